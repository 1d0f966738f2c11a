/* kcr_quantity: parsing, canonical text and arithmetic of Kubernetes
 * resource quantities, following apimachinery v0.37's resource.Quantity
 * (docs/object.md, "Quantities"). The magnitude is an unsigned 128-bit
 * mantissa times a power of ten, kept normalised (no factor of ten in the
 * mantissa), so equal values have equal fields. */
#include <limits.h>
#include <string.h>

#include "core/error.h"
#include "kcr/quantity.h"

__extension__ typedef unsigned __int128 u128;

#define U128_MAX (~(u128)0)
#define NANO_EXP (-9)
/* Go caps a binary SI value at 2^63-1 in magnitude. */
#define BINARY_CAP ((u128)INT64_MAX)

static u128 mant_of(const kcr_quantity *q)
{
    return ((u128)q->mant_hi << 64) | q->mant_lo;
}

/* Builds a normalised quantity from a magnitude and exponent. Errors only
 * when the exponent leaves int32 once trailing zeros are folded into it. */
static kcr_err make(u128 m, int64_t e, bool neg, kcr_quantity_format format, kcr_quantity *out)
{
    kcr_quantity q;
    memset(&q, 0, sizeof q);
    q.format = (uint8_t)format;
    if (m != 0) {
        while (m % 10 == 0) {
            m /= 10;
            e++;
        }
        if (e > INT32_MAX || e < INT32_MIN)
            return kcr__fail(KCR_ERR_TOO_LARGE, "quantity: exponent %lld is out of range",
                             (long long)e);
        q.mant_lo = (uint64_t)m;
        q.mant_hi = (uint64_t)(m >> 64);
        q.exp = (int32_t)e;
        q.neg = neg ? 1 : 0;
    }
    *out = q;
    return KCR_OK;
}

/* m * 10^n, false on overflow. */
static bool mul_pow10(u128 *m, int64_t n)
{
    for (; n > 0; n--) {
        if (*m > U128_MAX / 10)
            return false;
        *m *= 10;
    }
    return true;
}

/* Decimal digits of m (at least one), most significant first; returns the count. */
static size_t digits_of(u128 m, char out[40])
{
    char rev[40];
    size_t n = 0;
    do {
        rev[n++] = (char)('0' + (int)(m % 10));
        m /= 10;
    } while (m != 0);
    for (size_t i = 0; i < n; i++)
        out[i] = rev[n - 1 - i];
    return n;
}

/* ---- scanning ------------------------------------------------------------
 * Mirrors Go's parseQuantityString: sign, leading zeros, integer digits, an
 * optional "." and fraction digits, then a suffix of letters from
 * "eEinumkKMGTP", an optional sign and digits. */

typedef struct scan {
    bool neg;
    const char *num; /* integer digits, leading zeros stripped (may be empty) */
    size_t num_len;
    const char *den; /* fraction digits (may be empty) */
    size_t den_len;
    const char *suf;
    size_t suf_len;
} scan;

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static bool scan_text(const char *s, size_t end, scan *sc)
{
    size_t pos = 0;
    memset(sc, 0, sizeof *sc);
    sc->num = sc->den = sc->suf = s + end;
    if (pos < end && (s[0] == '-' || s[0] == '+')) {
        sc->neg = s[0] == '-';
        pos++;
    }
    while (pos < end && s[pos] == '0')
        pos++;
    if (pos >= end)
        return true; /* all zeros (or nothing) after the sign: zero */
    size_t start = pos;
    while (pos < end && is_digit(s[pos]))
        pos++;
    sc->num = s + start;
    sc->num_len = pos - start;
    if (pos < end && s[pos] == '.') {
        start = ++pos;
        while (pos < end && is_digit(s[pos]))
            pos++;
        sc->den = s + start;
        sc->den_len = pos - start;
    }
    start = pos;
    while (pos < end && strchr("eEinumkKMGTP", s[pos]) && s[pos] != '\0')
        pos++;
    if (pos < end && (s[pos] == '-' || s[pos] == '+'))
        pos++;
    while (pos < end && is_digit(s[pos]))
        pos++;
    sc->suf = s + start;
    sc->suf_len = end - start;
    return pos >= end;
}

