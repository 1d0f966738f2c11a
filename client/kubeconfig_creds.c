/* Credentials named by a kubeconfig: the CA bundle and the client
 * certificate and key, from inline base64 or a file, checked as PEM (and the
 * key against the certificate) when the config is loaded. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/kubeconfig_impl.h"
#include "client/pem.h"
#include "core/base64.h"
#include "core/error.h"

/* PEM material from either inline base64 data (preferred) or a file.
 * `owner` is e.g. "cluster \"x\"" and `field` the kubeconfig key without
 * "-data"; *used (may be NULL) receives the key that supplied it. */
static kcr_err load_pem(const char *data, const char *file, const char *dir, const char *field,
                        const char *kc_file, const char *owner, kcr__blob *out, char *used,
                        size_t used_size)
{
    if (used)
        snprintf(used, used_size, "%s", field);
    if (data && *data) {
        if (used)
            snprintf(used, used_size, "%s-data", field);
        kcr_err err = kcr__base64_decode(data, strlen(data), &out->data, &out->len);
        if (err != KCR_OK)
            return kcr__refail(KCR_ERR_CONFIG,
                               "kubeconfig %s: %s-data of %s is not valid base64: ", kc_file, field,
                               owner);
        return KCR_OK;
    }
    if (file && *file) {
        char *path = kcr__kc_resolve_path(dir, file);
        if (!path)
            return kcr__fail(KCR_ERR_NOMEM, "out of memory reading the kubeconfig");
        kcr_err err = kcr__read_file(path, KCR__MAX_CERT_FILE, field, out);
        free(path);
        if (err != KCR_OK)
            return kcr__refail(KCR_ERR_CONFIG, "kubeconfig %s: %s of %s: cannot read ", kc_file,
                               field, owner);
    }
    return KCR_OK;
}

/* Loads and checks the cluster's CA bundle: PEM certificates only. */
kcr_err kcr__kc_load_ca(const kcr__kc_cluster *cl, kcr__blob *out)
{
    char owner[300], used[64], what[1400];
    snprintf(owner, sizeof owner, "cluster \"%s\"", cl->name);
    kcr_err err = load_pem(cl->ca_data, cl->ca_file, cl->dir, "certificate-authority", cl->file,
                           owner, out, used, sizeof used);
    if (err != KCR_OK || !out->data)
        return err;
    snprintf(what, sizeof what, "kubeconfig %s: %s of %s", cl->file, used, owner);
    return kcr__pem_check_certs(out->data, out->len, what);
}

/* Loads and checks the user's client certificate and key: both or neither,
 * each valid PEM, and the key the certificate's. */
kcr_err kcr__kc_load_client_cert(const kcr__kc_user *us, kcr__blob *cert, kcr__blob *key)
{
    char owner[300], cert_used[64], key_used[64], what[1400];
    snprintf(owner, sizeof owner, "user \"%s\"", us->name);
    kcr_err err = load_pem(us->cert_data, us->cert_file, us->dir, "client-certificate", us->file,
                           owner, cert, cert_used, sizeof cert_used);
    if (err == KCR_OK)
        err = load_pem(us->key_data, us->key_file, us->dir, "client-key", us->file, owner, key,
                       key_used, sizeof key_used);
    if (err != KCR_OK)
        return err;
    if ((cert->len > 0) != (key->len > 0))
        return kcr__fail(KCR_ERR_CONFIG,
                         "kubeconfig %s: %s has %s without %s: client certificate and key must "
                         "be given together",
                         us->file, owner, cert->len ? cert_used : key_used,
                         cert->len ? "client-key(-data)" : "client-certificate(-data)");
    if (!cert->len)
        return KCR_OK;
    snprintf(what, sizeof what, "kubeconfig %s: %s of %s", us->file, cert_used, owner);
    err = kcr__pem_check_certs(cert->data, cert->len, what);
    if (err != KCR_OK)
        return err;
    snprintf(what, sizeof what, "kubeconfig %s: %s of %s", us->file, key_used, owner);
    return kcr__pem_check_pair(cert->data, cert->len, key->data, key->len, what, cert_used);
}
