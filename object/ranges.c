/* Sets of hash ranges: a sweep over both sets' boundaries for union,
 * intersection and difference, and the text published on a Lease.
 * Internally a range is handled by its first and LAST hash (inclusive), so
 * the top of the space needs no 65th bit. */
#include "object/ranges.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

static uint64_t last_of(kcr_shard_range r)
{
    return r.end - 1; /* end 0 (2^64) gives UINT64_MAX */
}

void kcr__ranges_clear(kcr__ranges *s)
{
    free(s->r);
    s->r = NULL;
    s->n = 0;
}

/* Index of the range containing h, or of the first range after it (s->n
 * when none), in *idx; returns whether one contains h. */
static bool locate(const kcr__ranges *s, uint64_t h, size_t *idx)
{
    size_t lo = 0, hi = s->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (last_of(s->r[mid]) < h)
            lo = mid + 1;
        else
            hi = mid;
    }
    *idx = lo;
    return lo < s->n && s->r[lo].start <= h;
}

bool kcr__ranges_contains(const kcr__ranges *s, uint64_t hash)
{
    size_t i;
    return locate(s, hash, &i);
}

bool kcr__ranges_equal(const kcr__ranges *a, const kcr__ranges *b)
{
    return a->n == b->n && (a->n == 0 || memcmp(a->r, b->r, a->n * sizeof *a->r) == 0);
}

kcr_err kcr__ranges_append(kcr__ranges *s, uint64_t start, uint64_t end)
{
    if (end != 0 && start >= end)
        return KCR_OK;
    if (s->n > 0 && s->r[s->n - 1].end == start && start != 0) {
        s->r[s->n - 1].end = end;
        return KCR_OK;
    }
    kcr_shard_range *grown = realloc(s->r, (s->n + 1) * sizeof *grown);
    if (!grown)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory growing a shard range set");
    s->r = grown;
    s->r[s->n++] = (kcr_shard_range){start, end};
    return KCR_OK;
}

/* State of one set during the sweep at position p: whether p is inside, and
 * the first position after p where that changes (has_next false: never). */
static bool probe(const kcr__ranges *s, uint64_t p, uint64_t *next, bool *has_next)
{
    size_t i;
    bool in = locate(s, p, &i);
    if (in) {
        uint64_t last = last_of(s->r[i]);
        *has_next = last != UINT64_MAX;
        *next = last + 1;
    } else {
        *has_next = i < s->n;
        *next = *has_next ? s->r[i].start : 0;
    }
    return in;
}

typedef enum set_op { OP_UNION, OP_INTERSECT, OP_SUBTRACT } set_op;

static kcr_err combine(const kcr__ranges *a, const kcr__ranges *b, set_op op, kcr__ranges *out)
{
    kcr__ranges res = {0};
    uint64_t p = 0;
    for (;;) {
        uint64_t na, nb;
        bool ha, hb;
        bool ina = probe(a, p, &na, &ha);
        bool inb = probe(b, p, &nb, &hb);
        bool keep = op == OP_UNION       ? (ina || inb)
                    : op == OP_INTERSECT ? (ina && inb)
                                         : (ina && !inb);
        bool has_next = ha || hb;
        uint64_t next = ha && hb ? (na < nb ? na : nb) : ha ? na : nb;
        if (keep) {
            kcr_err err = kcr__ranges_append(&res, p, has_next ? next : 0);
            if (err != KCR_OK) {
                kcr__ranges_clear(&res);
                return err;
            }
        }
        if (!has_next)
            break;
        p = next;
    }
    kcr__ranges_clear(out);
    *out = res;
    return KCR_OK;
}

kcr_err kcr__ranges_union(const kcr__ranges *a, const kcr__ranges *b, kcr__ranges *out)
{
    return combine(a, b, OP_UNION, out);
}

kcr_err kcr__ranges_intersect(const kcr__ranges *a, const kcr__ranges *b, kcr__ranges *out)
{
    return combine(a, b, OP_INTERSECT, out);
}

kcr_err kcr__ranges_subtract(const kcr__ranges *a, const kcr__ranges *b, kcr__ranges *out)
{
    return combine(a, b, OP_SUBTRACT, out);
}

bool kcr__ranges_intersects(const kcr__ranges *a, const kcr__ranges *b)
{
    size_t i = 0, j = 0;
    while (i < a->n && j < b->n) {
        uint64_t la = last_of(a->r[i]), lb = last_of(b->r[j]);
        if (a->r[i].start <= lb && b->r[j].start <= la)
            return true;
        if (la < lb)
            i++;
        else
            j++;
    }
    return false;
}

