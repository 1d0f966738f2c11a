/* Growable strings for request building: paths, queries, headers, and the
 * metrics exposition text (controller/metrics_text.c). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/http.h"
#include "core/error.h"

kcr_err kcr__buf_add(kcr__buf *b, const char *s, size_t n)
{
    if (b->oom)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory building a request");
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = realloc(b->s, cap);
        if (!p) {
            b->oom = true;
            return kcr__fail(KCR_ERR_NOMEM, "out of memory building a request");
        }
        b->s = p;
        b->cap = cap;
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
    return KCR_OK;
}

kcr_err kcr__buf_str(kcr__buf *b, const char *s)
{
    return kcr__buf_add(b, s, strlen(s));
}

kcr_err kcr__buf_printf(kcr__buf *b, const char *fmt, ...)
{
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0)
        return kcr__fail(KCR_ERR_INVALID, "cannot format a request string (\"%s\")", fmt);
    if ((size_t)n < sizeof tmp)
        return kcr__buf_add(b, tmp, (size_t)n);
    char *big = malloc((size_t)n + 1);
    if (!big)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory building a request");
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    kcr_err err = kcr__buf_add(b, big, (size_t)n);
    free(big);
    return err;
}

kcr_err kcr__buf_escape(kcr__buf *b, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
            *p == '-' || *p == '.' || *p == '_' || *p == '~') {
            kcr__buf_add(b, (const char *)p, 1);
        } else {
            char esc[3] = {'%', hex[*p >> 4], hex[*p & 15]};
            kcr__buf_add(b, esc, 3);
        }
    }
    return b->oom ? kcr__fail(KCR_ERR_NOMEM, "out of memory building a request path") : KCR_OK;
}

void kcr__buf_free(kcr__buf *b)
{
    free(b->s);
    memset(b, 0, sizeof *b);
}

void kcr__buf_query(kcr__buf *b, const char *key, const char *value)
{
    if (!value)
        return;
    kcr__buf_str(b, strchr(b->s ? b->s : "", '?') ? "&" : "?");
    kcr__buf_str(b, key);
    kcr__buf_str(b, "=");
    kcr__buf_escape(b, value);
}
