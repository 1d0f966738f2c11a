/* Internal: the libcurl-facing pieces of the transport (http_transport.c)
 * that live in their own files: the redacting trace and the TLS error
 * classification. */
#ifndef KCR_CLIENT_HTTP_CURL_H
#define KCR_CLIENT_HTTP_CURL_H

#include <curl/curl.h>

#include "client/http_transport.h"
#include "kcr/config.h"

/* CURLOPT_DEBUGFUNCTION: libcurl's verbose output (text and header lines,
 * not bodies or TLS records) to the log at TRACE, the value of every
 * credential header (Authorization, Cookie ...) replaced by "<redacted>". */
int kcr__curl_trace(CURL *h, curl_infotype type, char *data, size_t size, void *ud);

/* TLS failures that the same configuration will meet again (plain HTTP on
 * an https:// URL, an expired or not yet valid certificate, a host name
 * mismatch, an unknown issuer ...) as KCR_ERR_TLS with a message naming the
 * request, the cluster and the trust anchor; KCR_OK when `rc` (with the
 * OpenSSL verify result `vr`) is not one of them. url_base is the URL
 * requests are addressed to (its host is the name checked). */
kcr_err kcr__tls_classify(const kcr_config *cfg, const char *url_base, CURLcode rc, long vr,
                          const char *detail, const kcr__http_req *req);

#endif
