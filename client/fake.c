/* The in-memory fake API server behind the kcr_client vtable. See kcr/fake.h
 * for what it models. One mutex guards everything; callbacks and hooks run
 * without it. Objects are stored as mutable JSON trees plus a frozen
 * kcr_object view handed out to callers. */
#include "kcr/fake.h"

#include <inttypes.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/client_impl.h"
#include "client/decode.h"
#include "core/base64.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "kcr/time.h"
#include "object/selector.h"

enum { DEFAULT_HISTORY = 1000, DEFAULT_MAX_QUEUE = 100000, WAIT_SLICE_MS = 50 };

typedef struct fobj {
    char *rkey; /* "group/resource" */
    char *ns;   /* "" when cluster-scoped */
    char *name;
    kcr__json *doc;
    kcr_object *obj;
} fobj;

typedef struct fevent {
    uint64_t rv;
    kcr_watch_event_type type;
    char *rkey, *ns;
    kcr_object *obj; /* new (or final) state */
    kcr_object *old; /* previous state for MODIFIED */
} fevent;

typedef struct qitem {
    kcr_watch_event_type type;
    kcr_object *obj;
    char rv[24];
    bool initial_end;
    kcr_status *st;
    struct qitem *next;
} qitem;

typedef struct watcher {
    char *rkey, *ns;
    kcr__selector *labels, *fields;
    bool bookmarks, metadata_only;
    qitem *head, *tail;
    size_t len;
    bool ended;
    pthread_cond_t cond;
    struct watcher *next;
} watcher;

typedef struct rule {
    kcr_fake_verb verb;
    char *rkey; /* NULL: any */
    char *ns, *name; /* NULL: any */
    int times;  /* < 0: forever */
    int code;
    char *reason, *message;
} rule;

typedef struct counter {
    kcr_fake_verb verb;
    char *rkey;
    uint64_t n;
} counter;

struct kcr_fake {
    atomic_int refs;
    pthread_mutex_t lock;
    kcr_fake_options opts;
    uint64_t rv;
    fobj **objs; /* sorted by (rkey, ns, name) */
    size_t n, cap;
    fevent *hist; /* ring of opts.history_size */
    size_t hist_start, hist_len;
    uint64_t compacted_rv;
    watcher *watchers;
    rule *rules;
    size_t n_rules;
    counter *counters;
    size_t n_counters;
    kcr_fake_hook_fn hook;
    void *hook_ud;
    kcr__disc_table disc;
    uint64_t rand_state;
};

typedef struct fake_client {
    struct kcr_client base;
    kcr_fake *f;
    char *ns;
} fake_client;

#define FAKE(c) (((fake_client *)(c))->f)

/* ---- small helpers ------------------------------------------------------------------- */

static char *rkey_of(const kcr_resource *res)
{
    const char *g = res->group ? res->group : "";
    size_t len = strlen(g) + strlen(res->resource) + 2;
    char *k = malloc(len);
    if (k)
        snprintf(k, len, "%s/%s", g, res->resource);
    return k;
}

/* "configmaps" or "deployments.apps", as the apiserver names resources in messages. */
static void qualified(const kcr_resource *res, char *buf, size_t size)
{
    if (res->group && *res->group)
        snprintf(buf, size, "%s.%s", res->resource, res->group);
    else
        snprintf(buf, size, "%s", res->resource);
}

static uint64_t next_rand(kcr_fake *f)
{
    uint64_t x = f->rand_state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    f->rand_state = x;
    return x * UINT64_C(2685821657736338717);
}

static void make_uid(kcr_fake *f, char out[37])
{
    uint64_t a = next_rand(f), b = next_rand(f);
    snprintf(out, 37, "%08" PRIx32 "-%04" PRIx32 "-4%03" PRIx32 "-%04" PRIx32 "-%012" PRIx64,
             (uint32_t)(a >> 32), (uint32_t)(a >> 16) & 0xffff, (uint32_t)a & 0xfff,
             ((uint32_t)(b >> 48) & 0x3fff) | 0x8000, b & UINT64_C(0xffffffffffff));
}

static void now_rfc3339(char *buf, size_t size)
{
    kcr_time_format(kcr__wall_ns() / KCR_NS_PER_S, buf, size);
}

/* Status helpers: fill st and return the mapped error. */
static kcr_err status_err(kcr_status *st, int code, const char *reason, const kcr_resource *res,
                          const char *name, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
static kcr_err status_err(kcr_status *st, int code, const char *reason, const kcr_resource *res,
                          const char *name, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    kcr__status_make(st, code, reason, msg);
    if (res) {
        free(st->details.group);
        st->details.group = strdup(res->group ? res->group : "");
        free(st->details.kind);
        st->details.kind = strdup(res->resource);
    }
    if (name) {
        free(st->details.name);
        st->details.name = strdup(name);
    }
    return kcr__status_fail(st);
}

static kcr_err not_found(kcr_status *st, const kcr_resource *res, const char *name)
{
    char q[300];
    qualified(res, q, sizeof q);
    return status_err(st, 404, "NotFound", res, name, "%s \"%s\" not found", q, name);
}

static kcr_err conflict(kcr_status *st, const kcr_resource *res, const char *name)
{
    char q[300];
    qualified(res, q, sizeof q);
    return status_err(st, 409, "Conflict", res, name,
                      "Operation cannot be fulfilled on %s \"%s\": the object has been modified; "
                      "please apply your changes to the latest version and try again",
                      q, name);
}

static kcr_err bad_request(kcr_status *st, const char *msg)
{
    return status_err(st, 400, "BadRequest", NULL, NULL, "%s", msg);
}

static bool valid_name(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 253)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
        if (!alnum && !((c == '-' || c == '.') && i > 0 && i + 1 < n))
            return false;
    }
    return true;
}

static kcr_err invalid_name(kcr_status *st, const kcr_resource *res, const char *name)
{
    char q[300];
    qualified(res, q, sizeof q);
    kcr_err err = status_err(
        st, 422, "Invalid", res, name,
        "%s \"%s\" is invalid: metadata.name: Invalid value: \"%s\": a lowercase RFC 1123 "
        "subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
        "start and end with an alphanumeric character",
        q, name, name);
    st->details.causes = calloc(1, sizeof *st->details.causes);
    if (st->details.causes) {
        st->details.n_causes = 1;
        st->details.causes[0].type = strdup("FieldValueInvalid");
        st->details.causes[0].message = strdup("Invalid value: a lowercase RFC 1123 subdomain");
        st->details.causes[0].field = strdup("metadata.name");
    }
    return err;
}

/* Freezes a JSON tree into an immutable kcr_object. */
static kcr_err freeze(const kcr__json *doc, kcr_object **out)
{
    char *text = NULL;
    size_t len = 0;
    kcr_err err = kcr__json_dump(doc, &text, &len);
    if (err == KCR_OK)
        err = kcr_object_parse(text, len, out);
    free(text);
    return err;
}

/* A PartialObjectMetadata view of obj (new reference). */
static kcr_object *metadata_view(const kcr_object *obj)
{
    char *text = NULL;
    size_t len = 0;
    kcr__json *doc = NULL;
    kcr_object *out = NULL;
    if (kcr_object_to_json(obj, &text, &len) == KCR_OK && kcr__json_parse(text, len, &doc) == KCR_OK) {
        kcr__json *view = kcr__json_new(KCR__JSON_OBJECT);
        if (view) {
            kcr__json_set_str(view, "kind", "PartialObjectMetadata");
            kcr__json_set_str(view, "apiVersion", "meta.k8s.io/v1");
            kcr__json *md = kcr__json_get(doc, "metadata");
            kcr__json_set(view, "metadata", kcr__json_copy(md));
            freeze(view, &out);
            kcr__json_free(view);
        }
    }
    kcr__json_free(doc);
    free(text);
    return out;
}

/* ---- object table ---------------------------------------------------------------------- */

static int key_cmp(const char *rkey, const char *ns, const char *name, const fobj *o)
{
    int c = strcmp(rkey, o->rkey);
    if (c == 0)
        c = strcmp(ns, o->ns);
    if (c == 0)
        c = strcmp(name, o->name);
    return c;
}

/* Index of the object, or where it would go (*found false). */
static size_t find_pos(kcr_fake *f, const char *rkey, const char *ns, const char *name,
                       bool *found)
{
    size_t lo = 0, hi = f->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = key_cmp(rkey, ns, name, f->objs[mid]);
        if (c == 0) {
            *found = true;
            return mid;
        }
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    *found = false;
    return lo;
}

static void fobj_free(fobj *o)
{
    if (!o)
        return;
    free(o->rkey);
    free(o->ns);
    free(o->name);
    kcr__json_free(o->doc);
    kcr_object_unref(o->obj);
    free(o);
}

