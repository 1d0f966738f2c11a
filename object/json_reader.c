/* kcr's incremental JSON reader: tokens in one pass, a state machine for the
 * grammar, split tokens completed from the next feed. See json_reader.h. */
#include "object/json_reader.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* Where the grammar is: what the next token may be. */
typedef enum jstate {
    ST_TOP,         /* a top-level value (first, or the next one of a stream) */
    ST_END,         /* after the one top-level value: whitespace only */
    ST_VALUE,       /* a value, after ':' or an array's ',' */
    ST_ARRAY_FIRST, /* after '[': a value or ']' */
    ST_MAP_FIRST,   /* after '{': a key or '}' */
    ST_KEY,         /* after a map's ',': a key */
    ST_COLON,       /* after a key */
    ST_AFTER        /* after a value inside a container: ',' or its end */
} jstate;

/* The kind of token kept from the end of the previous feed. */
typedef enum jpend { PEND_NONE, PEND_STRING, PEND_KEY, PEND_WORD } jpend;

struct kcr__jreader {
    kcr__jreader_fn fn;
    void *ud;
    bool multi;
    jstate state;
    /* open containers, innermost last: 'm' map, 'a' array */
    char *stack;
    size_t depth, stack_cap;
    /* a split token: its bytes so far (a string's without the quote) */
    jpend pend;
    bool pend_escape;  /* the kept string bytes end inside an escape */
    bool pend_escaped; /* the kept string has escapes */
    bool pend_high;    /* the kept string has bytes >= 0x80 */
    size_t pend_at;    /* the kept token's offset in the whole input */
    char *tok;
    size_t tok_len, tok_cap;
    /* decoded strings with escapes */
    char *str;
    size_t str_cap;
    /* skipping a value (kcr__jreader_skip_value) until depth is back to
     * skip_to after a value */
    bool skipping;
    size_t skip_to;
    size_t consumed; /* in the current buffer, for kcr__jreader_consumed */
    size_t base;     /* bytes of the input before the current buffer */
    bool stopped;
    const char *err;
    size_t err_at;
    bool oom;
};

/* Byte classes. */
enum { C_WORD = 1, C_SPACE = 2 };
static const unsigned char cls[256] = {
    [' '] = C_SPACE, ['\t'] = C_SPACE, ['\n'] = C_SPACE, ['\r'] = C_SPACE,
    ['0'] = C_WORD,  ['1'] = C_WORD,   ['2'] = C_WORD,   ['3'] = C_WORD,
    ['4'] = C_WORD,  ['5'] = C_WORD,   ['6'] = C_WORD,   ['7'] = C_WORD,
    ['8'] = C_WORD,  ['9'] = C_WORD,   ['-'] = C_WORD,   ['+'] = C_WORD,
    ['.'] = C_WORD,  ['e'] = C_WORD,   ['E'] = C_WORD,   ['a'] = C_WORD,
    ['b'] = C_WORD,  ['c'] = C_WORD,   ['d'] = C_WORD,   ['f'] = C_WORD,
    ['l'] = C_WORD,  ['n'] = C_WORD,   ['r'] = C_WORD,   ['s'] = C_WORD,
    ['t'] = C_WORD,  ['u'] = C_WORD,
};

/* Grows *p (of *cap bytes) to hold need bytes. */
static bool grow(char **p, size_t *cap, size_t need)
{
    if (need <= *cap)
        return true;
    size_t cap2 = *cap ? *cap : 256;
    while (cap2 < need) {
        if (cap2 > SIZE_MAX / 2)
            return false;
        cap2 *= 2;
    }
    char *q = realloc(*p, cap2);
    if (!q)
        return false;
    *p = q;
    *cap = cap2;
    return true;
}

kcr__jreader *kcr__jreader_new(bool multiple_values, kcr__jreader_fn fn, void *user_data)
{
    kcr__jreader *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->fn = fn;
    r->ud = user_data;
    r->multi = multiple_values;
    r->state = ST_TOP;
    /* never NULL, so a kept token (an empty one too) always has storage */
    if (!grow(&r->tok, &r->tok_cap, 256)) {
        free(r);
        return NULL;
    }
    return r;
}

