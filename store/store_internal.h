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

#endif