static const kcr__disc_entry *find_res(kcr_fake *f, const kcr_resource *res)
{
    const char *g = res->group ? res->group : "";
    for (size_t i = 0; i < f->disc.n; i++)
        if (strcmp(f->disc.e[i].r.group, g) == 0 &&
            strcmp(f->disc.e[i].r.resource, res->resource) == 0)
            return &f->disc.e[i];
    return NULL;
}

/* Whether discovery serves res at its version (lock held): the apiserver
 * has no handler for anything else. */
static bool served(kcr_fake *f, const kcr_resource *res)
{
    const char *g = res->group ? res->group : "";
    for (size_t i = 0; i < f->disc.n; i++)
        if (strcmp(f->disc.e[i].r.group, g) == 0 &&
            strcmp(f->disc.e[i].r.version, res->version) == 0 &&
            strcmp(f->disc.e[i].r.resource, res->resource) == 0)
            return true;
    return false;
}

/* What the apiserver answers for a path it has no handler for: a bare 404
 * Status, without details. */
static kcr_err not_served(kcr_status *st)
{
    kcr__status_make(st, 404, "NotFound", "the server could not find the requested resource");
    return kcr__status_fail(st);
}

/* ---- events and watchers ------------------------------------------------------------------- */

static const char *obj_label(const char *key, void *ud)
{
    return kcr_object_label(ud, key);
}

static const char *obj_field(const char *key, void *ud)
{
    if (strcmp(key, "metadata.name") == 0)
        return kcr_object_name(ud);
    if (strcmp(key, "metadata.namespace") == 0)
        return kcr_object_namespace(ud);
    return NULL;
}

static bool watcher_selects(const watcher *w, const kcr_object *obj)
{
    return obj && kcr__selector_matches(w->labels, obj_label, (void *)obj) &&
           kcr__selector_matches(w->fields, obj_field, (void *)obj);
}

static void enqueue(kcr_fake *f, watcher *w, qitem *it)
{
    if (w->ended) {
        kcr_object_unref(it->obj);
        if (it->st) {
            kcr_status_clear(it->st);
            free(it->st);
        }
        free(it);
        return;
    }
    if (w->len >= f->opts.max_watch_queue) {
        /* A consumer this slow is dropped, as the apiserver closes its watch. */
        kcr__log(KCR_LOG_WARN, "fake", "watch on %s fell %zu events behind: closing it", w->rkey,
                 w->len);
        w->ended = true;
        kcr_object_unref(it->obj);
        free(it);
        pthread_cond_broadcast(&w->cond);
        return;
    }
    if (w->tail)
        w->tail->next = it;
    else
        w->head = it;
    w->tail = it;
    w->len++;
    pthread_cond_broadcast(&w->cond);
}

/* Queues what watcher w should see of event e (selector transitions). */
static void offer(kcr_fake *f, watcher *w, const fevent *e)
{
    if (strcmp(w->rkey, e->rkey) != 0 || (*w->ns && strcmp(w->ns, e->ns) != 0))
        return;
    bool now = watcher_selects(w, e->obj);
    bool before = e->type == KCR_WATCH_MODIFIED && watcher_selects(w, e->old);
    kcr_watch_event_type t;
    if (e->type == KCR_WATCH_MODIFIED)
        t = now && before ? KCR_WATCH_MODIFIED : now ? KCR_WATCH_ADDED : KCR_WATCH_DELETED;
    else
        t = e->type;
    if (!now && !before)
        return;
    qitem *it = calloc(1, sizeof *it);
    if (!it)
        return;
    it->type = t;
    it->obj = w->metadata_only ? metadata_view(e->obj) : kcr_object_ref(e->obj);
    enqueue(f, w, it);
}

/* Records an event (takes refs) and fans it out. Lock held. */
static void emit(kcr_fake *f, kcr_watch_event_type type, const char *rkey, const char *ns,
                 kcr_object *obj, kcr_object *old)
{
    fevent e = {.rv = f->rv, .type = type, .rkey = strdup(rkey), .ns = strdup(ns),
                .obj = kcr_object_ref(obj), .old = kcr_object_ref(old)};
    for (watcher *w = f->watchers; w; w = w->next)
        offer(f, w, &e);
    size_t cap = f->opts.history_size;
    if (f->hist_len == cap) {
        fevent *oldest = &f->hist[f->hist_start];
        f->compacted_rv = oldest->rv;
        free(oldest->rkey);
        free(oldest->ns);
        kcr_object_unref(oldest->obj);
        kcr_object_unref(oldest->old);
        f->hist_start = (f->hist_start + 1) % cap;
        f->hist_len--;
    }
    f->hist[(f->hist_start + f->hist_len) % cap] = e;
    f->hist_len++;
}

/* ---- request accounting -------------------------------------------------------------------- */

static kcr_err begin(kcr_fake *f, kcr_fake_verb verb, const kcr_resource *res, const char *ns,
                     const char *name, kcr_status *st)
{
    char *rkey = rkey_of(res);
    if (!rkey)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory");
    pthread_mutex_lock(&f->lock);
    counter *c = NULL;
    for (size_t i = 0; i < f->n_counters && !c; i++)
        if (f->counters[i].verb == verb && strcmp(f->counters[i].rkey, rkey) == 0)
            c = &f->counters[i];
    if (!c) {
        counter *nc = realloc(f->counters, (f->n_counters + 1) * sizeof *nc);
        if (nc) {
            f->counters = nc;
            c = &f->counters[f->n_counters++];
            c->verb = verb;
            c->rkey = strdup(rkey);
            c->n = 0;
        }
    }
    if (c)
        c->n++;
    kcr_fake_hook_fn hook = f->hook;
    void *hook_ud = f->hook_ud;
    pthread_mutex_unlock(&f->lock);
    if (hook)
        hook(verb, res, ns ? ns : "", name, hook_ud);
    kcr_err err = KCR_OK;
    pthread_mutex_lock(&f->lock);
    for (size_t i = 0; i < f->n_rules; i++) {
        rule *r = &f->rules[i];
        if (r->times == 0 || (r->verb != KCR_FAKE_ANY && r->verb != verb) ||
            (r->rkey && strcmp(r->rkey, rkey) != 0) ||
            (r->ns && strcmp(r->ns, ns ? ns : "") != 0) ||
            (r->name && (!name || strcmp(r->name, name) != 0)))
            continue;
        if (r->times > 0)
            r->times--;
        kcr__status_make(st, r->code, r->reason, r->message);
        err = kcr__status_fail(st);
        break;
    }
    if (err == KCR_OK && !served(f, res))
        err = not_served(st);
    pthread_mutex_unlock(&f->lock);
    free(rkey);
    return err;
}

/* ---- writes --------------------------------------------------------------------------------- */

/* Registers the resource a CRD defines (lock held). */
static void register_crd(kcr_fake *f, const kcr__json *crd)
{
    kcr__json *spec = kcr__json_get(crd, "spec");
    kcr__json *names = kcr__json_get(spec, "names");
    const char *group = kcr__json_str(kcr__json_get(spec, "group"));
    const char *plural = kcr__json_str(kcr__json_get(names, "plural"));
    const char *kind = kcr__json_str(kcr__json_get(names, "kind"));
    kcr__json *versions = kcr__json_get(spec, "versions");
    if (!group || !plural || !kind || !versions || versions->type != KCR__JSON_ARRAY)
        return;
    kcr__json *shorts = kcr__json_get(names, "shortNames");
    const char *sn[32];
    size_t n_short = 0;
    for (size_t i = 0; shorts && shorts->type == KCR__JSON_ARRAY && i < shorts->n && i < 32; i++)
        if (kcr__json_str(shorts->vals[i]))
            sn[n_short++] = kcr__json_str(shorts->vals[i]);
    for (size_t i = 0; i < versions->n; i++) {
        const char *v = kcr__json_str(kcr__json_get(versions->vals[i], "name"));
        if (!v)
            continue;
        kcr_api_resource r;
        memset(&r, 0, sizeof r);
        snprintf(r.group, sizeof r.group, "%s", group);
        snprintf(r.version, sizeof r.version, "%s", v);
        snprintf(r.resource, sizeof r.resource, "%s", plural);
        snprintf(r.kind, sizeof r.kind, "%s", kind);
        snprintf(r.singular, sizeof r.singular, "%s",
                 kcr__json_str(kcr__json_get(names, "singular"))
                     ? kcr__json_str(kcr__json_get(names, "singular"))
                     : "");
        const char *scope = kcr__json_str(kcr__json_get(spec, "scope"));
        r.namespaced = !scope || strcmp(scope, "Namespaced") == 0;
        kcr__disc_add(&f->disc, &r, sn, n_short, i == 0);
    }
}

