/* Internal: the step that linear-probing tables with backward-shift
 * deletion share (keytab.c, ptrset.c). Pure arithmetic, thread-agnostic. */
#ifndef KCR_WORKQUEUE_PROBE_H
#define KCR_WORKQUEUE_PROBE_H

#include <stdbool.h>
#include <stddef.h>

/* After slot `hole` was emptied: true if the entry at slot `j` (later in
 * the same probe run) whose home slot is `home` must stay where it is,
 * i.e. `home` lies cyclically in (hole, j]; otherwise it moves into the
 * hole and `j` becomes the new hole. */
static inline bool kcr__probe_stays(size_t hole, size_t home, size_t j)
{
    return hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
}

#endif
