/* Small string helpers (see str.h). */
#include "core/str.h"

#include <stdlib.h>
#include <string.h>

char *kcr__memdup_str(const void *s, size_t len)
{
    char *copy = malloc(len + 1);
    if (!copy)
        return NULL;
    memcpy(copy, s, len);
    copy[len] = '\0';
    return copy;
}
