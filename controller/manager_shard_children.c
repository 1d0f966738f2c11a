/* The caches of owned objects on a sharded manager follow the shard: a
 * sharded controller's owned source (kcr_controller_options' owns) lists
 * and watches with a shard selector on the child's controller reference
 * (KCR_SHARD_BY_CONTROLLER: hashed as the owner's uid, filtered by the
 * reflector) or, on a ring sharded by namespace, on the child's namespace
 * (which the apiserver filters for built-in resources). Every step that
 * changes the member's selection (want ∪ admitted ∪ draining) sets the
 * same ranges on those caches, which list what the change adds (their
 * reflectors list only the gained ranges and drop the lost ones, or
 * relist the whole selection where that fails); admission of a key in a range
 * the caches do not hold yet waits (KCR__ADMIT_SOON) until every one of
 * them applied a list made with the new ranges, so a reconcile never reads
 * an owned cache that is still missing its key's children.
 *
 * With kcr_sharding_options.child_bucket_selector (a ring by uid), each
 * owned cache's label selector also asks for the bucket label
 * (KCR_SHARD_BUCKET_LABEL) of every bucket the ranges touch, changed with
 * the shard selector by the reflector itself (kcr__reflector_set_shard_label,
 * which also gives the list of gained ranges their buckets' selector): the
 * apiserver then sends only those buckets' children (a superset at range
 * boundaries, which the controller filter trims).
 *
 * Threads: bind time (kcr__mgr_shard_add_child) is before start; the
 * member's thread reselects; workers refresh and ask. The gate state is
 * atomic or under s->lock as the struct says. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controller/manager_shard_internal.h"
#include "core/error.h"
#include "core/log.h"
#include "informer/informer_internal.h"

/* `user` (may be NULL) and the bucket label's `in` of the buckets the n
 * non-empty ranges touch (n 0: `user` alone, "" for none); malloc'd, NULL
 * when out of memory. The owned caches' kcr__shard_label_fn. */
static char *bucket_labels(const char *user, const kcr_shard_range *r, size_t n)
{
    if (!n)
        return strdup(user ? user : "");
    bool in[KCR_SHARD_BUCKETS] = {false};
    for (size_t i = 0; i < n; i++) {
        unsigned last = r[i].end ? kcr_shard_bucket(r[i].end - 1) : KCR_SHARD_BUCKETS - 1;
        for (unsigned b = kcr_shard_bucket(r[i].start); b <= last; b++)
            in[b] = true;
    }
    size_t cap = (user ? strlen(user) : 0) + sizeof KCR_SHARD_BUCKET_LABEL + 8 +
                 4 * KCR_SHARD_BUCKETS;
    char *text = malloc(cap);
    if (!text)
        return NULL;
    size_t len = (size_t)snprintf(text, cap, "%s%s%s in (", user ? user : "",
                                  user && *user ? "," : "", KCR_SHARD_BUCKET_LABEL);
    const char *sep = "";
    for (unsigned b = 0; b < KCR_SHARD_BUCKETS; b++)
        if (in[b]) {
            len += (size_t)snprintf(text + len, cap - len, "%s%u", sep, b);
            sep = ",";
        }
    snprintf(text + len, cap - len, ")");
    return text;
}

/* The one-hash range of the owned caches' first selector
 * (child_initial_selector): the member owns nothing yet. */
static const kcr_shard_range FIRST = {0, 1};

const char *kcr__mgr_shard_child_selector(const mgr_shard *s, const kcr_controller *c)
{
    /* a ring by namespace places a cluster-scoped primary's key on "":
     * its children, in any namespace, all go with it */
    if (s->field == KCR_SHARD_BY_NAMESPACE && c->sources[0].cluster_scoped)
        return NULL;
    return s->child_initial_selector;
}

kcr_err kcr__mgr_shard_child_labels(const mgr_shard *s, const char *user, char **out)
{
    *out = NULL;
    if (!s->child_buckets)
        return KCR_OK;
    if (!(*out = bucket_labels(user, &FIRST, 1)))
        return kcr__fail(KCR_ERR_NOMEM, "out of memory");
    return KCR_OK;
}