/* Checks scope and namespace of a body; sets metadata.namespace. */
static kcr_err place(kcr_fake *f, const kcr_resource *res, const char *ns, kcr__json *md,
                     const char **out_ns, kcr_status *st)
{
    const kcr__disc_entry *e = find_res(f, res);
    const char *body_ns = kcr__json_str(kcr__json_get(md, "namespace"));
    bool namespaced = e ? e->r.namespaced : (ns && *ns) || (body_ns && *body_ns);
    if (!namespaced) {
        kcr__json_remove(md, "namespace");
        *out_ns = "";
        return KCR_OK;
    }
    if (!ns || !*ns)
        ns = body_ns;
    if (!ns || !*ns)
        return bad_request(st, "the namespace of the object is required");
    if (body_ns && *body_ns && strcmp(body_ns, ns) != 0)
        return bad_request(st, "the namespace of the provided object does not match the "
                               "namespace sent on the request");
    *out_ns = ns;
    return kcr__json_set_str(md, "namespace", ns);
}

static kcr_err do_create(kcr_fake *f, const kcr_resource *res, const char *ns, kcr__json *doc,
                         kcr_object **out, kcr_status *st)
{
    if (doc->type != KCR__JSON_OBJECT)
        return bad_request(st, "the body is not a JSON object");
    kcr__json *md = kcr__json_child_object(doc, "metadata");
    if (!md)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory");
    char *rkey = rkey_of(res);
    if (!rkey)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory");
    pthread_mutex_lock(&f->lock);
    kcr_err err = KCR_OK;
    const char *name = kcr__json_str(kcr__json_get(md, "name"));
    const char *gen = kcr__json_str(kcr__json_get(md, "generateName"));
    char generated[300];
    if ((!name || !*name) && gen && *gen) {
        static const char alphabet[] = "bcdfghjklmnpqrstvwxz2456789";
        snprintf(generated, sizeof generated, "%.240s", gen);
        size_t n = strlen(generated);
        for (int i = 0; i < 5; i++)
            generated[n + (size_t)i] = alphabet[next_rand(f) % (sizeof alphabet - 1)];
        generated[n + 5] = '\0';
        kcr__json_set_str(md, "name", generated);
        name = kcr__json_str(kcr__json_get(md, "name"));
    }
    const char *where_ns = "";
    if (!name || !*name)
        err = status_err(st, 422, "Invalid", res, "",
                         "%s is invalid: metadata.name: Required value: name or generateName is "
                         "required",
                         res->resource);
    else if (!valid_name(name))
        err = invalid_name(st, res, name);
    if (err == KCR_OK)
        err = place(f, res, ns, md, &where_ns, st);
    bool found = false;
    size_t pos = 0;
    if (err == KCR_OK) {
        pos = find_pos(f, rkey, where_ns, name, &found);
        if (found) {
            char q[300];
            qualified(res, q, sizeof q);
            err = status_err(st, 409, "AlreadyExists", res, name, "%s \"%s\" already exists", q,
                             name);
        }
    }
    fobj *o = NULL;
    if (err == KCR_OK) {
        char buf[64];
        snprintf(buf, sizeof buf, "%" PRIu64, f->rv + 1);
        kcr__json_set_str(md, "resourceVersion", buf);
        make_uid(f, buf);
        kcr__json_set_str(md, "uid", buf);
        now_rfc3339(buf, sizeof buf);
        kcr__json_set_str(md, "creationTimestamp", buf);
        kcr__json_set(md, "generation", kcr__json_new_int(1));
        kcr__json_remove(md, "deletionTimestamp");
        const kcr__disc_entry *e = find_res(f, res);
        if (!kcr__json_get(doc, "kind") && e)
            kcr__json_set_str(doc, "kind", e->r.kind);
        if (!kcr__json_get(doc, "apiVersion")) {
            char av[400];
            if (res->group && *res->group)
                snprintf(av, sizeof av, "%s/%s", res->group, res->version);
            else
                snprintf(av, sizeof av, "%s", res->version);
            kcr__json_set_str(doc, "apiVersion", av);
        }
        o = calloc(1, sizeof *o);
        if (!o || !(o->rkey = strdup(rkey)) || !(o->ns = strdup(where_ns)) ||
            !(o->name = strdup(name)))
            err = kcr__fail(KCR_ERR_NOMEM, "out of memory");
        if (err == KCR_OK && (err = freeze(doc, &o->obj)) != KCR_OK)
            err = bad_request(st, kcr_last_error());
        if (err == KCR_OK && f->n == f->cap) {
            size_t cap = f->cap ? f->cap * 2 : 64;
            fobj **no = realloc(f->objs, cap * sizeof *no);
            if (!no)
                err = kcr__fail(KCR_ERR_NOMEM, "out of memory");
            else
                f->objs = no, f->cap = cap;
        }
    }
    if (err == KCR_OK) {
        f->rv++;
        o->doc = doc;
        memmove(f->objs + pos + 1, f->objs + pos, (f->n - pos) * sizeof *f->objs);
        f->objs[pos] = o;
        f->n++;
        if (strcmp(rkey, "apiextensions.k8s.io/customresourcedefinitions") == 0)
            register_crd(f, doc);
        emit(f, KCR_WATCH_ADDED, rkey, where_ns, o->obj, NULL);
        if (out)
            *out = kcr_object_ref(o->obj);
        doc = NULL;
    } else {
        fobj_free(o);
    }
    pthread_mutex_unlock(&f->lock);
    kcr__json_free(doc);
    free(rkey);
    return err;
}

/* Everything but metadata and status: what bumps metadata.generation. */
static bool spec_equal(const kcr__json *a, const kcr__json *b)
{
    for (size_t i = 0; i < a->n; i++) {
        if (strcmp(a->keys[i], "metadata") == 0 || strcmp(a->keys[i], "status") == 0)
            continue;
        if (!kcr__json_equal(a->vals[i], kcr__json_get(b, a->keys[i])))
            return false;
    }
    for (size_t i = 0; i < b->n; i++) {
        if (strcmp(b->keys[i], "metadata") == 0 || strcmp(b->keys[i], "status") == 0)
            continue;
        if (!kcr__json_get(a, b->keys[i]))
            return false;
    }
    return true;
}

static size_t finalizer_count(const kcr__json *md)
{
    kcr__json *fz = kcr__json_get(md, "finalizers");
    return fz && fz->type == KCR__JSON_ARRAY ? fz->n : 0;
}

/* Removes object at pos: bumps the RV, emits DELETED with the final state. */
static kcr_err remove_at(kcr_fake *f, size_t pos, kcr_object **out)
{
    fobj *o = f->objs[pos];
    kcr__json *md = kcr__json_child_object(o->doc, "metadata");
    char buf[32];
    snprintf(buf, sizeof buf, "%" PRIu64, f->rv + 1);
    kcr__json_set_str(md, "resourceVersion", buf);
    kcr_object *final = NULL;
    kcr_err err = freeze(o->doc, &final);
    if (err != KCR_OK)
        return err;
    f->rv++;
    emit(f, KCR_WATCH_DELETED, o->rkey, o->ns, final, NULL);
    memmove(f->objs + pos, f->objs + pos + 1, (f->n - pos - 1) * sizeof *f->objs);
    f->n--;
    fobj_free(o);
    if (out)
        *out = final;
    else
        kcr_object_unref(final);
    return KCR_OK;
}

/* Stores `next` as the new state of the object at pos (takes next). Lock held. */
static kcr_err commit(kcr_fake *f, size_t pos, kcr__json *next, const char *deletion_ts,
                      kcr_object **out)
{
    fobj *o = f->objs[pos];
    kcr__json *omd = kcr__json_get(o->doc, "metadata");
    kcr__json *md = kcr__json_child_object(next, "metadata");
    if (!md) {
        kcr__json_free(next);
        return kcr__fail(KCR_ERR_NOMEM, "out of memory");
    }
    /* Fields only the server sets. */
    static const char *const server_owned[] = {"uid", "creationTimestamp", "deletionTimestamp",
                                               "generation", "name", "namespace",
                                               "resourceVersion"};
    for (size_t i = 0; i < sizeof server_owned / sizeof *server_owned; i++) {
        kcr__json *v = kcr__json_get(omd, server_owned[i]);
        if (v)
            kcr__json_set(md, server_owned[i], kcr__json_copy(v));
        else
            kcr__json_remove(md, server_owned[i]);
    }
    if (deletion_ts)
        kcr__json_set_str(md, "deletionTimestamp", deletion_ts);
    if (kcr__json_equal(next, o->doc)) { /* no-op: nothing is written */
        kcr__json_free(next);
        if (out)
            *out = kcr_object_ref(o->obj);
        return KCR_OK;
    }
    if (!spec_equal(next, o->doc))
        kcr__json_set(md, "generation",
                      kcr__json_new_int(kcr__json_int(kcr__json_get(omd, "generation"), 0) + 1));
    if (kcr__json_get(md, "deletionTimestamp") && finalizer_count(md) == 0) {
        kcr__json_free(o->doc);
        o->doc = next;
        return remove_at(f, pos, out);
    }
    char buf[32];
    snprintf(buf, sizeof buf, "%" PRIu64, f->rv + 1);
    kcr__json_set_str(md, "resourceVersion", buf);
    kcr_object *obj = NULL;
    kcr_err err = freeze(next, &obj);
    if (err != KCR_OK) {
        kcr__json_free(next);
        return err;
    }
    f->rv++;
    kcr_object *old = o->obj;
    kcr__json_free(o->doc);
    o->doc = next;
    o->obj = obj;
    emit(f, KCR_WATCH_MODIFIED, o->rkey, o->ns, obj, old);
    kcr_object_unref(old);
    if (out)
        *out = kcr_object_ref(obj);
    return KCR_OK;
}

