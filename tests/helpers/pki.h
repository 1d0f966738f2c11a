/* Test-only certificates made on the fly with OpenSSL: a CA, and leaf
 * certificates it signs (server or client, with a chosen subjectAltName and
 * validity window). Keys are fresh EC P-256 keys, never written to disk by
 * this helper. Not thread-safe per object; fine to use from one test thread. */
#ifndef KCR_TESTS_HELPERS_PKI_H
#define KCR_TESTS_HELPERS_PKI_H

#include <stdbool.h>

typedef struct test_pki {
    char *cert_pem; /* malloc'd PEM certificate */
    char *key_pem;  /* malloc'd PEM private key (PKCS#8) */
    void *x509;     /* X509 *, for signing */
    void *pkey;     /* EVP_PKEY * */
} test_pki;

/* A self-signed CA named `cn`. Aborts the test on failure. */
void test_pki_ca(test_pki *out, const char *cn);

/* A leaf certificate for `cn` signed by `ca`. `san` is "IP:127.0.0.1",
 * "DNS:name" or NULL; valid from now+not_before_s to now+not_after_s. */
void test_pki_leaf(test_pki *out, const test_pki *ca, const char *cn, const char *san,
                   long not_before_s, long not_after_s);

void test_pki_free(test_pki *p);

#endif
