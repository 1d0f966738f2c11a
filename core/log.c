/* The process-wide log handler. Reads take a snapshot of handler+user_data
 * under a mutex so a record never pairs one handler with another's data. */
#include "core/log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>

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

void kcr_log_stderr(kcr_log_level level, const char *module, const char *message,
                    void *user_data)
{
    fprintf(stderr, "%-5s %s: %s\n", kcr_log_level_name(level), module, message);
}

bool kcr__log_enabled(kcr_log_level level)
{
    return atomic_load(&have_handler) && (int)level <= atomic_load(&max_level);
}

void kcr__log(kcr_log_level level, const char *module, const char *fmt, ...)
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
