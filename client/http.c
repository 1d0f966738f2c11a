/* The HTTP back end of kcr_client: libcurl, one (easy, multi) handle pair per
 * in-flight request taken from a pool (so sequential requests reuse
 * connections; libcurl cannot share a connection cache between threads), a
 * poll loop that wakes on the request's kcr_cancel, a token-bucket rate
 * limiter, retries on 429 / connection errors, and credentials from auth.c. */
#include <curl/curl.h>
#include <errno.h>
#include <openssl/x509_vfy.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "client/client_impl.h"
#include "client/config_impl.h"
#include "client/decode.h"
#include "client/http.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "core/str.h"
#include "kcr/version.h"

enum {
    DEFAULT_CONNECT_TIMEOUT_MS = 10000,
    DEFAULT_REQUEST_TIMEOUT_MS = 60000,
    DEFAULT_MAX_RETRIES = 5,
    MAX_POOLED = 8,
    MAX_ERROR_BODY = 1 << 20,
    MAX_RETRY_AFTER_S = 30,
};
#define DEFAULT_QPS 50.0
#define DEFAULT_BURST 100

/* ---- growable string ------------------------------------------------------------ */

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

kcr_err kcr__resource_path(kcr__buf *b, const kcr_resource *res, const char *ns,
                           const char *name, const char *subresource)
{
    if (!res || !res->version || !*res->version || !res->resource || !*res->resource)
        return kcr__fail(KCR_ERR_INVALID, "a resource needs a version and a resource name");
    if (res->group && *res->group) {
        kcr__buf_str(b, "/apis/");
        kcr__buf_escape(b, res->group);
        kcr__buf_str(b, "/");
    } else {
        kcr__buf_str(b, "/api/");
    }
    kcr__buf_escape(b, res->version);
    if (ns && *ns) {
        kcr__buf_str(b, "/namespaces/");
        kcr__buf_escape(b, ns);
    }
    kcr__buf_str(b, "/");
    kcr__buf_escape(b, res->resource);
    if (name) {
        if (!*name)
            return kcr__fail(KCR_ERR_INVALID, "empty object name");
        kcr__buf_str(b, "/");
        kcr__buf_escape(b, name);
    }
    if (subresource && *subresource) {
        kcr__buf_str(b, "/");
        kcr__buf_escape(b, subresource);
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

/* ---- cancellation --------------------------------------------------------------- */

kcr_err kcr_cancel_new(kcr_cancel **out)
{
    kcr_cancel *c = calloc(1, sizeof *c);
    if (!c)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory making a cancel token");
    if (pipe(c->fds) != 0) {
        free(c);
        return kcr__fail(KCR_ERR_IO, "cancel token: pipe: %s", strerror(errno));
    }
    for (int i = 0; i < 2; i++) {
        fcntl(c->fds[i], F_SETFL, fcntl(c->fds[i], F_GETFL) | O_NONBLOCK);
        fcntl(c->fds[i], F_SETFD, fcntl(c->fds[i], F_GETFD) | FD_CLOEXEC);
    }
    atomic_init(&c->triggered, false);
    *out = c;
    return KCR_OK;
}

void kcr_cancel_free(kcr_cancel *c)
{
    if (!c)
        return;
    close(c->fds[0]);
    close(c->fds[1]);
    free(c);
}

void kcr_cancel_trigger(kcr_cancel *c)
{
    if (!c || atomic_exchange(&c->triggered, true))
        return;
    ssize_t r = write(c->fds[1], "x", 1);
    (void)r; /* a full pipe is readable already */
}

bool kcr_cancel_triggered(const kcr_cancel *c)
{
    return c && atomic_load(&((kcr_cancel *)c)->triggered);
}

void kcr_cancel_reset(kcr_cancel *c)
{
    if (!c)
        return;
    char buf[64];
    while (read(c->fds[0], buf, sizeof buf) > 0)
        ;
    atomic_store(&c->triggered, false);
}

/* Sleeps up to ms, waking early when `cancel` triggers. KCR_ERR_CANCELED then. */
static kcr_err sleep_cancellable(int64_t ms, kcr_cancel *cancel)
{
    int64_t deadline = kcr__now_ns() + ms * KCR_NS_PER_MS;
    for (;;) {
        if (kcr_cancel_triggered(cancel))
            return kcr__fail(KCR_ERR_CANCELED, "request canceled");
        int64_t left = (deadline - kcr__now_ns()) / KCR_NS_PER_MS;
        if (left <= 0)
            return KCR_OK;
        struct pollfd p = {.fd = cancel ? cancel->fds[0] : -1, .events = POLLIN};
        poll(&p, cancel ? 1 : 0, (int)(left > 1000 ? 1000 : left));
    }
}

/* ---- the client ------------------------------------------------------------------- */

typedef struct handle_pair {
    CURL *easy;
    CURLM *multi;
} handle_pair;

typedef struct http_client {
    struct kcr_client base;
    kcr_config *cfg;
    kcr__auth *auth;
    kcr_client_options opts;
    char *user_agent;
    char *url_base;   /* scheme://host[:port][/prefix] as requests are addressed */
    char *connect_to; /* CURLOPT_CONNECT_TO entry for tls-server-name, or NULL */
    char *host;       /* the server's host[:port], for the request observer */

    pthread_mutex_t lock; /* guards the pool and the rate limiter */
    handle_pair pool[MAX_POOLED];
    size_t n_pool;
    double tokens;
    int64_t refill_ns;

    pthread_mutex_t disc_lock;
    kcr__disc_table disc;
    bool disc_valid;
    int64_t disc_fetched_ns;
} http_client;

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_result;

static void init_curl(void)
{
    curl_init_result = curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* Waits for a token of the QPS/burst bucket (client-go's reservation style). */
static kcr_err rate_limit(http_client *hc, kcr_cancel *cancel)
{
    if (hc->opts.qps < 0)
        return KCR_OK;
    pthread_mutex_lock(&hc->lock);
    int64_t now = kcr__now_ns();
    hc->tokens += (double)(now - hc->refill_ns) / 1e9 * hc->opts.qps;
    if (hc->tokens > hc->opts.burst)
        hc->tokens = hc->opts.burst;
    hc->refill_ns = now;
    hc->tokens -= 1;
    double wait_s = hc->tokens < 0 ? -hc->tokens / hc->opts.qps : 0;
    pthread_mutex_unlock(&hc->lock);
    if (wait_s <= 0)
        return KCR_OK;
    kcr__log(KCR_LOG_TRACE, "client", "rate limiter: waiting %.0f ms", wait_s * 1000);
    return sleep_cancellable((int64_t)(wait_s * 1000) + 1, cancel);
}

static kcr_err take_pair(http_client *hc, handle_pair *out)
{
    pthread_mutex_lock(&hc->lock);
    if (hc->n_pool) {
        *out = hc->pool[--hc->n_pool];
        pthread_mutex_unlock(&hc->lock);
        return KCR_OK;
    }
    pthread_mutex_unlock(&hc->lock);
    out->easy = curl_easy_init();
    out->multi = curl_multi_init();
    if (!out->easy || !out->multi) {
        if (out->easy)
            curl_easy_cleanup(out->easy);
        if (out->multi)
            curl_multi_cleanup(out->multi);
        return kcr__fail(KCR_ERR_NOMEM, "cannot create a libcurl handle");
    }
    return KCR_OK;
}

static void give_pair(http_client *hc, handle_pair p, bool reusable)
{
    curl_easy_reset(p.easy);
    pthread_mutex_lock(&hc->lock);
    if (reusable && hc->n_pool < MAX_POOLED) {
        hc->pool[hc->n_pool++] = p;
        p.easy = NULL;
    }
    pthread_mutex_unlock(&hc->lock);
    if (p.easy) {
        curl_easy_cleanup(p.easy);
        curl_multi_cleanup(p.multi);
    }
}

/* One transfer's state, shared with the libcurl callbacks. */
typedef struct xfer {
    http_client *hc;
    CURL *easy;
    const kcr__http_req *req;
    long code;
    bool code_known;
    kcr__buf body;      /* buffered 2xx body (no sink) or error body */
    size_t dropped;     /* error-body bytes beyond MAX_ERROR_BODY */
    int retry_after;    /* seconds, -1: none */
    int64_t last_byte_ns;
    kcr_err sink_err;
    bool delivered;     /* the sink saw bytes */
    size_t body_at;     /* bytes of a non-idempotent request's body handed to libcurl */
} xfer;

/* The body of a write that must not be resent (it may have been applied).
 * libcurl resends a request by itself when a reused connection dies before
 * any answer byte, rewinding the body; a body read through this callback,
 * with no seek callback, cannot be rewound, so libcurl fails the attempt
 * (CURLE_SEND_FAIL_REWIND) instead of sending it twice. */
static size_t read_body(char *buf, size_t size, size_t n, void *ud)
{
    xfer *x = ud;
    size_t left = x->req->body_len - x->body_at, len = size * n < left ? size * n : left;
    memcpy(buf, x->req->body + x->body_at, len);
    x->body_at += len;
    return len;
}

static size_t on_header(char *buf, size_t size, size_t n, void *ud)
{
    xfer *x = ud;
    size_t len = size * n;
    x->last_byte_ns = kcr__now_ns();
    if (len >= 5 && memcmp(buf, "HTTP/", 5) == 0) {
        x->retry_after = -1; /* a new response (after 100 Continue ...) */
    } else if (len > 12 && strncasecmp(buf, "retry-after:", 12) == 0) {
        char *end;
        long v = strtol(buf + 12, &end, 10);
        x->retry_after = end != buf + 12 && v >= 0 ? (int)(v > 3600 ? 3600 : v) : -1;
    }
    return len;
}

static size_t on_write(char *buf, size_t size, size_t n, void *ud)
{
    xfer *x = ud;
    size_t len = size * n;
    x->last_byte_ns = kcr__now_ns();
    if (!x->code_known) {
        curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &x->code);
        x->code_known = true;
    }
    bool ok = x->code >= 200 && x->code < 300;
    if (ok && x->req->sink) {
        x->delivered = true;
        kcr_err err = x->req->sink(buf, len, x->req->sink_ud);
        if (err != KCR_OK) {
            x->sink_err = err;
            return 0; /* aborts the transfer */
        }
        return len;
    }
    size_t limit = ok ? x->hc->opts.max_item_bytes : MAX_ERROR_BODY;
    if (x->body.len + len > limit) {
        if (ok) {
            x->sink_err = kcr__fail(KCR_ERR_TOO_LARGE, "response larger than %zu bytes", limit);
            return 0;
        }
        x->dropped += len;
        return len;
    }
    if (kcr__buf_add(&x->body, buf, len) != KCR_OK) {
        x->sink_err = kcr__fail(KCR_ERR_NOMEM, "out of memory reading a response");
        return 0;
    }
    return len;
}

static bool retryable_curl(CURLcode rc)
{
    switch (rc) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_CONNECT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
        return true;
    default:
        return false;
    }
}

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

/* libcurl's verbose output, routed to the log at TRACE (the library never
 * prints itself). Bodies and TLS records are left out. */
static int on_debug(CURL *h, curl_infotype type, char *data, size_t size, void *ud)
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

/* Configures the easy handle for one attempt. */
static kcr_err setup(http_client *hc, CURL *e, const kcr__http_req *req, const char *url,
                     kcr__creds *creds, struct curl_slist **headers, xfer *x, char *errbuf)
{
    const kcr_config *cfg = hc->cfg;
    curl_easy_setopt(e, CURLOPT_URL, url);
    if (kcr__log_enabled(KCR_LOG_TRACE)) {
        curl_easy_setopt(e, CURLOPT_DEBUGFUNCTION, on_debug);
        curl_easy_setopt(e, CURLOPT_VERBOSE, 1L);
    }
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
    curl_easy_setopt(e, CURLOPT_USERAGENT, hc->user_agent);
    /* Compressed watch streams arrive as one gzip member per flush, which
     * libcurl's decoder rejects; lists and single objects may be gzipped. */
    if (!req->uncompressed)
        curl_easy_setopt(e, CURLOPT_ACCEPT_ENCODING, "");
    curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)hc->opts.connect_timeout_ms);
    if (!req->streaming)
        curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)hc->opts.request_timeout_ms);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, x);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    if (hc->connect_to) {
        struct curl_slist *ct = curl_slist_append(NULL, hc->connect_to);
        curl_easy_setopt(e, CURLOPT_CONNECT_TO, ct);
        /* freed with the headers list below: chain it */
        headers[1] = ct;
    }
    if (cfg->proxy_url && *cfg->proxy_url)
        curl_easy_setopt(e, CURLOPT_PROXY, cfg->proxy_url);

    /* TLS: verification stays on unless the kubeconfig says otherwise. */
    if (cfg->insecure) {
        curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 0L);
    } else if (cfg->ca.data) {
        struct curl_blob ca = {cfg->ca.data, cfg->ca.len, CURL_BLOB_NOCOPY};
        curl_easy_setopt(e, CURLOPT_CAINFO_BLOB, &ca);
        curl_easy_setopt(e, CURLOPT_CAPATH, NULL);
    }
    if (creds->cert.data) {
        struct curl_blob cert = {creds->cert.data, creds->cert.len, CURL_BLOB_NOCOPY};
        struct curl_blob key = {creds->key.data, creds->key.len, CURL_BLOB_NOCOPY};
        curl_easy_setopt(e, CURLOPT_SSLCERTTYPE, "PEM");
        curl_easy_setopt(e, CURLOPT_SSLCERT_BLOB, &cert);
        curl_easy_setopt(e, CURLOPT_SSLKEYTYPE, "PEM");
        curl_easy_setopt(e, CURLOPT_SSLKEY_BLOB, &key);
    }

    kcr__buf h = {0};
    struct curl_slist *list = NULL;
    kcr__buf_printf(&h, "Accept: %s", req->accept ? req->accept : "application/json");
    list = curl_slist_append(list, h.s ? h.s : "Accept: application/json");
    if (req->body) {
        h.len = 0;
        kcr__buf_printf(&h, "Content-Type: %s",
                        req->content_type ? req->content_type : "application/json");
        list = curl_slist_append(list, h.s);
    }
    kcr__buf_free(&h);
    if (creds->bearer) {
        kcr__buf auth = {0};
        kcr__buf_printf(&auth, "Authorization: Bearer %s", creds->bearer);
        if (auth.s)
            list = curl_slist_append(list, auth.s);
        if (auth.s)
            memset(auth.s, 0, auth.len);
        kcr__buf_free(&auth);
    } else if (creds->username) {
        curl_easy_setopt(e, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
        curl_easy_setopt(e, CURLOPT_USERNAME, creds->username);
        curl_easy_setopt(e, CURLOPT_PASSWORD, creds->password);
    }
    list = curl_slist_append(list, "Expect:"); /* no 100-continue round trip */
    headers[0] = list;
    if (!list)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory setting the request headers");
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, list);

    if (strcmp(req->method, "GET") == 0) {
        curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
    } else if (strcmp(req->method, "POST") == 0 && req->body) {
        curl_easy_setopt(e, CURLOPT_POST, 1L);
    } else {
        curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, req->method);
    }
    if (req->body && !req->idempotent) {
        curl_easy_setopt(e, CURLOPT_POST, 1L); /* the body comes from read_body */
        curl_easy_setopt(e, CURLOPT_READFUNCTION, read_body);
        curl_easy_setopt(e, CURLOPT_READDATA, x);
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->body_len);
    } else if (req->body) {
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, req->body);
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->body_len);
    }
    return KCR_OK;
}

