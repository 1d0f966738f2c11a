/* Asymmetric fences for the add ring's handshake (see queue.h). An adder
 * publishes a slot and then reads `sleepers`; a getter raises `sleepers` and
 * then reads the slot. Each side needs a store-load fence between the two,
 * and on the adder's side that fence (a locked instruction) waited for the
 * slot's cache line on every add. With membarrier(2) the getter, which goes
 * to sleep rarely, makes every running thread of the process execute a full
 * fence instead, and adders get by with a compiler barrier. Where getters
 * sleep after almost every key (work that comes milliseconds apart), the
 * membarrier cost each sleep an interrupt of the other cores, several
 * microseconds on a virtual machine; adds are rare then, so the adders
 * fence instead (`adders_fence`). */
#define _GNU_SOURCE
#include <linux/membarrier.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "workqueue/queue.h"

static pthread_once_t once = PTHREAD_ONCE_INIT;
static bool usable;

static long membarrier(int cmd)
{
    return syscall(SYS_membarrier, cmd, 0, 0);
}

static void probe(void)
{
    long cmds = membarrier(MEMBARRIER_CMD_QUERY);
    usable = cmds > 0 && (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) &&
             membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0;
}

bool kcr__wq_light_fences(void)
{
    pthread_once(&once, probe);
    return usable;
}

/* A full fence on every running thread of the process. Registered in
 * probe(); it cannot fail afterwards. */
static void heavy_fence(void)
{
    (void)membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED);
}

/* While `adders_fence` is set, both sides fence with a seq_cst
 * read-modify-write of `sleepers` (a locked instruction; unlike
 * atomic_thread_fence, ThreadSanitizer follows it): of two such on one
 * variable, one reads the other's write, so either the adder sees the
 * getter's announcement or the getter sees the adder's slot.
 * Why switching is safe (both under the lock, so getters agree):
 * - on: after setting `adders_fence` the getter fences every thread once.
 *   An adder that read the flag clear did so before its thread's fence, so
 *   its slot, published before that read, is visible to every ring read
 *   after the membarrier; an adder reading it set fences by itself.
 * - off: an adder that reads the flag clear (acquire) sees every raise of
 *   `sleepers` made before the clearing under the lock, and a getter
 *   sleeping from now on takes the membarrier again. */
void kcr__wq_sleep_fence(struct kcr_workqueue *q)
{
    if (!q->light_fences)
        return; /* adders publish with a seq_cst exchange */
    bool on = atomic_load_explicit(&q->adders_fence, memory_order_relaxed);
    if (!kcr__wq_spin_pays()) { /* this thread's sleeps were all long */
        if (on) {
            atomic_fetch_add(&q->sleepers, 0);
            return;
        }
        atomic_store_explicit(&q->adders_fence, true, memory_order_relaxed);
    } else if (on) {
        atomic_store_explicit(&q->adders_fence, false, memory_order_release);
    }
    heavy_fence();
}