void kcr__jreader_free(kcr__jreader *r)
{
    if (!r)
        return;
    free(r->stack);
    free(r->tok);
    free(r->str);
    free(r);
}

size_t kcr__jreader_consumed(const kcr__jreader *r)
{
    return r->consumed;
}

const char *kcr__jreader_error(const kcr__jreader *r, size_t *offset, bool *out_of_memory)
{
    if (offset)
        *offset = r->err_at;
    if (out_of_memory)
        *out_of_memory = r->oom;
    return r->err ? r->err : "no error";
}

/* An error at offset `at` of the whole input. */
static kcr__jreader_status fail_at(kcr__jreader *r, const char *what, size_t at)
{
    if (!r->err) {
        r->err = what;
        r->err_at = at;
    }
    return KCR__JR_ERROR;
}

/* An error at offset `i` of the buffer being fed. */
static kcr__jreader_status fail(kcr__jreader *r, const char *what, size_t i)
{
    return fail_at(r, what, r->base + i);
}

static kcr__jreader_status nomem(kcr__jreader *r, size_t at)
{
    r->oom = true;
    return fail_at(r, "out of memory", at);
}

void kcr__jreader_skip_value(kcr__jreader *r)
{
    if (r->state != ST_COLON && r->state != ST_MAP_FIRST && r->state != ST_ARRAY_FIRST)
        return; /* not after a key or an opening bracket: nothing to skip */
    r->skip_to = r->state == ST_COLON ? r->depth : r->depth - 1;
    r->skipping = true;
}

/* A token of a skipped value was read: ends the skip after its last one. */
static kcr__jreader_status skipped(kcr__jreader *r)
{
    if (r->depth == r->skip_to)
        r->skipping = false;
    return KCR__JR_OK;
}

static kcr__jreader_status emit(kcr__jreader *r, const kcr__jev *ev, size_t end)
{
    if (r->skipping)
        return skipped(r);
    r->consumed = end;
    if (r->fn(r->ud, ev))
        return KCR__JR_OK;
    r->stopped = true;
    return KCR__JR_STOPPED;
}

/* An error for a token out of place; after the one top-level value every
 * token is. */
static kcr__jreader_status unexpected(kcr__jreader *r, const char *what, size_t at)
{
    return fail(r, r->state == ST_END ? "data after the JSON value" : what, at);
}

static bool value_allowed(const kcr__jreader *r)
{
    return r->state == ST_VALUE || r->state == ST_ARRAY_FIRST || r->state == ST_TOP;
}

/* A value ended: what may follow. */
static void value_done(kcr__jreader *r)
{
    if (r->depth > 0)
        r->state = ST_AFTER;
    else
        r->state = r->multi ? ST_TOP : ST_END;
}

/* ---- strings ----------------------------------------------------------- */

/* Index of the first '"', '\\' or control character in p[0..n), or n; *high
 * is set when a byte before it is >= 0x80. Sixteen bytes at a time with
 * SSE2, else eight at a time (in each flag mask the lowest flagged byte is
 * exact: borrows only run upwards), then byte by byte. */
static inline size_t scan_plain(const unsigned char *p, size_t n, bool *high)
{
    size_t i = 0;
#if defined(__SSE2__)
    const __m128i quote = _mm_set1_epi8('"'), bslash = _mm_set1_epi8('\\');
    const __m128i ctl = _mm_set1_epi8(0x1F);
    unsigned highs = 0;
    for (; i + 16 <= n; i += 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(p + i));
        __m128i m = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, bslash)),
                                 _mm_cmpeq_epi8(_mm_min_epu8(v, ctl), v));
        unsigned hit = (unsigned)_mm_movemask_epi8(m), hi = (unsigned)_mm_movemask_epi8(v);
        if (hit) {
            unsigned k = (unsigned)__builtin_ctz(hit);
            *high |= highs != 0 || (hi & ((1u << k) - 1)) != 0;
            return i + k;
        }
        highs |= hi;
    }
    *high |= highs != 0;
#else
    const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
    uint64_t acc = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t v;
        memcpy(&v, p + i, 8);
        uint64_t q = v ^ (ones * '"'), b = v ^ (ones * '\\');
        if ((((q - ones) & ~q) | ((b - ones) & ~b) | ((v - ones * 0x20) & ~v)) & highs)
            break;
        acc |= v;
    }
    *high |= (acc & highs) != 0;
