/* Internal to store/: what kcr_fifo and kcr_delta_fifo share. A lock and
 * its condition, the key -> item map, the queue of items in order, the
 * initial population still to pop, closing, and waiting for and popping the
 * head. Each FIFO decides what an item is (kcr_fifo: a malloc'd key in the
 * queue and an object in the map; kcr_delta_fifo: the same entry in both). */
#ifndef KCR_STORE_QUEUE_CORE_H
#define KCR_STORE_QUEUE_CORE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/ptrq.h"
#include "core/strmap.h"
#include "kcr/store.h"

typedef struct kcr__queue_core {
    pthread_mutex_t mu;
    pthread_cond_t cond; /* broadcast when something is queued or on close */
    struct kcr__strmap items;
    struct kcr__ptrq queue; /* oldest first */
    size_t initial;         /* initial population still to pop */
    bool populated;         /* a replace or a change happened */
    bool closed;
} kcr__queue_core;

void kcr__queue_core_init(kcr__queue_core *q);
/* Frees the map's and the queue's storage and the lock; the owner has
 * freed the items (kcr__strmap_clear, kcr__ptrq_pop) first. */
void kcr__queue_core_destroy(kcr__queue_core *q);

/* Under q->mu: the first replace (before any change) sets the initial
 * population to n; any call marks the queue populated. */
void kcr__queue_core_populate(kcr__queue_core *q, size_t n);

/* A change of one object (add, update, delete): computes its key into
 * *key (malloc'd), takes q->mu and marks the queue populated. On KCR_OK the
 * caller makes its change and calls kcr__queue_core_end_change. */
kcr_err kcr__queue_core_begin_change(kcr__queue_core *q, const kcr_object *obj, char **key);
/* Releases q->mu and frees the key. */
void kcr__queue_core_end_change(kcr__queue_core *q, char *key);

/* Under q->mu: counts one item handed to the consumer (popped, or applied
 * at once with nothing queued) against the initial population; true if it
 * belongs to it (or nothing was populated yet). */
bool kcr__queue_core_hand_out(kcr__queue_core *q);

/* Under q->mu: waits until an item is queued, then pops it into *item;
 * *initial says whether it belongs to the initial population (or nothing
 * was populated yet). KCR_ERR_SHUTDOWN once closed and empty,
 * KCR_ERR_TIMEOUT after timeout_ms (< 0: no limit). `what` names the queue
 * in the error detail. */
kcr_err kcr__queue_core_pop(kcr__queue_core *q, int64_t timeout_ms, const char *what, void **item,
                            bool *initial);

/* Take the lock themselves. */
void kcr__queue_core_close(kcr__queue_core *q);
bool kcr__queue_core_is_closed(kcr__queue_core *q);
/* True once the initial population is popped, or a change came first. */
bool kcr__queue_core_has_synced(kcr__queue_core *q);
size_t kcr__queue_core_len(kcr__queue_core *q);
/* Copies of the keys: of the map (queued_key NULL, any order), or of the
 * queued items in queue order (queued_key gives an item's key). */
kcr_err kcr__queue_core_list_keys(kcr__queue_core *q, const char *(*queued_key)(const void *item),
                                  kcr_string_list *out);

#endif
