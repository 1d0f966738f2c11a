/* Asymmetric fences for the add ring's handshake (see queue.h). An adder
 * publishes a slot and then reads `sleepers`; a getter raises `sleepers` and
 * then reads the slot. Each side needs a store-load fence between the two,
 * and on the adder's side that fence (a locked instruction) waited for the
 * slot's cache line on every add. With membarrier(2) the getter, which goes
 * to sleep rarely, makes every running thread of the process execute a full
 * fence instead, and adders get by with a compiler barrier. */
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

void kcr__wq_heavy_fence(void)
{
    /* Registered in probe(); it cannot fail afterwards. */
    (void)membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED);
}
