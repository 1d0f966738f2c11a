/* Internal: small pieces shared by the controller helpers (controllerutil.h):
 * a growing text buffer for JSON patch bodies, and retry bookkeeping. */
#ifndef KCR_CONTROLLER_CTRLUTIL_INTERNAL_H
#define KCR_CONTROLLER_CTRLUTIL_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include "kcr/controllerutil.h"

/* A malloc'd, NUL-terminated text being appended to. Zero-initialize; after
 * an allocation failure every append is a no-op and `failed` is set. */
typedef struct kcr__jbuf {
    char *s;
    size_t len, cap;
    bool failed;
} kcr__jbuf;

void kcr__jbuf_raw(kcr__jbuf *b, const char *s);
/* Appends s as a JSON string literal (quoted, escaped). */
void kcr__jbuf_string(kcr__jbuf *b, const char *s);
/* Appends a value's compact JSON ("null" for ABSENT). */
void kcr__jbuf_value(kcr__jbuf *b, kcr_value v);
void kcr__jbuf_free(kcr__jbuf *b);

/* max_retries as the public functions take it: 0 is the default, < 0 none. */
int kcr__ctrlutil_retries(int max_retries);

#endif
