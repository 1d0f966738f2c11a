/* Error names and the per-thread detail message. */
#include "core/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char last_error[1024];

const char *kcr_strerror(kcr_err err)
{
    switch (err) {
    case KCR_OK: return "success";
    case KCR_ERR_NOMEM: return "out of memory";
    case KCR_ERR_INVALID: return "invalid argument";
    case KCR_ERR_SHUTDOWN: return "shutting down";
    case KCR_ERR_TIMEOUT: return "timed out";
    case KCR_ERR_NOT_FOUND: return "not found";
    case KCR_ERR_EXISTS: return "already exists";
    case KCR_ERR_STATE: return "call out of order";
    case KCR_ERR_PARSE: return "malformed input";
    case KCR_ERR_CONFIG: return "bad configuration";
    case KCR_ERR_IO: return "I/O error";
    case KCR_ERR_TRANSPORT: return "transport error";
    case KCR_ERR_API: return "API error";
    case KCR_ERR_CONFLICT: return "conflict";
    case KCR_ERR_GONE: return "resource version expired";
    case KCR_ERR_UNAUTHORIZED: return "unauthorized";
    case KCR_ERR_FORBIDDEN: return "forbidden";
    case KCR_ERR_TOO_MANY: return "too many requests";
    case KCR_ERR_TOO_LARGE: return "too large";
    case KCR_ERR_UNSUPPORTED: return "unsupported";
    case KCR_ERR_EXEC: return "credential plugin failed";
    case KCR_ERR_CANCELED: return "canceled";
    case KCR_ERR_INVALID_OBJECT: return "invalid object";
    case KCR_ERR_LEADERSHIP_LOST: return "leadership lost";
    case KCR_ERR_TLS: return "TLS verification failed";
    case KCR_ERR_BAD_REQUEST: return "bad request";
    }
    return "unknown error";
}

bool kcr_err_is_permanent(kcr_err err)
{
    switch (err) {
    case KCR_ERR_BAD_REQUEST:
    case KCR_ERR_INVALID_OBJECT:
    case KCR_ERR_INVALID:
    case KCR_ERR_PARSE:
    case KCR_ERR_TOO_LARGE:
    case KCR_ERR_UNSUPPORTED:
        return true;
    default:
        return false;
    }
}

const char *kcr_last_error(void)
{
    return last_error;
}

/* Formats into a copy first: the arguments may point into last_error. */
static void set_detail(const char *fmt, va_list ap)
{
    char buf[sizeof last_error];
    vsnprintf(buf, sizeof buf, fmt, ap);
    memcpy(last_error, buf, sizeof buf);
}

kcr_err kcr_set_error(kcr_err err, const char *fmt, ...)
{
    if (!fmt) {
        last_error[0] = '\0';
        return err;
    }
    va_list ap;
    va_start(ap, fmt);
    set_detail(fmt, ap);
    va_end(ap);
    return err;
}

kcr_err kcr__refail(kcr_err err, const char *fmt, ...)
{
    char prev[sizeof last_error], head[sizeof last_error];
    snprintf(prev, sizeof prev, "%s", last_error);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(head, sizeof head, fmt, ap);
    va_end(ap);
    return kcr__fail(err, "%s%s", head, prev);
}

void kcr__clear_error(void)
{
    last_error[0] = '\0';
}