/* What a suffix means: base 10 or 2, its exponent and its format. */
typedef struct suffix_meaning {
    int base;
    int64_t exponent;
    kcr_quantity_format format;
} suffix_meaning;

static const char dec_suffix[] = "num kMGTPE";   /* 10^-9 .. 10^18 by threes; ' ' is "" */
static const char bin_suffix[] = "KMGTPE";       /* 2^10 .. 2^60 */

static kcr_err interpret_suffix(const char *suf, size_t len, suffix_meaning *out)
{
    out->base = 10;
    out->format = KCR_QUANTITY_DECIMAL_SI;
    out->exponent = 0;
    if (len == 0)
        return KCR_OK;
    if (len == 1 && suf[0] != ' ' && strchr(dec_suffix, suf[0])) {
        out->exponent = 3 * (int64_t)(strchr(dec_suffix, suf[0]) - dec_suffix) - 9;
        return KCR_OK;
    }
    if (len == 2 && suf[1] == 'i' && strchr(bin_suffix, suf[0]) && suf[0] != '\0') {
        out->base = 2;
        out->format = KCR_QUANTITY_BINARY_SI;
        out->exponent = 10 * (int64_t)(strchr(bin_suffix, suf[0]) - bin_suffix + 1);
        return KCR_OK;
    }
    if (len > 1 && (suf[0] == 'e' || suf[0] == 'E')) {
        /* Go: strconv.ParseInt(suffix[1:], 10, 64) */
        size_t i = 1;
        bool neg = false;
        if (suf[i] == '+' || suf[i] == '-')
            neg = suf[i++] == '-';
        if (i == len)
            return kcr__fail(KCR_ERR_PARSE, "exponent without digits");
        int64_t v = 0;
        for (; i < len; i++) {
            if (!is_digit(suf[i]))
                return kcr__fail(KCR_ERR_PARSE, "bad exponent");
            if (v > ((int64_t)INT32_MAX + 1) / 10 + 1)
                v = (int64_t)INT32_MAX + 2; /* saturate: refused below */
            else
                v = v * 10 + (suf[i] - '0');
        }
        v = neg ? -v : v;
        if (v > INT32_MAX || v < INT32_MIN)
            return kcr__fail(KCR_ERR_TOO_LARGE, "exponent out of the int32 range");
        out->format = KCR_QUANTITY_DECIMAL_EXPONENT;
        out->exponent = v;
        return KCR_OK;
    }
    return kcr__fail(KCR_ERR_PARSE, "unknown suffix");
}

/* ---- values --------------------------------------------------------------*/

/* The i-th digit of the number num.den (as one digit string). */
static int digit_at(const scan *sc, size_t i)
{
    return (i < sc->num_len ? sc->num[i] : sc->den[i - sc->num_len]) - '0';
}

/* Decimal: value = digits * 10^(exponent - den_len), rounded up to 1n. */
static kcr_err decimal_value(const scan *sc, const suffix_meaning *sm, kcr_quantity *out)
{
    size_t n = sc->num_len + sc->den_len, first = 0, last = n;
    while (first < n && digit_at(sc, first) == 0)
        first++;
    if (first == n)
        return make(0, 0, false, sm->format, out);
    while (digit_at(sc, last - 1) == 0)
        last--;
    /* power of ten of the digit at index i: (n - 1 - i) + exponent - den_len */
    int64_t base = sm->exponent - (int64_t)sc->den_len + (int64_t)n - 1;
    int64_t last_pow = base - (int64_t)(last - 1);
    bool round_up = false;
    int64_t exp = last_pow;
    size_t keep = last;
    if (last_pow < NANO_EXP) {
        /* digits below 10^-9 are dropped; some are non-zero (the last is),
         * so the kept value rounds away from zero by one nano */
        round_up = true;
        exp = NANO_EXP;
        int64_t cut = base - NANO_EXP + 1; /* digits with index < cut are kept */
        keep = cut <= (int64_t)first ? first : (size_t)cut;
    }
    u128 m = 0;
    for (size_t i = first; i < keep; i++) {
        if (m > (U128_MAX - 9) / 10)
            return kcr__fail(KCR_ERR_TOO_LARGE, "more than 38 significant digits");
        m = m * 10 + (u128)digit_at(sc, i);
    }
    if (round_up)
        m += 1;
    return make(m, exp, sc->neg, sm->format, out);
}

