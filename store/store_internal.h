/* Internal to store/: the store key of an object, shared by the indexer and
 * the FIFOs (their string map and pointer ring are core/'s); and the
 * informer's way into its DeltaFIFO. */
#ifndef KCR_STORE_STORE_INTERNAL_H
#define KCR_STORE_STORE_INTERNAL_H

#include "kcr/store.h"

/* The store key of obj, malloc'd; NULL on OOM. */
char *kcr__object_key(const kcr_object *obj);

/* A change of obj (ADDED, UPDATED or DELETED) for the DeltaFIFO f: when
 * nothing is queued (and f is open), applied at once on the calling thread
 * by `process`, under f's lock and with the arguments kcr_delta_fifo_pop
 * would have given it (so no popping thread is woken for it), and
 * *applied is set; otherwise queued as kcr_delta_fifo_add/_update/_delete
 * would. A delete of a key neither known nor queued does nothing either way.
 * The caller owns obj (a reference is taken when queued). Thread-safe, as
 * the queueing calls; `process` follows kcr_delta_fifo_process_fn's
 * contract. */
kcr_err kcr__delta_fifo_apply_or_queue(kcr_delta_fifo *f, const kcr_object *obj,
                                       kcr_delta_type type, kcr_delta_fifo_process_fn process,
                                       void *user_data, bool *applied);

/* Whether an object stays (kcr__delta_fifo_delete_unless). */
typedef bool (*kcr__delta_keep_fn)(const kcr_object *obj, void *user_data);

/* Queues the deletion of every key whose newest state `keep` rejects: a
 * queued key's newest delta (unless a deletion), else the known object's
 * state. Each goes as a tombstone carrying that state, as
 * kcr_delta_fifo_replace queues a key missing from a list, behind what is
 * queued for the key. A narrower selection's objects leave the cache so,
 * without a list of what stays. Thread-safe; `keep` runs under f's lock
 * and must not call into f. */
kcr_err kcr__delta_fifo_delete_unless(kcr_delta_fifo *f, kcr__delta_keep_fn keep, void *user_data);

#endif
