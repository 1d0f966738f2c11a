/* A controller's declaration: kcr_controller_options compiled, validated and
 * copied into a kcr_controller that the manager and the test kit run alike. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controller/controller_internal.h"
#include "core/abi.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"

static const char *const reason_names[] = {
    [KCR_REASON_NONE] = "None",
    [KCR_REASON_INITIAL_LIST] = "InitialList",
    [KCR_REASON_RESYNC] = "Resync",
    [KCR_REASON_REQUEUE_AFTER] = "RequeueAfter",
    [KCR_REASON_RETRY] = "Retry",
    [KCR_REASON_ENQUEUED] = "Enqueued",
    [KCR_REASON_MAPPED] = "Mapped",
    [KCR_REASON_OWNED] = "Owned",
    [KCR_REASON_PRIMARY_ADDED] = "PrimaryAdded",
    [KCR_REASON_PRIMARY_UPDATED] = "PrimaryUpdated",
    [KCR_REASON_PRIMARY_DELETED] = "PrimaryDeleted",
};

const char *kcr_reason_name(kcr_reason reason)
{
    if ((unsigned)reason >= sizeof reason_names / sizeof *reason_names)
        return "Unknown";
    return reason_names[reason];
}

static char *dup_opt(const char *s)
{
    return s && *s ? strdup(s) : NULL;
}

static void source_free(kcr__source *s)
{
    free(s->group), free(s->version), free(s->resource), free(s->kind), free(s->label);
    free(s->ns), free(s->label_selector), free(s->field_selector);
    kcr_predicate_free(s->predicate);
}

static const char *scope_name(bool cluster_scoped)
{
    return cluster_scoped ? "cluster-scoped" : "namespaced";
}

/* Asks discovery for a source's kind and scope and checks what the source
 * declared against it. A resource discovery does not know is an error
 * unless the source declared enough to run without it (its scope, and the
 * primary its kind too). */
static kcr_err resolve_source(kcr_client *client, kcr_cancel *cancel, const char *hint,
                              kcr__source *s)
{
    const char *ctl = s->ctl->name;
    char name[600]; /* RESOURCE.VERSION.GROUP; the core group's plurals are unqualified */
    if (s->group[0])
        snprintf(name, sizeof name, "%s.%s.%s", s->resource, s->version, s->group);
    else
        snprintf(name, sizeof name, "%s", s->resource);
    kcr_api_resource ar;
    kcr_status st = {0};
    kcr_err err =
        client ? kcr_client_resolve(client, name,
                                    &(kcr_resolve_options){.cancel = cancel, .status = &st}, &ar)
               : kcr__fail(KCR_ERR_INVALID, "no client to resolve kinds with");
    kcr_status_clear(&st);
    if (err == KCR_ERR_CANCELED)
        return kcr__fail(err, "controller \"%s\": stopped while discovering %s", ctl, s->label);
    if (err == KCR_OK && (strcmp(ar.group, s->group) != 0 || strcmp(ar.version, s->version) != 0))
        err = kcr__fail(KCR_ERR_NOT_FOUND, "discovery answered %s/%s %s", ar.group, ar.version,
                        ar.resource);
    if (err != KCR_OK) {
        bool declared = s->declared != KCR_SCOPE_DISCOVERED &&
                        (s->role != KCR__ROLE_PRIMARY || s->kind[0]);
        if (err == KCR_ERR_NOT_FOUND && !declared)
            return kcr__fail(err, "controller \"%s\": %s: the server does not serve it (%s); %s",
                             ctl, s->label, kcr_last_error(), hint);
        if (err == KCR_ERR_NOMEM || !declared)
            return kcr__fail(err, "controller \"%s\": %s: discovery failed: %s", ctl, s->label,
                             kcr_last_error());
        kcr__log(KCR_LOG_WARN, "controller",
                 "controller \"%s\": %s: discovery does not know it (%s); trusting the declared "
                 "kind and scope",
                 ctl, s->label, kcr_last_error());
        return KCR_OK;
    }
    if (s->kind[0] && strcmp(s->kind, ar.kind) != 0)
        return kcr__fail(KCR_ERR_INVALID,
                         "controller \"%s\": %s: declared kind \"%s\", but discovery says "
                         "\"%s\"",
                         ctl, s->label, s->kind, ar.kind);
    if (s->declared != KCR_SCOPE_DISCOVERED && s->cluster_scoped != !ar.namespaced)
        return kcr__fail(KCR_ERR_INVALID,
                         "controller \"%s\": %s: declared %s, but discovery says %s (leave "
                         "scope unset to take discovery's)",
                         ctl, s->label, scope_name(s->cluster_scoped), scope_name(!ar.namespaced));
    free(s->kind);
    s->kind = strdup(ar.kind);
    s->cluster_scoped = !ar.namespaced;
    return s->kind ? KCR_OK : kcr__fail(KCR_ERR_NOMEM, "out of memory compiling a source");
}