#endif
    unsigned char tail = 0;
    for (; i < n; i++) {
        unsigned char c = p[i];
        if (c == '"' || c == '\\' || c < 0x20)
            break;
        tail |= c;
    }
    *high |= tail >= 0x80;
    return i;
}

/* Scans string bytes from p[0] for the closing quote: its index, or n when
 * the string goes on past n. *escape carries "the previous byte opened an
 * escape" across calls; *escaped is set when an escape is seen, *high when a
 * byte >= 0x80 is. A control character is an error: *bad gets its index. */
static size_t scan_string(const unsigned char *p, size_t n, bool *escape, bool *escaped,
                          bool *high, size_t *bad)
{
    size_t i = 0;
    bool hi = false;
    if (*escape && n > 0) {
        *escape = false;
        i = 1; /* the escaped byte: checked when decoding */
    }
    while (i < n) {
        i += scan_plain(p + i, n - i, &hi);
        if (i >= n)
            break;
        if (p[i] == '"') {
            *high |= hi;
            return i;
        }
        if (p[i] < 0x20) {
            *bad = i;
            return n;
        }
        *escaped = true; /* a backslash */
        if (i + 1 >= n) {
            *escape = true;
            break;
        }
        i += 2;
    }
    *high |= hi;
    return n;
}

static int hex4(const unsigned char *p)
{
    int v = 0;
    for (int k = 0; k < 4; k++) {
        unsigned char c = p[k];
        int d;
        if (c >= '0' && c <= '9')
            d = c - '0';
        else if (c >= 'a' && c <= 'f')
            d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F')
            d = c - 'A' + 10;
        else
            return -1;
        v = v * 16 + d;
    }
    return v;
}

/* The code point of a \uXXXX escape whose value is cp; next: the bytes after
 * it (avail of them), where a high surrogate's low half must follow as a
 * second \uXXXX, which *pair then says was taken. A lone or broken
 * surrogate is U+FFFD. */
static inline unsigned code_point(unsigned cp, const unsigned char *next, size_t avail, bool *pair)
{
    *pair = false;
    if (cp >= 0xDC00 && cp <= 0xDFFF)
        return 0xFFFD;
    if (cp < 0xD800 || cp > 0xDBFF)
        return cp;
    int lo = avail >= 6 && next[0] == '\\' && next[1] == 'u' ? hex4(next + 2) : -1;
    if (lo < 0xDC00 || lo > 0xDFFF)
        return 0xFFFD;
    *pair = true;
    return 0x10000 + ((cp - 0xD800) << 10) + ((unsigned)lo - 0xDC00);
}

static size_t put_utf8(char *o, unsigned cp)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18));
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Decodes the escapes of s[0..n) (a whole string's content, no control
 * characters) into r->str; *out_len its length; *high set when a code point
 * >= 0x80 was written. NULL with r->err set when an escape is invalid (at:
 * the string's offset in the whole input). */
__attribute__((noinline)) static const char *
unescape(kcr__jreader *r, const unsigned char *s, size_t n, size_t at, size_t *out_len, bool *high)
{
    /* decoded is never longer than the escaped text, so k <= i throughout */
    if (!grow(&r->str, &r->str_cap, n + 1)) {
        nomem(r, at);
        return NULL;
    }
    char *o = r->str;
    size_t i = 0, k = 0;
    while (i < n) {
        /* copy up to the next backslash: sixteen bytes at a time with SSE2
         * (each block is stored whole, then the part past a backslash is
         * overwritten), the tail byte by byte */
#if defined(__SSE2__)
        const __m128i bslash = _mm_set1_epi8('\\');
        unsigned hit = 0;
        for (; i + 16 <= n; i += 16, k += 16) {
            __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(s + i));
            _mm_storeu_si128((__m128i *)(void *)(o + k), v);
            if ((hit = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, bslash))) != 0)
                break;
        }
        if (hit) {
            unsigned z = (unsigned)__builtin_ctz(hit);
            i += z;
            k += z;
        } else
