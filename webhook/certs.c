/* Development certificates: a self-signed CA kept in the directory and a
 * serving pair it signs (ECDSA P-256, SHA-256), written atomically, and the
 * CA as a caBundle value. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>

#include "core/error.h"
#include "webhook/webhook_internal.h"

/* Writes `data` to dir/name through a temporary file and a rename. */
static kcr_err write_file(const char *dir, const char *name, const char *data, size_t len,
                          mode_t mode)
{
    char path[4096], tmp[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    snprintf(tmp, sizeof tmp, "%s/.%s.tmp%ld", dir, name, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    if (fd < 0)
        return kcr__fail(KCR_ERR_IO, "writing %s: %s", tmp, strerror(errno));
    size_t off = 0;
    while (off < len) {
        ssize_t n = write(fd, data + off, len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            int e = errno;
            close(fd);
            unlink(tmp);
            return kcr__fail(KCR_ERR_IO, "writing %s: %s", tmp, strerror(e));
        }
        off += (size_t)n;
    }
    if (fsync(fd) != 0 || close(fd) != 0 || rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return kcr__fail(KCR_ERR_IO, "writing %s: %s", path, strerror(e));
    }
    return KCR_OK;
}

static kcr_err pem_out(BIO *bio, char **out, size_t *len)
{
    char *p;
    long n = BIO_get_mem_data(bio, &p);
    *out = n > 0 ? malloc((size_t)n + 1) : NULL;
    if (!*out)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory");
    memcpy(*out, p, (size_t)n);
    (*out)[n] = '\0';
    *len = (size_t)n;
    return KCR_OK;
}

static kcr_err write_pem(const char *dir, const char *name, X509 *cert, EVP_PKEY *key)
{
    BIO *bio = BIO_new(BIO_s_mem());
    bool ok = bio && (cert ? PEM_write_bio_X509(bio, cert)
                           : PEM_write_bio_PrivateKey(bio, key, NULL, NULL, 0, NULL, NULL));
    char *pem = NULL;
    size_t len = 0;
    kcr_err err = ok ? pem_out(bio, &pem, &len) : kcr__fail(KCR_ERR_NOMEM, "PEM encoding failed");
    BIO_free(bio);
    if (!err)
        err = write_file(dir, name, pem, len, cert ? 0644 : 0600);
    free(pem);
    return err;
}

static bool add_ext(X509 *cert, X509 *issuer, int nid, const char *value)
{
    X509V3_CTX ctx;
    X509V3_set_ctx(&ctx, issuer, cert, NULL, NULL, 0);
    X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
    bool ok = ext && X509_add_ext(cert, ext, -1) == 1;
    X509_EXTENSION_free(ext);
    return ok;
}

/* A certificate for `key` named `cn`, signed by issuer/issuer_key (itself
 * when issuer is NULL). */
static X509 *make_cert(EVP_PKEY *key, const char *cn, X509 *issuer, EVP_PKEY *issuer_key,
                       int64_t valid_ms, const char *san)
{
    X509 *c = X509_new();
    unsigned char serial[16];
    BIGNUM *bn = NULL;
    bool ok = c && RAND_bytes(serial, sizeof serial) == 1;
    serial[0] &= 0x7f;
    ok = ok && (bn = BN_bin2bn(serial, sizeof serial, NULL)) != NULL &&
         BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(c)) != NULL;
    BN_free(bn);
    ok = ok && X509_set_version(c, 2) == 1 &&
         X509_gmtime_adj(X509_getm_notBefore(c), -3600) != NULL &&
         X509_gmtime_adj(X509_getm_notAfter(c), (long)(valid_ms / 1000)) != NULL &&
         X509_set_pubkey(c, key) == 1;
    X509_NAME *name = ok ? X509_get_subject_name(c) : NULL;
    ok = ok && X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, (const unsigned char *)cn,
                                          -1, -1, 0) == 1;
    ok = ok && X509_set_issuer_name(c, issuer ? X509_get_subject_name(issuer) : name) == 1;
    X509 *iss = issuer ? issuer : c;
    if (ok && !issuer)
        ok = add_ext(c, iss, NID_basic_constraints, "critical,CA:TRUE") &&
             add_ext(c, iss, NID_key_usage, "critical,keyCertSign,cRLSign,digitalSignature") &&
             add_ext(c, iss, NID_subject_key_identifier, "hash");
    if (ok && issuer)
        ok = add_ext(c, iss, NID_basic_constraints, "critical,CA:FALSE") &&
             add_ext(c, iss, NID_key_usage, "critical,digitalSignature,keyEncipherment") &&
             add_ext(c, iss, NID_ext_key_usage, "serverAuth") &&
             add_ext(c, iss, NID_authority_key_identifier, "keyid") &&
             add_ext(c, iss, NID_subject_alt_name, san);
    ok = ok && X509_sign(c, issuer_key ? issuer_key : key, EVP_sha256()) > 0;
    if (!ok) {
        X509_free(c);
        return NULL;
    }
    return c;
}

