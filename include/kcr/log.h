/* Logging. kcr never prints by itself: records go to the handler set here,
 * or nowhere. Credentials never appear in a record. */
#ifndef KCR_LOG_H
#define KCR_LOG_H

#include <stdbool.h>

#include "kcr/error.h"
#include "kcr/export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum kcr_log_level {
    KCR_LOG_ERROR = 0,
    KCR_LOG_WARN = 1,
    KCR_LOG_INFO = 2,
    KCR_LOG_DEBUG = 3,
    KCR_LOG_TRACE = 4
} kcr_log_level;

/* Receives one formatted record. `module` ("workqueue", "reflector", ...) and
 * `message` are borrowed for the duration of the call. Called on whichever
 * kcr thread logs, with no kcr lock held; it must be thread-safe. */
typedef void (*kcr_log_fn)(kcr_log_level level, const char *module, const char *message,
                           void *user_data);

/* Installs the process-wide handler (NULL turns logging off, the default).
 * Thread-safe; records already being formatted may still reach the old handler. */
KCR_API void kcr_log_set_handler(kcr_log_fn fn, void *user_data);

/* Records above `level` are dropped before formatting. Default KCR_LOG_INFO.
 * Thread-safe. */
KCR_API void kcr_log_set_level(kcr_log_level level);

/* A ready-made handler writing "LEVEL module: message" lines to stderr.
 * Thread-safe. */
KCR_API void kcr_log_stderr(kcr_log_level level, const char *module, const char *message,
                            void *user_data);

/* Upper-case name of a level ("ERROR" ...); static string. */
KCR_API const char *kcr_log_level_name(kcr_log_level level);

/* The level named `name` ("error", "warn", "info", "debug", "trace", any
 * case). KCR_ERR_INVALID for anything else. Thread-safe. */
KCR_API kcr_err kcr_log_level_parse(const char *name, kcr_log_level *out);

/* For programs: when $KCR_LOG names a level, installs kcr_log_stderr at that
 * level and returns true; otherwise changes nothing and returns false (an
 * unknown name is reported on stderr). At "trace" every HTTP exchange is
 * logged too (module "curl"), with Authorization headers redacted.
 * Call it early in main(), before other threads log. */
KCR_API bool kcr_log_from_env(void);

/* True when a record at `level` would reach a handler: skip costly
 * formatting when it is false. Thread-safe. */
KCR_API bool kcr_log_enabled(kcr_log_level level);

/* Formats a record (printf-style, truncated at 2047 bytes) and hands it to
 * the handler, if one is installed and `level` is enabled, so code built on
 * kcr (a controller, kcr_http) logs the way kcr does. `module` names the
 * source ("my-controller"). Thread-safe. */
KCR_API void kcr_log(kcr_log_level level, const char *module, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

#ifdef __cplusplus
}
#endif

#endif
