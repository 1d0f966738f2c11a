/* Random UUIDs, the host name and the object-name rule, for leader
 * identities and Event names. */
#include "core/identity.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"

kcr_err kcr__uuid_v4(char out[37])
{
    uint8_t b[16];
    FILE *f = fopen("/dev/urandom", "rb");
    size_t got = f ? fread(b, 1, sizeof b, f) : 0;
    if (f)
        fclose(f);
    if (got != sizeof b)
        return kcr__fail(KCR_ERR_IO, "uuid: cannot read 16 bytes from /dev/urandom");
    b[6] = (uint8_t)((b[6] & 0x0f) | 0x40); /* version 4 */
    b[8] = (uint8_t)((b[8] & 0x3f) | 0x80); /* variant 10 */
    snprintf(out, 37,
             "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
             b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
             b[14], b[15]);
    return KCR_OK;
}

void kcr__hostname(char *out, size_t size)
{
    if (!size)
        return;
    char name[256] = "";
    if (gethostname(name, sizeof name - 1) != 0 || !name[0])
        strcpy(name, "localhost");
    snprintf(out, size, "%s", name);
}

bool kcr__is_dns_subdomain(const char *s)
{
    size_t n = s ? strlen(s) : 0;
    if (n == 0 || n > 253)
        return false;
    /* Dot-separated labels, each [a-z0-9]([-a-z0-9]*[a-z0-9])? */
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
        bool label_edge = i == 0 || i == n - 1 || s[i - 1] == '.' || s[i + 1] == '.';
        if (alnum)
            continue;
        if ((c != '-' && c != '.') || (c == '-' && label_edge) ||
            (c == '.' && (i == 0 || i == n - 1 || s[i - 1] == '.')))
            return false;
    }
    return true;
}