/* Runs one attempt with a poll loop that wakes on cancellation and checks
 * the idle limit. Returns the curl code; *canceled / *idle say why we stopped. */
static CURLcode perform(handle_pair *p, const kcr__http_req *req, xfer *x, bool *canceled,
                        bool *idle)
{
    *canceled = *idle = false;
    curl_multi_add_handle(p->multi, p->easy);
    CURLcode result = CURLE_OK;
    bool done = false;
    int64_t idle_ns = req->idle_timeout_ms > 0 ? req->idle_timeout_ms * KCR_NS_PER_MS : 0;
    while (!done) {
        int running = 0;
        CURLMcode mc = curl_multi_perform(p->multi, &running);
        if (mc != CURLM_OK) {
            result = CURLE_FAILED_INIT;
            break;
        }
        int left;
        CURLMsg *msg;
        while ((msg = curl_multi_info_read(p->multi, &left)))
            if (msg->msg == CURLMSG_DONE) {
                result = msg->data.result;
                done = true;
            }
        if (done || !running) {
            done = true;
            break;
        }
        if (kcr_cancel_triggered(req->cancel)) {
            *canceled = true;
            break;
        }
        int64_t now = kcr__now_ns();
        if (idle_ns && now - x->last_byte_ns > idle_ns) {
            *idle = true;
            break;
        }
        struct curl_waitfd extra = {.fd = req->cancel ? req->cancel->fds[0] : -1,
                                    .events = CURL_WAIT_POLLIN};
        int timeout = 1000;
        if (idle_ns) {
            int64_t until = (x->last_byte_ns + idle_ns - now) / KCR_NS_PER_MS + 1;
            if (until < timeout)
                timeout = (int)(until > 0 ? until : 1);
        }
        curl_multi_poll(p->multi, req->cancel ? &extra : NULL, req->cancel ? 1 : 0, timeout, NULL);
    }
    curl_multi_remove_handle(p->multi, p->easy);
    return result;
}