/* Binary: value = num.den * 2^k, rounded up to 1n, capped at 2^63-1. */
static kcr_err binary_value(const scan *sc, const suffix_meaning *sm, kcr_quantity *out)
{
    int k = (int)sm->exponent;
    u128 whole = 0;
    bool cap = sc->num_len > 19;
    for (size_t i = 0; !cap && i < sc->num_len; i++)
        whole = whole * 10 + (u128)(sc->num[i] - '0');
    if (!cap && whole >= ((u128)1 << (63 - k)))
        cap = true;
    u128 nano;
    if (cap) {
        nano = BINARY_CAP * 1000000000u;
    } else {
        /* whole * 2^k * 10^9 plus ceil(0.den * 2^k * 10^9), digit by digit
         * from the last: each step divides by ten, remembering any remainder */
        const u128 c = ((u128)1 << k) * 1000000000u;
        u128 carry = 0;
        bool inexact = false;
        for (size_t i = sc->den_len; i-- > 0;) {
            u128 t = (u128)(sc->den[i] - '0') * c + carry;
            inexact |= t % 10 != 0;
            carry = t / 10;
        }
        nano = whole * c + carry + (inexact ? 1 : 0);
        if (nano > BINARY_CAP * 1000000000u)
            nano = BINARY_CAP * 1000000000u;
    }
    /* a binary value between 0 and 1 is written as decimal SI */
    kcr_quantity_format f = nano != 0 && nano < 1000000000u ? KCR_QUANTITY_DECIMAL_SI
                                                            : KCR_QUANTITY_BINARY_SI;
    return make(nano, NANO_EXP, sc->neg, f, out);
}

static kcr_err parse_scanned(const char *text, size_t len, scan *sc, suffix_meaning *sm,
                             kcr_quantity *out)
{
    if (!out || (!text && len > 0))
        return kcr__fail(KCR_ERR_INVALID, "kcr_quantity_parse: NULL argument");
    if (len == 0)
        return kcr__fail(KCR_ERR_PARSE, "quantity \"\": empty");
    int shown = len > 64 ? 64 : (int)len;
    const char *more = len > 64 ? "..." : "";
    if (!scan_text(text, len, sc))
        return kcr__fail(KCR_ERR_PARSE,
                         "quantity \"%.*s%s\": not <sign><number><suffix> (like \"500m\", "
                         "\"1.5Gi\", \"1e3\")",
                         shown, text, more);
    kcr_err err = interpret_suffix(sc->suf, sc->suf_len, sm);
    if (err != KCR_OK)
        return kcr__refail(err, "quantity \"%.*s%s\": ", shown, text, more);
    kcr_quantity q;
    err = sm->base == 2 ? binary_value(sc, sm, &q) : decimal_value(sc, sm, &q);
    if (err != KCR_OK)
        return kcr__refail(err, "quantity \"%.*s%s\": ", shown, text, more);
    *out = q;
    return KCR_OK;
}

kcr_err kcr_quantity_parse(const char *text, size_t len, kcr_quantity *out)
{
    scan sc;
    suffix_meaning sm;
    return parse_scanned(text, len, &sc, &sm, out);
}

kcr_err kcr_quantity_parse_str(const char *text, kcr_quantity *out)
{
    return kcr_quantity_parse(text, text ? strlen(text) : 0, out);
}

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