#endif
        {
            while (i < n && s[i] != '\\')
                o[k++] = (char)s[i++];
        }
        if (i >= n)
            break;
        if (i + 1 >= n) {
            fail_at(r, "invalid escape in a string", at);
            return NULL;
        }
        unsigned char c = s[i + 1];
        i += 2;
        switch (c) {
        case '"': o[k++] = '"'; break;
        case '\\': o[k++] = '\\'; break;
        case '/': o[k++] = '/'; break;
        case 'b': o[k++] = '\b'; break;
        case 'f': o[k++] = '\f'; break;
        case 'n': o[k++] = '\n'; break;
        case 'r': o[k++] = '\r'; break;
        case 't': o[k++] = '\t'; break;
        case 'u': {
            int cp = n - i >= 4 ? hex4(s + i) : -1;
            if (cp < 0) {
                fail_at(r, "invalid \\u escape in a string", at);
                return NULL;
            }
            i += 4;
            bool pair;
            unsigned code = code_point((unsigned)cp, s + i, n - i, &pair);
            if (pair)
                i += 6;
            /* \uXXXX is 6 bytes, its UTF-8 at most 3; a pair 12 and 4 */
            k += put_utf8(o + k, code);
            *high |= code >= 0x80;
            break;
        }
        default: fail_at(r, "invalid escape in a string", at); return NULL;
        }
    }
    *out_len = k;
    return r->str;
}

/* Checks the escapes of s[0..n) (a whole string's content) as unescape does,
 * without decoding them: NULL when they are valid, else unescape's message. */
static const char *bad_escape(const unsigned char *s, size_t n)
{
    for (const unsigned char *p = s, *end = s + n;
         (p = memchr(p, '\\', (size_t)(end - p))) != NULL;) {
        if (end - p < 2)
            return "invalid escape in a string";
        switch (p[1]) {
        case '"':
        case '\\':
        case '/':
        case 'b':
        case 'f':
        case 'n':
        case 'r':
        case 't': p += 2; break;
        case 'u':
            if (end - p < 6 || hex4(p + 2) < 0)
                return "invalid \\u escape in a string";
            p += 6;
            break;
        default: return "invalid escape in a string";
        }
    }
    return NULL;
}

/* Decodes a string with escapes in one pass, when it ends in this buffer:
 * p[from..j) has no escape (copied), p[j] is its first backslash. Returns
 * r->str holding the decoded string (*out_len bytes; *high set as for
 * unescape) with *end the index of the closing quote; NULL, with nothing
 * reported, when the string goes on past the buffer, holds a control
 * character or an invalid escape, or memory runs out: the general path
 * (scan_string, then unescape) then keeps it or reports the error, so what
 * is reported never depends on which path took the string. */
__attribute__((noinline)) static const char *
unescape_to_quote(kcr__jreader *r, const unsigned char *p, size_t from, size_t j, size_t len,
                  size_t *end, size_t *out_len, bool *high)
{
    size_t k = j - from, i = j;
    if (!grow(&r->str, &r->str_cap, k + 64))
        return NULL;
    memcpy(r->str, p + from, k);
    bool hi = false;
    for (;;) {
        /* p[i] is a backslash; an escape writes at most 4 bytes, a block 16 */
        if (r->str_cap < k + 32 && !grow(&r->str, &r->str_cap, 2 * r->str_cap))
            return NULL;
        char *o = r->str;
        if (i + 1 >= len)
            return NULL;
        switch (p[i + 1]) {
        case '"': o[k++] = '"'; break;
        case '\\': o[k++] = '\\'; break;
        case '/': o[k++] = '/'; break;
        case 'b': o[k++] = '\b'; break;
        case 'f': o[k++] = '\f'; break;
        case 'n': o[k++] = '\n'; break;
        case 'r': o[k++] = '\r'; break;
        case 't': o[k++] = '\t'; break;
        case 'u': {
            int cp = i + 6 <= len ? hex4(p + i + 2) : -1;
            if (cp < 0)
                return NULL;
            /* a pair's second half is in the string if it follows: a quote
             * in those bytes fails the test as the string's end does in
             * unescape */
            if (cp >= 0xD800 && cp <= 0xDBFF && i + 12 > len)
                return NULL;
            bool pair;
            unsigned code = code_point((unsigned)cp, p + i + 6, len - (i + 6), &pair);
            if (pair)
                i += 6;
            k += put_utf8(o + k, code);
            hi |= code >= 0x80;
            i += 4;
            break;
        }
        default: return NULL;
        }
        i += 2;
        /* to the next quote, backslash or control character */
#if defined(__SSE2__)
        const __m128i quote = _mm_set1_epi8('"'), bslash = _mm_set1_epi8('\\');
        const __m128i ctl = _mm_set1_epi8(0x1F);
        for (;;) {
            if (i + 16 > len)
                break;
            if (r->str_cap < k + 16 && !grow(&r->str, &r->str_cap, 2 * r->str_cap))
                return NULL;
            __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(p + i));
            _mm_storeu_si128((__m128i *)(void *)(r->str + k), v);
            __m128i m = _mm_or_si128(
                _mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, bslash)),
                _mm_cmpeq_epi8(_mm_min_epu8(v, ctl), v));
            unsigned hit = (unsigned)_mm_movemask_epi8(m), highs = (unsigned)_mm_movemask_epi8(v);
            if (hit) {
                unsigned z = (unsigned)__builtin_ctz(hit);
                hi |= (highs & ((1u << z) - 1)) != 0;
                i += z;
                k += z;
                goto special;
            }
            hi |= highs != 0;
            i += 16;
            k += 16;
        }
