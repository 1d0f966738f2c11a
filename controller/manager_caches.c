/* The manager's caches: every source of every controller gets the factory's
 * shared informer for its resource + namespace + selectors + metadata_only,
 * and a handler feeding kcr__route, run inline by the informer's threads
 * (kcr_source.own_thread: a handler thread of its own). Also readiness: which cache is not
 * synced, and what the server said. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controller/manager_internal.h"
#include "core/error.h"

static void on_add(const char *key, const kcr_object *obj, bool initial, void *ud)
{
    kcr__route(ud, key, KCR_CHANGE_ADDED, NULL, obj, initial);
}

static void on_update(const char *key, const kcr_object *old_obj, const kcr_object *new_obj,
                      void *ud)
{
    kcr__route(ud, key, KCR_CHANGE_UPDATED, old_obj, new_obj, false);
}

static void on_delete(const char *key, const kcr_object *obj, const kcr_tombstone *tombstone,
                      void *ud)
{
    (void)tombstone; /* obj is already the tombstone's last known state */
    const kcr__source *s = ud;
    const mgr_ctl *mc = s->ctl->env_ctl;
    /* label-mode sharding: an object relabelled for a replica whose label
     * the cache does not watch leaves it as a DELETED event carrying its
     * new labels; it was not deleted, and its reconciles are the other
     * replica's (a deletion missed while not watching may come with no
     * object: it is routed) */
    if (s->role == KCR__ROLE_PRIMARY && mc->sharded && obj &&
        kcr__mgr_shard_moved_away(mc->m->shard, obj))
        return;
    kcr__route(ud, key, KCR_CHANGE_DELETED, NULL, obj, false);
}

kcr_err kcr__mgr_bind_sources(mgr_ctl *mc)
{
    kcr_manager *m = mc->m;
    kcr_controller *c = mc->c;
    for (size_t i = 0; i < c->n_sources; i++) {
        kcr__source *s = &c->sources[i];
        kcr_informer_options io =
            m->cache_defaults ? *m->cache_defaults : (kcr_informer_options){0};
        io.reflector.ns = s->ns;
        io.reflector.label_selector = s->label_selector;
        io.reflector.field_selector = s->field_selector;
        io.reflector.metadata_only = s->metadata_only;
        /* server-mode sharding: the primary cache follows the shard (and
         * starts with a selector of its own, so an unsharded controller
         * never shares it); in every mode an owned cache follows it by its
         * objects' controller (manager_shard_children.c); watched objects
         * map to keys only the map function knows, so their caches stay whole */
        const char *shard_sel = !mc->sharded                   ? NULL
                                : s->role == KCR__ROLE_PRIMARY ? kcr__mgr_shard_initial_selector(m->shard)
                                : s->role == KCR__ROLE_OWNS ? kcr__mgr_shard_child_selector(m->shard, c)
                                                            : NULL;
        if (shard_sel)
            io.reflector.shard_selector = shard_sel;
        /* label-mode sharding: the primary cache holds this replica's
         * objects (its shard label); with child_bucket_selector an owned
         * cache asks for its owners' buckets */
        char *labels = NULL;
        kcr_err err =
            mc->sharded && s->role == KCR__ROLE_PRIMARY
                ? kcr__mgr_shard_label_selector(m->shard, s->label_selector, &labels)
            : shard_sel && s->role == KCR__ROLE_OWNS
                ? kcr__mgr_shard_child_labels(m->shard, s->label_selector, &labels)
                : KCR_OK;
        if (err != KCR_OK)
            return err;
        if (labels)
            io.reflector.label_selector = labels;
        kcr_resource res = {s->group, s->version, s->resource};
        err = kcr_informer_factory_informer(m->factory, &res, &io, &mc->infs[i]);
        free(labels);
        if (err != KCR_OK)
            return err;
        if (mc->sharded && s->role == KCR__ROLE_PRIMARY &&
            (err = kcr__mgr_shard_label_cache(m->shard, mc->infs[i], s->label_selector)) != KCR_OK)
            return err;
        s->cache = kcr_informer_store(mc->infs[i]);
        if (shard_sel && s->role == KCR__ROLE_OWNS &&
            (err = kcr__mgr_shard_add_child(m->shard, mc->infs[i], s->label_selector)) != KCR_OK)
            return err;
        kcr_event_handler h = {
            .on_add = on_add,
            .on_update = on_update,
            .on_delete = on_delete,
            .resync_period_ms = s->role == KCR__ROLE_PRIMARY ? c->resync_ms : 0,
            /* routing only enqueues keys: no thread hand-off of its own
             * unless the source's predicate or map function may block */
            .delivery = s->own_thread ? KCR_HANDLER_DELIVERY_THREAD : KCR_HANDLER_DELIVERY_INLINE,
            .user_data = s,
        };
        err = kcr_informer_add_handler(mc->infs[i], &h, &mc->regs[i]);
        if (err != KCR_OK)
            return err;
    }
    for (size_t i = 0; i < c->n_indexes; i++) {
        const kcr_cache_index *ix = &c->indexes[i];
        for (size_t j = 0; j < c->n_sources; j++) {
            const kcr__source *s = &c->sources[j];
            if (strcmp(s->resource, ix->resource.resource) != 0 ||
                strcmp(s->group, ix->resource.group) != 0)
                continue;
            kcr_err err = kcr_informer_add_index(mc->infs[j], ix->name, ix->fn, ix->user_data);
            if (err != KCR_OK && err != KCR_ERR_EXISTS)
                return err;
            break;
        }
    }
    return KCR_OK;
}

char *kcr__mgr_caches_not_ready(kcr_manager *m)
{
    for (size_t i = 0; i < m->n_ctls; i++) {
        mgr_ctl *mc = m->ctls[i];
        for (size_t j = 0; j < mc->c->n_sources; j++) {
            if (kcr_informer_has_synced(mc->infs[j]))
                continue;
            const kcr__source *s = &mc->c->sources[j];
            kcr_status st = {0};
            char *detail = NULL;
            kcr_err err =
                kcr_reflector_last_error(kcr_informer_reflector(mc->infs[j]), &st, &detail);
            char msg[1024];
            if (err != KCR_OK)
                snprintf(msg, sizeof msg, "cache %s%s%s%s%s not synced: %s%s%s", s->resource,
                         s->group[0] ? "." : "", s->group, s->ns ? " in namespace " : "",
                         s->ns ? s->ns : "", kcr_strerror(err), detail && detail[0] ? ": " : "",
                         detail ? detail : "");
            else
                snprintf(msg, sizeof msg, "cache %s%s%s%s%s not synced yet", s->resource,
                         s->group[0] ? "." : "", s->group, s->ns ? " in namespace " : "",
                         s->ns ? s->ns : "");
            kcr_status_clear(&st);
            free(detail);
            return strdup(msg);
        }
    }
    return NULL;
}
