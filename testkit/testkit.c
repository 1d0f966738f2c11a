/* The reconciler test kit: controllers on the fake API, one thread, a
 * virtual clock. Queue semantics follow the workqueue's: a key waits at
 * most once (highest priority, earliest deadline kept), ready keys go out
 * highest priority first, then in add order. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testkit/testkit_internal.h"
#include "testkit/yaml_json.h"
#include "core/abi.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/grow.h"

#define DEFAULT_START_MS INT64_C(1893456000000) /* 2030-01-01T00:00:00Z */

static int64_t tk_now(void *ud)
{
    return ((kcr_testkit *)ud)->now_ms;
}

tk_item *kcr__tk_find_item(tk_ctl *t, const char *key)
{
    for (size_t i = 0; i < t->n; i++)
        if (strcmp(t->items[i].key, key) == 0)
            return &t->items[i];
    return NULL;
}

kcr_err kcr__tk_queue(kcr_testkit *tk, tk_ctl *t, const char *key, int priority, int64_t due_ms,
                      kcr__pending *p)
{
    tk_item *it = kcr__tk_find_item(t, key);
    if (it) {
        if (priority > it->priority)
            it->priority = priority;
        if (due_ms < it->due_ms) {
            it->due_ms = due_ms;
            it->seq = ++tk->seq;
        }
        kcr__pending_merge(&it->p, p);
        return KCR_OK;
    }
    tk_item *grown = kcr__grow(t->items, &t->cap, t->n, sizeof *t->items, 16);
    char *k = grown ? strdup(key) : NULL;
    if (grown)
        t->items = grown;
    if (!k) {
        kcr__pending_clear(p);
        return kcr__fail(KCR_ERR_NOMEM, "out of memory queueing a key");
    }
    t->items[t->n++] = (tk_item){k, priority, due_ms, ++tk->seq, *p};
    memset(p, 0, sizeof *p);
    return KCR_OK;
}

static kcr_err tk_enqueue(kcr_controller *c, const char *key, int priority, int64_t delay_ms,
                          kcr__pending *p, void *env)
{
    kcr_testkit *tk = env;
    return kcr__tk_queue(tk, c->env_ctl, key, priority, tk->now_ms + (delay_ms > 0 ? delay_ms : 0),
                         p);
}

static const kcr__env_ops tk_env_ops = {.enqueue = tk_enqueue, .now_ms = tk_now};

kcr_err (kcr_testkit_new)(size_t opts_size, const kcr_testkit_options *opts, kcr_testkit **out)
{
    KCR__ABI_OPTS(kcr_testkit_options, opts, opts_size);
    if (!out)
        return kcr__fail(KCR_ERR_INVALID, "kcr_testkit_new: NULL out");
    *out = NULL;
    kcr_testkit_options o = opts ? *opts : (kcr_testkit_options){0};
    kcr_testkit *tk = calloc(1, sizeof *tk);
    if (!tk)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory making a test kit");
    tk->now_ms = o.start_ms ? o.start_ms : DEFAULT_START_MS;
    tk->simulate_workers = o.simulate_workers;
    tk->clock = (kcr_clock){.now_ms = tk_now, .user_data = tk};
    kcr_err err = kcr_fake_new(NULL, &tk->fake);
    if (err == KCR_OK)
        err = kcr_fake_client(tk->fake, o.ns, &tk->client);
    if (err == KCR_OK)
        err = kcr_cancel_new(&tk->cancel);
    if (err == KCR_OK) {
        kcr_event_recorder_options ro = {
            .reporting_controller = o.event_reporter ? o.event_reporter : "testkit",
            .reporting_instance = "testkit",
            .synchronous = true,
            .clock = &tk->clock,
        };
        err = kcr_event_recorder_new(tk->client, &ro, &tk->recorder);
    }
    if (err != KCR_OK) {
        kcr_testkit_free(tk);
        return err;
    }
    *out = tk;
    return KCR_OK;
}

void kcr_testkit_free(kcr_testkit *tk)
{
    if (!tk)
        return;
    for (size_t i = 0; i < tk->n_ctls; i++) {
        tk_ctl *t = tk->ctls[i];
        for (size_t j = 0; j < t->n; j++) {
            free(t->items[j].key);
            kcr__pending_clear(&t->items[j].p);
        }
        free(t->items);
        kcr__controller_free(t->c);
        free(t);
    }
    free(tk->ctls);
    for (size_t i = 0; i < tk->n_caches; i++)
        kcr__tk_cache_free(tk->caches[i]);
    free(tk->caches);
    kcr_testkit_clear_history(tk);
    free(tk->hist);
    kcr_event_recorder_free(tk->recorder);
    kcr_cancel_free(tk->cancel);
    kcr_client_free(tk->client);
    kcr_fake_free(tk->fake);
    free(tk);
}

