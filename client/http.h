/* Internal: the growable string the HTTP client builds requests with (also
 * used by controller/metrics_text.c). */
#ifndef KCR_CLIENT_HTTP_H
#define KCR_CLIENT_HTTP_H

#include <stdbool.h>
#include <stddef.h>

#include "kcr/error.h"

/* A growable NUL-terminated string; out-of-memory is sticky (oom). */
typedef struct kcr__buf {
    char *s;
    size_t len, cap;
    bool oom;
} kcr__buf;

kcr_err kcr__buf_add(kcr__buf *b, const char *s, size_t n);
kcr_err kcr__buf_str(kcr__buf *b, const char *s);
kcr_err kcr__buf_printf(kcr__buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends s percent-encoded (everything but RFC 3986 unreserved characters). */
kcr_err kcr__buf_escape(kcr__buf *b, const char *s);
void kcr__buf_free(kcr__buf *b);
/* Appends "?key=value" or "&key=value" (value encoded); NULL value: nothing. */
void kcr__buf_query(kcr__buf *b, const char *key, const char *value);

#endif
