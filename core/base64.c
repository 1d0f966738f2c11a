/* Base64, standard alphabet (see base64.h). */
#include "core/base64.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"

static const char b64chars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

kcr_err kcr__base64_decode(const char *in, size_t len, char **out, size_t *out_len)
{
    *out = malloc(len / 4 * 3 + 4);
    if (!*out)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory");
    unsigned acc = 0;
    int bits = 0;
    size_t o = 0, pad = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)in[i];
        if (c == ' ' || c == '\n' || c == '\r' || c == '\t')
            continue;
        if (c == '=') {
            pad++;
            continue;
        }
        const char *p = c ? strchr(b64chars, c) : NULL;
        if (!p || pad) {
            free(*out);
            *out = NULL;
            return kcr__fail(KCR_ERR_PARSE, "bad base64 character at offset %zu", i);
        }
        acc = (acc << 6) | (unsigned)(p - b64chars);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            (*out)[o++] = (char)((acc >> bits) & 0xff);
        }
    }
    if (bits >= 6 || pad > 2) {
        free(*out);
        *out = NULL;
        return kcr__fail(KCR_ERR_PARSE, "truncated base64 data");
    }
    (*out)[o] = '\0';
    *out_len = o;
    return KCR_OK;
}

char *kcr__base64_encode(const char *in, size_t len)
{
    char *out = malloc((len + 2) / 3 * 4 + 1);
    if (!out)
        return NULL;
    size_t o = 0;
    for (size_t i = 0; i < len; i += 3) {
        unsigned v = (unsigned char)in[i] << 16;
        if (i + 1 < len)
            v |= (unsigned char)in[i + 1] << 8;
        if (i + 2 < len)
            v |= (unsigned char)in[i + 2];
        out[o++] = b64chars[(v >> 18) & 63];
        out[o++] = b64chars[(v >> 12) & 63];
        out[o++] = i + 1 < len ? b64chars[(v >> 6) & 63] : '=';
        out[o++] = i + 2 < len ? b64chars[v & 63] : '=';
    }
    out[o] = '\0';
    return out;
}
