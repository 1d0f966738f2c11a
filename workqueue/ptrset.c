/* Pointer set for the workqueue's keys in processing (see ptrset.h). */
#include "workqueue/ptrset.h"

#include <stdint.h>
#include <stdlib.h>

#include "core/probe.h"

static size_t home(const struct kcr__ptrset *s, const void *p)
{
    uint64_t x = (uint64_t)(uintptr_t)p * UINT64_C(0x9e3779b97f4a7c15);
    return (size_t)(x >> 32) & s->mask;
}

void kcr__ptrset_destroy(struct kcr__ptrset *s)
{
    free(s->slots);
    s->slots = NULL;
    s->mask = s->count = 0;
}

static void place(struct kcr__ptrset *s, const void *p)
{
    size_t i = home(s, p);
    while (s->slots[i])
        i = (i + 1) & s->mask;
    s->slots[i] = p;
}

static bool grow(struct kcr__ptrset *s)
{
    size_t cap = s->slots ? (s->mask + 1) * 2 : 16;
    const void **old = s->slots;
    size_t old_cap = s->slots ? s->mask + 1 : 0;
    s->slots = calloc(cap, sizeof *s->slots);
    if (!s->slots) {
        s->slots = old;
        return false;
    }
    s->mask = cap - 1;
    for (size_t i = 0; i < old_cap; i++)
        if (old[i])
            place(s, old[i]);
    free(old);
    return true;
}

bool kcr__ptrset_add(struct kcr__ptrset *s, const void *p)
{
    if ((!s->slots || (s->count + 1) * 2 > s->mask + 1) && !grow(s))
        return false;
    place(s, p);
    s->count++;
    return true;
}

bool kcr__ptrset_has(const struct kcr__ptrset *s, const void *p)
{
    if (!s->slots)
        return false;
    for (size_t i = home(s, p); s->slots[i]; i = (i + 1) & s->mask)
        if (s->slots[i] == p)
            return true;
    return false;
}

void kcr__ptrset_remove(struct kcr__ptrset *s, const void *p)
{
    if (!s->slots)
        return;
    size_t i = home(s, p);
    while (s->slots[i] != p) {
        if (!s->slots[i])
            return;
        i = (i + 1) & s->mask;
    }
    /* Backward shift (see probe.h). */
    for (size_t j = (i + 1) & s->mask; s->slots[j]; j = (j + 1) & s->mask) {
        if (!kcr__probe_stays(i, home(s, s->slots[j]), j)) {
            s->slots[i] = s->slots[j];
            i = j;
        }
    }
    s->slots[i] = NULL;
    s->count--;
}
