/* Internal: a growable FIFO ring of pointers. Zero-initialise a struct
 * kcr__ptrq to get an empty one. Not thread-safe: its owner locks. */
#ifndef KCR_CORE_PTRQ_H
#define KCR_CORE_PTRQ_H

#include <stddef.h>

#include "kcr/error.h"

struct kcr__ptrq {
    void **items;
    size_t head, len, cap;
};
kcr_err kcr__ptrq_push(struct kcr__ptrq *q, void *p);
void *kcr__ptrq_pop(struct kcr__ptrq *q);
void *kcr__ptrq_at(const struct kcr__ptrq *q, size_t i);
void kcr__ptrq_free(struct kcr__ptrq *q);

#endif
