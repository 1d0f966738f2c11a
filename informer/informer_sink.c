/* The shared informer's sink: the reflector's watch events go to the
 * DeltaFIFO, or straight to the cache when nothing is queued there (stamped
 * when tracing), its lists to the DeltaFIFO except the first, which goes
 * straight to the cache and the handlers' queues. Also the reflector's
 * transform and its list reuse and narrowing hooks. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/trace.h"
#include "informer/informer_impl.h"
#include "store/store_internal.h"

/* A watch event for the cache. With nothing queued in the DeltaFIFO it is
 * applied and delivered to the inline handlers right here, on the
 * reflector's thread, instead of waking the processing thread for it (one
 * thread hand-off fewer per event when the informer keeps up); otherwise
 * it is queued behind the others. Stamped when tracing (core/trace.h;
 * "fifo" is then the hand-over to the DeltaFIFO). */
static kcr_err apply_or_queue(kcr_informer *inf, const kcr_object *obj, kcr_delta_type type)
{
    char *key = NULL;
    if (kcr__trace_on() && kcr_store_key(obj, &key) == KCR_OK) {
        kcr__trace_begin(key);
        kcr__trace_stamp(KCR__TR_FIFO, key);
        free(key);
    }
    bool applied;
    kcr_err err = kcr__delta_fifo_apply_or_queue(inf->fifo, obj, type, kcr__informer_process,
                                                 inf, &applied);
    if (applied)
        kcr__informer_after_apply(inf);
    return err;
}

static kcr_err sink_add(const kcr_object *obj, void *ud)
{
    return apply_or_queue(ud, obj, KCR_DELTA_ADDED);
}

static kcr_err sink_update(const kcr_object *obj, void *ud)
{
    return apply_or_queue(ud, obj, KCR_DELTA_UPDATED);
}

static kcr_err sink_delete(const kcr_object *obj, void *ud)
{
    return apply_or_queue(ud, obj, KCR_DELTA_DELETED);
}

/* The first complete list, with an empty cache and nothing queued, has
 * nothing to reconcile: it goes straight to the cache and the handlers'
 * queues instead of through the DeltaFIFO, which saves the fifo's per-key
 * bookkeeping for the whole list at the memory peak (docs/informer.md).
 * Later lists (relists) go through the fifo, which finds the deletions. */
static kcr_err apply_first_list(kcr_informer *inf, kcr_object *const *objs, size_t n,
                                const char *rv, bool *applied)
{
    *applied = false;
    pthread_mutex_lock(&inf->mu);
    bool first = !inf->applied_first && kcr_store_len(inf->store) == 0;
    pthread_mutex_unlock(&inf->mu);
    if (!first || kcr_delta_fifo_len(inf->fifo) != 0)
        return KCR_OK;
    /* an empty replace marks the fifo populated (nothing known, nothing
     * queued, so it queues nothing) */
    kcr_err err = inf->fifo_sink.on_replace(NULL, 0, rv, inf->fifo_sink.user_data);
    if (err != KCR_OK)
        return err;
    pthread_mutex_lock(&inf->mu);
    err = kcr_store_replace(inf->store, objs, n);
    for (size_t i = 0; err == KCR_OK && i < n; i++) {
        char *key = NULL;
        if ((err = kcr_store_key(objs[i], &key)) == KCR_OK)
            kcr__informer_distribute(inf, key, KCR__N_ADD, NULL, objs[i], NULL, true, false);
        free(key);
    }
    inf->applied_first = *applied = err == KCR_OK;
    if (err == KCR_OK)
        kcr__informer_note_applied(inf, rv);
    pthread_mutex_unlock(&inf->mu);
    return err;
}

static kcr_err sink_replace(kcr_object *const *objs, size_t n, const char *rv, void *ud)
{
    kcr_informer *inf = ud;
    bool applied;
    kcr_err err = apply_first_list(inf, objs, n, rv, &applied);
    if (err == KCR_OK && !applied)
        err = inf->fifo_sink.on_replace(objs, n, rv, inf->fifo_sink.user_data);
    if (err != KCR_OK)
        return err;
    pthread_mutex_lock(&inf->mu);
    inf->listed = true;
    pthread_mutex_unlock(&inf->mu);
    kcr__informer_check_synced(inf);
    /* the first list bypassed the fifo: the processing thread, asleep on an
     * empty fifo, would not deliver it to the inline handlers */
    if (applied)
        kcr__informer_deliver_inline(inf);
    return KCR_OK;
}

kcr_object *kcr__informer_list_reuse(const kcr_object *listed, void *ud)
{
    kcr_informer *inf = ud;
    pthread_mutex_lock(&inf->mu);
    bool empty = !inf->applied_first && !inf->listed; /* nothing to reuse before a list */
    pthread_mutex_unlock(&inf->mu);
    char *key = NULL;
    if (empty || kcr_store_key(listed, &key) != KCR_OK)
        return NULL;
    kcr_object *held = kcr_store_get_by_key(inf->store, key);
    free(key);
    if (held && (strcmp(kcr_object_uid(held), kcr_object_uid(listed)) != 0 ||
                 strcmp(kcr_object_resource_version(held),
                        kcr_object_resource_version(listed)) != 0)) {
        kcr_object_unref(held);
        held = NULL;
    }
    return held;
}

kcr_err kcr__informer_narrow(kcr__keep_fn keep, void *keep_user_data, void *ud)
{
    kcr_informer *inf = ud;
    return kcr__delta_fifo_delete_unless(inf->fifo, keep, keep_user_data);
}

kcr_err kcr__informer_transform(const kcr_object *in, kcr_object **out, void *ud)
{
    kcr_informer *inf = ud;
    kcr_object *cur = kcr_object_ref(in);
    kcr_err err = KCR_OK;
    if (!inf->keep_managed_fields) {
        kcr_object *t = NULL;
        err = kcr_object_strip_managed_fields(cur, &t, NULL);
        kcr_object_unref(cur);
        cur = t;
    }
    if (err == KCR_OK && inf->transform) {
        kcr_object *t = NULL;
        err = inf->transform(cur, &t, inf->transform_ud);
        kcr_object_unref(cur);
        cur = t;
    }
    if (err != KCR_OK) {
        kcr_object_unref(cur);
        cur = NULL;
    }
    *out = cur;
    return err;
}

kcr_reflector_sink kcr__informer_sink(kcr_informer *inf)
{
    return (kcr_reflector_sink){.on_add = sink_add,
                                .on_update = sink_update,
                                .on_delete = sink_delete,
                                .on_replace = sink_replace,
                                .user_data = inf};
}
