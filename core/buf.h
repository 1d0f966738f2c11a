/* Internal: the one growable byte string of the library (request paths and
 * headers, the metrics exposition text, JSON bodies built by hand, YAML
 * converted to JSON, indexer values). Zero-initialise a kcr__buf to get an
 * empty one. Out-of-memory is sticky: after it every append fails with
 * KCR_ERR_NOMEM and `oom` stays set, so a caller may append many pieces and
 * check once. Not thread-safe: its owner locks. */
#ifndef KCR_CORE_BUF_H
#define KCR_CORE_BUF_H

#include <stdbool.h>
#include <stddef.h>

#include "kcr/error.h"

/* s is malloc'd and kept NUL-terminated after len bytes (NULL while empty);
 * the caller may take it and then zero the struct instead of freeing it. */
typedef struct kcr__buf {
    char *s;
    size_t len, cap;
    bool oom;
} kcr__buf;

/* Appends n bytes (which may include NULs). */
kcr_err kcr__buf_add(kcr__buf *b, const char *s, size_t n);
kcr_err kcr__buf_str(kcr__buf *b, const char *s);
kcr_err kcr__buf_printf(kcr__buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends s[0..n) as a quoted JSON string literal: '"' and '\\' escaped,
 * control characters as \u00XX; other bytes (UTF-8) copied as they are. */
kcr_err kcr__buf_json_string(kcr__buf *b, const char *s, size_t n);
/* Frees the text and empties the buffer (clears oom). */
void kcr__buf_free(kcr__buf *b);

#endif