kcr_fake *kcr_testkit_fake(kcr_testkit *tk)
{
    return tk->fake;
}

kcr_client *kcr_testkit_client(kcr_testkit *tk)
{
    return tk->client;
}

const kcr_clock *kcr_testkit_clock(kcr_testkit *tk)
{
    return &tk->clock;
}

int64_t kcr_testkit_now_ms(kcr_testkit *tk)
{
    return tk->now_ms;
}

void kcr_testkit_advance(kcr_testkit *tk, int64_t ms)
{
    if (ms > 0)
        tk->now_ms += ms;
    /* inside a reconcile: its deadline passes in virtual time */
    if (tk->deadline_ms && tk->now_ms >= tk->deadline_ms)
        kcr_cancel_trigger(tk->cancel);
}

kcr_err (kcr_testkit_add_controller)(size_t opts_size, kcr_testkit *tk,
                                     const kcr_controller_options *opts, kcr_controller **out)
{
    kcr_controller_options local;
    kcr_err abi_err = kcr__abi_in(&local, sizeof local, opts, opts_size, "kcr_controller_options");
    if (abi_err != KCR_OK) {
        kcr__controller_options_release(&local); /* the predicates and limiter are ours to free */
        return abi_err;
    }
    opts = &local;
    if (out)
        *out = NULL;
    if (!tk)
        return kcr__fail(KCR_ERR_INVALID, "kcr_testkit_add_controller: NULL kit");
    kcr_controller *c = NULL;
    kcr_err err = kcr__controller_new(tk->client, NULL,
                                      "the test kit's fake serves Kubernetes' built-in "
                                      "resources and those made known to it: register it with "
                                      "kcr_fake_register(kcr_testkit_fake(kit), ...) or seed its "
                                      "CustomResourceDefinition (kcr_testkit_seed) before adding "
                                      "the controller",
                                      opts, &c);
    if (err != KCR_OK)
        return err;
    for (size_t i = 0; i < tk->n_ctls; i++)
        if (strcmp(tk->ctls[i]->c->name, c->name) == 0) {
            err = kcr__fail(KCR_ERR_EXISTS, "a controller named \"%s\" already exists", c->name);
            kcr__controller_free(c);
            return err;
        }
    tk_ctl *t = calloc(1, sizeof *t);
    tk_ctl **nc = realloc(tk->ctls, (tk->n_ctls + 1) * sizeof *nc);
    if (nc)
        tk->ctls = nc;
    if (!t || !nc) {
        free(t);
        kcr__controller_free(c);
        return kcr__fail(KCR_ERR_NOMEM, "out of memory adding a controller");
    }
    t->c = c;
    c->env_ops = &tk_env_ops;
    c->env = tk;
    c->env_ctl = t;
    tk->ctls[tk->n_ctls++] = t;
    for (size_t i = 0; err == KCR_OK && i < c->n_sources; i++)
        err = kcr__tk_bind_source(tk, &c->sources[i]);
    for (size_t i = 0; err == KCR_OK && i < c->n_indexes; i++) {
        kcr_store *s = kcr_ctx_cache(&(kcr_ctx){.ctl = c}, &c->indexes[i].resource);
        err = kcr_store_add_index(s, c->indexes[i].name, c->indexes[i].fn, c->indexes[i].user_data);
        if (err == KCR_ERR_EXISTS) /* another controller shares the cache and the index */
            err = KCR_OK;
    }
    if (err == KCR_OK) {
        if (out) /* added: a failing first sync is reported, the controller stays */
            *out = c;
        err = kcr_testkit_sync(tk);
    }
    return err;
}

bool kcr_testkit_queued(kcr_testkit *tk, kcr_controller *c, const char *key, int64_t *delay_ms,
                        uint32_t *reasons)
{
    if (!tk || !c || !key || c->env != tk)
        return false;
    tk_item *it = kcr__tk_find_item(c->env_ctl, key);
    if (!it)
        return false;
    if (delay_ms)
        *delay_ms = it->due_ms > tk->now_ms ? it->due_ms - tk->now_ms : 0;
    if (reasons)
        *reasons = it->p.reasons | (it->p.delayed ? KCR_REASON_BIT(it->p.delayed) : 0);
    return true;
}

size_t kcr_testkit_queue_len(kcr_testkit *tk, kcr_controller *c)
{
    return tk && c && c->env == tk ? ((tk_ctl *)c->env_ctl)->n : 0;
}

