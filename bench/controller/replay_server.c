/* replay_server: a recorded ConfigMap stream served over loopback HTTP/1.1,
 * so bench_controller's path from socket to reconcile can be measured with
 * no apiserver (bench/controller/instructions runs it under callgrind).
 *
 *   replay_server gen DIR NAMESPACE OBJECTS EVENTS
 *       writes DIR/list.json: a ConfigMapList of OBJECTS ConfigMaps plus the
 *       sentinel "replay-end", as the apiserver sends one (items without
 *       kind/apiVersion, ~1 KiB of data each, managedFields of one Update),
 *       and DIR/events.json: one watch event per line, EVENTS MODIFIED
 *       events each to a different ConfigMap (data.replay "event", a second
 *       managedFields entry, rising resourceVersions), then one MODIFIED of
 *       the sentinel (data.replay "end"). Deterministic: the same arguments
 *       give the same bytes, and the list does not depend on EVENTS.
 *   replay_server serve DIR NAMESPACE [RATE]
 *       listens on 127.0.0.1 (a free port, printed as "port=<n>" on stdout)
 *       and answers, one thread per connection, keep-alive:
 *         GET .../namespaces/NS/configmaps (no watch=true)   DIR/list.json
 *         GET .../namespaces/NS/configmaps?watch=true...     a chunked stream
 *             of DIR/events.json, one chunk per event (as the apiserver
 *             flushes them), sent once the sentinel was read (below), at
 *             RATE events per second (default 0: as fast as the socket
 *             takes them); then the watch is held open until the client
 *             closes it
 *         GET .../namespaces/NS/configmaps/replay-end        the sentinel,
 *             and the cue to start the watch stream: bench_controller reads
 *             it once every listed ConfigMap was reconciled, so no event is
 *             merged in the workqueue with its object's first reconcile
 *         GET /api, /api/v1, /apis                            discovery (v1
 *             configmaps only)
 *         anything else                                       404 (logged)
 *       until killed.
 * Not part of the library; a bench tool (no TLS, no auth). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SENTINEL "replay-end"
#define BASE_RV 100000 /* resourceVersion of the first listed object */