/* Looks the object up (lock held); 404 Status when absent. */
static kcr_err locate(kcr_fake *f, const kcr_resource *res, const char *ns, const char *name,
                      size_t *pos, kcr_status *st)
{
    char *rkey = rkey_of(res);
    if (!rkey)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory");
    const kcr__disc_entry *e = find_res(f, res);
    if (e && !e->r.namespaced)
        ns = "";
    bool found;
    *pos = find_pos(f, rkey, ns ? ns : "", name, &found);
    free(rkey);
    return found ? KCR_OK : not_found(st, res, name);
}

/* ---- vtable -------------------------------------------------------------------------------- */

static kcr_err fake_get(kcr_client *c, const kcr_resource *res, const char *ns, const char *name,
                        const kcr_get_options *opts, kcr_object **out, kcr_status *st)
{
    kcr_fake *f = FAKE(c);
    kcr_err err = begin(f, KCR_FAKE_GET, res, ns, name, st);
    if (err != KCR_OK)
        return err;
    pthread_mutex_lock(&f->lock);
    size_t pos;
    err = locate(f, res, ns, name, &pos, st);
    kcr_object *obj = err == KCR_OK ? kcr_object_ref(f->objs[pos]->obj) : NULL;
    pthread_mutex_unlock(&f->lock);
    if (obj && opts->metadata_only) {
        kcr_object *view = metadata_view(obj);
        kcr_object_unref(obj);
        obj = view;
        if (!obj)
            err = kcr__fail(KCR_ERR_NOMEM, "out of memory");
    }
    if (out)
        *out = obj;
    else
        kcr_object_unref(obj);
    return err;
}

static kcr_err parse_body(const char *json, size_t len, kcr__json **doc, kcr_status *st)
{
    if (kcr__json_parse(json, len, doc) != KCR_OK)
        return bad_request(st, kcr_last_error());
    if ((*doc)->type != KCR__JSON_OBJECT) {
        kcr__json_free(*doc);
        *doc = NULL;
        return bad_request(st, "the body is not a JSON object");
    }
    return KCR_OK;
}

static kcr_err fake_create(kcr_client *c, const kcr_resource *res, const char *ns,
                           const char *json, size_t len, const kcr_write_options *opts,
                           kcr_object **out, kcr_status *st)
{
    kcr_fake *f = FAKE(c);
    kcr_err err = begin(f, KCR_FAKE_CREATE, res, ns, NULL, st);
    if (err != KCR_OK)
        return err;
    if (opts->dry_run)
        return bad_request(st, "the fake does not support dryRun");
    if (opts->subresource)
        return bad_request(st, "the fake does not create subresources");
    kcr__json *doc;
    if ((err = parse_body(json, len, &doc, st)) != KCR_OK)
        return err;
    return do_create(f, res, ns, doc, out, st);
}

static kcr_err fake_update(kcr_client *c, const kcr_resource *res, const char *ns,
                           const char *name, const char *json, size_t len,
                           const kcr_write_options *opts, kcr_object **out, kcr_status *st)
{
    kcr_fake *f = FAKE(c);
    kcr_err err = begin(f, KCR_FAKE_UPDATE, res, ns, name, st);
    if (err != KCR_OK)
        return err;
    if (opts->dry_run)
        return bad_request(st, "the fake does not support dryRun");
    bool status_only = opts->subresource && strcmp(opts->subresource, "status") == 0;
    if (opts->subresource && !status_only)
        return bad_request(st, "the fake supports only the status subresource");
    kcr__json *body;
    if ((err = parse_body(json, len, &body, st)) != KCR_OK)
        return err;
    pthread_mutex_lock(&f->lock);
    size_t pos;
    err = locate(f, res, ns, name, &pos, st);
    kcr__json *next = NULL;
    if (err == KCR_OK) {
        fobj *o = f->objs[pos];
        const char *want = kcr__json_str(kcr__json_path(body, "metadata", "resourceVersion", NULL));
        const char *have = kcr__json_str(kcr__json_path(o->doc, "metadata", "resourceVersion", NULL));
        if (want && *want && (!have || strcmp(want, have) != 0)) {
            err = conflict(st, res, name);
        } else if (status_only) {
            next = kcr__json_copy(o->doc);
            kcr__json *s = kcr__json_get(body, "status");
            if (next && s)
                kcr__json_set(next, "status", kcr__json_copy(s));
            else if (next)
                kcr__json_remove(next, "status");
        } else {
            next = body;
            body = NULL;
            kcr__json *s = kcr__json_get(o->doc, "status");
            if (s)
                kcr__json_set(next, "status", kcr__json_copy(s));
            else
                kcr__json_remove(next, "status");
        }
        if (err == KCR_OK)
            err = next ? commit(f, pos, next, NULL, out)
                       : kcr__fail(KCR_ERR_NOMEM, "out of memory");
    }
    pthread_mutex_unlock(&f->lock);
    kcr__json_free(body);
    return err;
}

/* RFC 6902 through the object layer (kcr_object_apply_json_patch), so the
 * fake and kcr's users patch alike; replaces *doc only on success. */
static kcr_err json_patch(kcr__json **doc, const char *patch, size_t len)
{
    char *text = NULL;
    size_t n = 0;
    kcr_object *cur = NULL, *next = NULL;
    kcr_err err = kcr__json_dump(*doc, &text, &n);
    if (err == KCR_OK)
        err = kcr_object_parse(text, n, &cur);
    free(text);
    text = NULL;
    if (err == KCR_OK)
        err = kcr_object_apply_json_patch(cur, patch, len, &next);
    if (err == KCR_OK)
        err = kcr_object_to_json(next, &text, &n);
    kcr__json *patched = NULL;
    if (err == KCR_OK && (err = kcr__json_parse(text, n, &patched)) == KCR_OK) {
        kcr__json_free(*doc);
        *doc = patched;
    }
    free(text);
    kcr_object_unref(cur);
    kcr_object_unref(next);
    return err;
}

static kcr_err fake_patch(kcr_client *c, const kcr_resource *res, const char *ns,
                          const char *name, kcr_patch_type type, const char *patch, size_t len,
                          const kcr_write_options *opts, kcr_object **out, kcr_status *st)
{
    kcr_fake *f = FAKE(c);
    kcr_err err = begin(f, KCR_FAKE_PATCH, res, ns, name, st);
    if (err != KCR_OK)
        return err;
    if (opts->dry_run)
        return bad_request(st, "the fake does not support dryRun");
    bool status_only = opts->subresource && strcmp(opts->subresource, "status") == 0;
    if (opts->subresource && !status_only)
        return bad_request(st, "the fake supports only the status subresource");
    kcr__json *p;
    if (kcr__json_parse(patch, len, &p) != KCR_OK)
        return status_err(st, type == KCR_PATCH_APPLY ? 415 : 400,
                          type == KCR_PATCH_APPLY ? "UnsupportedMediaType" : "BadRequest", res,
                          name, "the fake needs a JSON patch body: %s", kcr_last_error());
    if ((type == KCR_PATCH_JSON) != (p->type == KCR__JSON_ARRAY)) {
        kcr__json_free(p);
        return bad_request(st, type == KCR_PATCH_JSON ? "a JSON patch must be an array"
                                                      : "a merge patch must be a JSON object");
    }
    pthread_mutex_lock(&f->lock);
    size_t pos;
    err = locate(f, res, ns, name, &pos, st);
    if (err == KCR_ERR_NOT_FOUND && type == KCR_PATCH_APPLY) {
        /* apply creates a missing object */
        pthread_mutex_unlock(&f->lock);
        kcr_status_clear(st);
        kcr__clear_error();
        kcr__json *md = kcr__json_child_object(p, "metadata");
        if (md)
            kcr__json_set_str(md, "name", name);
        return md ? do_create(f, res, ns, p, out, st) : kcr__fail(KCR_ERR_NOMEM, "out of memory");
    }
    if (err == KCR_OK) {
        fobj *o = f->objs[pos];
        kcr__json *next = kcr__json_copy(o->doc);
        if (!next)
            err = kcr__fail(KCR_ERR_NOMEM, "out of memory");
        else if (type == KCR_PATCH_JSON)
            err = json_patch(&next, patch, len);
        else
            err = kcr__json_merge_patch(&next, p);
        if (err == KCR_ERR_NOMEM) {
            kcr__json_free(next);
        } else if (err != KCR_OK && type == KCR_PATCH_JSON) {
            /* The apiserver answers any failed JSON patch operation (a failed
             * test too) with this bare 422, without saying which. */
            kcr__json_free(next);
            kcr__log(KCR_LOG_DEBUG, "fake", "JSON patch of %s rejected: %s", name,
                     kcr_last_error());
            err = status_err(st, 422, "Invalid", NULL, NULL,
                             "the server rejected our request due to an error in our request");
        } else if (err != KCR_OK || !next || next->type != KCR__JSON_OBJECT) {
            kcr__json_free(next);
            err = status_err(st, 422, "Invalid", res, name, "%s", kcr_last_error());
        } else {
            const char *want = kcr__json_str(kcr__json_path(next, "metadata", "resourceVersion", NULL));
            const char *have = kcr__json_str(kcr__json_path(o->doc, "metadata", "resourceVersion", NULL));
            if (want && have && strcmp(want, have) != 0) {
                kcr__json_free(next);
                err = conflict(st, res, name);
            } else {
                if (status_only) { /* only the status changes */
                    kcr__json *merged = kcr__json_copy(o->doc);
                    kcr__json *s = kcr__json_get(next, "status");
                    if (merged && s)
                        kcr__json_set(merged, "status", kcr__json_copy(s));
                    else if (merged)
                        kcr__json_remove(merged, "status");
                    kcr__json_free(next);
                    next = merged;
                } else { /* the main resource keeps its status */
                    kcr__json *s = kcr__json_get(o->doc, "status");
                    if (s)
                        kcr__json_set(next, "status", kcr__json_copy(s));
                    else
                        kcr__json_remove(next, "status");
                }
                err = next ? commit(f, pos, next, NULL, out)
                           : kcr__fail(KCR_ERR_NOMEM, "out of memory");
            }
        }
    }
    pthread_mutex_unlock(&f->lock);
    kcr__json_free(p);
    return err;
}

