/* Internal: the schema `pattern` subset kcr supports (docs/types.md). */
#ifndef KCR_TYPED_REGEX_H
#define KCR_TYPED_REGEX_H

#include <stdbool.h>
#include <stddef.h>

/* Translates an ECMA-262 pattern into POSIX extended regex syntax in
 * out[0..cap): \d \w \s (and \D \W \S outside brackets) become classes, an
 * escaped punctuation character stays literal. Returns false for what POSIX
 * cannot express (lookaround, lazy quantifiers, backreferences, \b, \uXXXX)
 * or when out is too small. */
bool kcr__typed_regex_translate(const char *pattern, char *out, size_t cap);

/* 1 when s matches pattern (searched, not anchored, as in OpenAPI), 0 when
 * it does not, -1 when the pattern is outside the subset. */
int kcr__typed_regex_match(const char *pattern, const char *s);

#endif