kcr_err kcr_quantity_parse_json(const char *text, size_t len, kcr_quantity *out)
{
    while (text && len > 0 && is_space(text[0])) {
        text++;
        len--;
    }
    while (text && len > 0 && is_space(text[len - 1]))
        len--;
    return kcr_quantity_parse(text, len, out);
}

/* ---- text ----------------------------------------------------------------*/

typedef struct text_buf {
    char *buf;
    size_t cap, len;
} text_buf;

static void put(text_buf *t, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++, t->len++)
        if (t->len + 1 < t->cap)
            t->buf[t->len] = s[i];
}

static void put_exponent(text_buf *t, int64_t e)
{
    char num[24];
    size_t n = 0;
    uint64_t u = e < 0 ? (uint64_t)(-e) : (uint64_t)e;
    do {
        num[sizeof num - 1 - n++] = (char)('0' + (int)(u % 10));
        u /= 10;
    } while (u != 0);
    if (e < 0)
        num[sizeof num - 1 - n++] = '-';
    put(t, "e", 1);
    put(t, num + sizeof num - n, n);
}

/* Decimal SI or exponent: digits, then the exponent rounded down to a
 * multiple of three (zeros appended to the digits make up the difference). */
static void put_decimal(text_buf *t, u128 m, int64_t e, kcr_quantity_format format)
{
    char d[40];
    int64_t r = ((e % 3) + 3) % 3;
    put(t, d, digits_of(m, d));
    put(t, "00", (size_t)r);
    e -= r;
    if (format == KCR_QUANTITY_DECIMAL_SI && e >= NANO_EXP && e <= 18) {
        char c = dec_suffix[(e - NANO_EXP) / 3];
        put(t, &c, c == ' ' ? 0 : 1);
    } else if (e != 0) {
        /* exponent format, or a decimal SI value past "E" (see the header) */
        put_exponent(t, e);
    }
}

/* Binary SI: the whole value divided by the largest power of 1024 (up to
 * 2^60) that divides it. False when the value is not a whole number of at
 * most 128 bits: the caller writes it as decimal SI, as Go does for a
 * fraction. */
static bool put_binary(text_buf *t, u128 m, int64_t e)
{
    if (e < 0 || !mul_pow10(&m, e))
        return false;
    int j = 0;
    while (j < 6 && (m & 1023) == 0) {
        m >>= 10;
        j++;
    }
    char d[40];
    put(t, d, digits_of(m, d));
    if (j > 0) {
        char s[2] = {bin_suffix[j - 1], 'i'};
        put(t, s, 2);
    }
    return true;
}

size_t kcr_quantity_to_string(const kcr_quantity *q, char *buf, size_t cap)
{
    text_buf t = {buf, cap, 0};
    u128 m = q ? mant_of(q) : 0;
    if (m == 0) {
        put(&t, "0", 1);
    } else {
        if (q->neg)
            put(&t, "-", 1);
        kcr_quantity_format f = (kcr_quantity_format)q->format;
        if (f == KCR_QUANTITY_BINARY_SI) {
            kcr_quantity lim;
            make(1024, 0, false, KCR_QUANTITY_DECIMAL_SI, &lim);
            kcr_quantity mag = *q;
            mag.neg = 0;
            if (kcr_quantity_cmp(&mag, &lim) < 0 || !put_binary(&t, m, q->exp))
                f = KCR_QUANTITY_DECIMAL_SI;
        } else if (f != KCR_QUANTITY_DECIMAL_EXPONENT) {
            f = KCR_QUANTITY_DECIMAL_SI;
        }
        if (f != KCR_QUANTITY_BINARY_SI)
            put_decimal(&t, m, q->exp, f);
    }
    if (cap > 0)
        buf[t.len < cap ? t.len : cap - 1] = '\0';
    return t.len;
}