static kcr_err fake_delete(kcr_client *c, const kcr_resource *res, const char *ns,
                           const char *name, const kcr_delete_options *opts, kcr_object **out,
                           kcr_status *st)
{
    kcr_fake *f = FAKE(c);
    kcr_err err = begin(f, KCR_FAKE_DELETE, res, ns, name, st);
    if (err != KCR_OK)
        return err;
    if (opts->dry_run)
        return bad_request(st, "the fake does not support dryRun");
    pthread_mutex_lock(&f->lock);
    size_t pos;
    err = locate(f, res, ns, name, &pos, st);
    if (err == KCR_OK) {
        fobj *o = f->objs[pos];
        kcr__json *md = kcr__json_child_object(o->doc, "metadata");
        const char *uid = kcr__json_str(kcr__json_get(md, "uid"));
        const char *rv = kcr__json_str(kcr__json_get(md, "resourceVersion"));
        if (opts->precondition_uid && strcmp(opts->precondition_uid, uid ? uid : "") != 0) {
            char q[300];
            qualified(res, q, sizeof q);
            err = status_err(st, 409, "Conflict", res, name,
                             "Operation cannot be fulfilled on %s \"%s\": Precondition failed: "
                             "UID in precondition: %s, UID in object meta: %s",
                             q, name, opts->precondition_uid, uid ? uid : "");
        } else if (opts->precondition_resource_version &&
                   strcmp(opts->precondition_resource_version, rv ? rv : "") != 0) {
            char q[300];
            qualified(res, q, sizeof q);
            err = status_err(st, 409, "Conflict", res, name,
                             "Operation cannot be fulfilled on %s \"%s\": Precondition failed: "
                             "ResourceVersion in precondition: %s, ResourceVersion in object "
                             "meta: %s",
                             q, name, opts->precondition_resource_version, rv ? rv : "");
        } else if (finalizer_count(md) > 0) {
            if (kcr__json_get(md, "deletionTimestamp")) {
                if (out)
                    *out = kcr_object_ref(o->obj);
            } else {
                char ts[40];
                now_rfc3339(ts, sizeof ts);
                kcr__json *next = kcr__json_copy(o->doc);
                err = next ? commit(f, pos, next, ts, out)
                           : kcr__fail(KCR_ERR_NOMEM, "out of memory");
            }
        } else {
            err = remove_at(f, pos, out);
        }
    }
    pthread_mutex_unlock(&f->lock);
    return err;
}

/* ---- list -------------------------------------------------------------------------------- */

static kcr_err parse_selectors(const kcr_list_options *opts, kcr__selector **labels,
                               kcr__selector **fields, kcr_status *st)
{
    *labels = *fields = NULL;
    if (kcr__selector_parse(opts->label_selector, labels) != KCR_OK)
        return bad_request(st, kcr_last_error());
    if (kcr__field_selector_parse(opts->field_selector, fields) != KCR_OK) {
        kcr__selector_free(*labels);
        *labels = NULL;
        return bad_request(st, kcr_last_error());
    }
    return KCR_OK;
}

/* Effective namespace of a list/watch: "" for cluster-scoped resources. */
static const char *scope_ns(kcr_fake *f, const kcr_resource *res, const char *ns)
{
    const kcr__disc_entry *e = find_res(f, res);
    if ((e && !e->r.namespaced) || !ns)
        return "";
    return ns;
}

/* An item as the apiserver puts it in a List: without kind and apiVersion
 * (a metadata-only item keeps its PartialObjectMetadata type, as there). */
static kcr_err list_item_json(const kcr_object *obj, bool metadata_only, char **out, size_t *len)
{
    if (metadata_only) {
        kcr_object *view = metadata_view(obj);
        kcr_err err = view ? kcr_object_to_json(view, out, len)
                           : kcr__fail(KCR_ERR_NOMEM, "out of memory");
        kcr_object_unref(view);
        return err;
    }
    kcr_object_edit *e = NULL;
    kcr_object *bare = NULL;
    kcr_err err = kcr_object_edit_new(obj, &e);
    if (err == KCR_OK && *kcr_object_kind(obj))
        err = kcr_object_edit_delete(e, "kind");
    if (err == KCR_OK && *kcr_object_api_version(obj))
        err = kcr_object_edit_delete(e, "apiVersion");
    if (err == KCR_OK)
        err = kcr_object_edit_freeze(e, &bare);
    kcr_object_edit_free(e);
    if (err == KCR_OK)
        err = kcr_object_to_json(bare, out, len);
    kcr_object_unref(bare);
    return err;
}

/* Serves a page the way the apiserver sends it and the client reads it: a
 * List body (kind, apiVersion, then untyped items) through the client's LIST
 * decoder, which gives each item the List's type. */
static kcr_err serve_page(const char *list_kind, const char *list_av, bool metadata_only,
                          kcr_object **items, size_t n, kcr_list_item_fn fn, void *ud)
{
    kcr__list_decoder *d = kcr__list_decoder_new(0, fn, ud);
    if (!d)
        return kcr__fail(KCR_ERR_NOMEM, "fake list: out of memory");
    char head[512];
    if (metadata_only)
        snprintf(head, sizeof head,
                 "{\"kind\":\"PartialObjectMetadataList\",\"apiVersion\":\"meta.k8s.io/v1\","
                 "\"items\":[");
    else
        snprintf(head, sizeof head, "{\"kind\":\"%s%s\",\"apiVersion\":\"%s\",\"items\":[",
                 list_kind, *list_kind ? "List" : "", list_av);
    kcr_err err = kcr__list_decoder_feed(d, head, strlen(head));
    for (size_t i = 0; err == KCR_OK && i < n; i++) {
        char *json = NULL;
        size_t len = 0;
        err = list_item_json(items[i], metadata_only, &json, &len);
        if (err == KCR_OK && i > 0)
            err = kcr__list_decoder_feed(d, ",", 1);
        if (err == KCR_OK)
            err = kcr__list_decoder_feed(d, json, len);
        free(json);
    }
    if (err == KCR_OK)
        err = kcr__list_decoder_feed(d, "]}", 2);
    if (err == KCR_OK)
        err = kcr__list_decoder_finish(d, NULL);
    kcr__list_decoder_free(d);
    return err;
}

