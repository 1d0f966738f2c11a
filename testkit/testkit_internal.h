/* Internal: the reconciler test kit's state, shared by its files. */
#ifndef KCR_TESTKIT_INTERNAL_H
#define KCR_TESTKIT_INTERNAL_H

#include "controller/controller_internal.h"
#include "kcr/testkit.h"

/* A queued key of one controller: ready once due_ms <= now. Its pending
 * reasons live here, as they live in the workqueue item on the manager. */
typedef struct tk_item {
    char *key;
    int priority;
    int64_t due_ms;
    uint64_t seq; /* add order among ready keys */
    kcr__pending p;
} tk_item;

typedef struct tk_ctl {
    kcr_controller *c;
    tk_item *items;
    size_t n, cap;
} tk_ctl;

/* One cache: a resource + namespace + selectors + metadata_only, shared by
 * every source that asks for the same (as the manager's informer factory). */
typedef struct tk_cache {
    char *group, *version, *resource, *ns, *label_selector, *field_selector;
    bool metadata_only;
    kcr_store *store;
    bool listed;
    kcr__source **srcs;
    size_t n_srcs;
} tk_cache;

struct kcr_testkit {
    kcr_fake *fake;
    kcr_client *client;
    kcr_event_recorder *recorder;
    kcr_cancel *cancel; /* every reconcile's token, reset at its start */
    /* Virtual time. Atomic: the kit's kcr_clock may be read from any thread
     * (a workqueue's getter on the kit's clock), though the kit runs on one. */
    _Atomic int64_t now_ms;
    int64_t deadline_ms;   /* of the running reconcile (virtual); 0: none running or none set */
    bool simulate_workers; /* run_until_idle runs batches of concurrent reconciles */
    bool running;          /* a reconcile is running (no kit run may start inside) */
    size_t batches;        /* batches run so far (kcr_testkit_record.batch) */
    kcr_clock clock;
    tk_ctl **ctls;
    size_t n_ctls;
    tk_cache **caches;
    size_t n_caches;
    uint64_t seq;
    kcr_testkit_record *hist;
    size_t n_hist, cap_hist;
};

/* testkit.c: c's queue entry for key, or NULL. */
tk_item *kcr__tk_find_item(tk_ctl *t, const char *key);

/* testkit.c: queues key due at due_ms with `priority` (a key queued already
 * keeps the higher priority and the earlier deadline) and merges `p` (taken
 * over, also on failure) into its reasons. */
kcr_err kcr__tk_queue(kcr_testkit *tk, tk_ctl *t, const char *key, int priority, int64_t due_ms,
                      kcr__pending *p);

/* testkit_sync.c: the cache for a source (created and listed on first use). */
kcr_err kcr__tk_bind_source(kcr_testkit *tk, kcr__source *src);
void kcr__tk_cache_free(tk_cache *c);

#endif
