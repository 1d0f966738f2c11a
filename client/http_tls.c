/* TLS failures explained: which certificate check failed, against which
 * trust anchor, for which cluster, in words a person can act on. */
#include <openssl/x509_vfy.h>
#include <stdio.h>
#include <string.h>

#include "client/config_impl.h"
#include "client/http_curl.h"
#include "core/error.h"

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

kcr_err kcr__tls_classify(const kcr_config *cfg, const char *url_base, CURLcode rc, long vr,
                          const char *detail, const kcr__http_req *req)
{
    char cluster[300], host[300], ca[400];
    if (cfg->cluster)
        snprintf(cluster, sizeof cluster, "cluster \"%s\"", cfg->cluster);
    else
        snprintf(cluster, sizeof cluster, "the in-cluster API server");
    host_of(url_base, host, sizeof host);
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
