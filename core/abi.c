/* Sized structs across library versions (docs/abi.md). */
#include <string.h>

#include "core/abi.h"
#include "core/error.h"

kcr_err kcr__abi_in(void *dst, size_t own, const void *src, size_t size, const char *type)
{
    memset(dst, 0, own);
    if (!src)
        return KCR_OK;
    memcpy(dst, src, size < own ? size : own);
    const unsigned char *tail = (const unsigned char *)src;
    for (size_t i = own; i < size; i++)
        if (tail[i])
            return kcr__fail(KCR_ERR_INVALID,
                             "%s: the caller's struct (%zu bytes) sets a field this libkcr "
                             "(%zu bytes) does not know: link a newer libkcr",
                             type, size, own);
    return KCR_OK;
}

void kcr__abi_out(void *dst, size_t size, const void *src, size_t own)
{
    if (dst)
        memcpy(dst, src, size < own ? size : own);
}

kcr_err kcr__abi_reserved(const void *reserved, size_t n, const char *what)
{
    const unsigned char *p = (const unsigned char *)reserved;
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return kcr__fail(KCR_ERR_INVALID,
                             "%s: the reserved tail is not zero (zero-initialise the struct; "
                             "a field set there is unknown to this libkcr)",
                             what);
    return KCR_OK;
}
