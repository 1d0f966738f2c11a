/* Test certificates generated with OpenSSL (see pki.h). */
#include "helpers/pki.h"

#include <criterion/criterion.h>
#include <openssl/bio.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <stdlib.h>
#include <string.h>

static char *bio_string(BIO *b)
{
    char *data = NULL;
    long n = BIO_get_mem_data(b, &data);
    char *s = malloc((size_t)n + 1);
    cr_assert_not_null(s);
    memcpy(s, data, (size_t)n);
    s[n] = '\0';
    return s;
}

static EVP_PKEY *new_key(void)
{
    EVP_PKEY *k = EVP_EC_gen("P-256");
    cr_assert_not_null(k, "EC key generation failed");
    return k;
}

static void add_ext(X509 *cert, X509 *issuer, int nid, const char *value)
{
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, issuer, cert, NULL, NULL, 0);
    X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
    cr_assert_not_null(ext, "extension %d=%s", nid, value);
    X509_add_ext(cert, ext, -1);
    X509_EXTENSION_free(ext);
}

static void finish(test_pki *out, X509 *cert, EVP_PKEY *key, EVP_PKEY *signer)
{
    cr_assert(X509_sign(cert, signer, EVP_sha256()) > 0, "X509_sign failed");
    BIO *b = BIO_new(BIO_s_mem());
    PEM_write_bio_X509(b, cert);
    out->cert_pem = bio_string(b);
    BIO_free(b);
    b = BIO_new(BIO_s_mem());
    PEM_write_bio_PrivateKey(b, key, NULL, NULL, 0, NULL, NULL);
    out->key_pem = bio_string(b);
    BIO_free(b);
    out->x509 = cert;
    out->pkey = key;
}

static X509 *new_cert(const char *cn, EVP_PKEY *key, long not_before_s, long not_after_s)
{
    static long serial = 1;
    X509 *cert = X509_new();
    cr_assert_not_null(cert);
    X509_set_version(cert, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(cert), serial++);
    X509_gmtime_adj(X509_getm_notBefore(cert), not_before_s);
    X509_gmtime_adj(X509_getm_notAfter(cert), not_after_s);
    X509_set_pubkey(cert, key);
    X509_NAME *name = X509_get_subject_name(cert);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1, 0);
    return cert;
}

void test_pki_ca(test_pki *out, const char *cn)
{
    memset(out, 0, sizeof *out);
    EVP_PKEY *key = new_key();
    X509 *cert = new_cert(cn, key, -3600, 86400);
    X509_set_issuer_name(cert, X509_get_subject_name(cert));
    add_ext(cert, cert, NID_basic_constraints, "critical,CA:TRUE");
    add_ext(cert, cert, NID_key_usage, "critical,keyCertSign,cRLSign");
    add_ext(cert, cert, NID_subject_key_identifier, "hash");
    finish(out, cert, key, key);
}

void test_pki_leaf(test_pki *out, const test_pki *ca, const char *cn, const char *san,
                   long not_before_s, long not_after_s)
{
    memset(out, 0, sizeof *out);
    EVP_PKEY *key = new_key();
    X509 *cert = new_cert(cn, key, not_before_s, not_after_s);
    X509 *issuer = ca->x509;
    X509_set_issuer_name(cert, X509_get_subject_name(issuer));
    add_ext(cert, issuer, NID_basic_constraints, "critical,CA:FALSE");
    add_ext(cert, issuer, NID_key_usage, "critical,digitalSignature,keyEncipherment");
    add_ext(cert, issuer, NID_ext_key_usage, "serverAuth,clientAuth");
    add_ext(cert, issuer, NID_authority_key_identifier, "keyid:always");
    if (san)
        add_ext(cert, issuer, NID_subject_alt_name, san);
    finish(out, cert, key, ca->pkey);
}

void test_pki_free(test_pki *p)
{
    if (p->key_pem)
        memset(p->key_pem, 0, strlen(p->key_pem));
    free(p->cert_pem);
    free(p->key_pem);
    X509_free(p->x509);
    EVP_PKEY_free(p->pkey);
    memset(p, 0, sizeof *p);
}
