/* Text building for the controller helpers' request bodies. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controller/ctrlutil_internal.h"

static void append(kcr__jbuf *b, const char *s, size_t n)
{
    if (b->failed)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = realloc(b->s, cap);
        if (!p) {
            b->failed = true;
            return;
        }
        b->s = p;
        b->cap = cap;
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

void kcr__jbuf_raw(kcr__jbuf *b, const char *s)
{
    append(b, s, strlen(s));
}

void kcr__jbuf_string(kcr__jbuf *b, const char *s)
{
    append(b, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        char esc[8];
        if (*p == '"' || *p == '\\') {
            esc[0] = '\\';
            esc[1] = (char)*p;
            append(b, esc, 2);
        } else if (*p < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", *p);
            append(b, esc, 6);
        } else {
            append(b, (const char *)p, 1);
        }
    }
    append(b, "\"", 1);
}

void kcr__jbuf_value(kcr__jbuf *b, kcr_value v)
{
    if (kcr_value_get_type(v) == KCR_VALUE_ABSENT) {
        kcr__jbuf_raw(b, "null");
        return;
    }
    char *json = NULL;
    size_t n = 0;
    if (kcr_value_to_json(v, &json, &n) != KCR_OK) {
        b->failed = true;
        return;
    }
    append(b, json, n);
    free(json);
}

void kcr__jbuf_free(kcr__jbuf *b)
{
    free(b->s);
    *b = (kcr__jbuf){0};
}

int kcr__ctrlutil_retries(int max_retries)
{
    return max_retries == 0 ? KCR_CTRLUTIL_DEFAULT_RETRIES : max_retries < 0 ? 0 : max_retries;
}

const char *kcr_ctrlutil_op_result_string(kcr_ctrlutil_op_result r)
{
    switch (r) {
    case KCR_CTRLUTIL_UNCHANGED:
        return "unchanged";
    case KCR_CTRLUTIL_CREATED:
        return "created";
    case KCR_CTRLUTIL_UPDATED:
        return "updated";
    }
    return "unknown";
}
