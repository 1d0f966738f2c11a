/* Internal: recording the detail message behind a kcr_err. */
#ifndef KCR_CORE_ERROR_H
#define KCR_CORE_ERROR_H

#include "kcr/error.h"

/* Stores a printf-style detail message for kcr_last_error() on this thread and
 * returns `err`, so call sites read `return kcr__fail(KCR_ERR_PARSE, "...", ...)`. */
kcr_err kcr__fail(kcr_err err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Clears this thread's detail message. */
void kcr__clear_error(void);

#endif
