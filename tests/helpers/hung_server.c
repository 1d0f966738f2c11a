/* The hung loopback server (see hung_server.h). */
#include "helpers/hung_server.h"

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"

#define MAX_CONNS 64

struct hung_server {
    int fd, port;
    pthread_t thread;
    atomic_bool stopping;
    atomic_int requests;
    kcr_config *config;
    int conns[MAX_CONNS];
    char seen[MAX_CONNS][4]; /* the last bytes read, to find "\r\n\r\n" across reads */
};

/* Counts each header end ("\r\n\r\n") in what arrives on connection i. */
static bool drain(hung_server *s, int i)
{
    char buf[4096];
    ssize_t n = recv(s->conns[i], buf, sizeof buf, 0);
    if (n <= 0)
        return false;
    for (ssize_t k = 0; k < n; k++) {
        memmove(s->seen[i], s->seen[i] + 1, 3);
        s->seen[i][3] = buf[k];
        if (memcmp(s->seen[i], "\r\n\r\n", 4) == 0)
            atomic_fetch_add(&s->requests, 1);
    }
    return true;
}

static void *serve(void *arg)
{
    hung_server *s = arg;
    while (!atomic_load(&s->stopping)) {
        struct pollfd p[MAX_CONNS + 1];
        int idx[MAX_CONNS + 1];
        int n = 0;
        p[n] = (struct pollfd){.fd = s->fd, .events = POLLIN};
        idx[n++] = -1;
        for (int i = 0; i < MAX_CONNS; i++)
            if (s->conns[i] >= 0) {
                p[n] = (struct pollfd){.fd = s->conns[i], .events = POLLIN};
                idx[n++] = i;
            }
        if (poll(p, (nfds_t)n, 50) <= 0)
            continue;
        for (int k = 0; k < n; k++) {
            if (!(p[k].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            if (idx[k] < 0) {
                int fd = accept(s->fd, NULL, NULL);
                int slot = -1;
                for (int i = 0; fd >= 0 && i < MAX_CONNS && slot < 0; i++)
                    if (s->conns[i] < 0)
                        slot = i;
                if (slot < 0) {
                    if (fd >= 0)
                        close(fd);
                    continue;
                }
                s->conns[slot] = fd;
                memset(s->seen[slot], 0, sizeof s->seen[slot]);
            } else if (!drain(s, idx[k])) {
                close(s->conns[idx[k]]);
                s->conns[idx[k]] = -1;
            }
        }
    }
    return NULL;
}

hung_server *hung_server_start(void)
{
    signal(SIGPIPE, SIG_IGN);
    hung_server *s = calloc(1, sizeof *s);
    cr_assert(s);
    for (int i = 0; i < MAX_CONNS; i++)
        s->conns[i] = -1;
    s->fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    cr_assert_eq(bind(s->fd, (struct sockaddr *)&a, sizeof a), 0);
    cr_assert_eq(listen(s->fd, 64), 0);
    socklen_t al = sizeof a;
    cr_assert_eq(getsockname(s->fd, (struct sockaddr *)&a, &al), 0);
    s->port = ntohs(a.sin_port);
    cr_assert_eq(pthread_create(&s->thread, NULL, serve, s), 0);
    char yaml[512];
    snprintf(yaml, sizeof yaml,
             "clusters: [{name: c, cluster: {server: 'http://127.0.0.1:%d'}}]\n"
             "users: [{name: u, user: {}}]\n"
             "contexts: [{name: x, context: {cluster: c, user: u, namespace: team}}]\n"
             "current-context: x\n",
             s->port);
    cr_assert_eq(kcr_config_parse_kubeconfig(yaml, strlen(yaml), NULL, NULL, &s->config), KCR_OK,
                 "%s", kcr_last_error());
    return s;
}

kcr_client *hung_server_client(hung_server *s, const kcr_client_options *opts)
{
    kcr_client_options o = opts ? *opts : (kcr_client_options){0};
    o.allow_insecure_http = true;
    kcr_client *c = NULL;
    cr_assert_eq(kcr_client_new(s->config, &o, &c), KCR_OK, "%s", kcr_last_error());
    return c;
}

int hung_server_requests(hung_server *s)
{
    return atomic_load(&s->requests);
}

bool hung_server_wait_requests(hung_server *s, int n)
{
    int64_t until = kcr__now_ns() + 10 * KCR_NS_PER_S;
    while (atomic_load(&s->requests) < n && kcr__now_ns() < until) {
        struct timespec ts = {0, 2 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return atomic_load(&s->requests) >= n;
}

void hung_server_stop(hung_server *s)
{
    if (!s)
        return;
    atomic_store(&s->stopping, true);
    pthread_join(s->thread, NULL);
    for (int i = 0; i < MAX_CONNS; i++)
        if (s->conns[i] >= 0)
            close(s->conns[i]);
    close(s->fd);
    kcr_config_free(s->config);
    free(s);
}
