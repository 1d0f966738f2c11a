/* Yields that notice a contended CPU, and waits that notice they are
 * futile (see queue.h). Getters waiting for a
 * key and adders waiting for ring space yield instead of sleeping, which
 * pays off while a core is free: a yield then comes back within a
 * microsecond, or after another thread of the process made the key. When
 * another process keeps the CPU busy, each yield hands that process the
 * rest of a time slice (a millisecond or more) and the queue crawls. A yield
 * that comes back late says so: for a while the thread's waits then yield
 * little (a getter a few rounds before it sleeps, an adder facing a full
 * ring not at all: it applies the ring under the lock), twice as long each
 * time the next try is late again (up to CALM_MAX).
 * The state is per thread: contention belongs to the CPU a thread runs on,
 * and nothing here writes a cache line another thread reads. */
#define _GNU_SOURCE
#include <sched.h>

#include "workqueue/queue.h"

/* A yield that took longer than this ran another process for a while. */
#ifndef KCR__WQ_LATE_YIELD_NS
#define KCR__WQ_LATE_YIELD_NS (100 * 1000)
#endif
/* How long waits stay short after a late yield at first, and at most. */
#ifndef KCR__WQ_CALM_MIN_NS
#define KCR__WQ_CALM_MIN_NS (2 * 1000 * 1000)
#endif
#ifndef KCR__WQ_CALM_MAX_NS
#define KCR__WQ_CALM_MAX_NS (640 * 1000 * 1000)
#endif

static _Thread_local int64_t calm_until; /* this thread's waits are short until then */
static _Thread_local int64_t calm_ns;    /* the next calm period (0: CALM_MIN) */

/* Waiting awake pays when work comes within microseconds. A sleep longer
 * than SPIN_PAYS_NS would not have been saved by the wait before it; after
 * FUTILE_MAX such sleeps in a row the thread sleeps at once (a controller
 * seeing an event every few milliseconds spent a seventh of its CPU on
 * yields), until a sleep ends sooner than that again. */
#ifndef KCR__WQ_SPIN_PAYS_NS
#define KCR__WQ_SPIN_PAYS_NS (100 * 1000)
#endif
#ifndef KCR__WQ_FUTILE_MAX
#define KCR__WQ_FUTILE_MAX 4
#endif
static _Thread_local int futile; /* long sleeps in a row */

bool kcr__wq_may_yield(int64_t now)
{
    return now >= calm_until;
}

int64_t kcr__wq_yield(int64_t before)
{
    sched_yield();
    int64_t after = kcr__now_ns();
    if (after - before < KCR__WQ_LATE_YIELD_NS)
        return after;
    int64_t period = calm_ns < KCR__WQ_CALM_MIN_NS ? KCR__WQ_CALM_MIN_NS : calm_ns;
    calm_until = after + period;
    calm_ns = period >= KCR__WQ_CALM_MAX_NS / 2 ? KCR__WQ_CALM_MAX_NS : 2 * period;
    return 0;
}

void kcr__wq_yields_on_time(void)
{
    calm_ns = 0;
}

void kcr__wq_calm_until(int64_t until)
{
    calm_until = until;
}

bool kcr__wq_spin_pays(void)
{
    return futile < KCR__WQ_FUTILE_MAX;
}

void kcr__wq_slept(int64_t ns)
{
    if (ns < KCR__WQ_SPIN_PAYS_NS)
        futile = 0;
    else if (futile < KCR__WQ_FUTILE_MAX)
        futile++;
}