/* "host" of scheme://host[:port][/path] (IPv6 brackets kept) into buf. */
static void host_of(const char *url, char *buf, size_t size)
{
    const char *h = strstr(url, "://");
    h = h ? h + 3 : url;
    size_t n = *h == '[' ? strcspn(h, "]") + 1 : strcspn(h, ":/");
    snprintf(buf, size, "%.*s", (int)n, h);
}

/* The trust anchor a failed verification was checked against. */
static void describe_ca(const kcr_config *cfg, char *buf, size_t size)
{
    if (cfg->ca.data && cfg->cluster)
        snprintf(buf, size, "the certificate-authority of cluster \"%s\"", cfg->cluster);
    else if (cfg->ca.data)
        snprintf(buf, size, "the service account's CA (ca.crt)");
    else if (cfg->cluster)
        snprintf(buf, size,
                 "any CA this system trusts (cluster \"%s\" sets no certificate-authority)",
                 cfg->cluster);
    else
        snprintf(buf, size, "any CA this system trusts");
}

/* TLS failures that the same configuration will meet again, in words a
 * person understands: KCR_ERR_TLS with the message set, or KCR_OK when `rc`
 * is not one of them (a reset mid-handshake, say, stays a transport error). */
static kcr_err classify_tls(http_client *hc, CURLcode rc, long vr, const char *detail,
                            const kcr__http_req *req)
{
    const kcr_config *cfg = hc->cfg;
    char cluster[300], host[300], ca[400];
    if (cfg->cluster)
        snprintf(cluster, sizeof cluster, "cluster \"%s\"", cfg->cluster);
    else
        snprintf(cluster, sizeof cluster, "the in-cluster API server");
    host_of(hc->url_base, host, sizeof host);
    if (rc == CURLE_SSL_CONNECT_ERROR && strstr(detail, "wrong version number"))
        return kcr__fail(KCR_ERR_TLS,
                         "%s %s: the server of %s (%s) does not speak TLS: it answered in plain "
                         "HTTP on an https:// URL (%s)",
                         req->method, req->path, cluster, cfg->server, detail);
    if (rc != CURLE_PEER_FAILED_VERIFICATION)
        return KCR_OK;
    switch (vr) {
    case X509_V_ERR_CERT_HAS_EXPIRED:
        return kcr__fail(KCR_ERR_TLS, "%s %s: the server's certificate has expired (%s, %s)",
                         req->method, req->path, cluster, detail);
    case X509_V_ERR_CERT_NOT_YET_VALID:
        return kcr__fail(KCR_ERR_TLS,
                         "%s %s: the server's certificate is not valid yet: check the clocks "
                         "(%s, %s)",
                         req->method, req->path, cluster, detail);
    case X509_V_OK:
    case X509_V_ERR_UNSPECIFIED: /* libcurl's own host name check reports these */
        if (!strstr(detail, "host name"))
            break;
        /* fall through */
    case X509_V_ERR_HOSTNAME_MISMATCH:
    case X509_V_ERR_IP_ADDRESS_MISMATCH:
        return kcr__fail(KCR_ERR_TLS,
                         "%s %s: the server's certificate is not valid for the host name \"%s\" "
                         "(%s%s; %s)",
                         req->method, req->path, host, cluster,
                         cfg->tls_server_name && *cfg->tls_server_name
                             ? ", checked against its tls-server-name"
                             : "; set tls-server-name if the certificate names another host",
                         detail);
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
    case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
    case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
    case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
    case X509_V_ERR_CERT_SIGNATURE_FAILURE:
        describe_ca(cfg, ca, sizeof ca);
        return kcr__fail(KCR_ERR_TLS, "%s %s: the server's certificate is not signed by %s (%s)",
                         req->method, req->path, ca, detail);
    default:
        break;
    }
    describe_ca(cfg, ca, sizeof ca);
    return kcr__fail(KCR_ERR_TLS,
                     "%s %s: the server's certificate failed verification against %s (%s)",
                     req->method, req->path, ca, detail);
}