#endif
        for (; i < len; i++) {
            unsigned char c = p[i];
            if (c == '"' || c == '\\' || c < 0x20)
                break;
            if (r->str_cap < k + 1 && !grow(&r->str, &r->str_cap, 2 * r->str_cap))
                return NULL;
            r->str[k++] = (char)c;
            hi |= c >= 0x80;
        }
#if defined(__SSE2__)
    special:
#endif
        if (i >= len || p[i] < 0x20)
            return NULL;
        if (p[i] == '"')
            break;
    }
    *end = i;
    *out_len = k;
    *high |= hi;
    return r->str;
}

/* A string of a skipped value: its escapes checked, nothing reported. */
__attribute__((noinline)) static kcr__jreader_status
skipped_string(kcr__jreader *r, bool key, const unsigned char *s, size_t n, bool escaped, size_t at)
{
    const char *bad = escaped ? bad_escape(s, n) : NULL;
    if (bad)
        return fail_at(r, bad, at);
    if (key)
        r->state = ST_COLON;
    else
        value_done(r);
    return skipped(r);
}

/* Reports the string s[0..n) (its content) as a key or a value; at: its
 * offset in the whole input; end: the offset after its closing quote in the
 * current buffer. */
static inline kcr__jreader_status string_token(kcr__jreader *r, bool key,
                                               const unsigned char *s, size_t n, bool escaped,
                                               bool high, size_t at, size_t end)
{
    if (r->skipping)
        return skipped_string(r, key, s, n, escaped, at);
    kcr__jev ev = {.type = key ? KCR__JEV_KEY : KCR__JEV_STRING, .s = (const char *)s, .len = n};
    if (escaped && !(ev.s = unescape(r, s, n, at, &ev.len, &high)))
        return KCR__JR_ERROR;
    ev.ascii = !high;
    if (key)
        r->state = ST_COLON;
    else
        value_done(r);
    return emit(r, &ev, end);
}

/* ---- numbers and literals --------------------------------------------- */

static bool is_digit(unsigned char c)
{
    return c >= '0' && c <= '9';
}

/* JSON's number grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
static bool valid_number(const unsigned char *p, size_t n)
{
    size_t i = 0;
    if (i < n && p[i] == '-')
        i++;
    if (i >= n || !is_digit(p[i]))
        return false;
    if (p[i++] != '0')
        while (i < n && is_digit(p[i]))
            i++;
    if (i < n && p[i] == '.') {
        if (++i >= n || !is_digit(p[i]))
            return false;
        while (i < n && is_digit(p[i]))
            i++;
    }
    if (i < n && (p[i] == 'e' || p[i] == 'E')) {
        if (++i < n && (p[i] == '+' || p[i] == '-'))
            i++;
        if (i >= n || !is_digit(p[i]))
            return false;
        while (i < n && is_digit(p[i]))
            i++;
    }
    return i == n;
}

/* Reports the word p[0..n) (true, false, null or a number); at and end as
 * for string_token. */
