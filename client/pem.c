/* PEM certificate and key checks with OpenSSL (see pem.h). Nothing here logs
 * or copies key material beyond OpenSSL's own parse, which is freed at once. */
#include "client/pem.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "core/error.h"

/* The reason of OpenSSL's most recent error, e.g. "bad base64 decode". */
static const char *ssl_reason(void)
{
    unsigned long e = ERR_peek_last_error();
    const char *r = e ? ERR_reason_error_string(e) : NULL;
    return r ? r : "unreadable";
}

/* True when a "-----BEGIN X-----" line other than CERTIFICATE appears. */
static bool foreign_block(const char *pem, size_t len)
{
    static const char begin[] = "-----BEGIN ", cert[] = "-----BEGIN CERTIFICATE-----";
    for (size_t i = 0; i + sizeof begin - 1 <= len; i++)
        if (memcmp(pem + i, begin, sizeof begin - 1) == 0 &&
            (len - i < sizeof cert - 1 || memcmp(pem + i, cert, sizeof cert - 1) != 0))
            return true;
    return false;
}

kcr_err kcr__pem_check_certs(const char *pem, size_t len, const char *what)
{
    if (!pem || len == 0 || len > INT32_MAX)
        return kcr__fail(KCR_ERR_CONFIG, "%s is empty", what);
    ERR_clear_error();
    BIO *b = BIO_new_mem_buf(pem, (int)len);
    if (!b)
        return kcr__fail(KCR_ERR_NOMEM, "%s: out of memory", what);
    kcr_err err = KCR_OK;
    int n = 0;
    for (;;) {
        X509 *x = PEM_read_bio_X509(b, NULL, NULL, NULL);
        if (!x)
            break;
        X509_free(x);
        n++;
    }
    unsigned long e = ERR_peek_last_error();
    bool clean_end = ERR_GET_LIB(e) == ERR_LIB_PEM && ERR_GET_REASON(e) == PEM_R_NO_START_LINE;
    if (n == 0)
        err = kcr__fail(KCR_ERR_CONFIG, "%s is not a PEM certificate (%s)", what,
                        clean_end ? "no BEGIN CERTIFICATE line" : ssl_reason());
    else if (!clean_end)
        err = kcr__fail(KCR_ERR_CONFIG, "%s: certificate %d is not valid PEM (%s)", what, n + 1,
                        ssl_reason());
    else if (foreign_block(pem, len))
        err = kcr__fail(KCR_ERR_CONFIG, "%s holds a PEM block that is not a certificate", what);
    BIO_free(b);
    ERR_clear_error();
    return err;
}

static EVP_PKEY *read_key(const char *key, size_t len)
{
    BIO *b = BIO_new_mem_buf(key, (int)len);
    EVP_PKEY *k = b ? PEM_read_bio_PrivateKey(b, NULL, NULL, NULL) : NULL;
    BIO_free(b);
    return k;
}

static X509 *read_cert(const char *cert, size_t len)
{
    BIO *b = BIO_new_mem_buf(cert, (int)len);
    X509 *x = b ? PEM_read_bio_X509(b, NULL, NULL, NULL) : NULL;
    BIO_free(b);
    return x;
}

kcr_err kcr__pem_check_pair(const char *cert, size_t cert_len, const char *key, size_t key_len,
                            const char *key_what, const char *cert_field)
{
    kcr_err err = KCR_OK;
    if (!key || key_len == 0 || key_len > INT32_MAX)
        return kcr__fail(KCR_ERR_CONFIG, "%s is empty", key_what);
    ERR_clear_error();
    EVP_PKEY *k = read_key(key, key_len);
    if (!k) {
        err = kcr__fail(KCR_ERR_CONFIG, "%s is not a PEM private key (%s)", key_what, ssl_reason());
        ERR_clear_error();
        return err;
    }
    X509 *x = read_cert(cert, cert_len);
    EVP_PKEY *pub = x ? X509_get0_pubkey(x) : NULL;
    if (!pub || EVP_PKEY_eq(pub, k) != 1)
        err = kcr__fail(KCR_ERR_CONFIG, "%s does not match its %s", key_what, cert_field);
    X509_free(x);
    EVP_PKEY_free(k);
    ERR_clear_error();
    return err;
}
