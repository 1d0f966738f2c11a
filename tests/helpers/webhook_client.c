#include "helpers/webhook_client.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct wh_client {
    CURL *curl;
    char ca[4096];
    int port;
    long connects;
    long timeout_ms;
};

static size_t on_body(char *p, size_t size, size_t n, void *ud)
{
    wh_resp *r = ud;
    char *b = realloc(r->body, r->len + size * n + 1);
    if (!b)
        return 0;
    memcpy(b + r->len, p, size * n);
    r->len += size * n;
    b[r->len] = '\0';
    r->body = b;
    return size * n;
}

wh_client *wh_client_new(const char *cert_dir, int port)
{
    wh_client *c = calloc(1, sizeof *c);
    c->curl = curl_easy_init();
    snprintf(c->ca, sizeof c->ca, "%s/ca.crt", cert_dir);
    c->port = port;
    return c;
}

void wh_client_free(wh_client *c)
{
    curl_easy_cleanup(c->curl);
    free(c);
}

static wh_resp perform(wh_client *c, const char *path, struct curl_slist *h)
{
    wh_resp r = {0};
    char url[256];
    snprintf(url, sizeof url, "https://127.0.0.1:%d%s", c->port, path);
    curl_easy_setopt(c->curl, CURLOPT_URL, url);
    curl_easy_setopt(c->curl, CURLOPT_CAINFO, c->ca);
    curl_easy_setopt(c->curl, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c->curl, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c->curl, CURLOPT_WRITEDATA, &r);
    curl_easy_setopt(c->curl, CURLOPT_TIMEOUT_MS, c->timeout_ms ? c->timeout_ms : 20000L);
    curl_easy_setopt(c->curl, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    CURLcode rc = curl_easy_perform(c->curl);
    if (rc != CURLE_OK)
        r.code = -(long)rc;
    else
        curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &r.code);
    long n = 0;
    curl_easy_getinfo(c->curl, CURLINFO_NUM_CONNECTS, &n);
    c->connects += n;
    if (!r.body)
        r.body = calloc(1, 1);
    return r;
}

wh_resp wh_post(wh_client *c, const char *path, const char *body, size_t len,
                const char *content_type)
{
    char ct[128];
    snprintf(ct, sizeof ct, "Content-Type: %s", content_type ? content_type : "application/json");
    struct curl_slist *h = curl_slist_append(NULL, ct);
    curl_easy_setopt(c->curl, CURLOPT_HTTPGET, 0L);
    curl_easy_setopt(c->curl, CURLOPT_POST, 1L);
    curl_easy_setopt(c->curl, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(len ? len : strlen(body)));
    wh_resp r = perform(c, path, h);
    curl_slist_free_all(h);
    return r;
}

wh_resp wh_get(wh_client *c, const char *path)
{
    curl_easy_setopt(c->curl, CURLOPT_HTTPGET, 1L);
    return perform(c, path, NULL);
}

long wh_client_connects(wh_client *c)
{
    return c->connects;
}

void wh_client_set_timeout(wh_client *c, long ms)
{
    c->timeout_ms = ms;
}
