/* The growable byte string (core/buf.h). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/error.h"

static kcr_err oom(void)
{
    return kcr__fail(KCR_ERR_NOMEM, "out of memory building a string");
}

kcr_err kcr__buf_add(kcr__buf *b, const char *s, size_t n)
{
    if (b->oom)
        return oom();
    if (n >= (size_t)-1 / 2 - b->len) {
        b->oom = true;
        return oom();
    }
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = realloc(b->s, cap);
        if (!p) {
            b->oom = true;
            return oom();
        }
        b->s = p;
        b->cap = cap;
    }
    if (n)
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
        return kcr__fail(KCR_ERR_INVALID, "cannot format a string (\"%s\")", fmt);
    if ((size_t)n < sizeof tmp)
        return kcr__buf_add(b, tmp, (size_t)n);
    char *big = malloc((size_t)n + 1);
    if (!big) {
        b->oom = true;
        return oom();
    }
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    kcr_err err = kcr__buf_add(b, big, (size_t)n);
    free(big);
    return err;
}

kcr_err kcr__buf_json_string(kcr__buf *b, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    kcr__buf_add(b, "\"", 1);
    size_t run = 0; /* start of the bytes not copied yet */
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch >= 0x20 && ch != '"' && ch != '\\')
            continue;
        kcr__buf_add(b, s + run, i - run);
        run = i + 1;
        if (ch >= 0x20) {
            char esc[2] = {'\\', (char)ch};
            kcr__buf_add(b, esc, 2);
        } else {
            char esc[6] = {'\\', 'u', '0', '0', hex[ch >> 4], hex[ch & 15]};
            kcr__buf_add(b, esc, 6);
        }
    }
    kcr__buf_add(b, s + run, n - run);
    return kcr__buf_add(b, "\"", 1);
}

void kcr__buf_free(kcr__buf *b)
{
    free(b->s);
    memset(b, 0, sizeof *b);
}
