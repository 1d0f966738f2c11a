/* A growable ring of pointers (see ptrq.h). */
#include "core/ptrq.h"

#include <stdlib.h>

#include "core/error.h"

kcr_err kcr__ptrq_push(struct kcr__ptrq *q, void *p)
{
    if (q->len == q->cap) {
        size_t cap = q->cap ? q->cap * 2 : 16;
        void **items = malloc(cap * sizeof *items);
        if (!items)
            return kcr__fail(KCR_ERR_NOMEM, "out of memory growing a queue");
        for (size_t i = 0; i < q->len; i++)
            items[i] = q->items[(q->head + i) % q->cap];
        free(q->items);
        q->items = items;
        q->head = 0;
        q->cap = cap;
    }
    q->items[(q->head + q->len++) % q->cap] = p;
    return KCR_OK;
}

void *kcr__ptrq_pop(struct kcr__ptrq *q)
{
    if (!q->len)
        return NULL;
    void *p = q->items[q->head];
    q->head = (q->head + 1) % q->cap;
    q->len--;
    return p;
}

void *kcr__ptrq_at(const struct kcr__ptrq *q, size_t i)
{
    return i < q->len ? q->items[(q->head + i) % q->cap] : NULL;
}

void kcr__ptrq_free(struct kcr__ptrq *q)
{
    free(q->items);
    q->items = NULL;
    q->head = q->len = q->cap = 0;
}
