/* Test helpers for informers: an event tracker (a handler that mirrors what
 * it was told) and the convergence checker used by the unit and e2e tests:
 * after faults settle, the informer's cache and the tracker's mirror equal a
 * fresh LIST from the server (same keys, same resourceVersions), and every
 * object deleted on the server produced exactly one on_delete. */
#ifndef KCR_TEST_CONVERGE_H
#define KCR_TEST_CONVERGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kcr/kcr.h"

typedef struct tracker tracker;

tracker *tracker_new(void);
void tracker_free(tracker *t);

/* A handler that records into t (resync period as given). */
kcr_event_handler tracker_handler(tracker *t, int64_t resync_ms);

/* Counters (thread-safe). */
typedef struct tracker_counts {
    uint64_t adds, initial_adds, updates, resyncs, deletes, tombstones;
    uint64_t wrong_keys; /* callbacks whose key was not the object's (or tombstone's) key */
} tracker_counts;
tracker_counts tracker_get_counts(tracker *t);

/* Number of on_delete calls seen for the object with this uid (the uid of
 * the deleted object or of a tombstone's last known object). */
unsigned tracker_deletes_of_uid(tracker *t, const char *uid);
/* Number of on_add calls for key ns/name (ns "" for cluster-scoped). */
unsigned tracker_adds_of_key(tracker *t, const char *key);
/* The resourceVersion the handler last saw for key, malloc'd, or NULL. */
char *tracker_rv_of(tracker *t, const char *key);

/* Records that the test deleted an object with this uid on the server. */
void tracker_expect_deleted(tracker *t, const char *uid);

/* Waits up to timeout_ms until the cache of `inf` and the mirror of `t`
 * (may be NULL) equal a fresh LIST of res in ns (NULL: all) with
 * label_selector (may be NULL), and every uid given to
 * tracker_expect_deleted got exactly one on_delete. On failure returns
 * false with the last difference in why. */
bool converge_wait(kcr_client *c, const kcr_resource *res, const char *ns,
                   const char *label_selector, kcr_informer *inf, tracker *t,
                   int64_t timeout_ms, char *why, size_t why_len);

/* Milliseconds on the monotonic clock. */
int64_t now_ms(void);
void sleep_ms(int64_t ms);

#endif