static kcr_err fake_list(kcr_client *c, const kcr_resource *res, const char *ns,
                         const kcr_list_options *opts, kcr_list_item_fn fn, void *ud,
                         kcr_list_meta *meta, kcr_status *st)
{
    kcr_fake *f = FAKE(c);
    kcr_err err = begin(f, KCR_FAKE_LIST, res, ns, NULL, st);
    if (err != KCR_OK)
        return err;
    kcr__selector *labels, *fields;
    if ((err = parse_selectors(opts, &labels, &fields, st)) != KCR_OK)
        return err;
    char *after_ns = NULL, *after_name = NULL;
    if (opts->continue_token && *opts->continue_token) {
        char *raw = NULL;
        size_t raw_len = 0;
        char *sep = NULL;
        if (kcr__base64_decode(opts->continue_token, strlen(opts->continue_token), &raw,
                               &raw_len) == KCR_OK)
            sep = memchr(raw, '\x1f', raw_len);
        if (!sep) {
            free(raw);
            kcr__selector_free(labels);
            kcr__selector_free(fields);
            return bad_request(st, "invalid continue token");
        }
        *sep = '\0';
        after_ns = strdup(raw);
        after_name = strdup(sep + 1);
        free(raw);
    }
    char *rkey = rkey_of(res);
    kcr_object **items = NULL;
    size_t n_items = 0;
    int64_t remaining = 0;
    uint64_t rv = 0;
    char list_kind[256] = "", list_av[256];
    if (res->group && *res->group)
        snprintf(list_av, sizeof list_av, "%s/%s", res->group, res->version);
    else
        snprintf(list_av, sizeof list_av, "%s", res->version);
    if (rkey && (!opts->continue_token || !*opts->continue_token || (after_ns && after_name))) {
        pthread_mutex_lock(&f->lock);
        const char *sns = scope_ns(f, res, ns);
        const kcr__disc_entry *de = find_res(f, res);
        if (de)
            snprintf(list_kind, sizeof list_kind, "%s", de->r.kind);
        rv = f->rv;
        bool found;
        size_t i = find_pos(f, rkey, "", "", &found);
        items = calloc(f->n + 1, sizeof *items);
        for (; items && i < f->n && strcmp(f->objs[i]->rkey, rkey) == 0; i++) {
            fobj *o = f->objs[i];
            if (*sns && strcmp(o->ns, sns) != 0)
                continue;
            if (after_ns) {
                int cmp = strcmp(o->ns, after_ns);
                if (cmp < 0 || (cmp == 0 && strcmp(o->name, after_name) <= 0))
                    continue;
            }
            if (!kcr__selector_matches(labels, obj_label, o->obj) ||
                !kcr__selector_matches(fields, obj_field, o->obj))
                continue;
            if (opts->limit > 0 && (int64_t)n_items >= opts->limit)
                remaining++;
            else
                items[n_items++] = kcr_object_ref(o->obj);
        }
        pthread_mutex_unlock(&f->lock);
    }
    if (!rkey || !items || (opts->continue_token && *opts->continue_token && !after_name))
        err = kcr__fail(KCR_ERR_NOMEM, "out of memory");
    if (err == KCR_OK && !*list_kind && n_items) /* not in discovery: the objects' kind */
        snprintf(list_kind, sizeof list_kind, "%s", kcr_object_kind(items[0]));
    if (err == KCR_OK)
        err = serve_page(list_kind, list_av, opts->metadata_only, items, n_items, fn, ud);
    if (err == KCR_OK && meta) {
        char buf[32];
        snprintf(buf, sizeof buf, "%" PRIu64, rv);
        meta->resource_version = strdup(buf);
        meta->continue_token = NULL;
        if (remaining > 0 && n_items > 0) {
            const kcr_object *last = items[n_items - 1];
            size_t len = strlen(kcr_object_namespace(last)) + strlen(kcr_object_name(last)) + 2;
            char *raw = malloc(len);
            if (raw) {
                snprintf(raw, len, "%s\x1f%s", kcr_object_namespace(last), kcr_object_name(last));
                meta->continue_token = kcr__base64_encode(raw, len - 1);
                free(raw);
            }
            meta->remaining_item_count = remaining;
            meta->has_remaining_item_count = true;
        } else {
            meta->continue_token = strdup("");
        }
        if (!meta->resource_version || !meta->continue_token) {
            kcr_list_meta_clear(meta);
            err = kcr__fail(KCR_ERR_NOMEM, "out of memory");
        }
    }
    for (size_t i = 0; i < n_items; i++)
        kcr_object_unref(items[i]);
    free(items);
    free(rkey);
    free(after_ns);
    free(after_name);
    kcr__selector_free(labels);
    kcr__selector_free(fields);
    return err;
}

/* ---- watch ------------------------------------------------------------------------------- */

static void free_item(qitem *it)
{
    kcr_object_unref(it->obj);
    if (it->st) {
        kcr_status_clear(it->st);
        free(it->st);
    }
    free(it);
}

static qitem *bookmark_item(kcr_fake *f, bool initial_end)
{
    qitem *it = calloc(1, sizeof *it);
    if (it) {
        it->type = KCR_WATCH_BOOKMARK;
        snprintf(it->rv, sizeof it->rv, "%" PRIu64, f->rv);
        it->initial_end = initial_end;
    }
    return it;
}

static qitem *error_item(int code, const char *reason, const char *message)
{
    qitem *it = calloc(1, sizeof *it);
    if (!it)
        return NULL;
    it->type = KCR_WATCH_ERROR;
    it->st = calloc(1, sizeof *it->st);
    if (!it->st || kcr__status_make(it->st, code, reason, message) != KCR_OK) {
        free_item(it);
        return NULL;
    }
    return it;
}

static void unlink_watcher(kcr_fake *f, watcher *w)
{
    for (watcher **p = &f->watchers; *p; p = &(*p)->next)
        if (*p == w) {
            *p = w->next;
            break;
        }
}

static void watcher_free(watcher *w)
{
    while (w->head) {
        qitem *it = w->head;
        w->head = it->next;
        free_item(it);
    }
    free(w->rkey);
    free(w->ns);
    kcr__selector_free(w->labels);
    kcr__selector_free(w->fields);
    pthread_cond_destroy(&w->cond);
    free(w);
}

static kcr_err fake_watch(kcr_client *c, const kcr_resource *res, const char *ns,
                          const kcr_list_options *opts, kcr_watch_event_fn fn, void *ud,
                          kcr_status *st)
{
    kcr_fake *f = FAKE(c);
    kcr_err err = begin(f, KCR_FAKE_WATCH, res, ns, NULL, st);
    if (err != KCR_OK)
        return err;
    const char *rvs = opts->resource_version;
    bool initial = !rvs || !*rvs || strcmp(rvs, "0") == 0 || opts->send_initial_events;
    uint64_t from_rv = 0;
    if (rvs && *rvs) {
        char *end;
        from_rv = strtoull(rvs, &end, 10);
        if (*end || *rvs == '-')
            return bad_request(st, "resourceVersion must be a number for the fake");
    }
    watcher *w = calloc(1, sizeof *w);
    if (!w)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory");
    kcr__cond_init_monotonic(&w->cond);
    w->bookmarks = opts->allow_bookmarks;
    w->metadata_only = opts->metadata_only;
    w->rkey = rkey_of(res);
    if ((err = parse_selectors(opts, &w->labels, &w->fields, st)) != KCR_OK || !w->rkey) {
        watcher_free(w);
        return err != KCR_OK ? err : kcr__fail(KCR_ERR_NOMEM, "out of memory");
    }
    pthread_mutex_lock(&f->lock);
    w->ns = strdup(scope_ns(f, res, ns));
    if (initial) {
        bool found;
        for (size_t i = find_pos(f, w->rkey, "", "", &found);
             i < f->n && strcmp(f->objs[i]->rkey, w->rkey) == 0; i++) {
            fobj *o = f->objs[i];
            if ((w->ns && *w->ns && strcmp(o->ns, w->ns) != 0) || !watcher_selects(w, o->obj))
                continue;
            qitem *it = calloc(1, sizeof *it);
            if (!it)
                continue;
            it->type = KCR_WATCH_ADDED;
            it->obj = w->metadata_only ? metadata_view(o->obj) : kcr_object_ref(o->obj);
            enqueue(f, w, it);
        }
        if (opts->send_initial_events && w->bookmarks) {
            qitem *it = bookmark_item(f, true);
            if (it)
                enqueue(f, w, it);
        }
    } else if (from_rv < f->compacted_rv) {
        char msg[128];
        snprintf(msg, sizeof msg, "too old resource version: %" PRIu64 " (%" PRIu64 ")", from_rv,
                 f->compacted_rv + 1);
        qitem *it = error_item(410, "Expired", msg);
        if (it)
            enqueue(f, w, it);
    } else {
        for (size_t i = 0; i < f->hist_len; i++) {
            const fevent *e = &f->hist[(f->hist_start + i) % f->opts.history_size];
            if (e->rv > from_rv)
                offer(f, w, e);
        }
    }
    w->next = f->watchers;
    f->watchers = w;
    pthread_mutex_unlock(&f->lock);

    int64_t start = kcr__now_ns();
    /* The server sees timeoutSeconds: the timeout rounded up to whole seconds. */
    int64_t deadline =
        opts->timeout_ms > 0 ? start + kcr__ms_to_s_ceil(opts->timeout_ms) * KCR_NS_PER_S : 0;
    int64_t idle_ns = opts->idle_timeout_ms > 0 ? opts->idle_timeout_ms * KCR_NS_PER_MS : 0;
    int64_t bm_ns = f->opts.bookmark_interval_ms > 0 && w->bookmarks
                        ? f->opts.bookmark_interval_ms * KCR_NS_PER_MS
                        : 0;
    int64_t next_bm = bm_ns ? start + bm_ns : 0;
    int64_t last_activity = start;
    err = KCR_OK;
    for (;;) {
        pthread_mutex_lock(&f->lock);
        qitem *it = NULL;
        while (err == KCR_OK) {
            if (w->head) {
                it = w->head;
                w->head = it->next;
                if (!w->head)
                    w->tail = NULL;
                w->len--;
                break;
            }
            if (w->ended)
                break;
            int64_t now = kcr__now_ns();
            if (kcr_cancel_triggered(opts->cancel)) {
                err = kcr__fail(KCR_ERR_CANCELED, "watch canceled");
            } else if (deadline && now >= deadline) {
                break; /* timeoutSeconds: a clean end */
            } else if (idle_ns && now - last_activity >= idle_ns) {
                err = kcr__fail(KCR_ERR_TIMEOUT, "watch: no event for %lld ms",
                                (long long)opts->idle_timeout_ms);
            } else if (next_bm && now >= next_bm) {
                qitem *b = bookmark_item(f, false);
                if (b)
                    enqueue(f, w, b);
                next_bm = now + bm_ns;
            } else {
                int64_t wake = now + WAIT_SLICE_MS * KCR_NS_PER_MS;
                if (deadline && deadline < wake)
                    wake = deadline;
                if (idle_ns && last_activity + idle_ns < wake)
                    wake = last_activity + idle_ns;
                if (next_bm && next_bm < wake)
                    wake = next_bm;
                struct timespec ts = kcr__timespec_at(wake);
                pthread_cond_timedwait(&w->cond, &f->lock, &ts);
            }
        }
        pthread_mutex_unlock(&f->lock);
        if (!it)
            break;
        last_activity = kcr__now_ns();
        kcr_watch_event ev = {.type = it->type,
                              .object = it->obj,
                              .resource_version = it->obj ? kcr_object_resource_version(it->obj)
                                                          : it->rv,
                              .initial_events_end = it->initial_end,
                              .status = it->st};
        if (it->type == KCR_WATCH_ERROR)
            ev.resource_version = "";
        err = fn ? fn(&ev, ud) : KCR_OK;
        if (err == KCR_OK && it->type == KCR_WATCH_ERROR) {
            kcr_status_copy(st, it->st);
            err = kcr__status_fail(it->st);
        }
        free_item(it);
        if (err != KCR_OK)
            break;
    }
    pthread_mutex_lock(&f->lock);
    unlink_watcher(f, w);
    pthread_mutex_unlock(&f->lock);
    watcher_free(w);
    return err;
}

