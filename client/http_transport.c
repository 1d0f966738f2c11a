/* The HTTP client's transport: libcurl, one (easy, multi) handle pair per
 * in-flight request taken from a pool (so sequential requests reuse
 * connections; libcurl cannot share a connection cache between threads;
 * a pair idle for 90 s is closed), a
 * poll loop that wakes on the request's kcr_cancel, a token-bucket rate
 * limiter, retries on 429 / connection errors, and credentials from auth.c. */
#include <curl/curl.h>
#include <openssl/x509_vfy.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "client/client_impl.h"
#include "client/config_impl.h"
#include "client/decode.h"
#include "client/http.h"
#include "client/http_curl.h"
#include "client/http_transport.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "core/str.h"
#include "core/trace.h"
#include "kcr/version.h"

enum {
    DEFAULT_CONNECT_TIMEOUT_MS = 10000,
    DEFAULT_REQUEST_TIMEOUT_MS = 60000,
    DEFAULT_MAX_RETRIES = 5,
    MAX_POOLED = 8,
    IDLE_CLOSE_MS = 90000, /* as Go's http.Transport (IdleConnTimeout) */
    MAX_ERROR_BODY = 1 << 20,
    MAX_RETRY_AFTER_S = 30,
};
#define DEFAULT_QPS 50.0
#define DEFAULT_BURST 100

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

enum { MAX_WATCHED = 8 }; /* sockets of one transfer: connection(s), resolver */

/* What a pair's multi handle asked to be watched: its sockets
 * (CURLMOPT_SOCKETFUNCTION) and when it wants a timeout call
 * (CURLMOPT_TIMERFUNCTION). perform() polls these itself and tells libcurl
 * which socket is ready, so libcurl reads without polling the socket once
 * more first, as curl_multi_perform does on every call. Owned by its pair;
 * used only by the thread holding the pair. */
typedef struct watched {
    struct pollfd fds[MAX_WATCHED];
    int n;
    int64_t timer_ns; /* when libcurl wants its timeout call; INT64_MAX: never */
} watched;

/* One transfer's libcurl handles; the multi keeps the connection between
 * requests. The pool holds pairs by value: `watched` is on the heap so that
 * the address libcurl's callbacks hold stays put. */
typedef struct handle_pair {
    CURL *easy;
    CURLM *multi;
    watched *watched;
    int64_t idle_since_ns; /* when it went back to the pool */
} handle_pair;

struct kcr__transport {
    const kcr_client *owner; /* its request observer sees every attempt */
    kcr_config *cfg;
    kcr__auth *auth;
    kcr_client_options opts;
    char *user_agent;
    char *url_base;   /* scheme://host[:port][/prefix] as requests are addressed */
    char *connect_to; /* CURLOPT_CONNECT_TO entry for tls-server-name, or NULL */
    char *host;       /* the server's host[:port], for the request observer */