static kcr_err compile_source(kcr_controller *c, kcr__role role, const kcr_source *in,
                              kcr__source *s, size_t idx)
{
    static const char *const role_names[] = {"primary", "owns", "watches"};
    if (kcr__abi_reserved(in->reserved, sizeof in->reserved, "kcr_source") != KCR_OK)
        return kcr__fail(KCR_ERR_INVALID, "controller \"%s\": %s[%zu]: %s", c->name,
                         role_names[role], idx, kcr_last_error());
    s->role = role;
    s->ctl = c;
    s->predicate = in->predicate;
    s->map = in->map;
    s->map_user_data = in->map_user_data;
    s->metadata_only = in->metadata_only;
    s->own_thread = in->own_thread;
    s->declared = in->scope;
    s->cluster_scoped = in->scope == KCR_SCOPE_CLUSTER;
    if ((unsigned)in->scope > KCR_SCOPE_CLUSTER)
        return kcr__fail(KCR_ERR_INVALID, "controller \"%s\": %s[%zu]: scope %d is not a kcr_scope",
                         c->name, role_names[role], idx, (int)in->scope);
    if (!in->resource.version || !in->resource.version[0] || !in->resource.resource ||
        !in->resource.resource[0])
        return kcr__fail(KCR_ERR_INVALID,
                         "controller \"%s\": %s[%zu]: resource.version and resource.resource "
                         "are required",
                         c->name, role_names[role], idx);
    if (role == KCR__ROLE_WATCHES && !in->map)
        return kcr__fail(KCR_ERR_INVALID,
                         "controller \"%s\": watches[%zu] (%s) needs a map function", c->name, idx,
                         in->resource.resource);
    if (role != KCR__ROLE_WATCHES && in->map)
        return kcr__fail(KCR_ERR_INVALID,
                         "controller \"%s\": %s[%zu]: a map function belongs in watches[]", c->name,
                         role_names[role], idx);
    s->group = strdup(in->resource.group ? in->resource.group : "");
    s->version = strdup(in->resource.version);
    s->resource = strdup(in->resource.resource);
    s->kind = strdup(in->kind ? in->kind : "");
    s->ns = dup_opt(in->ns);
    s->label_selector = dup_opt(in->label_selector);
    s->field_selector = dup_opt(in->field_selector);
    char label[600];
    if (role == KCR__ROLE_PRIMARY)
        snprintf(label, sizeof label, "primary");
    else
        snprintf(label, sizeof label, "%s[%zu]", role_names[role], idx);
    snprintf(label + strlen(label), sizeof label - strlen(label), " %s%s%s %s",
             in->resource.group && *in->resource.group ? in->resource.group : "",
             in->resource.group && *in->resource.group ? "/" : "", in->resource.version,
             in->resource.resource);
    s->label = strdup(label);
    if (!s->group || !s->version || !s->resource || !s->kind || !s->label ||
        (in->ns && in->ns[0] && !s->ns) ||
        (in->label_selector && in->label_selector[0] && !s->label_selector) ||
        (in->field_selector && in->field_selector[0] && !s->field_selector))
        return kcr__fail(KCR_ERR_NOMEM, "out of memory compiling controller \"%s\"", c->name);
    return KCR_OK;
}