kcr_err kcr__mgr_shard_add_child(mgr_shard *s, kcr_informer *inf, const char *user)
{
    for (size_t i = 0; i < s->n_children; i++)
        if (s->children[i] == inf)
            return KCR_OK; /* a shared informer follows once */
    kcr_informer **c = realloc(s->children, (s->n_children + 1) * sizeof *c);
    if (c)
        s->children = c;
    _Atomic uint64_t *g = realloc((void *)s->child_gen, (s->n_children + 1) * sizeof *g);
    if (g)
        s->child_gen = g;
    if (!c || !g ||
        (s->child_buckets && kcr__reflector_set_shard_label(kcr_informer_reflector(inf),
                                                            bucket_labels, user) != KCR_OK))
        return kcr__fail(KCR_ERR_NOMEM, "out of memory binding an owned cache to the shard");
    s->children[s->n_children] = inf;
    atomic_init(&s->child_gen[s->n_children], 0);
    s->n_children++;
    return KCR_OK;
}

void kcr__shard_children_reselect(mgr_shard *s, const kcr__ranges *sel)
{
    if (!s->n_children)
        return;
    char *text = NULL;
    if (sel->n ? kcr_shard_selector_format(s->child_field, sel->r, sel->n, &text) != KCR_OK
               : !(text = strdup(s->child_initial_selector))) {
        kcr__log(KCR_LOG_ERROR, "shard", "shard ring \"%s\": the owned caches' selector: %s",
                 s->ring, kcr_last_error());
        return;
    }
    pthread_mutex_lock(&s->lock);
    /* what leaves the selection is no longer held from now on */
    kcr__ranges kept = {0};
    if (kcr__ranges_intersect(&s->children_synced, sel, &kept) == KCR_OK) {
        kcr__ranges_clear(&s->children_synced);
        s->children_synced = kept;
    } else {
        kcr__ranges_clear(&s->children_synced); /* out of memory: wait for the relist */
    }
    pthread_mutex_unlock(&s->lock);
    for (size_t i = 0; i < s->n_children; i++) {
        kcr_reflector *r = kcr_informer_reflector(s->children[i]);
        kcr_err err = kcr_reflector_set_shard_selector(r, text);
        if (err != KCR_OK)
            kcr__log(KCR_LOG_ERROR, "shard", "shard ring \"%s\": setting an owned cache's selector: %s",
                     s->ring, kcr_last_error());
        atomic_store(&s->child_gen[i], kcr__reflector_shard_gen(r));
    }
    pthread_mutex_lock(&s->lock);
    if (kcr__ranges_copy(sel, &s->children_want) != KCR_OK)
        kcr__ranges_clear(&s->children_want); /* the gate then opens nothing new */
    atomic_fetch_add(&s->children_epoch, 1);
    atomic_store(&s->children_pending, true);
    pthread_mutex_unlock(&s->lock);
    free(text);
}

void kcr__shard_children_refresh(mgr_shard *s)
{
    if (!atomic_load(&s->children_pending))
        return;
    uint64_t epoch = atomic_load(&s->children_epoch);
    for (size_t i = 0; i < s->n_children; i++)
        if (!kcr__informer_shard_synced(s->children[i], atomic_load(&s->child_gen[i])))
            return;
    pthread_mutex_lock(&s->lock);
    /* a reselect since the generations were read starts the wait again */
    if (epoch == atomic_load(&s->children_epoch) &&
        kcr__ranges_copy(&s->children_want, &s->children_synced) == KCR_OK)
        atomic_store(&s->children_pending, false);
    pthread_mutex_unlock(&s->lock);
}

bool kcr__shard_children_hold(const mgr_shard *s, uint64_t hash)
{
    return !s->n_children || kcr__ranges_contains(&s->children_synced, hash);
}

void kcr__shard_children_free(mgr_shard *s)
{
    free(s->children);
    free((void *)s->child_gen);
    free(s->child_initial_selector);
    kcr__ranges_clear(&s->children_want);
    kcr__ranges_clear(&s->children_synced);
}