kcr_err kcr__http_do(kcr_client *c, const kcr__http_req *req, char **out, size_t *out_len,
                     kcr_status *st)
{
    http_client *hc = (http_client *)c;
    if (out) {
        *out = NULL;
        if (out_len)
            *out_len = 0;
    }
    kcr__buf url = {0};
    kcr__buf_str(&url, hc->url_base);
    kcr__buf_str(&url, req->path);
    if (url.oom)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory making a request");
    kcr_err err = KCR_OK;
    bool auth_retried = false;
    int attempts = 0;
    for (;;) {
        if ((err = rate_limit(hc, req->cancel)) != KCR_OK)
            break;
        kcr__creds creds;
        if ((err = kcr__auth_get(hc->auth, &creds)) != KCR_OK)
            break;
        handle_pair p;
        if ((err = take_pair(hc, &p)) != KCR_OK) {
            kcr__creds_clear(&creds);
            break;
        }
        xfer x = {.hc = hc, .easy = p.easy, .req = req, .retry_after = -1, .last_byte_ns = kcr__now_ns()};
        char errbuf[CURL_ERROR_SIZE] = "";
        struct curl_slist *lists[2] = {NULL, NULL};
        err = setup(hc, p.easy, req, url.s, &creds, lists, &x, errbuf);
        bool canceled = false, idle = false;
        CURLcode rc = CURLE_OK;
        long verify_result = X509_V_OK;
        if (err == KCR_OK) {
            kcr__log(KCR_LOG_DEBUG, "client", "%s %s", req->method, req->path);
            int64_t start_ns = kcr__now_ns();
            rc = perform(&p, req, &x, &canceled, &idle);
            if (!x.code_known)
                curl_easy_getinfo(p.easy, CURLINFO_RESPONSE_CODE, &x.code);
            if (rc == CURLE_PEER_FAILED_VERIFICATION)
                curl_easy_getinfo(p.easy, CURLINFO_SSL_VERIFYRESULT, &verify_result);
            kcr__client_observe(c, req->method, hc->host, (int)x.code, start_ns);
        }
        curl_slist_free_all(lists[0]);
        curl_slist_free_all(lists[1]);
        kcr__creds_clear(&creds);
        give_pair(hc, p, err == KCR_OK && rc == CURLE_OK && !canceled && !idle);
        attempts++;
        bool may_retry = hc->opts.max_retries >= 0 && attempts <= hc->opts.max_retries;
        if (err != KCR_OK) {
            kcr__buf_free(&x.body);
            break;
        }
        if (canceled) {
            err = kcr__fail(KCR_ERR_CANCELED, "%s %s: canceled", req->method, req->path);
        } else if (idle) {
            err = kcr__fail(KCR_ERR_TIMEOUT, "%s %s: no data for %lld ms", req->method, req->path,
                            (long long)req->idle_timeout_ms);
        } else if (x.sink_err != KCR_OK) {
            err = x.sink_err; /* the decoder or callback stopped it; message already set */
        } else if (rc != CURLE_OK) {
            bool retry = may_retry && req->idempotent && !x.delivered && retryable_curl(rc) &&
                         !(x.code >= 200 && x.code < 300);
            const char *detail = *errbuf ? errbuf : curl_easy_strerror(rc);
            bool timed_out = rc == CURLE_OPERATION_TIMEDOUT;
            kcr_err terr = timed_out ? KCR_ERR_TIMEOUT : KCR_ERR_TRANSPORT; /* detail: below */
            err = classify_tls(hc, rc, verify_result, detail, req);
            if (err == KCR_OK && rc == CURLE_OPERATION_TIMEDOUT && !req->streaming)
                err = kcr__fail(terr, "%s %s: no complete answer within %lld ms (%s)", req->method,
                                req->path, (long long)hc->opts.request_timeout_ms, detail);
            else if (err == KCR_OK)
                err = kcr__fail(terr, "%s %s: %s", req->method, req->path, detail);
            if (retry) {
                kcr__log(KCR_LOG_INFO, "client", "%s %s failed (%s), retrying", req->method,
                         req->path, *errbuf ? errbuf : curl_easy_strerror(rc));
                kcr__buf_free(&x.body);
                int64_t backoff = 100LL << (attempts < 6 ? attempts : 6);
                if ((err = sleep_cancellable(backoff, req->cancel)) != KCR_OK)
                    break;
                continue;
            }
        } else if (x.code >= 200 && x.code < 300) {
            err = KCR_OK;
            if (out && !req->sink) {
                if (!x.body.s && kcr__buf_add(&x.body, "", 0) != KCR_OK) {
                    err = kcr__fail(KCR_ERR_NOMEM, "out of memory making a request");
                } else {
                    *out = x.body.s;
                    if (out_len)
                        *out_len = x.body.len;
                    x.body.s = NULL;
                }
            }
        } else if (x.code == 401 && !auth_retried && kcr__auth_unauthorized(hc->auth)) {
            kcr__log(KCR_LOG_INFO, "client", "401 from %s %s: refreshing credentials",
                     req->method, req->path);
            auth_retried = true;
            kcr__buf_free(&x.body);
            continue;
        } else if (x.code == 429 && may_retry) {
            int wait_s = x.retry_after >= 0 ? x.retry_after : 1;
            if (wait_s > MAX_RETRY_AFTER_S)
                wait_s = MAX_RETRY_AFTER_S;
            kcr__log(KCR_LOG_INFO, "client", "429 from %s %s: retrying after %d s", req->method,
                     req->path, wait_s);
            kcr__buf_free(&x.body);
            if ((err = sleep_cancellable(wait_s * 1000LL, req->cancel)) != KCR_OK)
                break;
            continue;
        } else {
            err = kcr__status_from_http(x.code, x.body.s ? x.body.s : "", x.body.len, st);
            if (x.retry_after > 0 && st->details.retry_after_seconds == 0)
                st->details.retry_after_seconds = x.retry_after;
        }
        kcr__buf_free(&x.body);
        break;
    }
    kcr__buf_free(&url);
    return err;
}