void kcr__controller_options_release(const kcr_controller_options *opts)
{
    kcr_predicate_free(opts->primary.predicate);
    for (size_t i = 0; opts->owns && i < opts->n_owns; i++)
        kcr_predicate_free(opts->owns[i].predicate);
    for (size_t i = 0; opts->watches && i < opts->n_watches; i++)
        kcr_predicate_free(opts->watches[i].predicate);
    kcr_rate_limiter_free(opts->rate_limiter);
}

kcr_err kcr__controller_new(kcr_client *client, kcr_cancel *cancel, const char *register_hint,
                            const kcr_controller_options *opts, kcr_controller **out)
{
    if (!opts || !out) {
        if (opts)
            kcr__controller_options_release(opts);
        return kcr__fail(KCR_ERR_INVALID, "add_controller: NULL options");
    }
    *out = NULL;
    if (!opts->name || !opts->name[0] || !opts->reconcile || (opts->n_owns && !opts->owns) ||
        (opts->n_watches && !opts->watches) || (opts->n_indexes && !opts->indexes) ||
        opts->max_concurrent_reconciles < 0 ||
        opts->reconcile_timeout_ms < KCR_DURATION_INFINITE ||
        opts->resync_period_ms < KCR_DURATION_INFINITE || opts->read_your_writes_timeout_ms < 0) {
        kcr__controller_options_release(opts);
        return kcr__fail(KCR_ERR_INVALID, "controller \"%s\": %s", opts->name ? opts->name : "",
                         !opts->name || !opts->name[0] ? "a name is required"
                         : !opts->reconcile            ? "a reconcile function is required"
                         : (opts->n_owns && !opts->owns) || (opts->n_watches && !opts->watches) ||
                                 (opts->n_indexes && !opts->indexes)
                             ? "an array is NULL but its count is not 0"
                             : "negative concurrency or duration");
    }
    const struct {
        const char *name;
        int64_t ms;
    } durations[] = {{"reconcile_timeout_ms", opts->reconcile_timeout_ms},
                     {"resync_period_ms", opts->resync_period_ms},
                     {"read_your_writes_timeout_ms", opts->read_your_writes_timeout_ms}};
    for (size_t i = 0; i < sizeof durations / sizeof durations[0]; i++)
        if (durations[i].ms > KCR__MAX_DURATION_MS) {
            kcr__controller_options_release(opts);
            return kcr__fail(KCR_ERR_INVALID, "controller \"%s\": %s %lld is above %lld ms",
                             opts->name, durations[i].name, (long long)durations[i].ms,
                             (long long)KCR__MAX_DURATION_MS);
        }
    kcr_controller *c = calloc(1, sizeof *c);
    size_t n = 1 + opts->n_owns + opts->n_watches;
    if (!c || !(c->name = strdup(opts->name)) || !(c->sources = calloc(n, sizeof *c->sources))) {
        if (c) {
            free(c->sources);
            free(c->name);
            free(c);
        }
        kcr__controller_options_release(opts);
        return kcr__fail(KCR_ERR_NOMEM, "out of memory adding a controller");
    }
    pthread_mutex_init(&c->stats_lock, NULL);
    c->n_sources = n;
    c->workers = opts->max_concurrent_reconciles ? opts->max_concurrent_reconciles : 1;
    c->limiter = opts->rate_limiter;
    /* KCR_DURATION_INFINITE: none, as the default */
    c->timeout_ms = opts->reconcile_timeout_ms > 0 ? opts->reconcile_timeout_ms : 0;
    c->resync_ms = opts->resync_period_ms > 0 ? opts->resync_period_ms : 0;
    c->ryw = !opts->no_read_your_writes;
    c->ryw_timeout_ms =
        opts->read_your_writes_timeout_ms > 0 ? opts->read_your_writes_timeout_ms : 5000;
    c->reconcile = opts->reconcile;
    c->user_data = opts->user_data;
    c->client = client;
    kcr_err err = compile_source(c, KCR__ROLE_PRIMARY, &opts->primary, &c->sources[0], 0);
    for (size_t i = 0; i < opts->n_owns; i++) {
        kcr_err e = compile_source(c, KCR__ROLE_OWNS, &opts->owns[i], &c->sources[1 + i], i);
        err = err ? err : e;
    }
    for (size_t i = 0; i < opts->n_watches; i++) {
        kcr_err e = compile_source(c, KCR__ROLE_WATCHES, &opts->watches[i],
                                   &c->sources[1 + opts->n_owns + i], i);
        err = err ? err : e;
    }
    /* the predicates now belong to c->sources; the limiter to c */
    for (size_t i = 0; err == KCR_OK && i < c->n_sources; i++)
        err = resolve_source(client, cancel, register_hint, &c->sources[i]);
    if (err == KCR_OK && !c->limiter)
        err = kcr_rate_limiter_default_new(&c->limiter);
    if (err == KCR_OK && opts->n_indexes) {
        c->indexes = calloc(opts->n_indexes, sizeof *c->indexes);
        err = c->indexes ? KCR_OK
                         : kcr__fail(KCR_ERR_NOMEM, "controller \"%s\": out of memory for indexes",
                                     c->name);
        for (size_t i = 0; err == KCR_OK && i < opts->n_indexes; i++) {
            const kcr_cache_index *ix = &opts->indexes[i];
            bool known = false;
            for (size_t j = 0; j < c->n_sources && !known; j++)
                known =
                    ix->resource.resource &&
                    strcmp(c->sources[j].resource, ix->resource.resource) == 0 &&
                    strcmp(c->sources[j].group, ix->resource.group ? ix->resource.group : "") == 0;
            if (kcr__abi_reserved(ix->reserved, sizeof ix->reserved, "kcr_cache_index") !=
                KCR_OK) {
                err = kcr__fail(KCR_ERR_INVALID, "controller \"%s\": indexes[%zu]: %s", c->name, i,
                                kcr_last_error());
                break;
            }
            if (!ix->name || !ix->fn || !known) {
                err = kcr__fail(KCR_ERR_INVALID,
                                "controller \"%s\": indexes[%zu] needs a name, a function and "
                                "the resource of one of the controller's sources",
                                c->name, i);
                break;
            }
            c->indexes[i] = *ix;
            c->indexes[i].resource = (kcr_resource){0};
            for (size_t j = 0; j < c->n_sources; j++)
                if (strcmp(c->sources[j].resource, ix->resource.resource) == 0 &&
                    strcmp(c->sources[j].group, ix->resource.group ? ix->resource.group : "") ==
                        0) {
                    c->indexes[i].resource = (kcr_resource){
                        c->sources[j].group, c->sources[j].version, c->sources[j].resource};
                    break;
                }
            if (!(c->indexes[i].name = strdup(ix->name)))
                err = kcr__fail(KCR_ERR_NOMEM, "controller \"%s\": out of memory for indexes",
                                c->name);
            c->n_indexes = i + 1;
        }
    }
    if (err != KCR_OK) {
        kcr__controller_free(c);
        return err;
    }
    *out = c;
    return KCR_OK;
}

