/* The event router: one change of a watched object becomes zero or more
 * keys, each with a reason and a priority. Informer handlers (manager) and
 * the test kit's cache sync both call kcr__route, so both see the same
 * routing. */
#include <stdlib.h>
#include <string.h>

#include "controller/controller_internal.h"
#include "core/error.h"
#include "core/log.h"
#include "core/trace.h"

struct kcr_map_out {
    kcr__source *src;
    const kcr_object *from;
    bool low; /* from the initial list: low priority */
};

/* Logs a routing problem once per source and flag. */
static void warn_once(atomic_bool *flag, const kcr__source *s, const char *what)
{
    if (!atomic_exchange(flag, true))
        kcr__log(KCR_LOG_ERROR, "controller",
                 "controller \"%s\": %s: %s: %s (logged once; counted)", s->ctl->name, s->label,
                 what, kcr_last_error());
}

/* A key that cannot be routed: counted and logged once per source. */
static void refuse_key(kcr__source *s, const char *what)
{
    KCR__COUNT(s->ctl, invalid_keys, 1);
    warn_once(&s->warned_key, s, what);
}

static const char *kind_of(const kcr__source *s, const kcr_object *obj)
{
    if (s->kind[0])
        return s->kind;
    if (obj && kcr_object_kind(obj)[0])
        return kcr_object_kind(obj);
    return s->resource;
}

/* uid: the uid of the object `key` names, when known (sharded admission). */
static void enqueue(kcr__source *s, const char *key, kcr_reason reason, kcr_change change,
                    const kcr_object *obj, const char *uid, bool low)
{
    kcr_trigger t = {
        .reason = reason,
        .change = change,
        .kind = kind_of(s, obj),
        .ns = obj ? kcr_object_namespace(obj) : "",
        .name = obj ? kcr_object_name(obj) : "",
    };
    kcr_err err = kcr__controller_enqueue_uid(
        s->ctl, key, &t, uid, low ? KCR_WQ_PRIORITY_LOW : KCR_WQ_PRIORITY_NORMAL);
    if (err == KCR_OK) /* counted once in the queue: a reader of the count finds it there */
        KCR__COUNT(s->ctl, enqueues, 1);
    else if (err != KCR_ERR_SHUTDOWN)
        kcr__log(KCR_LOG_WARN, "controller", "controller \"%s\": enqueue %s: %s", s->ctl->name, key,
                 kcr_last_error());
}

kcr_err kcr_map_emit(kcr_map_out *out, const char *ns, const char *name)
{
    if (!out)
        return kcr__fail(KCR_ERR_INVALID, "kcr_map_emit: NULL output");
    kcr__source *s = out->src;
    char *key = NULL;
    kcr_err err = kcr__make_key(s->ctl, ns, name, &key);
    if (err != KCR_OK) {
        refuse_key(s, "map function emitted an invalid key");
        return err;
    }
    enqueue(s, key, KCR_REASON_MAPPED, 0, out->from, NULL, out->low);
    free(key);
    return KCR_OK;
}

/* The group of an apiVersion ("apps/v1" -> "apps", "v1" -> ""), compared in place. */
static bool same_group(const char *api_version, const char *group)
{
    const char *slash = strchr(api_version, '/');
    if (!slash)
        return group[0] == '\0';
    size_t n = (size_t)(slash - api_version);
    return strlen(group) == n && memcmp(api_version, group, n) == 0;
}

static void route_owner(kcr__source *s, const kcr_object *obj, kcr_change change, bool low)
{
    kcr_owner_ref ref;
    const kcr__source *p = &s->ctl->sources[0];
    if (!kcr_object_controller_ref(obj, &ref) || strcmp(ref.kind, p->kind) != 0 ||
        !same_group(ref.api_version, p->group))
        return;
    char *key = NULL;
    if (kcr__make_key(s->ctl, p->cluster_scoped ? "" : kcr_object_namespace(obj), ref.name, &key) !=
        KCR_OK) {
        refuse_key(s, "owner reference names an invalid key");
        return;
    }
    enqueue(s, key, KCR_REASON_OWNED, change, obj, ref.uid, low);
    free(key);
}