static kcr__jreader_status word_token(kcr__jreader *r, const unsigned char *p, size_t n, size_t at,
                                      size_t end)
{
    kcr__jev ev = {.type = KCR__JEV_NUMBER, .s = (const char *)p, .len = n};
    if (n == 4 && memcmp(p, "true", 4) == 0) {
        ev = (kcr__jev){.type = KCR__JEV_BOOL, .b = true};
    } else if (n == 5 && memcmp(p, "false", 5) == 0) {
        ev = (kcr__jev){.type = KCR__JEV_BOOL, .b = false};
    } else if (n == 4 && memcmp(p, "null", 4) == 0) {
        ev = (kcr__jev){.type = KCR__JEV_NULL};
    } else if (!valid_number(p, n)) {
        return fail_at(r, is_digit(p[0]) || p[0] == '-' ? "invalid number" : "invalid literal",
                       at);
    }
    value_done(r);
    return emit(r, &ev, end);
}

/* ---- split tokens ------------------------------------------------------ */

/* Appends p[0..n) to the kept token. */
static kcr__jreader_status keep(kcr__jreader *r, const unsigned char *p, size_t n)
{
    if (!grow(&r->tok, &r->tok_cap, r->tok_len + n))
        return nomem(r, r->pend_at);
    memcpy(r->tok + r->tok_len, p, n);
    r->tok_len += n;
    return KCR__JR_OK;
}

/* Continues the kept token with buf; *used gets the bytes of buf it took. */
static kcr__jreader_status resume(kcr__jreader *r, const unsigned char *buf, size_t len,
                                  size_t *used)
{
    kcr__jreader_status st;
    if (r->pend == PEND_WORD) {
        size_t j = 0;
        while (j < len && cls[buf[j]] == C_WORD)
            j++;
        *used = j;
        if ((st = keep(r, buf, j)) != KCR__JR_OK || j == len)
            return st;
        size_t n = r->tok_len;
        r->pend = PEND_NONE;
        r->tok_len = 0;
        return word_token(r, (const unsigned char *)r->tok, n, r->pend_at, j);
    }
    size_t bad = len;
    size_t j = scan_string(buf, len, &r->pend_escape, &r->pend_escaped, &r->pend_high, &bad);
    if (bad < len)
        return fail(r, "control character in a string", bad);
    *used = j == len ? len : j + 1;
    if ((st = keep(r, buf, j)) != KCR__JR_OK || j == len)
        return st;
    bool key = r->pend == PEND_KEY;
    size_t n = r->tok_len;
    r->pend = PEND_NONE;
    r->tok_len = 0;
    return string_token(r, key, (const unsigned char *)r->tok, n, r->pend_escaped, r->pend_high,
                        r->pend_at, j + 1);
}

/* ---- the grammar ------------------------------------------------------- */

static kcr__jreader_status open_container(kcr__jreader *r, char kind, size_t i)
{
    if (!value_allowed(r))
        return unexpected(r, kind == 'm' ? "unexpected '{'" : "unexpected '['", i);
    if (r->depth == r->stack_cap &&
        !grow(&r->stack, &r->stack_cap, r->stack_cap ? r->stack_cap * 2 : 64))
        return nomem(r, r->base + i);
    r->stack[r->depth++] = kind;
    r->state = kind == 'm' ? ST_MAP_FIRST : ST_ARRAY_FIRST;
    kcr__jev ev = {.type = kind == 'm' ? KCR__JEV_START_MAP : KCR__JEV_START_ARRAY};
    return emit(r, &ev, i + 1);
}

static kcr__jreader_status close_container(kcr__jreader *r, char kind, size_t i)
{
    bool ok = r->depth > 0 && r->stack[r->depth - 1] == kind &&
              (r->state == ST_AFTER ||
               r->state == (kind == 'm' ? ST_MAP_FIRST : ST_ARRAY_FIRST));
    if (!ok)
        return unexpected(r, kind == 'm' ? "unexpected '}'" : "unexpected ']'", i);
    r->depth--;
    value_done(r);
    kcr__jev ev = {.type = kind == 'm' ? KCR__JEV_END_MAP : KCR__JEV_END_ARRAY};
    return emit(r, &ev, i + 1);
}