static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("replay_server: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

/* ---- gen ------------------------------------------------------------------------------- */

/* A fixed pseudo-random sequence (64-bit LCG), so the files never change. */
static uint64_t rng_next(uint64_t *s)
{
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return *s >> 33;
}

static void uid_of(char out[37], unsigned i)
{
    uint64_t s = 0x9e3779b97f4a7c15ULL ^ i;
    snprintf(out, 37, "%08x-%04x-4%03x-a%03x-%012llx", (unsigned)rng_next(&s),
             (unsigned)(rng_next(&s) & 0xffff), (unsigned)(rng_next(&s) & 0xfff),
             (unsigned)(rng_next(&s) & 0xfff),
             (unsigned long long)((rng_next(&s) << 20 ^ rng_next(&s)) & 0xffffffffffffULL));
}

static void name_of(char out[32], unsigned i, unsigned objects)
{
    if (i == objects)
        snprintf(out, 32, "%s", SENTINEL);
    else
        snprintf(out, 32, "bench-%05u", i);
}

/* One ConfigMap as the apiserver serializes it. `event` adds kind and
 * apiVersion (watch events carry them, list items do not) and the second
 * managedFields entry an update leaves. */
static void write_configmap(FILE *f, const char *ns, unsigned i, unsigned objects, unsigned long rv,
                            const char *marker, bool event)
{
    char name[32], uid[37];
    name_of(name, i, objects);
    uid_of(uid, i);
    uint64_t s = 0x51ed270b27ULL * (i + 1);
    if (event)
        fputs("{\"kind\":\"ConfigMap\",\"apiVersion\":\"v1\",", f);
    else
        fputc('{', f);
    fprintf(
        f,
        "\"metadata\":{\"name\":\"%s\",\"namespace\":\"%s\",\"uid\":\"%s\","
        "\"resourceVersion\":\"%lu\",\"creationTimestamp\":\"2026-12-04T10:%02u:%02uZ\","
        "\"labels\":{\"app.kubernetes.io/name\":\"replay\",\"app.kubernetes.io/part-of\":"
        "\"kcr-bench\",\"shard\":\"s%u\"},"
        "\"annotations\":{\"kcr-bench/owner\":\"team-%u\"},"
        "\"managedFields\":[{\"manager\":\"load\",\"operation\":\"Update\",\"apiVersion\":\"v1\","
        "\"time\":\"2026-12-04T10:%02u:%02uZ\",\"fieldsType\":\"FieldsV1\",\"fieldsV1\":"
        "{\"f:data\":{\".\":{},\"f:app.properties\":{},\"f:config.yaml\":{},"
        "\"f:replay\":{},\"f:version\":{}},\"f:metadata\":{\"f:annotations\":{\".\":{},"
        "\"f:kcr-bench/owner\":{}},\"f:labels\":{\".\":{},\"f:app.kubernetes.io/name\":{},"
        "\"f:app.kubernetes.io/part-of\":{},\"f:shard\":{}}}}}",
        name, ns, uid, rv, i / 60 % 60, i % 60, i % 8, i % 50, i / 60 % 60, i % 60);
    if (event)
        fprintf(f,
                ",{\"manager\":\"replay\",\"operation\":\"Update\",\"apiVersion\":\"v1\","
                "\"time\":\"2026-12-04T11:%02u:%02uZ\",\"fieldsType\":\"FieldsV1\",\"fieldsV1\":"
                "{\"f:data\":{\"f:replay\":{}}}}",
                i / 60 % 60, i % 60);
    fputs("]},\"data\":{\"app.properties\":\"", f);
    /* 320 bytes of properties, 700 of YAML: ~1 KiB of data in all */
    for (int k = 0; k < 16; k++)
        fprintf(f, "setting.%02d=%08llx\\n", k, (unsigned long long)rng_next(&s));
    fputs("\",\"config.yaml\":\"", f);
    for (int k = 0; k < 20; k++)
        fprintf(f, "section%02d:\\n  key: value-%010llu\\n", k, (unsigned long long)rng_next(&s));
    fprintf(f, "\",\"replay\":\"%s\",\"version\":\"%u\"}}", marker,
            (unsigned)(rng_next(&s) % 1000));
}

static FILE *open_out(const char *dir, const char *file)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    FILE *f = fopen(path, "w");
    if (!f)
        die("%s: %s", path, strerror(errno));
    return f;
}

static void close_out(FILE *f, const char *file)
{
    if (ferror(f) || fclose(f) != 0)
        die("writing %s failed", file);
}

static int gen(const char *dir, const char *ns, unsigned objects, unsigned events)
{
    if (events > objects)
        die("gen: %u events for %u objects: each event must go to a different object", events,
            objects);
    if (events && objects % 7919 == 0)
        die("gen: the object count must not be a multiple of 7919");
    FILE *f = open_out(dir, "list.json");
    /* objects 0..objects-1 and the sentinel (index `objects`) */
    fprintf(f,
            "{\"kind\":\"ConfigMapList\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":"
            "\"%lu\"},\"items\":[",
            (unsigned long)BASE_RV + objects);
    for (unsigned i = 0; i <= objects; i++) {
        if (i)
            fputc(',', f);
        write_configmap(f, ns, i, objects, BASE_RV + i, "listed", false);
    }
    fputs("]}\n", f);
    close_out(f, "list.json");
    f = open_out(dir, "events.json");
    unsigned long rv = BASE_RV + objects + 1;
    for (unsigned e = 0; e <= events; e++) {
        /* a fixed permutation of the objects (7919 is prime, so coprime to
         * every count that is not a multiple of it), the sentinel last */
        unsigned i = e == events ? objects : (unsigned)((uint64_t)e * 7919 % objects);
        fputs("{\"type\":\"MODIFIED\",\"object\":", f);
        write_configmap(f, ns, i, objects, rv++, e == events ? "end" : "event", true);
        fputs("}\n", f);
    }
    close_out(f, "events.json");
    return 0;
}

/* ---- serve ----------------------------------------------------------------------------- */

static struct {
    const char *ns;
    unsigned rate; /* watch events per second; 0: no pacing */
    char *list;
    size_t list_len;
    char *events;
    size_t events_len;
    pthread_mutex_t mu;
    pthread_cond_t cond;
    bool go; /* the sentinel was read: watches may stream */
} srv = {.mu = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};

