/* Internal: emitting log records through the user's handler. */
#ifndef KCR_CORE_LOG_H
#define KCR_CORE_LOG_H

#include <stdbool.h>

#include "kcr/export.h"
#include "kcr/log.h"

/* Exported from libkcr.so (KCR_API) for kcr's companion library kcr_http
 * only, so it logs through the same handler; not public API. */

/* True when a record at `level` would reach a handler (skip costly formatting). */
KCR_API bool kcr__log_enabled(kcr_log_level level);

/* Formats and hands one record to the handler, if any and if enabled. */
KCR_API void kcr__log(kcr_log_level level, const char *module, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