static void route_primary(kcr__source *s, const char *key, const kcr_object *obj, kcr_change change,
                          bool initial, bool resync)
{
    char *made = NULL;
    if (!key && kcr_store_key(obj, &made) != KCR_OK) {
        refuse_key(s, "object without a key");
        return;
    }
    /* the key's shape must be the primary's scope: a namespaced object's
     * key under a cluster-scoped primary (or the reverse) names nothing */
    if ((strchr(key ? key : made, '/') != NULL) == s->cluster_scoped) {
        kcr__fail(KCR_ERR_INVALID, "key \"%s\" %s, but the primary resource is %s",
                  key ? key : made, s->cluster_scoped ? "has a namespace" : "has no namespace",
                  s->cluster_scoped ? "cluster-scoped" : "namespaced");
        free(made);
        refuse_key(s, "object's key does not fit the primary's scope");
        return;
    }
    kcr_reason r = initial                        ? KCR_REASON_INITIAL_LIST
                   : resync                       ? KCR_REASON_RESYNC
                   : change == KCR_CHANGE_ADDED   ? KCR_REASON_PRIMARY_ADDED
                   : change == KCR_CHANGE_UPDATED ? KCR_REASON_PRIMARY_UPDATED
                                                  : KCR_REASON_PRIMARY_DELETED;
    enqueue(s, key ? key : made, r, change, obj, kcr_object_uid(obj), initial || resync);
    free(made);
}

void kcr__route(kcr__source *s, const char *key, kcr_change change, const kcr_object *old_obj,
                const kcr_object *obj, bool initial)
{
    kcr_controller *c = s->ctl;
    if (key)
        kcr__trace_stamp(KCR__TR_HANDLER, key);
    bool resync =
        change == KCR_CHANGE_UPDATED && old_obj && obj &&
        strcmp(kcr_object_resource_version(old_obj), kcr_object_resource_version(obj)) == 0;
    if (resync && s->role != KCR__ROLE_PRIMARY)
        return; /* only the primary asks for resyncs */
    bool failed = false;
    kcr_source_ctx sctx = {.src = s};
    kcr_object_change oc = {.change = change, .old_obj = old_obj, .obj = obj};
    bool pass = kcr_predicate_eval(s->predicate, &sctx, &oc, &failed);
    if (failed) {
        KCR__COUNT(c, predicate_errors, 1);
        kcr__fail(KCR_ERR_API, "custom predicate failed (the change passes)");
        warn_once(&s->warned_predicate, s, "predicate");
    }
    if (!pass) {
        KCR__COUNT(c, filtered, 1);
        return;
    }
    if (!obj) {
        /* a missed deletion without a last known state: nothing to route on */
        kcr__log(KCR_LOG_DEBUG, "controller", "controller \"%s\": %s: deletion without state",
                 c->name, s->label);
        return;
    }
    switch (s->role) {
    case KCR__ROLE_PRIMARY:
        route_primary(s, key, obj, change, initial, resync);
        break;
    case KCR__ROLE_OWNS:
        route_owner(s, obj, change, initial);
        /* an update that moved the object to another owner also tells the old one */
        if (change == KCR_CHANGE_UPDATED && old_obj) {
            kcr_owner_ref a, b;
            bool ha = kcr_object_controller_ref(old_obj, &a),
                 hb = kcr_object_controller_ref(obj, &b);
            if (ha && (!hb || strcmp(a.uid, b.uid) != 0))
                route_owner(s, old_obj, change, false);
        }
        break;
    case KCR__ROLE_WATCHES: {
        kcr_map_out out = {.src = s, .from = obj, .low = initial};
        kcr_err err = s->map(&sctx, obj, &out, s->map_user_data);
        if (err != KCR_OK) {
            KCR__COUNT(c, map_errors, 1);
            kcr__fail(err, "it returned %s", kcr_strerror(err));
            warn_once(&s->warned_map, s, "map function failed");
        }
        break;
    }
    }
}