/* ---- verbs ------------------------------------------------------------------------- */

static kcr_err decode_object(const char *body, size_t len, kcr_object **out)
{
    kcr_err err = kcr_object_parse(body, len, out);
    if (err != KCR_OK)
        return kcr__refail(err, "response: ");
    return KCR_OK;
}

/* Runs a request whose 2xx answer is one object, stored in *out if wanted. */
static kcr_err object_request(kcr_client *c, kcr__http_req *req, kcr_object **out,
                              kcr_status *st)
{
    if (out)
        *out = NULL;
    char *body = NULL;
    size_t len = 0;
    kcr_err err = kcr__http_do(c, req, &body, &len, st);
    if (err == KCR_OK && out)
        err = decode_object(body, len, out);
    free(body);
    return err;
}

static const char *metadata_accept(bool list)
{
    return list ? "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,"
                  "application/json"
                : "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,"
                  "application/json";
}

static kcr_err http_get(kcr_client *c, const kcr_resource *res, const char *ns, const char *name,
                        const kcr_get_options *opts, kcr_object **out, kcr_status *st)
{
    kcr__buf path = {0};
    kcr_err err = kcr__resource_path(&path, res, ns, name, opts->subresource);
    kcr__buf_query(&path, "resourceVersion", opts->resource_version);
    if (err == KCR_OK && path.oom)
        err = kcr__fail(KCR_ERR_NOMEM, "out of memory building a get request");
    if (err == KCR_OK) {
        kcr__http_req req = {.method = "GET",
                             .path = path.s,
                             .idempotent = true,
                             .cancel = opts->cancel,
                             .accept = opts->metadata_only ? metadata_accept(false) : NULL};
        err = object_request(c, &req, out, st);
    }
    kcr__buf_free(&path);
    return err;
}

static void write_query(kcr__buf *path, const kcr_write_options *opts, bool apply)
{
    kcr__buf_query(path, "fieldManager", opts->field_manager);
    if (apply && opts->force)
        kcr__buf_query(path, "force", "true");
    if (opts->dry_run)
        kcr__buf_query(path, "dryRun", "All");
}

/* POST (create, name NULL) or PUT (update) of a whole object. PUT is
 * idempotent only with a resourceVersion precondition, so neither is retried
 * on connection errors. */
static kcr_err write_object(kcr_client *c, const char *method, const kcr_resource *res,
                            const char *ns, const char *name, const char *json, size_t len,
                            const kcr_write_options *opts, kcr_object **out, kcr_status *st)
{
    kcr__buf path = {0};
    kcr_err err = kcr__resource_path(&path, res, ns, name, opts->subresource);
    write_query(&path, opts, false);
    if (err == KCR_OK && path.oom)
        err = kcr__fail(KCR_ERR_NOMEM, "out of memory building a write request");
    if (err == KCR_OK) {
        kcr__http_req req = {.method = method,
                             .path = path.s,
                             .body = json,
                             .body_len = len,
                             .cancel = opts->cancel};
        err = object_request(c, &req, out, st);
    }
    kcr__buf_free(&path);
    return err;
}

static kcr_err http_create(kcr_client *c, const kcr_resource *res, const char *ns,
                           const char *json, size_t len, const kcr_write_options *opts,
                           kcr_object **out, kcr_status *st)
{
    return write_object(c, "POST", res, ns, NULL, json, len, opts, out, st);
}

static kcr_err http_update(kcr_client *c, const kcr_resource *res, const char *ns,
                           const char *name, const char *json, size_t len,
                           const kcr_write_options *opts, kcr_object **out, kcr_status *st)
{
    return write_object(c, "PUT", res, ns, name, json, len, opts, out, st);
}

static kcr_err http_patch(kcr_client *c, const kcr_resource *res, const char *ns,
                          const char *name, kcr_patch_type type, const char *patch, size_t len,
                          const kcr_write_options *opts, kcr_object **out, kcr_status *st)
{
    static const char *const types[] = {
        "application/json-patch+json", "application/merge-patch+json",
        "application/strategic-merge-patch+json", "application/apply-patch+yaml"};
    if ((unsigned)type > KCR_PATCH_APPLY)
        return kcr__fail(KCR_ERR_INVALID, "unknown patch type %d", (int)type);
    kcr__buf path = {0};
    kcr_err err = kcr__resource_path(&path, res, ns, name, opts->subresource);
    write_query(&path, opts, type == KCR_PATCH_APPLY);
    if (err == KCR_OK && path.oom)
        err = kcr__fail(KCR_ERR_NOMEM, "out of memory building a patch request");
    if (err == KCR_OK) {
        kcr__http_req req = {.method = "PATCH",
                             .path = path.s,
                             .body = patch,
                             .body_len = len,
                             .content_type = types[type],
                             .cancel = opts->cancel,
                             .idempotent = type == KCR_PATCH_APPLY};
        err = object_request(c, &req, out, st);
    }
    kcr__buf_free(&path);
    return err;
}

/* DeleteOptions body. */
static char *delete_body(const kcr_delete_options *o)
{
    kcr__json *d = kcr__json_new(KCR__JSON_OBJECT);
    if (!d)
        return NULL;
    kcr__json_set_str(d, "kind", "DeleteOptions");
    kcr__json_set_str(d, "apiVersion", "v1");
    if (o->propagation_policy)
        kcr__json_set_str(d, "propagationPolicy", o->propagation_policy);
    if (o->has_grace_period)
        kcr__json_set(d, "gracePeriodSeconds",
                      kcr__json_new_int(kcr__ms_to_s_ceil(o->grace_period_ms)));
    if (o->dry_run) {
        kcr__json *a = kcr__json_new(KCR__JSON_ARRAY);
        if (a)
            kcr__json_append(a, kcr__json_new_str("All"));
        kcr__json_set(d, "dryRun", a);
    }
    if (o->precondition_uid || o->precondition_resource_version) {
        kcr__json *p = kcr__json_child_object(d, "preconditions");
        if (p && o->precondition_uid)
            kcr__json_set_str(p, "uid", o->precondition_uid);
        if (p && o->precondition_resource_version)
            kcr__json_set_str(p, "resourceVersion", o->precondition_resource_version);
    }
    char *out = NULL;
    kcr__json_dump(d, &out, NULL);
    kcr__json_free(d);
    return out;
}