kcr_object *kcr_testkit_get(kcr_testkit *tk, const kcr_resource *res, const char *ns,
                            const char *name)
{
    kcr_object *obj = NULL;
    kcr_status st = {0};
    if (tk && kcr_client_get(tk->client,
                             &(kcr_request){.resource = res, .ns = ns, .name = name, .status = &st},
                             &obj) != KCR_OK)
        obj = NULL;
    kcr_status_clear(&st);
    return obj;
}

kcr_err (kcr_testkit_inject_error)(size_t e_size, kcr_testkit *tk, const kcr_fake_error *e)
{
    KCR__ABI_OPTS(kcr_fake_error, e, e_size);
    if (!tk)
        return kcr__fail(KCR_ERR_INVALID, "kcr_testkit_inject_error: NULL kit");
    return kcr_fake_inject_error(tk->fake, e);
}

typedef struct count_ctx {
    const char *name, *reason;
    size_t n;
} count_ctx;

static kcr_err count_event(kcr_object *ev, void *ud)
{
    count_ctx *cc = ud;
    const char *name = kcr_value_string(kcr_object_get(ev, "regarding.name"), NULL);
    const char *reason = kcr_value_string(kcr_object_get(ev, "reason"), NULL);
    if ((!cc->name || (name && strcmp(name, cc->name) == 0)) &&
        (!cc->reason || (reason && strcmp(reason, cc->reason) == 0)))
        cc->n++;
    return KCR_OK;
}

size_t kcr_testkit_count_events(kcr_testkit *tk, const char *regarding_name, const char *reason)
{
    count_ctx cc = {regarding_name, reason, 0};
    kcr_status st = {0};
    kcr_resource events = {"events.k8s.io", "v1", "events"};
    kcr_request lo = {.resource = &events, .status = &st};
    if (tk)
        kcr_client_list(tk->client, &lo, count_event, &cc, NULL);
    kcr_status_clear(&st);
    return cc.n;
}

static kcr_err fail_doc(kcr_err err, size_t index)
{
    char msg[512];
    snprintf(msg, sizeof msg, "%s", kcr_last_error());
    return kcr__fail(err, "seed document %zu: %s", index + 1, msg);
}

static kcr_err seed_doc(size_t index, const char *json, size_t len, void *ud)
{
    kcr_testkit *tk = ud;
    kcr_object *obj = NULL;
    kcr_err err = kcr_object_parse(json, len, &obj);
    if (err != KCR_OK)
        return fail_doc(err, index);
    const char *api_version = kcr_object_api_version(obj), *kind = kcr_object_kind(obj);
    const char *slash = strchr(api_version, '/');
    char group[254] = "";
    if (slash && (size_t)(slash - api_version) < sizeof group)
        memcpy(group, api_version, (size_t)(slash - api_version));
    kcr_api_resource ar;
    kcr_status st = {0};
    err = kind[0] && api_version[0]
              ? kcr_client_resolve_kind(tk->client,
                                        &(kcr_gvk){group, slash ? slash + 1 : api_version, kind},
                                        &(kcr_resolve_options){.status = &st}, &ar)
              : kcr__fail(KCR_ERR_PARSE, "apiVersion and kind are required");
    kcr_status_clear(&st);
    char *fixed = NULL;
    if (err == KCR_OK && ar.namespaced && !kcr_object_namespace(obj)[0]) {
        kcr_object_edit *e = NULL;
        kcr_object *with_ns = NULL;
        err = kcr_object_edit_new(obj, &e);
        if (err == KCR_OK)
            err = kcr_object_edit_set_string(e, "metadata.namespace",
                                             kcr_client_namespace(tk->client));
        if (err == KCR_OK)
            err = kcr_object_edit_freeze(e, &with_ns);
        kcr_object_edit_free(e);
        if (err == KCR_OK)
            err = kcr_object_to_json(with_ns, &fixed, NULL);
        kcr_object_unref(with_ns);
    }
    if (err == KCR_OK) {
        kcr_resource res = kcr_api_resource_gvr(&ar);
        err = kcr_fake_add(tk->fake, &res, fixed ? fixed : json, NULL);
    }
    free(fixed);
    kcr_object_unref(obj);
    return err == KCR_OK ? KCR_OK : fail_doc(err, index);
}

kcr_err kcr_testkit_seed(kcr_testkit *tk, const char *text)
{
    if (!tk || !text)
        return kcr__fail(KCR_ERR_INVALID, "kcr_testkit_seed: NULL argument");
    return kcr__yaml_each_json(text, strlen(text), seed_doc, tk);
}
