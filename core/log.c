/* The process-wide log handler. Reads take a snapshot of handler+user_data
 * under a mutex so a record never pairs one handler with another's data. */
#include "core/log.h"

#include "core/error.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

static pthread_mutex_t handler_lock = PTHREAD_MUTEX_INITIALIZER;
static kcr_log_fn handler_fn;
static void *handler_data;
static atomic_int max_level = KCR_LOG_INFO;
static atomic_bool have_handler;

void kcr_log_set_handler(kcr_log_fn fn, void *user_data)
{
    pthread_mutex_lock(&handler_lock);
    handler_fn = fn;
    handler_data = user_data;
    atomic_store(&have_handler, fn != NULL);
    pthread_mutex_unlock(&handler_lock);
}

void kcr_log_set_level(kcr_log_level level)
{
    atomic_store(&max_level, (int)level);
}

const char *kcr_log_level_name(kcr_log_level level)
{
    static const char *const names[] = {"ERROR", "WARN", "INFO", "DEBUG", "TRACE"};
    if ((unsigned)level < sizeof names / sizeof names[0])
        return names[level];
    return "?";
}

kcr_err kcr_log_level_parse(const char *name, kcr_log_level *out)
{
    static const char *const names[] = {"error", "warn", "info", "debug", "trace"};
    for (int i = 0; name && out && i < (int)(sizeof names / sizeof names[0]); i++)
        if (strcasecmp(name, names[i]) == 0) {
            *out = (kcr_log_level)i;
            return KCR_OK;
        }
    return kcr__fail(KCR_ERR_INVALID, "unknown log level \"%s\" (error, warn, info, debug, trace)",
                     name ? name : "");
}

bool kcr_log_from_env(void)
{
    const char *name = getenv("KCR_LOG");
    kcr_log_level level;
    if (!name || !*name)
        return false;
    if (kcr_log_level_parse(name, &level) != KCR_OK) {
        /* the program asked for logging on stderr: say why there is none */
        fprintf(stderr, "KCR_LOG: %s\n", kcr_last_error());
        return false;
    }
    kcr_log_set_level(level);
    kcr_log_set_handler(kcr_log_stderr, NULL);
    return true;
}

void kcr_log_stderr(kcr_log_level level, const char *module, const char *message,
                    void *user_data)
{
    fprintf(stderr, "%-5s %s: %s\n", kcr_log_level_name(level), module, message);
}

bool kcr_log_enabled(kcr_log_level level)
{
    return atomic_load(&have_handler) && (int)level <= atomic_load(&max_level);
}

void kcr_log(kcr_log_level level, const char *module, const char *fmt, ...)
{
    if (!kcr__log_enabled(level))
        return;
    char message[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);

    pthread_mutex_lock(&handler_lock);
    kcr_log_fn fn = handler_fn;
    void *data = handler_data;
    pthread_mutex_unlock(&handler_lock);
    if (fn)
        fn(level, module, message, data);
}
