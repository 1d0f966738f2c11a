/* Doubling growth of arrays (core/grow.h). */
#include "core/grow.h"

#include <stdint.h>
#include <stdlib.h>

void *kcr__grow(void *arr, size_t *cap, size_t n, size_t size, size_t first)
{
    if (n < *cap)
        return arr;
    size_t ncap = *cap ? *cap : first ? first : 1;
    while (ncap <= n) {
        if (ncap > SIZE_MAX / 2)
            return NULL;
        ncap *= 2;
    }
    if (ncap > SIZE_MAX / size)
        return NULL;
    void *p = realloc(arr, ncap * size);
    if (p)
        *cap = ncap;
    return p;
}
