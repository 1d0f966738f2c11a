/* Internal: the library side of the sized structs of docs/abi.md. A public
 * function taking an options or stats struct also takes the struct's size in
 * the caller's compilation (the public header's macro passes it), so a
 * binary built against an older, shorter struct keeps working. */
#ifndef KCR_CORE_ABI_H
#define KCR_CORE_ABI_H

#include <stddef.h>

#include "kcr/error.h"

/* Copies the caller's struct (`size` bytes at `src`, NULL: none) into `dst`
 * (`own` bytes, this library's size of the type), zeroing what the caller's
 * shorter struct does not have. A longer struct (a newer caller) is accepted
 * when its bytes past `own` are zero; else KCR_ERR_INVALID naming `type` (a
 * field this library does not know would otherwise be ignored). `dst` holds
 * the common prefix also on failure, so a function taking ownership of
 * something in it can still release it. */
kcr_err kcr__abi_in(void *dst, size_t own, const void *src, size_t size, const char *type);

/* Writes `own` bytes of `src` (this library's stats) to the caller's `dst`,
 * but no more than its `size` bytes. */
void kcr__abi_out(void *dst, size_t size, const void *src, size_t own);

/* KCR_OK when the `n` bytes of a struct's reserved tail are zero, else
 * KCR_ERR_INVALID naming `what` (a field unknown to this library, or a
 * struct that was not zero-initialised). */
kcr_err kcr__abi_reserved(const void *reserved, size_t n, const char *what);

/* In a function taking `const T *opts, size_t opts_size`: points `opts` at a
 * zeroed local copy of the caller's struct (the defaults when it was NULL),
 * or returns kcr__abi_in's error. */
#define KCR__ABI_OPTS(T, opts, opts_size)                                                          \
    T opts##_abi_;                                                                                 \
    do {                                                                                           \
        kcr_err opts##_abi_err_ = kcr__abi_in(&opts##_abi_, sizeof opts##_abi_, (opts),            \
                                              (opts_size), #T);                                    \
        if (opts##_abi_err_ != KCR_OK)                                                             \
            return opts##_abi_err_;                                                                \
        (opts) = &opts##_abi_;                                                                     \
    } while (0)

#endif
