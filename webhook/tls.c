/* The serving certificate: loaded into an SSL_CTX (TLS 1.2 minimum, no
 * renegotiation, HTTP/1.1 by ALPN), and reloaded when the files change, as
 * controller-runtime's certwatcher does: the files are polled (a stat of
 * each, which also follows the symlink swap of a mounted Secret), a changed
 * pair is loaded into a new context and used for new connections; a pair
 * that does not load (half written, key not matching, expired) is refused
 * with a log line and the old one stays. Open connections keep the context
 * they started with (SSL holds a reference). Loop 0 polls and swaps the
 * context; every loop takes it for its new connections, under ctx_mu. */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <openssl/err.h>
#include <openssl/x509.h>

#include "core/error.h"
#include "core/log.h"
#include "webhook/webhook_internal.h"

static const char *ssl_reason(void)
{
    unsigned long e = ERR_get_error();
    const char *r = e ? ERR_reason_error_string(e) : NULL;
    ERR_clear_error();
    return r ? r : "unknown error";
}

static int alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                       const unsigned char *in, unsigned int inlen, void *arg)
{
    (void)ssl, (void)arg;
    static const unsigned char http11[] = "\x08http/1.1";
    unsigned char *sel = NULL;
    if (SSL_select_next_proto(&sel, outlen, http11, sizeof http11 - 1, in, inlen) !=
        OPENSSL_NPN_NEGOTIATED)
        return SSL_TLSEXT_ERR_NOACK;
    *out = sel;
    return SSL_TLSEXT_ERR_OK;
}

kcr_err kcr__wh_tls_load(const char *cert_path, const char *key_path, SSL_CTX **out,
                         int64_t *not_after)
{
    *out = NULL;
    ERR_clear_error();
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (!ctx)
        return kcr__fail(KCR_ERR_NOMEM, "webhook TLS: %s", ssl_reason());
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE |
                                 SSL_OP_NO_COMPRESSION);
    SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
    SSL_CTX_set_alpn_select_cb(ctx, alpn_select, NULL);
    kcr_err err = KCR_OK;
    if (SSL_CTX_use_certificate_chain_file(ctx, cert_path) != 1)
        err = kcr__fail(KCR_ERR_TLS, "webhook certificate %s: %s", cert_path, ssl_reason());
    else if (SSL_CTX_use_PrivateKey_file(ctx, key_path, SSL_FILETYPE_PEM) != 1)
        err = kcr__fail(KCR_ERR_TLS, "webhook key %s: %s", key_path, ssl_reason());
    else if (SSL_CTX_check_private_key(ctx) != 1)
        err = kcr__fail(KCR_ERR_TLS, "webhook key %s does not match certificate %s", key_path,
                        cert_path);
    X509 *leaf = err ? NULL : SSL_CTX_get0_certificate(ctx);
    if (leaf) {
        time_t now = time(NULL);
        if (X509_cmp_time(X509_get0_notAfter(leaf), &now) <= 0)
            err = kcr__fail(KCR_ERR_TLS, "webhook certificate %s has expired", cert_path);
        struct tm tm;
        if (!err && ASN1_TIME_to_tm(X509_get0_notAfter(leaf), &tm) == 1)
            *not_after = (int64_t)timegm(&tm);
    }
    if (err) {
        SSL_CTX_free(ctx);
        return err;
    }
    *out = ctx;
    return KCR_OK;
}

static void file_id(const char *path, struct kcr__wh_file_id *id)
{
    struct stat st;
    memset(id, 0, sizeof *id);
    if (stat(path, &st) != 0)
        return;
    id->mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
    id->size = st.st_size;
    id->ino = st.st_ino;
    id->dev = st.st_dev;
}

static bool same_id(const struct kcr__wh_file_id *a, const struct kcr__wh_file_id *b)
{
    return a->mtime_ns == b->mtime_ns && a->size == b->size && a->ino == b->ino &&
           a->dev == b->dev;
}

static void arm(kcr_webhook_server *s)
{
    struct timeval tv = {.tv_sec = s->cert_poll_ms / 1000,
                         .tv_usec = (s->cert_poll_ms % 1000) * 1000};
    evtimer_add(s->cert_timer, &tv);
}

/* Loop: the poll. A pair is tried once per change of either file. */
static void on_poll(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    kcr_webhook_server *s = arg;
    struct kcr__wh_file_id c, k;
    file_id(s->cert_path, &c);
    file_id(s->key_path, &k);
    if (!same_id(&c, &s->cert_id) || !same_id(&k, &s->key_id)) {
        s->cert_id = c;
        s->key_id = k;
        SSL_CTX *ctx;
        int64_t not_after = 0;
        if (kcr__wh_tls_load(s->cert_path, s->key_path, &ctx, &not_after) == KCR_OK) {
            pthread_mutex_lock(&s->ctx_mu);
            SSL_CTX *old = s->ctx;
            s->ctx = ctx;
            pthread_mutex_unlock(&s->ctx_mu);
            SSL_CTX_free(old); /* connections on it hold their own reference */
            atomic_store(&s->cert_not_after, not_after);
            atomic_fetch_add(&s->n_reloads, 1);
            kcr__log(KCR_LOG_INFO, "webhook", "loaded the new serving certificate %s",
                     s->cert_path);
        } else {
            atomic_fetch_add(&s->n_reload_failures, 1);
            kcr__log(KCR_LOG_ERROR, "webhook",
                     "refusing the changed certificate pair, keeping the previous one: %s",
                     kcr_last_error());
        }
    }
    arm(s);
}

kcr_err kcr__wh_tls_start(kcr_webhook_server *s)
{
    file_id(s->cert_path, &s->cert_id);
    file_id(s->key_path, &s->key_id);
    int64_t not_after = 0;
    kcr_err err = kcr__wh_tls_load(s->cert_path, s->key_path, &s->ctx, &not_after);
    if (err)
        return err;
    atomic_store(&s->cert_not_after, not_after);
    s->cert_timer = evtimer_new(s->loops[0].base, on_poll, s);
    if (!s->cert_timer)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory");
    arm(s);
    return KCR_OK;
}

SSL *kcr__wh_tls_new_ssl(kcr_webhook_server *s)
{
    pthread_mutex_lock(&s->ctx_mu);
    SSL *ssl = SSL_new(s->ctx);
    pthread_mutex_unlock(&s->ctx_mu);
    return ssl;
}
