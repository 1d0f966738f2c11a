/* libFuzzer target for kcr_quantity. The input is one or two quantities
 * separated by a newline. Parsing never crashes; a parsed quantity's
 * canonical text parses back to the same value and formats to the same text
 * (a fixed point); the apiserver's text (kcr_quantity_server_text) parses to
 * the same value; comparison is antisymmetric; (a + b) - b == a whenever
 * the sum fits; rounding up to milli-units moves away from zero by less
 * than 1m; int64 conversions either fail cleanly or round away from zero by
 * less than one unit. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kcr/kcr.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_one(const char *text, size_t len, kcr_quantity *q, int *ok)
{
    *ok = kcr_quantity_parse(text, len, q) == KCR_OK;
    if (!*ok)
        return;
    char a[KCR_QUANTITY_TEXT_MAX], b[KCR_QUANTITY_TEXT_MAX];
    size_t n = kcr_quantity_to_string(q, a, sizeof a);
    if (n >= sizeof a || strlen(a) != n)
        abort();
    kcr_quantity back;
    if (kcr_quantity_parse(a, n, &back) != KCR_OK || kcr_quantity_cmp(q, &back) != 0)
        abort();
    /* The text need not be a fixed point at once: a binary-SI value with no
     * whole power-of-1024 form is written as a plain number ("812.5Ki" ->
     * "832000", as Go writes it), which parses back as decimal SI ("832k").
     * One more round must change nothing. */
    kcr_quantity_to_string(&back, b, sizeof b);
    kcr_quantity again;
    char c[KCR_QUANTITY_TEXT_MAX];
    if (kcr_quantity_parse(b, strlen(b), &again) != KCR_OK || kcr_quantity_cmp(q, &again) != 0)
        abort();
    kcr_quantity_to_string(&again, c, sizeof c);
    if (strcmp(b, c) != 0)
        abort();

    /* server text: only for NUL-free input, which it takes as a C string */
    if (memchr(text, '\0', len) == NULL) {
        char *copy = malloc(len + 1), stored[KCR_QUANTITY_TEXT_MAX];
        if (!copy)
            abort();
        memcpy(copy, text, len);
        copy[len] = '\0';
        kcr_err err = kcr_quantity_server_text(copy, stored, sizeof stored);
        if (err == KCR_OK) {
            kcr_quantity s;
            if (kcr_quantity_parse_str(stored, &s) != KCR_OK || kcr_quantity_cmp(q, &s) != 0)
                abort();
        } else if (err != KCR_ERR_TOO_LARGE || len < sizeof stored) {
            abort(); /* only a verbatim text longer than the buffer may fail */
        }
        free(copy);
    }

    /* rounding up to milli-units moves away from zero, by less than 1m */
    kcr_quantity r, d, one_milli;
    bool exact = false;
    kcr_err rerr = kcr_quantity_round_up(q, -3, &r, &exact);
    if (rerr == KCR_OK) {
        if (kcr_quantity_from_int64(1, -3, KCR_QUANTITY_DECIMAL_SI, &one_milli) != KCR_OK)
            abort();
        int c = kcr_quantity_cmp(&r, q);
        if ((exact && c != 0) || (!exact && c != kcr_quantity_sign(q)))
            abort();
        if (kcr_quantity_sub(&r, q, &d) == KCR_OK) {
            kcr_quantity mag = kcr_quantity_sign(&d) < 0 ? kcr_quantity_neg(d) : d;
            if (kcr_quantity_cmp(&mag, &one_milli) >= 0)
                abort();
        }
    } else if (rerr != KCR_ERR_TOO_LARGE) {
        abort();
    }

    int64_t v, milli;
    if (kcr_quantity_value(q, &v) == KCR_OK && kcr_quantity_milli_value(q, &milli) == KCR_OK) {
        /* both round away from zero: |v| >= |milli| / 1000 and v within one of it */
        int64_t whole = milli / 1000 + (milli % 1000 != 0 ? (milli > 0 ? 1 : -1) : 0);
        if (v != whole)
            abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    const char *nl = memchr(text, '\n', size);
    size_t la = nl ? (size_t)(nl - text) : size;
    kcr_quantity a, b;
    int oka, okb;
    check_one(text, la, &a, &oka);
    if (!nl)
        return 0;
    check_one(nl + 1, size - la - 1, &b, &okb);
    if (!oka || !okb)
        return 0;
    if (kcr_quantity_cmp(&a, &b) != -kcr_quantity_cmp(&b, &a))
        abort();
    kcr_quantity sum, diff;
    if (kcr_quantity_add(&a, &b, &sum) == KCR_OK) {
        if (kcr_quantity_sub(&sum, &b, &diff) != KCR_OK || kcr_quantity_cmp(&diff, &a) != 0)
            abort();
        int c = kcr_quantity_cmp(&sum, &a), s = kcr_quantity_sign(&b);
        if (c != s)
            abort();
    }
    return 0;
}
