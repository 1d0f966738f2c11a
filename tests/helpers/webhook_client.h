/* Test helper: POSTs to a kcr webhook server over TLS with libcurl, trusting
 * the CA that kcr_webhook_generate_certs wrote. One client keeps its
 * connection alive across requests. */
#ifndef KCR_TESTS_WEBHOOK_CLIENT_H
#define KCR_TESTS_WEBHOOK_CLIENT_H

#include <stddef.h>

typedef struct wh_client wh_client;

typedef struct wh_resp {
    long code;
    char *body; /* malloc'd, NUL-terminated; the caller frees */
    size_t len;
} wh_resp;

wh_client *wh_client_new(const char *cert_dir, int port);
void wh_client_free(wh_client *c);
/* POSTs body (len 0: strlen) with the content type (NULL: application/json). */
wh_resp wh_post(wh_client *c, const char *path, const char *body, size_t len,
                const char *content_type);
/* A GET, to check methods. */
wh_resp wh_get(wh_client *c, const char *path);
/* Gives up on a request after ms (default 20 s): a client going away. */
void wh_client_set_timeout(wh_client *c, long ms);
/* Connections curl opened so far (1 while keep-alive holds). */
long wh_client_connects(wh_client *c);

#endif
