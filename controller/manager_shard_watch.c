/* The shard member's watch of its ring's Leases (docs/sharding.md, "In the
 * manager"): a change another member makes that the protocol waits for (a
 * claim or an acknowledgement in the held ranges, a release, a join, a
 * departure) wakes the member's thread at once instead of at its next retry
 * period. The watch only wakes: every step still decides on a fresh list of
 * the Leases, so a missed or late event costs time, never safety, and a
 * replica whose RBAC lacks `watch` on Leases works as before, at the pace of
 * its retry period (the informer logs the refusal and backs off).
 *
 * Renewals alone (renewTime) wake nobody: with N replicas renewing every
 * retry period, waking on them would make every replica list the Leases N
 * times as often. */
#include <stdlib.h>
#include <string.h>

#include "controller/manager_shard_internal.h"
#include "core/error.h"
#include "leader/lease.h"

/* Whether two strings, either of which may be NULL, differ. */
static bool differ(const char *a, const char *b)
{
    return strcmp(a ? a : "", b ? b : "") != 0;
}

static const char *holder_of(const kcr_object *lease)
{
    return kcr_value_string(kcr_object_get(lease, "spec.holderIdentity"), NULL);
}

/* Whether `now` differs from `before` in what the protocol reads besides
 * the renewal: the holder, the identity, the slot, the held ranges. */
static bool changed(const kcr_object *before, const kcr_object *now)
{
    return differ(holder_of(before), holder_of(now)) ||
           differ(kcr_object_label(before, KCR__SHARD_IDENTITY_LABEL),
                  kcr_object_label(now, KCR__SHARD_IDENTITY_LABEL)) ||
           differ(kcr_object_annotation(before, KCR__SHARD_SLOT_ANNOTATION),
                  kcr_object_annotation(now, KCR__SHARD_SLOT_ANNOTATION)) ||
           differ(kcr_object_annotation(before, KCR__SHARD_HELD_ANNOTATION),
                  kcr_object_annotation(now, KCR__SHARD_HELD_ANNOTATION));
}

static void wake(mgr_shard *s)
{
    pthread_mutex_lock(&s->lock);
    s->poke = true;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
}

static void on_add(const char *key, const kcr_object *obj, bool initial, void *user_data)
{
    (void)key, (void)obj;
    if (!initial) /* the first list is what the member's own first step reads */
        wake(user_data);
}

static void on_update(const char *key, const kcr_object *old_obj, const kcr_object *new_obj,
                      void *user_data)
{
    (void)key;
    if (changed(old_obj, new_obj))
        wake(user_data);
}

static void on_delete(const char *key, const kcr_object *obj, const kcr_tombstone *tombstone,
                      void *user_data)
{
    (void)key, (void)obj, (void)tombstone;
    wake(user_data);
}

kcr_err kcr__shard_watch_start(mgr_shard *s)
{
    char *selector = malloc(strlen(KCR__SHARD_RING_LABEL) + strlen(s->ring) + 2);
    if (!selector)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory watching the shard Leases");
    strcat(strcat(strcpy(selector, KCR__SHARD_RING_LABEL), "="), s->ring);
    kcr_informer_options o = {.reflector = {.ns = s->ns, .label_selector = selector}};
    kcr_err err = kcr_informer_new(s->m->client, &KCR__LEASES, &o, &s->lease_watch);
    free(selector); /* the informer copies its options */
    if (err == KCR_OK)
        err = kcr_informer_add_handler(s->lease_watch,
                                       &(kcr_event_handler){.on_add = on_add,
                                                            .on_update = on_update,
                                                            .on_delete = on_delete,
                                                            .delivery = KCR_HANDLER_DELIVERY_INLINE,
                                                            .user_data = s},
                                       NULL);
    if (err == KCR_OK)
        err = kcr_informer_start(s->lease_watch);
    if (err != KCR_OK) {
        kcr_informer_free(s->lease_watch);
        s->lease_watch = NULL;
        return kcr__refail(err, "shard ring \"%s\": watching its Leases: ", s->ring);
    }
    return KCR_OK;
}

void kcr__shard_watch_stop(mgr_shard *s)
{
    if (!s->lease_watch)
        return;
    kcr_informer_stop(s->lease_watch);
    kcr_informer_free(s->lease_watch);
    s->lease_watch = NULL;
}
