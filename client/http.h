/* Internal: URL pieces the HTTP client appends to its request strings
 * (core/buf.h). */
#ifndef KCR_CLIENT_HTTP_H
#define KCR_CLIENT_HTTP_H

#include "core/buf.h"

/* Appends s percent-encoded (everything but RFC 3986 unreserved characters). */
kcr_err kcr__buf_escape(kcr__buf *b, const char *s);
/* Appends "?key=value" or "&key=value" (value encoded); NULL value: nothing. */
void kcr__buf_query(kcr__buf *b, const char *key, const char *value);

#endif
