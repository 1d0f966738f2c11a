/* Internal: the step that every linear-probing table of the library with
 * backward-shift deletion shares (core/strmap.c, workqueue/keytab.c,
 * workqueue/ptrset.c, store/indexer.c's object sets and index values).
 * Pure arithmetic, thread-agnostic. */
#ifndef KCR_CORE_PROBE_H
#define KCR_CORE_PROBE_H

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
