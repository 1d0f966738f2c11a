/* Internal: an opt-in latency trace of the path from the watch stream to the
 * reconcile, one record per object change, for finding where an event's time
 * goes (KCR_BENCH_TRACE=1 bench/controller/run; docs/controller.md, "Where the
 * time goes").
 *
 * Off unless the environment variable KCR_TRACE names a file when the first
 * stage is stamped; then every stage stamps CLOCK_MONOTONIC for the object
 * key passing it, into a table preallocated at that moment (KCR_TRACE_EVENTS
 * records, default 16384; later changes are counted as dropped), and the
 * table is written to the file at process exit: a header line, then one line
 * per change, "key" and each stage's time as wall-clock ns since the epoch
 * (0: the change never reached that stage, e.g. coalesced with a later one).
 * Stages are in order: when a hand-off's receiver stamps (POP, GOT) before
 * its sender (FIFO, ENQUEUED, stamped once their push returns), the sender's
 * stage takes the receiver's time.
 * Records are matched by the object's store key, so stages after the handler
 * are traced for primary-object changes only (an owned or mapped change
 * enqueues another key). When off, a stamp costs one atomic load.
 *
 * Thread-safety: every function may be called from any thread. */
#ifndef KCR_CORE_TRACE_H
#define KCR_CORE_TRACE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

typedef enum kcr__trace_stage {
    KCR__TR_RECV = 0,     /* libcurl handed over the bytes that ended the watch event */
    KCR__TR_DECODED = 1,  /* the event's object is built and transformed (reflector thread) */
    KCR__TR_FIFO = 2,     /* pushed into the DeltaFIFO */
    KCR__TR_POP = 3,      /* popped by the informer's processing thread */
    KCR__TR_HANDLER = 4,  /* a handler gets it (a controller's routing starts, inline) */
    KCR__TR_ENQUEUED = 5, /* its key was added to a controller's workqueue */
    KCR__TR_GOT = 6,      /* a worker got the key from the workqueue */
    KCR__TR_START = 7,    /* the reconcile starts (after any read-your-writes wait) */
    KCR__TR_N = 8
} kcr__trace_stage;

/* Whether tracing is on (reads KCR_TRACE once). */
bool kcr__trace_on(void);

/* Notes that bytes of a response arrived on this thread at mono_ns (the
 * RECV stamp of the next change this thread begins). */
void kcr__trace_recv(int64_t mono_ns);

/* Starts the record of a new change of `key` (DECODED now, RECV from this
 * thread's kcr__trace_recv); a record of key still open stays incomplete. */
void kcr__trace_begin(const char *key);

/* Stamps `stage` of key's open record, if any (the first stamp wins; POP
 * and GOT also stamp FIFO and ENQUEUED when those are not stamped yet). */
void kcr__trace_stamp(kcr__trace_stage stage, const char *key);

/* Stamps KCR__TR_START and closes key's record. */
void kcr__trace_end(const char *key);

#endif