/* ---- skipped values ---------------------------------------------------- */

/* True when p[0..n) is a literal or a number (what word_token accepts). */
static bool valid_word(const unsigned char *p, size_t n)
{
    return (n == 4 && (memcmp(p, "true", 4) == 0 || memcmp(p, "null", 4) == 0)) ||
           (n == 5 && memcmp(p, "false", 5) == 0) || valid_number(p, n);
}

/* Reads the tokens of a skipped value from p[i], with the grammar of the
 * loop in kcr__jreader_feed and no events, and returns where it stopped:
 * after the value's last token (skipping is then over), at the end of the
 * buffer, or at the first byte of a token it leaves to that loop - one that
 * goes on past the buffer, that is an error (so the loop reports it as it
 * would unskipped), or that needs the stack grown. */
static size_t skip_tokens(kcr__jreader *r, const unsigned char *p, size_t len, size_t i)
{
    jstate state = r->state;
    size_t depth = r->depth;
    while (i < len) {
        unsigned char c = p[i];
        bool value_ends = false;
        switch (c) {
        case ' ':
        case '\t':
        case '\n':
        case '\r': i++; continue;
        case ':':
            if (state != ST_COLON)
                goto out;
            state = ST_VALUE;
            i++;
            continue;
        case ',':
            if (state != ST_AFTER)
                goto out;
            state = r->stack[depth - 1] == 'm' ? ST_KEY : ST_VALUE;
            i++;
            continue;
        case '{':
        case '[':
            if ((state != ST_VALUE && state != ST_ARRAY_FIRST) || depth == r->stack_cap)
                goto out;
            r->stack[depth++] = c == '{' ? 'm' : 'a';
            state = c == '{' ? ST_MAP_FIRST : ST_ARRAY_FIRST;
            i++;
            continue;
        case '}':
        case ']': {
            char kind = c == '}' ? 'm' : 'a';
            if (depth == 0 || r->stack[depth - 1] != kind ||
                (state != ST_AFTER && state != (kind == 'm' ? ST_MAP_FIRST : ST_ARRAY_FIRST)))
                goto out;
            depth--;
            value_ends = true;
            i++;
            break;
        }
        case '"': {
            bool key = state == ST_MAP_FIRST || state == ST_KEY;
            if (!key && state != ST_VALUE && state != ST_ARRAY_FIRST)
                goto out;
            bool high = false;
            size_t from = i + 1, j = from + scan_plain(p + from, len - from, &high);
            if (j < len && p[j] == '\\') {
                bool escape = false, escaped = false;
                size_t bad = len;
                j += scan_string(p + j, len - j, &escape, &escaped, &high, &bad);
                if (j < len && bad_escape(p + from, j - from))
                    goto out;
            }
            if (j >= len || p[j] != '"')
                goto out; /* goes on in the next feed, or a control character */
            i = j + 1;
            if (key) {
                state = ST_COLON;
                continue;
            }
            value_ends = true;
            break;
        }
        default: {
            if (cls[c] != C_WORD || (state != ST_VALUE && state != ST_ARRAY_FIRST))
                goto out;
            size_t j = i + 1;
            while (j < len && cls[p[j]] == C_WORD)
                j++;
            if (j == len || !valid_word(p + i, j - i))
                goto out;
            i = j;
            value_ends = true;
            break;
        }
        }
        if (value_ends) {
            state = ST_AFTER; /* depth > skip_to >= 0 until the last token */
            if (depth == r->skip_to) {
                r->skipping = false;
                r->depth = depth;
                r->state = state;
                value_done(r);
                return i;
            }
        }
    }
out:
    r->state = state;
    r->depth = depth;
    return i;
}