void kcr__controller_free(kcr_controller *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->n_sources; i++)
        source_free(&c->sources[i]);
    for (size_t i = 0; i < c->n_indexes; i++)
        free((char *)c->indexes[i].name);
    free(c->indexes);
    free(c->sources);
    kcr_rate_limiter_free(c->limiter);
    pthread_mutex_destroy(&c->stats_lock);
    free(c->name);
    free(c);
}

void kcr__controller_count(kcr_controller *c, size_t offset, int64_t delta)
{
    pthread_mutex_lock(&c->stats_lock);
    if (offset == offsetof(kcr_controller_stats, active_workers))
        c->stats.active_workers += delta;
    else
        *(uint64_t *)((char *)&c->stats + offset) += (uint64_t)delta;
    pthread_mutex_unlock(&c->stats_lock);
}

void (kcr_controller_get_stats)(size_t out_size, kcr_controller *c, kcr_controller_stats *out)
{
    pthread_mutex_lock(&c->stats_lock);
    kcr_controller_stats st = c->stats;
    pthread_mutex_unlock(&c->stats_lock);
    kcr__abi_out(out, out_size, &st, sizeof st);
}

const char *kcr_controller_name(const kcr_controller *c)
{
    return c->name;
}

kcr_err kcr__make_key(const kcr_controller *c, const char *ns, const char *name, char **out)
{
    *out = NULL;
    ns = ns ? ns : "";
    size_t nl = strlen(ns), ml = name ? strlen(name) : 0;
    const char *why = NULL;
    if (!ml)
        why = "an empty name";
    else if (ml > 253 || nl > 63)
        why = "a name or namespace over the length limit (253 / 63)";
    else if (strchr(name, '/') || strchr(ns, '/'))
        why = "a '/' in the name or namespace";
    else if (c->sources[0].cluster_scoped && nl)
        why = "a namespace, but the primary resource is cluster-scoped";
    else if (!c->sources[0].cluster_scoped && !nl)
        why = "no namespace, but the primary resource is namespaced";
    if (why)
        return kcr__fail(KCR_ERR_INVALID, "controller \"%s\": invalid key \"%s/%s\": %s", c->name,
                         ns, name ? name : "", why);
    char *k = malloc(nl + ml + 2);
    if (!k)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory making a key");
    if (nl)
        sprintf(k, "%s/%s", ns, name);
    else
        memcpy(k, name, ml + 1);
    *out = k;
    return KCR_OK;
}