static kcr_err http_delete(kcr_client *c, const kcr_resource *res, const char *ns,
                           const char *name, const kcr_delete_options *opts, kcr_object **out,
                           kcr_status *st)
{
    if (out)
        *out = NULL;
    kcr__buf path = {0};
    kcr_err err = kcr__resource_path(&path, res, ns, name, NULL);
    char *body = delete_body(opts);
    if (err == KCR_OK && (path.oom || !body))
        err = kcr__fail(KCR_ERR_NOMEM, "out of memory building a delete request");
    char *resp = NULL;
    size_t len = 0;
    if (err == KCR_OK) {
        kcr__http_req req = {.method = "DELETE",
                             .path = path.s,
                             .body = body,
                             .body_len = strlen(body),
                             .cancel = opts->cancel,
                             .idempotent = true};
        err = kcr__http_do(c, &req, &resp, &len, st);
    }
    if (err == KCR_OK && out && resp) {
        /* The server answers with the object, or a Status "Success". */
        kcr__json *doc = NULL;
        if (kcr__json_parse(resp, len, &doc) == KCR_OK &&
            !kcr__json_str(kcr__json_get(doc, "status")) &&
            kcr__json_str(kcr__json_path(doc, "metadata", "name", NULL)))
            err = decode_object(resp, len, out);
        kcr__json_free(doc);
    }
    free(resp);
    free(body);
    kcr__buf_free(&path);
    return err;
}

static kcr_err list_query(kcr__buf *path, const kcr_list_options *o, bool watch)
{
    if (watch)
        kcr__buf_query(path, "watch", "true");
    kcr__buf_query(path, "labelSelector", o->label_selector);
    kcr__buf_query(path, "fieldSelector", o->field_selector);
    kcr__buf_query(path, "resourceVersion", o->resource_version);
    kcr__buf_query(path, "resourceVersionMatch", o->resource_version_match);
    char num[32];
    if (!watch && o->limit > 0) {
        snprintf(num, sizeof num, "%lld", (long long)o->limit);
        kcr__buf_query(path, "limit", num);
    }
    if (!watch)
        kcr__buf_query(path, "continue", o->continue_token && *o->continue_token
                                             ? o->continue_token
                                             : NULL);
    if (o->timeout_ms > 0) {
        snprintf(num, sizeof num, "%lld", (long long)kcr__ms_to_s_ceil(o->timeout_ms));
        kcr__buf_query(path, "timeoutSeconds", num);
    }
    if (watch && o->allow_bookmarks)
        kcr__buf_query(path, "allowWatchBookmarks", "true");
    if (watch && o->send_initial_events)
        kcr__buf_query(path, "sendInitialEvents", "true");
    return path->oom ? kcr__fail(KCR_ERR_NOMEM, "out of memory building a list or watch query")
                     : KCR_OK;
}

static kcr_err list_sink(const char *buf, size_t len, void *ud)
{
    return kcr__list_decoder_feed(ud, buf, len);
}

static kcr_err http_list(kcr_client *c, const kcr_resource *res, const char *ns,
                         const kcr_list_options *opts, kcr_list_item_fn fn, void *ud,
                         kcr_list_meta *meta, kcr_status *st)
{
    http_client *hc = (http_client *)c;
    kcr__buf path = {0};
    kcr_err err = kcr__resource_path(&path, res, ns, NULL, NULL);
    if (err == KCR_OK)
        err = list_query(&path, opts, false);
    kcr__list_decoder *d = NULL;
    if (err == KCR_OK && !(d = kcr__list_decoder_new(hc->opts.max_item_bytes, fn, ud)))
        err = kcr__fail(KCR_ERR_NOMEM, "out of memory building a list request");
    if (err == KCR_OK) {
        kcr__http_req req = {.method = "GET",
                             .path = path.s,
                             .idempotent = true,
                             .streaming = true,
                             .idle_timeout_ms = hc->opts.request_timeout_ms,
                             .cancel = opts->cancel,
                             .accept = opts->metadata_only ? metadata_accept(true) : NULL,
                             .sink = list_sink,
                             .sink_ud = d};
        err = kcr__http_do(c, &req, NULL, NULL, st);
        if (err == KCR_OK)
            err = kcr__list_decoder_finish(d, meta);
    }
    kcr__list_decoder_free(d);
    kcr__buf_free(&path);
    return err;
}

static kcr_err watch_sink(const char *buf, size_t len, void *ud)
{
    return kcr__watch_decoder_feed(ud, buf, len);
}

static kcr_err http_watch(kcr_client *c, const kcr_resource *res, const char *ns,
                          const kcr_list_options *opts, kcr_watch_event_fn fn, void *ud,
                          kcr_status *st)
{
    http_client *hc = (http_client *)c;
    kcr__buf path = {0};
    kcr_err err = kcr__resource_path(&path, res, ns, NULL, NULL);
    if (err == KCR_OK)
        err = list_query(&path, opts, true);
    kcr__watch_decoder *d = NULL;
    if (err == KCR_OK && !(d = kcr__watch_decoder_new(hc->opts.max_item_bytes, fn, ud)))
        err = kcr__fail(KCR_ERR_NOMEM, "out of memory building a watch request");
    if (err == KCR_OK) {
        kcr__http_req req = {.method = "GET",
                             .path = path.s,
                             .idempotent = true,
                             .streaming = true,
                             .idle_timeout_ms = opts->idle_timeout_ms,
                             .uncompressed = true,
                             .cancel = opts->cancel,
                             .accept = opts->metadata_only ? metadata_accept(false) : NULL,
                             .sink = watch_sink,
                             .sink_ud = d};
        err = kcr__http_do(c, &req, NULL, NULL, st);
        if (err == KCR_OK)
            err = kcr__watch_decoder_finish(d);
        const kcr_status *es = kcr__watch_decoder_status(d);
        if (es) {
            kcr_status_copy(st, es);
            err = kcr__status_fail(es);
        }
    }
    kcr__watch_decoder_free(d);
    kcr__buf_free(&path);
    return err;
}