static char *slurp(const char *dir, const char *file, size_t *len)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    FILE *f = fopen(path, "rb");
    struct stat st;
    if (!f || fstat(fileno(f), &st) != 0)
        die("%s: %s", path, strerror(errno));
    char *b = malloc((size_t)st.st_size + 1);
    if (!b || fread(b, 1, (size_t)st.st_size, f) != (size_t)st.st_size)
        die("%s: read failed", path);
    fclose(f);
    b[st.st_size] = 0;
    *len = (size_t)st.st_size;
    return b;
}

static bool send_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        c += w;
        n -= (size_t)w;
    }
    return true;
}

static bool respond(int fd, int code, const char *reason, const char *body, size_t len)
{
    char head[256];
    int n = snprintf(head, sizeof head,
                     "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\n"
                     "Content-Length: %zu\r\n\r\n",
                     code, reason, len);
    return send_all(fd, head, (size_t)n) && send_all(fd, body, len);
}

/* The chunked watch stream; returns when the client closes the connection. */
static void stream_watch(int fd)
{
    static const char head[] = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                               "Transfer-Encoding: chunked\r\n\r\n";
    if (!send_all(fd, head, sizeof head - 1))
        return;
    pthread_mutex_lock(&srv.mu);
    while (!srv.go)
        pthread_cond_wait(&srv.cond, &srv.mu);
    pthread_mutex_unlock(&srv.mu);
    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    for (char *p = srv.events, *end = srv.events + srv.events_len; p < end;) {
        if (srv.rate) { /* paced: event i leaves at start + i / rate */
            next.tv_nsec += 1000000000L / srv.rate;
            if (next.tv_nsec >= 1000000000L) {
                next.tv_sec += next.tv_nsec / 1000000000L;
                next.tv_nsec %= 1000000000L;
            }
            while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL) == EINTR)
                ;
        }
        char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t len = nl ? (size_t)(nl - p) + 1 : (size_t)(end - p);
        char size[32];
        int n = snprintf(size, sizeof size, "%zx\r\n", len);
        if (!send_all(fd, size, (size_t)n) || !send_all(fd, p, len) || !send_all(fd, "\r\n", 2))
            return;
        p += len;
    }
    char sink[256];
    while (recv(fd, sink, sizeof sink, 0) > 0) /* held open until the client goes */
        ;
}

/* Answers one request line; false: close the connection. */
static bool handle(int fd, const char *method, const char *target)
{
    char prefix[512];
    snprintf(prefix, sizeof prefix, "/api/v1/namespaces/%s/configmaps", srv.ns);
    size_t pl = strlen(prefix);
    const char *query = strchr(target, '?');
    size_t path_len = query ? (size_t)(query - target) : strlen(target);
    bool ours = strcmp(method, "GET") == 0 && strncmp(target, prefix, pl) == 0;
    if (ours && path_len == pl && query && strstr(query, "watch=true")) {
        stream_watch(fd);
        return false;
    }
    if (ours && path_len == pl)
        return respond(fd, 200, "OK", srv.list, srv.list_len);
    if (ours && path_len == pl + 1 + strlen(SENTINEL) && target[pl] == '/' &&
        strncmp(target + pl + 1, SENTINEL, strlen(SENTINEL)) == 0) {
        char body[512];
        int n = snprintf(body, sizeof body,
                         "{\"kind\":\"ConfigMap\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":"
                         "\"%s\",\"namespace\":\"%s\",\"resourceVersion\":\"%d\"},"
                         "\"data\":{\"replay\":\"listed\"}}",
                         SENTINEL, srv.ns, BASE_RV);
        pthread_mutex_lock(&srv.mu);
        srv.go = true;
        pthread_cond_broadcast(&srv.cond);
        pthread_mutex_unlock(&srv.mu);
        return respond(fd, 200, "OK", body, (size_t)n);
    }
    /* discovery, which the manager reads once to learn the resource's scope */
    static const char api[] = "{\"kind\":\"APIVersions\",\"versions\":[\"v1\"],"
                              "\"serverAddressByClientCIDRs\":[]}";
    static const char api_v1[] =
        "{\"kind\":\"APIResourceList\",\"groupVersion\":\"v1\",\"resources\":[{\"name\":"
        "\"configmaps\",\"singularName\":\"configmap\",\"namespaced\":true,\"kind\":"
        "\"ConfigMap\",\"verbs\":[\"create\",\"delete\",\"deletecollection\",\"get\",\"list\","
        "\"patch\",\"update\",\"watch\"],\"shortNames\":[\"cm\"]}]}";
    static const char apis[] = "{\"kind\":\"APIGroupList\",\"apiVersion\":\"v1\",\"groups\":[]}";
    if (strcmp(method, "GET") == 0 && path_len == 4 && strncmp(target, "/api", 4) == 0)
        return respond(fd, 200, "OK", api, sizeof api - 1);
    if (strcmp(method, "GET") == 0 && path_len == 7 && strncmp(target, "/api/v1", 7) == 0)
        return respond(fd, 200, "OK", api_v1, sizeof api_v1 - 1);
    if (strcmp(method, "GET") == 0 && path_len == 5 && strncmp(target, "/apis", 5) == 0)
        return respond(fd, 200, "OK", apis, sizeof apis - 1);
    fprintf(stderr, "replay_server: 404 for %s %s\n", method, target);
    static const char nf[] = "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\","
                             "\"reason\":\"NotFound\",\"code\":404}";
    return respond(fd, 404, "Not Found", nf, sizeof nf - 1);
}

