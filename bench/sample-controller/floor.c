/* floor: the resident memory any controller on a given libcurl starts from.
 * Loads what examples/sample-controller loads for its HTTP (libcurl with its
 * OpenSSL and whatever else that libcurl was built with: run links it once
 * against cmake/slim-deps' libcurl and once against Debian's),
 * makes one HTTPS GET of URL with a client certificate, and prints its peak
 * RSS (VmHWM, as bench/sample-controller/run reads it) in MB:
 *
 *   floor URL CA_FILE CERT_FILE KEY_FILE
 *
 * No kcr, no parsing, no cache: what is left of the controller's RSS above
 * this is kcr's own code and data. Not a test. */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t discard(char *p, size_t size, size_t n, void *ud)
{
    (void)p, (void)ud;
    return size * n;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: floor URL CA_FILE CERT_FILE KEY_FILE\n");
        return 2;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    CURL *c = curl_easy_init();
    long code = 0;
    CURLcode rc = CURLE_FAILED_INIT;
    if (c) {
        curl_easy_setopt(c, CURLOPT_URL, argv[1]);
        curl_easy_setopt(c, CURLOPT_CAINFO, argv[2]);
        curl_easy_setopt(c, CURLOPT_SSLCERT, argv[3]);
        curl_easy_setopt(c, CURLOPT_SSLKEY, argv[4]);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
        rc = curl_easy_perform(c);
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    }
    if (rc != CURLE_OK || code != 200) {
        fprintf(stderr, "floor: GET %s: %s, HTTP %ld\n", argv[1], curl_easy_strerror(rc), code);
        return 1;
    }
    char line[256];
    FILE *f = fopen("/proc/self/status", "r");
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "VmHWM:", 6) == 0)
            printf("%.1f\n", (double)strtol(line + 6, NULL, 10) / 1024.0);
    if (f)
        fclose(f);
    curl_easy_cleanup(c);
    curl_global_cleanup();
    return 0;
}