    pthread_mutex_t lock; /* guards the pool and the rate limiter */
    /* Idle pairs, a stack: the top is reused first, so the bottom has been
     * idle longest. A pair idle idle_close_ns or more is closed at the next
     * take or give. */
    handle_pair pool[MAX_POOLED];
    size_t n_pool;
    int64_t idle_close_ns;
    double tokens;
    int64_t refill_ns;
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_result;

static void init_curl(void)
{
    curl_init_result = curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* Waits for a token of the QPS/burst bucket (client-go's reservation style). */
static kcr_err rate_limit(kcr__transport *hc, kcr_cancel *cancel)
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

/* CURLMOPT_SOCKETFUNCTION: libcurl wants socket s watched for `what`. */
static int on_socket(CURL *easy, curl_socket_t s, int what, void *ud, void *socket_ud)
{
    (void)easy;
    (void)socket_ud;
    watched *w = ud;
    int i = 0;
    while (i < w->n && w->fds[i].fd != s)
        i++;
    if (what == CURL_POLL_REMOVE || !(what & CURL_POLL_INOUT)) { /* nothing to wait for */
        if (i < w->n)
            w->fds[i] = w->fds[--w->n];
        return 0;
    }
    if (i == w->n) {
        if (w->n == MAX_WATCHED)
            return -1; /* libcurl fails the transfer (CURLM_ABORTED_BY_CALLBACK) */
        w->n++;
    }
    w->fds[i] = (struct pollfd){.fd = s,
                                .events = (short)((what & CURL_POLL_IN ? POLLIN : 0) |
                                                  (what & CURL_POLL_OUT ? POLLOUT : 0))};
    return 0;
}

/* CURLMOPT_TIMERFUNCTION: libcurl wants its timeout call in ms (-1: none). */
static int on_timer(CURLM *multi, long ms, void *ud)
{
    (void)multi;
    watched *w = ud;
    w->timer_ns = ms < 0 ? INT64_MAX : kcr__now_ns() + (int64_t)ms * KCR_NS_PER_MS;
    return 0;
}

/* Frees a pair's handles; the multi first, as its cleanup may still call the
 * socket callback with `watched`. */
static void free_pair(handle_pair p)
{
    if (p.easy)
        curl_easy_cleanup(p.easy);
    if (p.multi)
        curl_multi_cleanup(p.multi);
    free(p.watched);
}

/* Lock held: moves the pairs idle for idle_close_ns or more out of the pool
 * into gone (the caller frees them without the lock); how many. A burst of
 * concurrent requests leaves up to MAX_POOLED pairs behind, each with its
 * connection, TLS state and buffers (some 260 KB); those the steady load no
 * longer takes go, as Go's transport closes an idle connection after 90 s. */
static size_t take_expired(kcr__transport *hc, handle_pair *gone)
{
    int64_t now = kcr__now_ns();
    size_t n = 0;
    while (n < hc->n_pool && now - hc->pool[n].idle_since_ns >= hc->idle_close_ns)
        n++;
    memcpy(gone, hc->pool, n * sizeof *gone);
    memmove(hc->pool, hc->pool + n, (hc->n_pool - n) * sizeof *hc->pool);
    hc->n_pool -= n;
    return n;
}

static void free_pairs(handle_pair *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free_pair(v[i]);
}

static kcr_err take_pair(kcr__transport *hc, handle_pair *out)
{
    handle_pair gone[MAX_POOLED];
    pthread_mutex_lock(&hc->lock);
    size_t n_gone = take_expired(hc, gone);
    bool pooled = hc->n_pool > 0;
    if (pooled)
        *out = hc->pool[--hc->n_pool];
    pthread_mutex_unlock(&hc->lock);
    free_pairs(gone, n_gone);
    if (pooled)
        return KCR_OK;
    out->easy = curl_easy_init();
    out->multi = curl_multi_init();
    out->watched = calloc(1, sizeof *out->watched);
    if (!out->easy || !out->multi || !out->watched) {
        free_pair(*out);
        return kcr__fail(KCR_ERR_NOMEM, "cannot create a libcurl handle");
    }
    out->watched->timer_ns = INT64_MAX;
    curl_multi_setopt(out->multi, CURLMOPT_SOCKETFUNCTION, on_socket);
    curl_multi_setopt(out->multi, CURLMOPT_SOCKETDATA, out->watched);
    curl_multi_setopt(out->multi, CURLMOPT_TIMERFUNCTION, on_timer);
    curl_multi_setopt(out->multi, CURLMOPT_TIMERDATA, out->watched);
    return KCR_OK;
}

static void give_pair(kcr__transport *hc, handle_pair p, bool reusable)
{
    curl_easy_reset(p.easy);
    handle_pair gone[MAX_POOLED];
    pthread_mutex_lock(&hc->lock);
    size_t n_gone = take_expired(hc, gone);
    if (reusable && hc->n_pool < MAX_POOLED) {
        p.idle_since_ns = kcr__now_ns();
        hc->pool[hc->n_pool++] = p;
        p.easy = NULL;
    }
    pthread_mutex_unlock(&hc->lock);
    free_pairs(gone, n_gone);
    if (p.easy)
        free_pair(p);
}

/* One transfer's state, shared with the libcurl callbacks. */
typedef struct xfer {
    kcr__transport *hc;
    CURL *easy;
    const kcr__http_req *req;
    long code;
    bool code_known;
    kcr__buf body;   /* buffered 2xx body (no sink) or error body */
    size_t dropped;  /* error-body bytes beyond MAX_ERROR_BODY */
    int retry_after; /* seconds, -1: none */
    int64_t last_byte_ns;
    kcr_err sink_err;
    bool delivered; /* the sink saw bytes */
    size_t body_at; /* bytes of a non-idempotent request's body handed to libcurl */
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
    kcr__trace_recv(x->last_byte_ns);
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

/* Configures the easy handle for one attempt. */
static kcr_err setup(kcr__transport *hc, CURL *e, const kcr__http_req *req, const char *url,
                     kcr__creds *creds, struct curl_slist **headers, xfer *x, char *errbuf)
{
    const kcr_config *cfg = hc->cfg;
    curl_easy_setopt(e, CURLOPT_URL, url);
    if (kcr__log_enabled(KCR_LOG_TRACE)) {
        curl_easy_setopt(e, CURLOPT_DEBUGFUNCTION, kcr__curl_trace);
        curl_easy_setopt(e, CURLOPT_VERBOSE, 1L);
    }
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
    curl_easy_setopt(e, CURLOPT_USERAGENT, hc->user_agent);
    /* Compressed watch streams arrive as one gzip member per flush, which
     * libcurl's decoder rejects; lists and single objects may be gzipped,
     * unless the options or the kubeconfig's cluster say not to. */
    if (!req->uncompressed && !hc->opts.disable_compression && !cfg->disable_compression)
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

/* The CURL_CSELECT_* bits for what poll() reported on a socket watched for
 * `events`. A hang-up or an error counts as ready in the watched direction:
 * libcurl's read or write then reports it with its own message. */
static int ready_bits(short events, short revents)
{
    int bits = 0;
    if ((events & POLLIN) && (revents & (POLLIN | POLLHUP | POLLERR)))
        bits |= CURL_CSELECT_IN;
    if ((events & POLLOUT) && (revents & (POLLOUT | POLLHUP | POLLERR)))
        bits |= CURL_CSELECT_OUT;
    return bits;
}

/* Runs one attempt: polls the sockets libcurl asked for and the request's
 * cancel fd, hands each ready socket to curl_multi_socket_action, and
 * checks the idle limit. Returns the curl code; *canceled / *idle say why
 * we stopped. */
static CURLcode perform(handle_pair *p, const kcr__http_req *req, xfer *x, bool *canceled,
                        bool *idle)
{
    *canceled = *idle = false;
    watched *w = p->watched;
    CURLcode result = CURLE_OK;
    int running = 1;
    /* Adding the handle sets libcurl's timer to "now": the first round below
     * makes the timeout call that starts the transfer. */
    CURLMcode mc = curl_multi_add_handle(p->multi, p->easy);
    int64_t idle_ns = req->idle_timeout_ms > 0 ? req->idle_timeout_ms * KCR_NS_PER_MS : 0;
    while (mc == CURLM_OK) {
        bool done = false;
        int left;
        CURLMsg *msg;
        while ((msg = curl_multi_info_read(p->multi, &left)))
            if (msg->msg == CURLMSG_DONE) {
                result = msg->data.result;
                done = true;
            }
        if (done || !running)
            break;
        if (kcr_cancel_triggered(req->cancel)) {
            *canceled = true;
            break;
        }
        int64_t now = kcr__now_ns();
        if (idle_ns && now - x->last_byte_ns > idle_ns) {
            *idle = true;
            break;
        }
        int64_t wait_ns = 1000 * KCR_NS_PER_MS;
        if (idle_ns && x->last_byte_ns + idle_ns - now < wait_ns)
            wait_ns = x->last_byte_ns + idle_ns - now;
        if (w->timer_ns - now < wait_ns)
            wait_ns = w->timer_ns - now;
        /* A copy: the socket callback changes w->fds during the actions. */
        struct pollfd fds[MAX_WATCHED + 1];
        int n_curl = w->n, n = n_curl;
        memcpy(fds, w->fds, (size_t)n_curl * sizeof *fds);
        if (req->cancel)
            fds[n++] = (struct pollfd){.fd = req->cancel->fds[0], .events = POLLIN};
        int ready = wait_ns > 0 ? poll(fds, (nfds_t)n,
                                       (int)((wait_ns + KCR_NS_PER_MS - 1) / KCR_NS_PER_MS))
                                : 0; /* libcurl's timer is due: no wait */
        for (int i = 0; ready > 0 && i < n_curl && mc == CURLM_OK; i++) {
            int bits = ready_bits(fds[i].events, fds[i].revents);
            if (bits)
                mc = curl_multi_socket_action(p->multi, fds[i].fd, bits, &running);
            else if (fds[i].revents & POLLNVAL) /* closed without a word: stop watching it */
                on_socket(p->easy, fds[i].fd, CURL_POLL_REMOVE, w, NULL);
        }
        /* libcurl's timer is one-shot: it sets it again if it wants another
         * call. A wait that ended with nothing ready makes the call too, so a
         * timer libcurl left unchanged cannot stall the transfer. */
        if (mc == CURLM_OK && (ready == 0 || kcr__now_ns() >= w->timer_ns)) {
            w->timer_ns = INT64_MAX;
            mc = curl_multi_socket_action(p->multi, CURL_SOCKET_TIMEOUT, 0, &running);
        }
    }
    if (mc != CURLM_OK)
        result = CURLE_FAILED_INIT;
    curl_multi_remove_handle(p->multi, p->easy);
    return result;
}

kcr_err kcr__transport_do(kcr__transport *hc, const kcr__http_req *req, char **out, size_t *out_len,
                          kcr_status *st)
{
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
        xfer x = {
            .hc = hc, .easy = p.easy, .req = req, .retry_after = -1, .last_byte_ns = kcr__now_ns()};
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
            kcr__client_observe(hc->owner, req->method, hc->host, (int)x.code, start_ns);
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
            err = kcr__tls_classify(hc->cfg, hc->url_base, rc, verify_result, detail, req);
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
            kcr__log(KCR_LOG_INFO, "client", "401 from %s %s: refreshing credentials", req->method,
                     req->path);
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

/* Splits the server URL for tls-server-name: requests address the TLS name
 * and CONNECT_TO sends them to the real host. */
static kcr_err address(kcr__transport *hc)
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

kcr_err kcr__transport_new(const kcr_config *cfg, const kcr_client_options *opts,
                           const kcr_client *owner, kcr__transport **out)
{
    *out = NULL;
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
    kcr__transport *hc = calloc(1, sizeof *hc);
    if (!hc)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory making a client");
    hc->owner = owner;
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
    hc->idle_close_ns = (int64_t)IDLE_CLOSE_MS * KCR_NS_PER_MS;
    pthread_mutex_init(&hc->lock, NULL);
    hc->cfg = kcr__config_dup(cfg);
    char ua[256];
    snprintf(ua, sizeof ua, "%s/%s kcr", kcr__program_name(), KCR_VERSION_STRING);
    hc->user_agent = strdup(opts && opts->user_agent ? opts->user_agent : ua);
    hc->opts.user_agent = NULL;
    hc->opts.field_manager = NULL; /* borrowed from the caller; the client keeps a copy */
    hc->auth = hc->cfg ? kcr__auth_new(hc->cfg) : NULL;
    kcr_err err = hc->cfg && hc->user_agent && hc->auth
                      ? address(hc)
                      : kcr__fail(KCR_ERR_NOMEM, "out of memory making a client");
    if (err != KCR_OK) {
        kcr__transport_free(hc);
        return err;
    }
    *out = hc;
    return KCR_OK;
}

void kcr__transport_set_idle_close(kcr__transport *t, int64_t ms)
{
    pthread_mutex_lock(&t->lock);
    t->idle_close_ns = ms * KCR_NS_PER_MS;
    pthread_mutex_unlock(&t->lock);
}

void kcr__transport_free(kcr__transport *hc)
{
    if (!hc)
        return;
    for (size_t i = 0; i < hc->n_pool; i++)
        free_pair(hc->pool[i]);
    kcr__auth_free(hc->auth);
    kcr_config_free(hc->cfg);
    free(hc->user_agent);
    free(hc->url_base);
    free(hc->connect_to);
    free(hc->host);
    pthread_mutex_destroy(&hc->lock);
    free(hc);
}

const kcr_client_options *kcr__transport_options(const kcr__transport *t)
{
    return &t->opts;
}

const kcr_config *kcr__transport_config(const kcr__transport *t)
{
    return t->cfg;
}