kcr_err kcr__controller_enqueue(kcr_controller *c, const char *key, const kcr_trigger *trig,
                                int priority, int64_t delay_ms)
{
    kcr__pending p;
    kcr_err err = kcr__pending_init(&p, trig, c->env_ops->now_ms(c->env), delay_ms);
    if (err == KCR_OK)
        err = c->env_ops->enqueue(c, key, priority, delay_ms, &p, c->env);
    return err;
}

kcr_err kcr__controller_enqueue_uid(kcr_controller *c, const char *key, const kcr_trigger *trig,
                                    const char *uid, int priority)
{
    kcr__pending p;
    kcr_err err = kcr__pending_init(&p, trig, c->env_ops->now_ms(c->env), 0);
    if (err == KCR_OK && uid && *uid) {
        p.has_uid = true;
        p.uid_hash = kcr_shard_hash(uid, strlen(uid));
    }
    if (err == KCR_OK)
        err = c->env_ops->enqueue(c, key, priority, 0, &p, c->env);
    return err;
}

kcr_err kcr_controller_enqueue(kcr_controller *c, const char *ns, const char *name)
{
    if (!c)
        return kcr__fail(KCR_ERR_INVALID, "kcr_controller_enqueue: NULL controller");
    if (!c->env_ops)
        return kcr__fail(KCR_ERR_STATE, "controller \"%s\" is not running", c->name);
    char *key = NULL;
    kcr_err err = kcr__make_key(c, ns, name, &key);
    if (err != KCR_OK)
        return err;
    kcr_trigger t = {.reason = KCR_REASON_ENQUEUED};
    err = kcr__controller_enqueue(c, key, &t, KCR_WQ_PRIORITY_NORMAL, 0);
    free(key);
    return err;
}
