/* libcurl's verbose output, routed to the log at TRACE with every credential
 * header's value replaced (the library never prints itself, and never logs
 * a credential). */
#include <stddef.h>
#include <string.h>
#include <strings.h>

#include "client/http_curl.h"
#include "core/log.h"

static const char *const secret_headers[] = {
    "authorization:", "proxy-authorization:", "cookie:", "set-cookie:"};

/* Where a credential-bearing header name starts in line[0..len), or NULL. */
static const char *find_secret(const char *line, size_t len, size_t *name_len)
{
    for (size_t at = 0; at < len; at++)
        for (size_t i = 0; i < sizeof secret_headers / sizeof *secret_headers; i++) {
            size_t n = strlen(secret_headers[i]);
            if (len - at >= n && strncasecmp(line + at, secret_headers[i], n) == 0 &&
                (at == 0 || !((line[at - 1] | 0x20) >= 'a' && (line[at - 1] | 0x20) <= 'z') ||
                 line[at - 1] == '-')) {
                *name_len = n - 1;
                return line + at;
            }
        }
    return NULL;
}

/* Logs one line of libcurl's trace with any credential header's value
 * replaced: header lines ("authorization: Bearer ...") and libcurl's own
 * notes that quote headers (HTTP/2's "[authorization: Bearer ...]"). */
static void log_trace_line(char dir, const char *line, size_t len)
{
    while (len && (line[len - 1] == '\n' || line[len - 1] == '\r'))
        len--;
    if (!len)
        return;
    size_t name_len;
    const char *secret = find_secret(line, len, &name_len);
    if (secret)
        kcr__log(KCR_LOG_TRACE, "curl", "%c %.*s <redacted>", dir,
                 (int)(secret - line + (ptrdiff_t)name_len), line);
    else
        kcr__log(KCR_LOG_TRACE, "curl", "%c %.*s", dir, (int)len, line);
}

int kcr__curl_trace(CURL *h, curl_infotype type, char *data, size_t size, void *ud)
{
    (void)h;
    (void)ud;
    if (type == CURLINFO_TEXT) {
        log_trace_line('*', data, size);
    } else if (type == CURLINFO_HEADER_OUT || type == CURLINFO_HEADER_IN) {
        const char *p = data, *end = data + size;
        while (p < end) {
            const char *nl = memchr(p, '\n', (size_t)(end - p));
            size_t n = nl ? (size_t)(nl - p + 1) : (size_t)(end - p);
            log_trace_line(type == CURLINFO_HEADER_OUT ? '>' : '<', p, n);
            p += n;
        }
    }
    return 0;
}