static kcr_err http_raw(kcr_client *c, const char *path, const char *body, size_t body_len,
                        const kcr_raw_options *opts, char **out, size_t *out_len, kcr_status *st)
{
    if (!path || path[0] != '/')
        return kcr__fail(KCR_ERR_INVALID, "raw request path must start with '/'");
    kcr__http_req req = {.method = opts->method,
                         .path = path,
                         .accept = opts->accept,
                         .content_type = opts->content_type,
                         .body = body,
                         .body_len = body_len,
                         .cancel = opts->cancel,
                         .idempotent = strcmp(opts->method, "GET") == 0};
    return kcr__http_do(c, &req, out, out_len, st);
}

/* ---- discovery ---------------------------------------------------------------------- */

#define AGGREGATED_ACCEPT                                                                          \
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"

static kcr_err get_json(kcr_client *c, const char *path, const char *accept, kcr_cancel *cancel,
                        kcr__json **doc, kcr_status *st)
{
    char *body = NULL;
    size_t len = 0;
    kcr_raw_options o = {
        .method = "GET", .accept = accept, .content_type = "application/json", .cancel = cancel};
    kcr_err err = http_raw(c, path, NULL, 0, &o, &body, &len, st);
    if (err == KCR_OK)
        err = kcr__json_parse(body, len, doc);
    free(body);
    return err;
}

static bool is_aggregated(const kcr__json *doc)
{
    const char *kind = kcr__json_str(kcr__json_get(doc, "kind"));
    return kind && strcmp(kind, "APIGroupDiscoveryList") == 0;
}

/* Legacy discovery: /api, /api/v1, /apis, /apis/G/V for every version. */
static kcr_err legacy_discovery(kcr_client *c, const kcr__json *api, kcr_cancel *cancel,
                                kcr__disc_table *t, kcr_status *st)
{
    kcr__json *versions = kcr__json_get(api, "versions");
    kcr_err err = KCR_OK;
    for (size_t i = 0; err == KCR_OK && versions && i < versions->n; i++) {
        const char *v = kcr__json_str(versions->vals[i]);
        if (!v)
            continue;
        kcr__buf path = {0};
        kcr__buf_printf(&path, "/api/%s", v);
        kcr__json *doc = NULL;
        err = path.oom ? kcr__fail(KCR_ERR_NOMEM, "out of memory reading discovery")
                       : get_json(c, path.s, NULL, cancel, &doc, st);
        if (err == KCR_OK)
            err = kcr__disc_parse_resource_list(doc, "", v, i == 0, t);
        kcr__json_free(doc);
        kcr__buf_free(&path);
    }
    kcr__json *apis = NULL;
    if (err == KCR_OK)
        err = get_json(c, "/apis", NULL, cancel, &apis, st);
    kcr__json *groups = kcr__json_get(apis, "groups");
    for (size_t i = 0; err == KCR_OK && groups && i < groups->n; i++) {
        kcr__json *g = groups->vals[i];
        const char *name = kcr__json_str(kcr__json_get(g, "name"));
        const char *pref = kcr__json_str(kcr__json_path(g, "preferredVersion", "version", NULL));
        kcr__json *gv = kcr__json_get(g, "versions");
        if (!name || !gv)
            continue;
        /* preferred version first, then the others */
        for (int pass = 0; pass < 2 && err == KCR_OK; pass++)
            for (size_t j = 0; err == KCR_OK && j < gv->n; j++) {
                const char *v = kcr__json_str(kcr__json_get(gv->vals[j], "version"));
                bool is_pref = v && pref && strcmp(v, pref) == 0;
                if (!v || (pass == 0) != is_pref)
                    continue;
                kcr__buf path = {0};
                kcr__buf_str(&path, "/apis/");
                kcr__buf_escape(&path, name);
                kcr__buf_str(&path, "/");
                kcr__buf_escape(&path, v);
                kcr__json *doc = NULL;
                err = path.oom ? kcr__fail(KCR_ERR_NOMEM, "out of memory reading discovery")
                               : get_json(c, path.s, NULL, cancel, &doc, st);
                if (err == KCR_ERR_NOT_FOUND || err == KCR_ERR_API) {
                    /* an aggregated API that is down: skip it, like kubectl */
                    kcr__log(KCR_LOG_WARN, "client", "discovery of %s/%s failed: %s", name, v,
                             kcr_last_error());
                    kcr_status_clear(st);
                    err = KCR_OK;
                } else if (err == KCR_OK) {
                    err = kcr__disc_parse_resource_list(doc, name, v, is_pref, t);
                }
                kcr__json_free(doc);
                kcr__buf_free(&path);
            }
    }
    kcr__json_free(apis);
    return err;
}

static kcr_err fetch_discovery(kcr_client *c, kcr_cancel *cancel, kcr__disc_table *t,
                               kcr_status *st)
{
    kcr__json *api = NULL, *apis = NULL;
    kcr_err err = get_json(c, "/api", AGGREGATED_ACCEPT, cancel, &api, st);
    if (err == KCR_OK && is_aggregated(api)) {
        err = kcr__disc_parse_aggregated(api, t);
        if (err == KCR_OK)
            err = get_json(c, "/apis", AGGREGATED_ACCEPT, cancel, &apis, st);
        if (err == KCR_OK && is_aggregated(apis))
            err = kcr__disc_parse_aggregated(apis, t);
        else if (err == KCR_OK)
            err = kcr__fail(KCR_ERR_PARSE, "/apis did not answer aggregated discovery");
        kcr__log(KCR_LOG_DEBUG, "client", "aggregated discovery: %zu resources", t->n);
    } else if (err == KCR_OK) {
        err = legacy_discovery(c, api, cancel, t, st);
        kcr__log(KCR_LOG_DEBUG, "client", "legacy discovery: %zu resources", t->n);
    }
    kcr__json_free(api);
    kcr__json_free(apis);
    return err;
}

static kcr_err http_resolve(kcr_client *c, const kcr__disc_query *q, bool refresh,
                            kcr_api_resource *out, kcr_status *st)
{
    http_client *hc = (http_client *)c;
    pthread_mutex_lock(&hc->disc_lock);
    kcr_err err = KCR_OK;
    /* Refresh at most once a second, however many misses ask for it. */
    if (!hc->disc_valid ||
        (refresh && kcr__now_ns() - hc->disc_fetched_ns > KCR_NS_PER_S)) {
        kcr__disc_table t = {0};
        err = fetch_discovery(c, q->cancel, &t, st);
        if (err == KCR_OK) {
            kcr__disc_clear(&hc->disc);
            hc->disc = t;
            hc->disc_valid = true;
            hc->disc_fetched_ns = kcr__now_ns();
        } else {
            kcr__disc_clear(&t);
        }
    }
    if (err == KCR_OK)
        err = kcr__disc_resolve(&hc->disc, q, out);
    pthread_mutex_unlock(&hc->disc_lock);
    return err;
}

