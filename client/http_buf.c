/* URL encoding for request paths and queries (client/http.h). */
#include <string.h>

#include "client/http.h"
#include "core/error.h"

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

void kcr__buf_query(kcr__buf *b, const char *key, const char *value)
{
    if (!value)
        return;
    kcr__buf_str(b, strchr(b->s ? b->s : "", '?') ? "&" : "?");
    kcr__buf_str(b, key);
    kcr__buf_str(b, "=");
    kcr__buf_escape(b, value);
}
