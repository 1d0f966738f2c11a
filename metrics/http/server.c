/* kcr_health_server's lifecycle: one libmicrohttpd daemon per bound address
 * (one when metrics and probes share it), each on a socket we bind ourselves
 * (so failures name the address and errno), with a thread per connection:
 * a slow check holds only its own request, never /metrics. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "metrics/http/server.h"
#include "core/abi.h"
#include "core/error.h"
#include "core/log.h"

enum {
    MAX_CONNECTIONS = 64,  /* concurrent connections (so threads) per listener */
    IDLE_TIMEOUT_S = 30,   /* an idle keep-alive connection is closed after this */
};

static bool endpoint_on(const char *address)
{
    return address && *address && strcmp(address, "0") != 0;
}

static kcr_err copy_address(const char *in, char **out)
{
    *out = NULL;
    if (!endpoint_on(in))
        return KCR_OK;
    char host[256];
    int port;
    kcr_err err = kcr__http_parse_address(in, host, sizeof host, &port);
    if (err != KCR_OK)
        return err;
    if (!(*out = strdup(in)))
        return kcr__fail(KCR_ERR_NOMEM, "kcr_health_server_new: out of memory");
    return KCR_OK;
}

/* Fills s->listeners from the addresses (bound at start; what each serves
 * never changes after this). */
static void plan_listeners(kcr_health_server *s)
{
    bool shared = s->metrics_address && s->probe_address &&
                  strcmp(s->metrics_address, s->probe_address) == 0;
    if (s->metrics_address)
        s->listeners[s->n_listeners++] = (kcr__http_listener){
            .server = s, .address = s->metrics_address, .metrics = true, .probes = shared};
    if (s->probe_address && !shared)
        s->listeners[s->n_listeners++] = (kcr__http_listener){
            .server = s, .address = s->probe_address, .probes = true};
}

kcr_err (kcr_health_server_new)(size_t opts_size, const kcr_health_server_options *opts,
                                kcr_health_server **out)
{
    KCR__ABI_OPTS(kcr_health_server_options, opts, opts_size);
    if (!out)
        return kcr__fail(KCR_ERR_INVALID, "kcr_health_server_new: out is NULL");
    *out = NULL;
    static const kcr_health_server_options none;
    if (!opts)
        opts = &none;
    kcr_health_server *s = calloc(1, sizeof *s);
    if (!s)
        return kcr__fail(KCR_ERR_NOMEM, "kcr_health_server_new: out of memory");
    pthread_mutex_init(&s->lock, NULL);
    s->metrics = opts->metrics;
    kcr_err err = copy_address(opts->metrics_bind_address, &s->metrics_address);
    if (err == KCR_OK)
        err = copy_address(opts->probe_bind_address, &s->probe_address);
    if (err != KCR_OK) {
        kcr_health_server_free(s);
        return err;
    }
    plan_listeners(s);
    *out = s;
    return KCR_OK;
}

static void stop_listeners(kcr_health_server *s)
{
    for (size_t i = 0; i < s->n_listeners; i++) {
        if (s->listeners[i].daemon)
            MHD_stop_daemon(s->listeners[i].daemon); /* closes the listening socket */
        s->listeners[i].daemon = NULL;
        atomic_store(&s->listeners[i].port, 0);
    }
}

static kcr_err start_listener(kcr__http_listener *l)
{
    int fd, port;
    kcr_err err = kcr__http_listen(l->address, &fd, &port);
    if (err != KCR_OK)
        return err;
    l->daemon = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL, 0, NULL,
        NULL, kcr__http_route, l, MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)MAX_CONNECTIONS, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)IDLE_TIMEOUT_S,
        MHD_OPTION_END);
    if (!l->daemon) {
        close(fd);
        return kcr__fail(KCR_ERR_IO, "cannot serve on %s: libmicrohttpd failed to start",
                         l->address);
    }
    atomic_store(&l->port, port);
    kcr__log(KCR_LOG_INFO, "health", "serving %s%s%s on %s (port %d)",
             l->metrics ? "/metrics" : "", l->metrics && l->probes ? ", " : "",
             l->probes ? "/healthz, /readyz" : "", l->address, port);
    return KCR_OK;
}

kcr_err kcr_health_server_start(kcr_health_server *s)
{
    if (!s)
        return kcr__fail(KCR_ERR_INVALID, "kcr_health_server_start: NULL server");
    pthread_mutex_lock(&s->lock);
    if (s->started) {
        pthread_mutex_unlock(&s->lock);
        return kcr__fail(KCR_ERR_STATE, "the health server is already started");
    }
    kcr_err err = KCR_OK;
    for (size_t i = 0; i < s->n_listeners && err == KCR_OK; i++)
        err = start_listener(&s->listeners[i]);
    if (err != KCR_OK)
        stop_listeners(s);
    s->started = err == KCR_OK;
    pthread_mutex_unlock(&s->lock);
    return err;
}

static int port_of(const kcr_health_server *s, bool metrics)
{
    if (!s)
        return 0;
    for (size_t i = 0; i < s->n_listeners; i++) {
        const kcr__http_listener *l = &s->listeners[i];
        if (metrics ? l->metrics : l->probes)
            return atomic_load(&l->port);
    }
    return 0;
}

int kcr_health_server_metrics_port(const kcr_health_server *s)
{
    return port_of(s, true);
}

int kcr_health_server_probe_port(const kcr_health_server *s)
{
    return port_of(s, false);
}

void kcr_health_server_stop(kcr_health_server *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->lock);
    if (s->started) {
        stop_listeners(s);
        s->started = false;
    }
    pthread_mutex_unlock(&s->lock);
}

void kcr_health_server_free(kcr_health_server *s)
{
    if (!s)
        return;
    kcr_health_server_stop(s);
    kcr__health_checks_free(&s->healthz);
    kcr__health_checks_free(&s->readyz);
    free(s->metrics_address);
    free(s->probe_address);
    pthread_mutex_destroy(&s->lock);
    free(s);
}