/* Go's ParseQuantity keeps the caller's text (Quantity.s) when its int64
 * fast path takes the input and finds it in canonical shape. */
static bool server_keeps_text(const char *text, size_t len, const scan *sc,
                              const suffix_meaning *sm)
{
    if (len == 1 && text[0] == '0')
        return true;
    size_t num_len = sc->num_len ? sc->num_len : 1; /* Go's num is "0" when empty */
    if (sm->base == 2) {
        /* binary fast path: no fraction; 14 - digits - exponent*3/10 >= 0 */
        if (sc->den_len != 0 || 14 - (int64_t)num_len - sm->exponent * 3 / 10 < 0)
            return false;
        uint64_t v = 0; /* at most 14 digits here */
        for (size_t i = 0; i < sc->num_len; i++)
            v = v * 10 + (uint64_t)(sc->num[i] - '0');
        return (v & 7) != 0;
    }
    if (18 - (int64_t)(num_len + sc->den_len) < 0)
        return false;
    int64_t scale = sm->exponent - (int64_t)sc->den_len;
    if (scale < NANO_EXP || scale % 3 != 0)
        return false;
    /* shifted = num + den: must not start with '0' nor end in "000" */
    if (sc->num_len == 0)
        return false;
    size_t n = sc->num_len + sc->den_len;
    if (n >= 3 && digit_at(sc, n - 1) == 0 && digit_at(sc, n - 2) == 0 && digit_at(sc, n - 3) == 0)
        return false;
    return true;
}

kcr_err kcr_quantity_server_text(const char *text, char *buf, size_t cap)
{
    scan sc;
    suffix_meaning sm;
    kcr_quantity q;
    size_t len = text ? strlen(text) : 0;
    if (!buf || cap == 0)
        return kcr__fail(KCR_ERR_INVALID, "kcr_quantity_server_text: no buffer");
    kcr_err err = parse_scanned(text, len, &sc, &sm, &q);
    if (err != KCR_OK)
        return err;
    bool keep = server_keeps_text(text, len, &sc, &sm);
    size_t n = keep ? len : kcr_quantity_to_string(&q, NULL, 0);
    if (n >= cap)
        return kcr__fail(KCR_ERR_TOO_LARGE, "kcr_quantity_server_text: %zu bytes do not fit in %zu",
                         n + 1, cap);
    if (keep) {
        memcpy(buf, text, n);
        buf[n] = '\0';
    } else {
        kcr_quantity_to_string(&q, buf, cap);
    }
    return KCR_OK;
}

/* ---- arithmetic ----------------------------------------------------------*/

int kcr_quantity_sign(const kcr_quantity *q)
{
    if (!q || mant_of(q) == 0)
        return 0;
    return q->neg ? -1 : 1;
}

/* Compares magnitudes: by order of magnitude first, then digit by digit. */
static int cmp_magnitude(const kcr_quantity *a, const kcr_quantity *b)
{
    char da[40], db[40];
    size_t na = digits_of(mant_of(a), da), nb = digits_of(mant_of(b), db);
    int64_t oa = (int64_t)na + a->exp, ob = (int64_t)nb + b->exp;
    if (oa != ob)
        return oa < ob ? -1 : 1;
    for (size_t i = 0; i < na || i < nb; i++) {
        char ca = i < na ? da[i] : '0', cb = i < nb ? db[i] : '0';
        if (ca != cb)
            return ca < cb ? -1 : 1;
    }
    return 0;
}

int kcr_quantity_cmp(const kcr_quantity *a, const kcr_quantity *b)
{
    int sa = kcr_quantity_sign(a), sb = kcr_quantity_sign(b);
    if (sa != sb)
        return sa < sb ? -1 : 1;
    if (sa == 0)
        return 0;
    int c = cmp_magnitude(a, b);
    return sa < 0 ? -c : c;
}

kcr_quantity kcr_quantity_neg(kcr_quantity q)
{
    if (mant_of(&q) != 0)
        q.neg = q.neg ? 0 : 1;
    return q;
}

