/* Internal: emitting log records through the user's handler. */
#ifndef KCR_CORE_LOG_H
#define KCR_CORE_LOG_H

#include <stdbool.h>

#include "kcr/log.h"

/* The library logs through the public kcr_log (kcr/log.h), as kcr_http
 * and users' code do: one entry point, nothing internal exported. */
#define kcr__log_enabled kcr_log_enabled
#define kcr__log kcr_log

#endif
