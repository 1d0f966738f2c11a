/* Internal: recording the detail message behind a kcr_err. */
#ifndef KCR_CORE_ERROR_H
#define KCR_CORE_ERROR_H

#include "kcr/error.h"
#include "kcr/export.h"

/* The two functions below are exported from libkcr.so (KCR_API) for kcr's
 * companion library kcr_http only, so its errors reach kcr_last_error(); they
 * are not public API (no installed header declares them). */

/* Stores a printf-style detail message for kcr_last_error() on this thread and
 * returns `err`, so call sites read `return kcr__fail(KCR_ERR_PARSE, "...", ...)`. */
KCR_API kcr_err kcr__fail(kcr_err err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* kcr__fail() with the current kcr_last_error() appended: "<fmt...><previous>",
 * for adding context to a failure reported further down. (Passing
 * kcr_last_error() to kcr__fail() itself would overlap buffers.) */
kcr_err kcr__refail(kcr_err err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Clears this thread's detail message. */
KCR_API void kcr__clear_error(void);

#endif
