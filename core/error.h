/* Internal: recording the detail message behind a kcr_err. */
#ifndef KCR_CORE_ERROR_H
#define KCR_CORE_ERROR_H

#include "kcr/error.h"

/* Stores a printf-style detail message for kcr_last_error() on this thread and
 * returns `err`, so call sites read `return kcr__fail(KCR_ERR_PARSE, "...", ...)`.
 * It is the public kcr_set_error (kcr/error.h), so kcr_http, built outside
 * libkcr, records its errors the same way with nothing internal exported. */
#define kcr__fail kcr_set_error

/* kcr__fail() with the current kcr_last_error() appended: "<fmt...><previous>",
 * for adding context to a failure reported further down. (Passing
 * kcr_last_error() to kcr__fail() itself would overlap buffers.) */
kcr_err kcr__refail(kcr_err err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Clears this thread's detail message. */
void kcr__clear_error(void);

#endif