static void *connection(void *arg)
{
    int fd = (int)(intptr_t)arg;
    char buf[16384];
    size_t have = 0;
    for (;;) {
        char *end = have ? memmem(buf, have, "\r\n\r\n", 4) : NULL;
        if (!end) {
            if (have == sizeof buf) {
                fprintf(stderr, "replay_server: request headers over %zu bytes, closing\n",
                        sizeof buf);
                break;
            }
            ssize_t r = recv(fd, buf + have, sizeof buf - have, 0);
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0)
                break;
            have += (size_t)r;
            continue;
        }
        /* requests are GETs without a body: the headers are all there is */
        size_t used = (size_t)(end - buf) + 4;
        *end = 0;
        char method[16], target[8192];
        if (sscanf(buf, "%15s %8191s", method, target) != 2) {
            fprintf(stderr, "replay_server: malformed request, closing the connection\n");
            break;
        }
        if (!handle(fd, method, target))
            break;
        memmove(buf, buf + used, have - used);
        have -= used;
    }
    close(fd);
    return NULL;
}

static _Noreturn void serve(const char *dir, const char *ns, unsigned rate)
{
    srv.ns = ns;
    srv.rate = rate;
    srv.list = slurp(dir, "list.json", &srv.list_len);
    srv.events = slurp(dir, "events.json", &srv.events_len);
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof a;
    if (ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof a) != 0 || listen(ls, 16) != 0 ||
        getsockname(ls, (struct sockaddr *)&a, &alen) != 0)
        die("listen: %s", strerror(errno));
    printf("port=%u\n", ntohs(a.sin_port));
    fflush(stdout);
    for (;;) {
        int fd = accept(ls, NULL, NULL);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            die("accept: %s", strerror(errno));
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        pthread_t t;
        if (pthread_create(&t, NULL, connection, (void *)(intptr_t)fd) != 0)
            die("pthread_create failed");
        pthread_detach(t);
    }
}

static unsigned count_arg(const char *s)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno || !*s || *end || v > 1000000)
        die("bad count \"%s\" (0..1000000)", s);
    return (unsigned)v;
}

int main(int argc, char **argv)
{
    if (argc == 6 && strcmp(argv[1], "gen") == 0)
        return gen(argv[2], argv[3], count_arg(argv[4]), count_arg(argv[5]));
    if ((argc == 4 || argc == 5) && strcmp(argv[1], "serve") == 0)
        serve(argv[2], argv[3], argc == 5 ? count_arg(argv[4]) : 0);
    fprintf(stderr, "usage: replay_server gen DIR NAMESPACE OBJECTS EVENTS\n"
                    "       replay_server serve DIR NAMESPACE [RATE]\n");
    return 2;
}
