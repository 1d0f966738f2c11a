/* Internal: THE UTF-8 validator. Every string that enters an object - parsed
 * by the builder (object parsing, the client's LIST and watch decoders) or
 * set through the edit API - is checked here, so bad UTF-8 gets the same
 * answer everywhere. Well-formed means RFC 3629: shortest form, no
 * surrogates, nothing above U+10FFFF. No state: any thread. */
#ifndef KCR_OBJECT_UTF8_H
#define KCR_OBJECT_UTF8_H

#include <stdbool.h>
#include <stddef.h>

/* Length of the longest valid UTF-8 prefix of s: len when all of s is valid. */
size_t kcr__utf8_valid_prefix(const char *s, size_t len);

static inline bool kcr__utf8_valid(const char *s, size_t len)
{
    return kcr__utf8_valid_prefix(s, len) == len;
}

#endif