/* ---- discovery, raw, lifetime --------------------------------------------------------------- */

static kcr_err fake_resolve(kcr_client *c, const kcr__disc_query *q, bool refresh,
                            kcr_api_resource *out, kcr_status *st)
{
    kcr_fake *f = FAKE(c);
    if (kcr_cancel_triggered(q->cancel))
        return kcr__fail(KCR_ERR_CANCELED, "resolve canceled");
    pthread_mutex_lock(&f->lock);
    kcr_err err = kcr__disc_resolve(&f->disc, q, out);
    pthread_mutex_unlock(&f->lock);
    return err;
}

static void fake_invalidate(kcr_client *c)
{
}

static kcr_err fake_raw(kcr_client *c, const char *path, const char *body, size_t body_len,
                        const kcr_raw_options *opts, char **out, size_t *out_len, kcr_status *st)
{
    return kcr__fail(KCR_ERR_UNSUPPORTED, "the fake API serves no raw requests (%s)", path);
}

static void fake_unref(kcr_fake *f)
{
    if (!f || atomic_fetch_sub(&f->refs, 1) != 1)
        return;
    for (size_t i = 0; i < f->n; i++)
        fobj_free(f->objs[i]);
    free(f->objs);
    for (size_t i = 0; i < f->hist_len; i++) {
        fevent *e = &f->hist[(f->hist_start + i) % f->opts.history_size];
        free(e->rkey);
        free(e->ns);
        kcr_object_unref(e->obj);
        kcr_object_unref(e->old);
    }
    free(f->hist);
    for (size_t i = 0; i < f->n_rules; i++) {
        free(f->rules[i].rkey);
        free(f->rules[i].ns);
        free(f->rules[i].name);
        free(f->rules[i].reason);
        free(f->rules[i].message);
    }
    free(f->rules);
    for (size_t i = 0; i < f->n_counters; i++)
        free(f->counters[i].rkey);
    free(f->counters);
    kcr__disc_clear(&f->disc);
    pthread_mutex_destroy(&f->lock);
    free(f);
}

static void fake_destroy(kcr_client *c)
{
    fake_client *fc = (fake_client *)c;
    fake_unref(fc->f);
    free(fc->ns);
    free(fc);
}

static const kcr__client_ops fake_ops = {
    .get = fake_get,
    .create = fake_create,
    .update = fake_update,
    .patch = fake_patch,
    .del = fake_delete,
    .list = fake_list,
    .watch = fake_watch,
    .resolve = fake_resolve,
    .invalidate = fake_invalidate,
    .raw = fake_raw,
    .destroy = fake_destroy,
    .dispatch_host = "fake",
};

/* ---- public API ------------------------------------------------------------------------------ */

static const struct builtin {
    const char *group, *version, *resource, *singular, *kind, *shorts;
    bool namespaced;
} builtins[] = {
    {"", "v1", "configmaps", "configmap", "ConfigMap", "cm", true},
    {"", "v1", "secrets", "secret", "Secret", NULL, true},
    {"", "v1", "pods", "pod", "Pod", "po", true},
    {"", "v1", "services", "service", "Service", "svc", true},
    {"", "v1", "serviceaccounts", "serviceaccount", "ServiceAccount", "sa", true},
    {"", "v1", "endpoints", "endpoints", "Endpoints", "ep", true},
    {"", "v1", "events", "event", "Event", "ev", true},
    {"", "v1", "persistentvolumeclaims", "persistentvolumeclaim", "PersistentVolumeClaim", "pvc",
     true},
    {"", "v1", "namespaces", "namespace", "Namespace", "ns", false},
    {"", "v1", "nodes", "node", "Node", "no", false},
    {"", "v1", "persistentvolumes", "persistentvolume", "PersistentVolume", "pv", false},
    {"apps", "v1", "deployments", "deployment", "Deployment", "deploy", true},
    {"apps", "v1", "replicasets", "replicaset", "ReplicaSet", "rs", true},
    {"apps", "v1", "statefulsets", "statefulset", "StatefulSet", "sts", true},
    {"apps", "v1", "daemonsets", "daemonset", "DaemonSet", "ds", true},
    {"batch", "v1", "jobs", "job", "Job", NULL, true},
    {"batch", "v1", "cronjobs", "cronjob", "CronJob", "cj", true},
    {"coordination.k8s.io", "v1", "leases", "lease", "Lease", NULL, true},
    {"events.k8s.io", "v1", "events", "event", "Event", "ev", true},
    {"apiextensions.k8s.io", "v1", "customresourcedefinitions", "customresourcedefinition",
     "CustomResourceDefinition", "crd,crds", false},
};

kcr_err kcr_fake_register(kcr_fake *f, const kcr_api_resource *r, const char *short_names)
{
    if (!f || !r || !r->version[0] || !r->resource[0])
        return kcr__fail(KCR_ERR_INVALID, "register: a resource with version and plural required");
    char *copy = strdup(short_names ? short_names : "");
    if (!copy)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory");
    const char *names[32];
    size_t n = 0;
    for (char *save = NULL, *t = strtok_r(copy, ",", &save); t && n < 32;
         t = strtok_r(NULL, ",", &save))
        names[n++] = t;
    pthread_mutex_lock(&f->lock);
    kcr_err err = kcr__disc_add(&f->disc, r, names, n, true);
    pthread_mutex_unlock(&f->lock);
    free(copy);
    return err;
}

kcr_err kcr_fake_new(const kcr_fake_options *opts, kcr_fake **out)
{
    *out = NULL;
    if (opts && opts->bookmark_interval_ms > KCR__MAX_DURATION_MS)
        return kcr__fail(KCR_ERR_INVALID, "kcr_fake_new: bookmark_interval_ms %lld is above %lld",
                         (long long)opts->bookmark_interval_ms, (long long)KCR__MAX_DURATION_MS);
    kcr_fake *f = calloc(1, sizeof *f);
    if (!f)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory");
    if (opts)
        f->opts = *opts;
    if (!f->opts.history_size)
        f->opts.history_size = DEFAULT_HISTORY;
    if (!f->opts.max_watch_queue)
        f->opts.max_watch_queue = DEFAULT_MAX_QUEUE;
    atomic_init(&f->refs, 1);
    pthread_mutex_init(&f->lock, NULL);
    f->rand_state = (uint64_t)kcr__wall_ns() ^ ((uint64_t)getpid() << 32) ^ (uintptr_t)f;
    if (!f->rand_state)
        f->rand_state = 88172645463325252ULL;
    f->hist = calloc(f->opts.history_size, sizeof *f->hist);
    kcr_err err = f->hist ? KCR_OK : kcr__fail(KCR_ERR_NOMEM, "out of memory");
    for (size_t i = 0; err == KCR_OK && i < sizeof builtins / sizeof *builtins; i++) {
        const struct builtin *b = &builtins[i];
        kcr_api_resource r;
        memset(&r, 0, sizeof r);
        snprintf(r.group, sizeof r.group, "%s", b->group);
        snprintf(r.version, sizeof r.version, "%s", b->version);
        snprintf(r.resource, sizeof r.resource, "%s", b->resource);
        snprintf(r.singular, sizeof r.singular, "%s", b->singular);
        snprintf(r.kind, sizeof r.kind, "%s", b->kind);
        r.namespaced = b->namespaced;
        err = kcr_fake_register(f, &r, b->shorts);
    }
    if (err != KCR_OK) {
        fake_unref(f);
        return err;
    }
    *out = f;
    return KCR_OK;
}

