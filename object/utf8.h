/* Internal: THE UTF-8 validator. Every string that enters an object - parsed
 * by the builder (object parsing, the client's LIST and watch decoders) or
 * set through the edit API - is checked here, so bad UTF-8 gets the same
 * answer everywhere. Well-formed means RFC 3629: shortest form, no
 * surrogates, nothing above U+10FFFF. No state: any thread. */
#ifndef KCR_OBJECT_UTF8_H
#define KCR_OBJECT_UTF8_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* The checking of s from byte `from` on, the first byte >= 0x80 (the
 * out-of-line part of kcr__utf8_valid_prefix). */
size_t kcr__utf8_valid_prefix_from(const char *s, size_t len, size_t from);

/* Length of the longest valid UTF-8 prefix of s: len when all of s is valid.
 * Inline for its ASCII scan: the decoders call it for every string and key,
 * and most of what Kubernetes sends is ASCII. */
static inline size_t kcr__utf8_valid_prefix(const char *s, size_t len)
{
    const uint64_t high = UINT64_C(0x8080808080808080);
    size_t i = 0;
    for (; i + 16 <= len; i += 16) {
        uint64_t a, b;
        memcpy(&a, s + i, 8);
        memcpy(&b, s + i + 8, 8);
        if ((a | b) & high)
            return kcr__utf8_valid_prefix_from(s, len, i);
    }
    for (; i < len; i++)
        if ((unsigned char)s[i] >= 0x80)
            return kcr__utf8_valid_prefix_from(s, len, i);
    return len;
}

static inline bool kcr__utf8_valid(const char *s, size_t len)
{
    return kcr__utf8_valid_prefix(s, len) == len;
}

#endif
