/* The one UTF-8 validator (object/utf8.h). */
#include "object/utf8.h"

#include <stdint.h>
#include <string.h>

size_t kcr__utf8_valid_prefix_from(const char *str, size_t len, size_t from)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t i = from;
    while (i < len) {
        /* Most of what Kubernetes sends is ASCII: eight bytes at a time. */
        while (i + 8 <= len) {
            uint64_t w;
            memcpy(&w, s + i, 8);
            if (w & UINT64_C(0x8080808080808080))
                break;
            i += 8;
        }
        if (i == len)
            break;
        unsigned char c = s[i];
        size_t n;
        uint32_t cp;
        if (c < 0x80) {
            i++;
            continue;
        } else if ((c & 0xe0) == 0xc0) {
            n = 1;
            cp = c & 0x1f;
        } else if ((c & 0xf0) == 0xe0) {
            n = 2;
            cp = c & 0x0f;
        } else if ((c & 0xf8) == 0xf0) {
            n = 3;
            cp = c & 0x07;
        } else {
            return i;
        }
        if (n >= len - i)
            return i;
        for (size_t k = 1; k <= n; k++) {
            if ((s[i + k] & 0xc0) != 0x80)
                return i;
            cp = cp << 6 | (s[i + k] & 0x3f);
        }
        if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) ||
            cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return i;
        i += n + 1;
    }
    return len;
}