kcr__jreader_status kcr__jreader_feed(kcr__jreader *r, const char *buf, size_t len)
{
    if (r->err)
        return KCR__JR_ERROR;
    if (r->stopped)
        return KCR__JR_STOPPED;
    const unsigned char *p = (const unsigned char *)buf;
    kcr__jreader_status st = KCR__JR_OK;
    size_t i = 0;
    if (r->pend != PEND_NONE && len > 0)
        st = resume(r, p, len, &i);
    while (st == KCR__JR_OK && i < len) {
        if (r->skipping && (i = skip_tokens(r, p, len, i)) == len)
            break;
        unsigned char c = p[i];
        switch (c) {
        case ' ':
        case '\t':
        case '\n':
        case '\r': i++; continue;
        case '{': st = open_container(r, 'm', i); break;
        case '[': st = open_container(r, 'a', i); break;
        case '}': st = close_container(r, 'm', i); break;
        case ']': st = close_container(r, 'a', i); break;
        case ':':
            if (r->state != ST_COLON)
                return unexpected(r, "unexpected ':'", i);
            r->state = ST_VALUE;
            break;
        case ',':
            if (r->state != ST_AFTER)
                return unexpected(r, "unexpected ','", i);
            r->state = r->stack[r->depth - 1] == 'm' ? ST_KEY : ST_VALUE;
            break;
        case '"': {
            bool key = r->state == ST_MAP_FIRST || r->state == ST_KEY;
            if (!key && !value_allowed(r))
                return unexpected(r, "unexpected string", i);
            bool escape = false, escaped = false, high = false;
            size_t bad = len, from = i + 1;
            /* most strings have no escape and end in this buffer: one scan */
            size_t j = from + scan_plain(p + from, len - from, &high);
            if (j < len && p[j] == '"') {
                st = string_token(r, key, p + from, j - from, false, high, r->base + i, j + 1);
                i = j + 1;
                continue;
            }
            if (j < len && p[j] < 0x20)
                return fail(r, "control character in a string", j);
            size_t end, out_len;
            const char *decoded;
            if (j < len && !r->skipping &&
                (decoded = unescape_to_quote(r, p, from, j, len, &end, &out_len, &high))) {
                kcr__jev ev = {.type = key ? KCR__JEV_KEY : KCR__JEV_STRING,
                               .s = decoded,
                               .len = out_len,
                               .ascii = !high};
                if (key)
                    r->state = ST_COLON;
                else
                    value_done(r);
                st = emit(r, &ev, end + 1);
                i = end + 1;
                continue;
            }
            size_t rest = j; /* from the first backslash, or the end of the buffer */
            j = rest + scan_string(p + rest, len - rest, &escape, &escaped, &high, &bad);
            if (bad < len - rest)
                return fail(r, "control character in a string", rest + bad);
            if (j == len) { /* goes on in the next feed */
                r->pend = key ? PEND_KEY : PEND_STRING;
                r->pend_escape = escape;
                r->pend_escaped = escaped;
                r->pend_high = high;
                r->pend_at = r->base + i;
                r->tok_len = 0;
                st = keep(r, p + from, len - from);
                i = len;
                continue;
            }
            st = string_token(r, key, p + from, j - from, escaped, high, r->base + i, j + 1);
            i = j + 1;
            continue;
        }
        default: {
            if (cls[c] != C_WORD)
                return fail(r, "invalid character", i);
            if (!value_allowed(r))
                return unexpected(r, "unexpected value", i);
            size_t j = i + 1;
            while (j < len && cls[p[j]] == C_WORD)
                j++;
            if (j == len) {
                r->pend = PEND_WORD;
                r->pend_at = r->base + i;
                r->tok_len = 0;
                st = keep(r, p + i, len - i);
                i = len;
                continue;
            }
            st = word_token(r, p + i, j - i, r->base + i, j);
            i = j;
            continue;
        }
        }
        i++;
    }
    r->base += len;
    return st;
}

kcr__jreader_status kcr__jreader_complete(kcr__jreader *r)
{
    if (r->err)
        return KCR__JR_ERROR;
    if (r->stopped)
        return KCR__JR_STOPPED;
    r->consumed = 0;
    if (r->pend == PEND_WORD) { /* a number ends with the input */
        r->pend = PEND_NONE;
        size_t n = r->tok_len;
        r->tok_len = 0;
        kcr__jreader_status st = word_token(r, (const unsigned char *)r->tok, n, r->pend_at, 0);
        if (st != KCR__JR_OK)
            return st;
    }
    if (r->pend != PEND_NONE || r->depth > 0 || (r->state != ST_END && r->state != ST_TOP))
        return fail(r, "premature end of input", 0);
    if (r->state == ST_TOP && !r->multi)
        return fail(r, "no JSON value", 0);
    return KCR__JR_OK;
}