static kcr_err add_signed(const kcr_quantity *a, const kcr_quantity *b, bool negate_b,
                          kcr_quantity *out)
{
    if (!a || !b || !out)
        return kcr__fail(KCR_ERR_INVALID, "kcr_quantity_add/sub: NULL argument");
    kcr_quantity_format f =
        (kcr_quantity_format)(kcr_quantity_sign(a) == 0 ? b->format : a->format);
    u128 ma = mant_of(a), mb = mant_of(b);
    bool na = a->neg != 0, nb = (b->neg != 0) != negate_b;
    int64_t e = a->exp < b->exp ? a->exp : b->exp;
    if (ma == 0)
        e = b->exp;
    else if (mb == 0)
        e = a->exp;
    if ((ma != 0 && !mul_pow10(&ma, a->exp - e)) || (mb != 0 && !mul_pow10(&mb, b->exp - e)))
        return kcr__fail(KCR_ERR_TOO_LARGE,
                         "quantity arithmetic: the result needs more than 38 significant digits");
    u128 m;
    bool neg;
    if (na == nb) {
        if (ma > U128_MAX - mb)
            return kcr__fail(KCR_ERR_TOO_LARGE,
                             "quantity arithmetic: the result needs more than 38 significant digits");
        m = ma + mb;
        neg = na;
    } else if (ma >= mb) {
        m = ma - mb;
        neg = na;
    } else {
        m = mb - ma;
        neg = nb;
    }
    return make(m, e, neg, f, out);
}

kcr_err kcr_quantity_add(const kcr_quantity *a, const kcr_quantity *b, kcr_quantity *out)
{
    return add_signed(a, b, false, out);
}

kcr_err kcr_quantity_sub(const kcr_quantity *a, const kcr_quantity *b, kcr_quantity *out)
{
    return add_signed(a, b, true, out);
}

kcr_err kcr_quantity_from_int64(int64_t value, int32_t scale, kcr_quantity_format format,
                                kcr_quantity *out)
{
    if (!out || scale < NANO_EXP || (unsigned)format > KCR_QUANTITY_DECIMAL_EXPONENT)
        return kcr__fail(KCR_ERR_INVALID,
                         "kcr_quantity_from_int64: NULL out, scale %d below -9 or format %d",
                         (int)scale, (int)format);
    u128 m = value < 0 ? (u128)(-(value + 1)) + 1 : (u128)value;
    return make(m, scale, value < 0, format, out);
}

kcr_err kcr_quantity_scaled_value(const kcr_quantity *q, int32_t scale, int64_t *out)
{
    if (!q || !out)
        return kcr__fail(KCR_ERR_INVALID, "kcr_quantity_scaled_value: NULL argument");
    u128 m = mant_of(q);
    int64_t shift = (int64_t)q->exp - scale;
    if (m != 0 && shift >= 0) {
        if (!mul_pow10(&m, shift))
            m = U128_MAX;
    } else if (m != 0) {
        /* divide by 10^-shift, rounding the magnitude up */
        bool inexact = false;
        for (int64_t i = 0; i < -shift && m != 0; i++) {
            inexact |= m % 10 != 0;
            m /= 10;
        }
        if (inexact)
            m += 1;
    }
    u128 limit = q->neg ? (u128)INT64_MAX + 1 : (u128)INT64_MAX;
    if (m > limit)
        return kcr__fail(KCR_ERR_TOO_LARGE, "quantity does not fit int64 in units of 10^%d",
                         (int)scale);
    *out = q->neg ? -(int64_t)(m - 1) - 1 : (int64_t)m;
    return KCR_OK;
}

kcr_err kcr_quantity_value(const kcr_quantity *q, int64_t *out)
{
    return kcr_quantity_scaled_value(q, 0, out);
}

kcr_err kcr_quantity_milli_value(const kcr_quantity *q, int64_t *out)
{
    return kcr_quantity_scaled_value(q, -3, out);
}