static void http_invalidate(kcr_client *c)
{
    http_client *hc = (http_client *)c;
    pthread_mutex_lock(&hc->disc_lock);
    hc->disc_valid = false;
    pthread_mutex_unlock(&hc->disc_lock);
}

static void http_destroy(kcr_client *c)
{
    http_client *hc = (http_client *)c;
    for (size_t i = 0; i < hc->n_pool; i++) {
        curl_easy_cleanup(hc->pool[i].easy);
        curl_multi_cleanup(hc->pool[i].multi);
    }
    kcr__disc_clear(&hc->disc);
    kcr__auth_free(hc->auth);
    kcr_config_free(hc->cfg);
    free(hc->user_agent);
    free(hc->base.field_manager);
    free(hc->url_base);
    free(hc->connect_to);
    free(hc->host);
    pthread_mutex_destroy(&hc->lock);
    pthread_mutex_destroy(&hc->disc_lock);
    free(hc);
}

static const kcr__client_ops http_ops = {
    .get = http_get,
    .create = http_create,
    .update = http_update,
    .patch = http_patch,
    .del = http_delete,
    .list = http_list,
    .watch = http_watch,
    .resolve = http_resolve,
    .invalidate = http_invalidate,
    .raw = http_raw,
    .destroy = http_destroy,
};

/* Splits the server URL for tls-server-name: requests address the TLS name
 * and CONNECT_TO sends them to the real host. */
static kcr_err address(http_client *hc)
{
    const char *server = hc->cfg->server;
    const char *tls = hc->cfg->tls_server_name;
    const char *authority = strstr(server, "://") ? strstr(server, "://") + 3 : server;
    hc->host = kcr__memdup_str(authority, strcspn(authority, "/"));
    if (!hc->host)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory reading the server address");
    if (!tls || !*tls) {
        hc->url_base = strdup(server);
        return hc->url_base ? KCR_OK
                            : kcr__fail(KCR_ERR_NOMEM, "out of memory reading the server address");
    }
    const char *scheme_end = strstr(server, "://");
    const char *host = scheme_end + 3;
    const char *path = strchr(host, '/');
    size_t hostport_len = path ? (size_t)(path - host) : strlen(host);
    char hostport[512];
    if (hostport_len >= sizeof hostport)
        return kcr__fail(KCR_ERR_CONFIG, "server URL host too long");
    memcpy(hostport, host, hostport_len);
    hostport[hostport_len] = '\0';
    const char *port = strrchr(hostport, ':');
    if (port && strchr(port, ']'))
        port = NULL; /* the colon was inside an IPv6 literal */
    const char *default_port = strncmp(server, "https", 5) == 0 ? "443" : "80";
    char real_host[512];
    snprintf(real_host, sizeof real_host, "%.*s", port ? (int)(port - hostport) : (int)hostport_len,
             hostport);
    const char *portnum = port ? port + 1 : default_port;
    kcr__buf b = {0};
    kcr__buf_printf(&b, "%.*s://%s:%s%s", (int)(scheme_end - server), server, tls, portnum,
                    path ? path : "");
    hc->url_base = b.s;
    b = (kcr__buf){0};
    kcr__buf_printf(&b, "%s:%s:%s:%s", tls, portnum, real_host, portnum);
    hc->connect_to = b.s;
    return hc->url_base && hc->connect_to
               ? KCR_OK
               : kcr__fail(KCR_ERR_NOMEM, "out of memory reading the server address");
}

kcr_err kcr_client_new(const kcr_config *cfg, const kcr_client_options *opts, kcr_client **out)
{
    *out = NULL;
    if (!cfg)
        return kcr__fail(KCR_ERR_INVALID, "kcr_client_new: no config");
    if (strncmp(cfg->server, "http://", 7) == 0 && !(opts && opts->allow_insecure_http))
        return kcr__fail(KCR_ERR_CONFIG,
                         "server %s is plain HTTP: credentials and data would travel "
                         "unencrypted; use https, or set kcr_client_options.allow_insecure_http "
                         "to allow it",
                         cfg->server);
    if (opts && (opts->connect_timeout_ms > KCR__MAX_DURATION_MS ||
                 opts->request_timeout_ms > KCR__MAX_DURATION_MS))
        return kcr__fail(KCR_ERR_INVALID, "kcr_client_new: a timeout is above %lld ms",
                         (long long)KCR__MAX_DURATION_MS);
    pthread_once(&curl_once, init_curl);
    if (curl_init_result != CURLE_OK)
        return kcr__fail(KCR_ERR_TRANSPORT, "libcurl initialization failed");
    http_client *hc = calloc(1, sizeof *hc);
    if (!hc)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory making a client");
    hc->base.ops = &http_ops;
    if (opts)
        hc->opts = *opts;
    if (hc->opts.qps == 0)
        hc->opts.qps = DEFAULT_QPS;
    if (hc->opts.burst <= 0)
        hc->opts.burst = DEFAULT_BURST;
    if (hc->opts.connect_timeout_ms <= 0)
        hc->opts.connect_timeout_ms = DEFAULT_CONNECT_TIMEOUT_MS;
    if (hc->opts.request_timeout_ms <= 0)
        hc->opts.request_timeout_ms = DEFAULT_REQUEST_TIMEOUT_MS;
    if (hc->opts.max_retries == 0)
        hc->opts.max_retries = DEFAULT_MAX_RETRIES;
    if (hc->opts.max_item_bytes == 0)
        hc->opts.max_item_bytes = KCR__DEFAULT_MAX_ITEM_BYTES;
    hc->tokens = hc->opts.burst;
    hc->refill_ns = kcr__now_ns();
    pthread_mutex_init(&hc->lock, NULL);
    pthread_mutex_init(&hc->disc_lock, NULL);
    hc->cfg = kcr__config_dup(cfg);
    char ua[256];
    snprintf(ua, sizeof ua, "%s/%s kcr", kcr__program_name(), KCR_VERSION_STRING);
    hc->user_agent = strdup(opts && opts->user_agent ? opts->user_agent : ua);
    hc->opts.user_agent = NULL;
    hc->opts.field_manager = NULL; /* borrowed from the caller: copied below */
    if (opts && opts->field_manager && !(hc->base.field_manager = strdup(opts->field_manager)))
        hc->user_agent = (free(hc->user_agent), NULL);
    hc->auth = hc->cfg ? kcr__auth_new(hc->cfg) : NULL;
    hc->base.namespace = hc->cfg ? (char *)kcr_config_namespace(hc->cfg) : NULL;
    kcr_err err = hc->cfg && hc->user_agent && hc->auth
                      ? address(hc)
                      : kcr__fail(KCR_ERR_NOMEM, "out of memory making a client");
    if (err != KCR_OK) {
        http_destroy(&hc->base);
        return err;
    }
    *out = &hc->base;
    return KCR_OK;
}