kcr_err kcr__ranges_copy(const kcr__ranges *src, kcr__ranges *dst)
{
    kcr__ranges_clear(dst);
    if (src->n == 0)
        return KCR_OK;
    dst->r = malloc(src->n * sizeof *dst->r);
    if (!dst->r)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory copying a shard range set");
    memcpy(dst->r, src->r, src->n * sizeof *dst->r);
    dst->n = src->n;
    return KCR_OK;
}

static int by_start(const void *a, const void *b)
{
    uint64_t x = ((const kcr_shard_range *)a)->start, y = ((const kcr_shard_range *)b)->start;
    return (x > y) - (x < y);
}

kcr_err kcr__ranges_from_array(const kcr_shard_range *ranges, size_t n, kcr__ranges *out)
{
    kcr__ranges_clear(out);
    if (n == 0)
        return KCR_OK;
    kcr_shard_range *r = malloc(n * sizeof *r);
    if (!r)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory sorting shard ranges");
    memcpy(r, ranges, n * sizeof *r);
    qsort(r, n, sizeof *r, by_start);
    size_t m = 0; /* r[0..m) is the set of r[0..i) */
    for (size_t i = 0; i < n; i++) {
        if (r[i].end != 0 && r[i].start >= r[i].end)
            continue; /* empty */
        kcr_shard_range *last = m ? &r[m - 1] : NULL;
        if (!last || (last->end != 0 && r[i].start > last->end))
            r[m++] = r[i];
        else if (last->end != 0 && (r[i].end == 0 || r[i].end > last->end))
            last->end = r[i].end; /* overlaps or touches: merged */
    }
    if (m == 0)
        free(r);
    else
        *out = (kcr__ranges){r, m};
    return KCR_OK;
}

uint64_t kcr__ranges_measure(const kcr__ranges *s)
{
    uint64_t sum = 0;
    for (size_t i = 0; i < s->n; i++) {
        uint64_t len = last_of(s->r[i]) - s->r[i].start; /* one less than the length */
        if (len == UINT64_MAX || sum > UINT64_MAX - (len + 1))
            return UINT64_MAX;
        sum += len + 1;
    }
    return sum;
}

#define RANGE_TEXT 35 /* "<16 hex>-<17 hex>" plus "," */

kcr_err kcr__ranges_format(const kcr__ranges *s, char **out)
{
    *out = malloc(s->n * RANGE_TEXT + 1);
    if (!*out)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory formatting shard ranges");
    char *p = *out;
    *p = '\0';
    for (size_t i = 0; i < s->n; i++) {
        if (s->r[i].end == 0)
            p += sprintf(p, "%s%016" PRIx64 "-10000000000000000", i ? "," : "", s->r[i].start);
        else
            p += sprintf(p, "%s%016" PRIx64 "-%016" PRIx64, i ? "," : "", s->r[i].start,
                         s->r[i].end);
    }
    return KCR_OK;
}

/* Parses exactly `digits` hex digits at *p (advancing it). */
static bool hex_field(const char **p, int digits, uint64_t *v)
{
    *v = 0;
    for (int i = 0; i < digits; i++) {
        char c = (*p)[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0)
            return false;
        *v = *v << 4 | (uint64_t)d;
    }
    *p += digits;
    return true;
}

kcr_err kcr__ranges_parse(const char *text, kcr__ranges *out)
{
    kcr__ranges_clear(out);
    const char *p = text;
    while (*p) {
        uint64_t start, end;
        bool ok = hex_field(&p, 16, &start) && *p++ == '-';
        if (ok && strncmp(p, "10000000000000000", 17) == 0) {
            end = 0;
            p += 17;
        } else if (ok) {
            ok = hex_field(&p, 16, &end) && end > start;
        }
        uint64_t prev_end = out->n ? out->r[out->n - 1].end : 1;
        ok =
            ok && (*p == '\0' || *p == ',') && (out->n == 0 || (prev_end != 0 && start > prev_end));
        if (!ok) {
            kcr__ranges_clear(out);
            return kcr__fail(KCR_ERR_PARSE,
                             "shard ranges \"%.80s\": expected sorted, disjoint "
                             "<16 hex>-<16 hex> pairs joined with ','",
                             text);
        }
        kcr_err err = kcr__ranges_append(out, start, end);
        if (err != KCR_OK) {
            kcr__ranges_clear(out);
            return err;
        }
        if (*p == ',' && *++p == '\0')
            return kcr__ranges_parse(",", out); /* a trailing ',' is an error */
    }
    return KCR_OK;
}
