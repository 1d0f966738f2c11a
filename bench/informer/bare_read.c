/* bare_read: the floor of an informer's initial sync, the same bytes read
 * with nothing done to them. One process, one request, on the libcurl kcr
 * links and with the transfer settings kcr's client uses (HTTP/2 over TLS;
 * gzip accepted on a LIST, not on a watch, as client/http_transport.c does),
 * no JSON parsing, no objects, no cache:
 *
 *   bare_read list   URL CA_FILE CERT_FILE KEY_FILE   reads the LIST to its end
 *   bare_read stream URL CA_FILE CERT_FILE KEY_FILE   reads a streaming list
 *       (watch with sendInitialEvents) up to the bookmark that carries the
 *       "k8s.io/initial-events-end" annotation, then hangs up
 *
 * prints "seconds=<s> bytes=<n> lines=<n> cpu_s=<s>" (lines: newlines seen,
 * one per watch event; the clock starts at main, as bench_informer's starts
 * before it loads the kubeconfig; cpu_s: user + sys of the process).
 * bench/informer/run puts it beside kcr's sync of the same namespace. Not a
 * test. */
#define _GNU_SOURCE /* memmem */
#include <curl/curl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>

#define MARKER "\"k8s.io/initial-events-end\":\"true\""

typedef struct reader {
    bool stream;              /* stop at the marker */
    bool found;               /* the marker was seen */
    size_t bytes, lines;      /* read so far */
    char tail[sizeof MARKER]; /* the stream's last bytes before this chunk: a marker */
    size_t tail_len;          /* may be split between two chunks */
} reader;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Whether MARKER ends within the last tail_len bytes before p plus p[0..n). */
static bool marker_in(reader *r, const char *p, size_t n)
{
    const size_t m = sizeof MARKER - 1;
    char joint[2 * sizeof MARKER];
    size_t head = n < m - 1 ? n : m - 1;
    memcpy(joint, r->tail, r->tail_len);
    memcpy(joint + r->tail_len, p, head);
    if (memmem(joint, r->tail_len + head, MARKER, m) || memmem(p, n, MARKER, m))
        return true;
    /* keep the last m - 1 bytes of the stream for the next chunk */
    if (n >= m - 1) {
        memcpy(r->tail, p + n - (m - 1), m - 1);
        r->tail_len = m - 1;
    } else {
        size_t keep = r->tail_len + n > m - 1 ? m - 1 - n : r->tail_len;
        memmove(r->tail, r->tail + r->tail_len - keep, keep);
        memcpy(r->tail + keep, p, n);
        r->tail_len = keep + n;
    }
    return false;
}

static size_t on_data(char *p, size_t size, size_t nmemb, void *ud)
{
    reader *r = ud;
    size_t n = size * nmemb;
    r->bytes += n;
    for (const char *q = p; (q = memchr(q, '\n', (size_t)(p + n - q))) != NULL; q++)
        r->lines++;
    if (r->stream && marker_in(r, p, n)) {
        r->found = true;
        return 0; /* hang up: the initial state has arrived */
    }
    return n;
}

int main(int argc, char **argv)
{
    double t0 = now_s();
    if (argc != 6 || (strcmp(argv[1], "list") != 0 && strcmp(argv[1], "stream") != 0)) {
        fprintf(stderr, "usage: bare_read list|stream URL CA_FILE CERT_FILE KEY_FILE\n");
        return 2;
    }
    reader r = {.stream = strcmp(argv[1], "stream") == 0};
    curl_global_init(CURL_GLOBAL_DEFAULT);
    CURL *c = curl_easy_init();
    if (!c)
        return 1;
    curl_easy_setopt(c, CURLOPT_URL, argv[2]);
    curl_easy_setopt(c, CURLOPT_CAINFO, argv[3]);
    curl_easy_setopt(c, CURLOPT_SSLCERT, argv[4]);
    curl_easy_setopt(c, CURLOPT_SSLKEY, argv[5]);
    curl_easy_setopt(c, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    if (!r.stream)
        curl_easy_setopt(c, CURLOPT_ACCEPT_ENCODING, "");
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &r);
    CURLcode rc = curl_easy_perform(c);
    long code = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    double secs = now_s() - t0;
    curl_easy_cleanup(c);
    curl_global_cleanup();
    bool ok = code == 200 && (r.stream ? r.found && rc == CURLE_WRITE_ERROR : rc == CURLE_OK);
    if (!ok) {
        fprintf(stderr, "bare_read: GET %s: %s, HTTP %ld%s\n", argv[2], curl_easy_strerror(rc), code,
                r.stream && !r.found ? ", no initial-events-end bookmark" : "");
        return 1;
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("seconds=%.3f bytes=%zu lines=%zu cpu_s=%.3f\n", secs, r.bytes, r.lines,
           (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
               (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6);
    return 0;
}