/* Loads dir/ca.crt and dir/ca.key when both exist. */
static bool load_ca(const char *dir, X509 **ca, EVP_PKEY **key)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/ca.crt", dir);
    FILE *f = fopen(path, "r");
    *ca = f ? PEM_read_X509(f, NULL, NULL, NULL) : NULL;
    if (f)
        fclose(f);
    snprintf(path, sizeof path, "%s/ca.key", dir);
    f = fopen(path, "r");
    *key = f ? PEM_read_PrivateKey(f, NULL, NULL, NULL) : NULL;
    if (f)
        fclose(f);
    if (*ca && *key && X509_check_private_key(*ca, *key) == 1)
        return true;
    X509_free(*ca);
    EVP_PKEY_free(*key);
    *ca = NULL;
    *key = NULL;
    return false;
}

/* "DNS:a,DNS:b,IP:127.0.0.1" */
static char *san_list(const kcr_webhook_certs_options *o)
{
    size_t cap = 32;
    for (size_t i = 0; i < o->n_dns_names; i++)
        cap += strlen(o->dns_names[i]) + 6;
    for (size_t i = 0; i < o->n_ip_addresses; i++)
        cap += strlen(o->ip_addresses[i]) + 5;
    char *s = calloc(1, cap);
    if (!s)
        return NULL;
    for (size_t i = 0; i < o->n_dns_names; i++)
        sprintf(s + strlen(s), "%sDNS:%s", *s ? "," : "", o->dns_names[i]);
    for (size_t i = 0; i < o->n_ip_addresses; i++)
        sprintf(s + strlen(s), "%sIP:%s", *s ? "," : "", o->ip_addresses[i]);
    if (!*s)
        strcpy(s, "IP:127.0.0.1");
    return s;
}

kcr_err kcr_webhook_generate_certs(const char *dir, const kcr_webhook_certs_options *opts,
                                   char **ca_bundle)
{
    kcr_webhook_certs_options none = {0};
    const kcr_webhook_certs_options *o = opts ? opts : &none;
    if (ca_bundle)
        *ca_bundle = NULL;
    if (!dir)
        return kcr__fail(KCR_ERR_INVALID, "kcr_webhook_generate_certs: dir is NULL");
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        return kcr__fail(KCR_ERR_IO, "creating %s: %s", dir, strerror(errno));
    int64_t valid = o->valid_ms > 0 ? o->valid_ms : INT64_C(365) * 24 * 3600 * 1000;
    X509 *ca = NULL, *leaf = NULL;
    EVP_PKEY *ca_key = NULL, *key = NULL;
    kcr_err err = KCR_OK;
    if (!load_ca(dir, &ca, &ca_key)) {
        ca_key = EVP_EC_gen("P-256");
        ca = ca_key ? make_cert(ca_key, "kcr-webhook-ca", NULL, NULL,
                                valid * 10, NULL) : NULL;
        if (!ca)
            err = kcr__fail(KCR_ERR_NOMEM, "creating the webhook CA failed");
        if (!err)
            err = write_pem(dir, "ca.key", NULL, ca_key);
        if (!err)
            err = write_pem(dir, "ca.crt", ca, NULL);
    }
    char *san = err ? NULL : san_list(o);
    const char *cn = o->n_dns_names ? o->dns_names[0] : "kcr-webhook";
    if (!err) {
        key = EVP_EC_gen("P-256");
        leaf = key && san ? make_cert(key, cn, ca, ca_key, valid, san) : NULL;
        if (!leaf)
            err = kcr__fail(KCR_ERR_NOMEM, "creating the serving certificate failed");
    }
    /* the key first: a server polling between the two renames refuses the
     * mismatched pair once and loads the matched one on its next look */
    if (!err)
        err = write_pem(dir, "tls.key", NULL, key);
    if (!err)
        err = write_pem(dir, "tls.crt", leaf, NULL);
    if (!err && ca_bundle) {
        BIO *bio = BIO_new(BIO_s_mem());
        char *pem = NULL;
        size_t len = 0;
        err = bio && PEM_write_bio_X509(bio, ca) ? pem_out(bio, &pem, &len)
                                                 : kcr__fail(KCR_ERR_NOMEM, "PEM encoding failed");
        BIO_free(bio);
        if (!err) {
            *ca_bundle = malloc(4 * ((len + 2) / 3) + 1);
            if (*ca_bundle)
                EVP_EncodeBlock((unsigned char *)*ca_bundle, (unsigned char *)pem, (int)len);
            else
                err = kcr__fail(KCR_ERR_NOMEM, "out of memory");
        }
        free(pem);
    }
    free(san);
    X509_free(ca);
    X509_free(leaf);
    EVP_PKEY_free(ca_key);
    EVP_PKEY_free(key);
    return err;
}
