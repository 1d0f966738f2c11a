/* Internal: checks of PEM material from a kubeconfig or a credential plugin,
 * so a bad certificate or key is reported at load time with the entry that
 * holds it, instead of as an obscure TLS failure at the first request. */
#ifndef KCR_CLIENT_PEM_H
#define KCR_CLIENT_PEM_H

#include <stddef.h>

#include "kcr/error.h"

/* KCR_ERR_CONFIG unless `pem` holds one or more PEM certificates and nothing
 * else but whitespace. `what` names the data in the message, e.g.
 * "kubeconfig F: certificate-authority-data of cluster \"x\"". */
kcr_err kcr__pem_check_certs(const char *pem, size_t len, const char *what);

/* KCR_ERR_CONFIG unless `key` is a PEM private key and `cert` (already
 * checked with kcr__pem_check_certs) starts with the certificate of its
 * public key. `key_what` names the key as above; `cert_field` the
 * certificate's field ("client-certificate-data"). */
kcr_err kcr__pem_check_pair(const char *cert, size_t cert_len, const char *key, size_t key_len,
                            const char *key_what, const char *cert_field);

#endif