void kcr_fake_free(kcr_fake *f)
{
    fake_unref(f);
}

kcr_err kcr_fake_client(kcr_fake *f, const char *ns, kcr_client **out)
{
    *out = NULL;
    if (!f)
        return kcr__fail(KCR_ERR_INVALID, "kcr_fake_client: no fake");
    fake_client *fc = calloc(1, sizeof *fc);
    if (!fc || !(fc->ns = strdup(ns ? ns : "default"))) {
        free(fc);
        return kcr__fail(KCR_ERR_NOMEM, "out of memory");
    }
    fc->base.ops = &fake_ops;
    fc->base.namespace = fc->ns;
    fc->f = f;
    atomic_fetch_add(&f->refs, 1);
    *out = &fc->base;
    return KCR_OK;
}

kcr_err kcr_fake_add(kcr_fake *f, const kcr_resource *res, const char *json, kcr_object **out)
{
    if (out)
        *out = NULL;
    if (!f || !res || !res->resource || !res->version || !json)
        return kcr__fail(KCR_ERR_INVALID, "kcr_fake_add: a fake, a resource and JSON required");
    pthread_mutex_lock(&f->lock);
    bool known = served(f, res);
    pthread_mutex_unlock(&f->lock);
    if (!known)
        return kcr__fail(KCR_ERR_NOT_FOUND,
                         "kcr_fake_add: the fake does not serve %s/%s %s: register it "
                         "(kcr_fake_register) or create its CustomResourceDefinition first",
                         res->group && *res->group ? res->group : "core", res->version,
                         res->resource);
    kcr_status st = {0};
    kcr__json *doc;
    kcr_err err = parse_body(json, strlen(json), &doc, &st);
    if (err == KCR_OK) {
        const char *ns = kcr__json_str(kcr__json_path(doc, "metadata", "namespace", NULL));
        char *nsc = ns ? strdup(ns) : NULL;
        err = do_create(f, res, nsc, doc, out, &st);
        free(nsc);
    }
    kcr_status_clear(&st);
    return err;
}

kcr_err kcr_fake_inject_error(kcr_fake *f, kcr_fake_verb verb, const kcr_resource *res,
                              int times, int code, const char *reason, const char *message)
{
    return kcr_fake_inject_error_for(f, verb, res, NULL, NULL, times, code, reason, message);
}

kcr_err kcr_fake_inject_error_for(kcr_fake *f, kcr_fake_verb verb, const kcr_resource *res,
                                  const char *ns, const char *name, int times, int code,
                                  const char *reason, const char *message)
{
    if (!f || times == 0)
        return kcr__fail(KCR_ERR_INVALID, "inject_error: a fake and times != 0 required");
    rule r = {.verb = verb, .times = times, .code = code};
    r.rkey = res ? rkey_of(res) : NULL;
    r.ns = ns ? strdup(ns) : NULL;
    r.name = name ? strdup(name) : NULL;
    r.reason = strdup(reason ? reason : "");
    r.message = strdup(message ? message : "");
    pthread_mutex_lock(&f->lock);
    rule *nr = realloc(f->rules, (f->n_rules + 1) * sizeof *nr);
    kcr_err err = KCR_OK;
    if (!nr || (res && !r.rkey) || (ns && !r.ns) || (name && !r.name) || !r.reason ||
        !r.message) {
        err = kcr__fail(KCR_ERR_NOMEM, "out of memory");
        if (nr)
            f->rules = nr;
        free(r.rkey);
        free(r.ns);
        free(r.name);
        free(r.reason);
        free(r.message);
    } else {
        f->rules = nr;
        f->rules[f->n_rules++] = r;
    }
    pthread_mutex_unlock(&f->lock);
    return err;
}

void kcr_fake_clear_errors(kcr_fake *f)
{
    pthread_mutex_lock(&f->lock);
    for (size_t i = 0; i < f->n_rules; i++) {
        free(f->rules[i].rkey);
        free(f->rules[i].ns);
        free(f->rules[i].name);
        free(f->rules[i].reason);
        free(f->rules[i].message);
    }
    f->n_rules = 0;
    pthread_mutex_unlock(&f->lock);
}

void kcr_fake_set_hook(kcr_fake *f, kcr_fake_hook_fn fn, void *user_data)
{
    pthread_mutex_lock(&f->lock);
    f->hook = fn;
    f->hook_ud = user_data;
    pthread_mutex_unlock(&f->lock);
}

uint64_t kcr_fake_count(kcr_fake *f, kcr_fake_verb verb, const kcr_resource *res)
{
    char *rkey = res ? rkey_of(res) : NULL;
    uint64_t n = 0;
    pthread_mutex_lock(&f->lock);
    for (size_t i = 0; i < f->n_counters; i++)
        if ((verb == KCR_FAKE_ANY || f->counters[i].verb == verb) &&
            (!rkey || strcmp(rkey, f->counters[i].rkey) == 0))
            n += f->counters[i].n;
    pthread_mutex_unlock(&f->lock);
    free(rkey);
    return n;
}

uint64_t kcr_fake_resource_version(kcr_fake *f)
{
    pthread_mutex_lock(&f->lock);
    uint64_t rv = f->rv;
    pthread_mutex_unlock(&f->lock);
    return rv;
}

/* Runs fn on each active watcher of res (NULL: all), lock held. */
static size_t each_watcher(kcr_fake *f, const kcr_resource *res,
                           void (*fn)(kcr_fake *, watcher *, void *), void *ud)
{
    char *rkey = res ? rkey_of(res) : NULL;
    size_t n = 0;
    for (watcher *w = f->watchers; w; w = w->next)
        if (!w->ended && (!rkey || strcmp(rkey, w->rkey) == 0)) {
            n++;
            if (fn)
                fn(f, w, ud);
        }
    free(rkey);
    return n;
}

size_t kcr_fake_watch_count(kcr_fake *f, const kcr_resource *res)
{
    pthread_mutex_lock(&f->lock);
    size_t n = each_watcher(f, res, NULL, NULL);
    pthread_mutex_unlock(&f->lock);
    return n;
}

static void end_one(kcr_fake *f, watcher *w, void *ud)
{
    w->ended = true;
    pthread_cond_broadcast(&w->cond);
}

void kcr_fake_end_watches(kcr_fake *f, const kcr_resource *res)
{
    pthread_mutex_lock(&f->lock);
    each_watcher(f, res, end_one, NULL);
    pthread_mutex_unlock(&f->lock);
}

struct error_args {
    int code;
    const char *reason, *message;
};

static void error_one(kcr_fake *f, watcher *w, void *ud)
{
    struct error_args *a = ud;
    qitem *it = error_item(a->code, a->reason, a->message);
    if (it)
        enqueue(f, w, it);
    w->ended = true;
}

void kcr_fake_watch_error(kcr_fake *f, const kcr_resource *res, int code, const char *reason,
                          const char *message)
{
    struct error_args a = {code, reason, message};
    pthread_mutex_lock(&f->lock);
    each_watcher(f, res, error_one, &a);
    pthread_mutex_unlock(&f->lock);
}

static void bookmark_one(kcr_fake *f, watcher *w, void *ud)
{
    if (!w->bookmarks)
        return;
    qitem *it = bookmark_item(f, false);
    if (it)
        enqueue(f, w, it);
}

void kcr_fake_bookmark(kcr_fake *f, const kcr_resource *res)
{
    pthread_mutex_lock(&f->lock);
    each_watcher(f, res, bookmark_one, NULL);
    pthread_mutex_unlock(&f->lock);
}

void kcr_fake_compact(kcr_fake *f)
{
    pthread_mutex_lock(&f->lock);
    for (size_t i = 0; i < f->hist_len; i++) {
        fevent *e = &f->hist[(f->hist_start + i) % f->opts.history_size];
        free(e->rkey);
        free(e->ns);
        kcr_object_unref(e->obj);
        kcr_object_unref(e->old);
    }
    f->hist_start = f->hist_len = 0;
    f->compacted_rv = f->rv;
    pthread_mutex_unlock(&f->lock);
}
