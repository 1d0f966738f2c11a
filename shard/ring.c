/* The shard ring (ring.h): the slot layout built one slot at a time, vacant
 * slots spread by rendezvous per grid cell, and owner lookups by binary
 * search over the resulting segments. */
#include "shard/ring.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"

/* Vacant slots are spread per cell of this size (2^58: 64 cells). */
#define CELL_SHIFT 58

/* A segment: from `start` to the next segment's start (the last one to
 * 2^64), held by `who` (a slot while laying out, a member index after). */
typedef struct seg {
    uint64_t start;
    int who;
} seg;

typedef struct segs {
    seg *s;
    size_t n, cap;
} segs;

struct kcr__ring {
    char **ids; /* members sorted by identity */
    int *slots;
    bool *placed;
    size_t n;
    int slot_member[KCR__RING_MAX_SLOTS]; /* member index holding each slot, -1 */
    segs out;                             /* who = member index, -1 for none */
};

static uint64_t seg_len(const segs *l, size_t j)
{
    uint64_t end = j + 1 < l->n ? l->s[j + 1].start : 0;
    uint64_t len = end - l->s[j].start;
    return len == 0 ? UINT64_MAX : len; /* only the whole space wraps to 0 */
}

static kcr_err segs_insert(segs *l, size_t at, seg v)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        seg *grown = realloc(l->s, cap * sizeof *grown);
        if (!grown)
            return kcr__fail(KCR_ERR_NOMEM, "out of memory laying out the shard ring");
        l->s = grown;
        l->cap = cap;
    }
    memmove(&l->s[at + 1], &l->s[at], (l->n - at) * sizeof *l->s);
    l->s[at] = v;
    l->n++;
    return KCR_OK;
}

/* Appends (start, who), merged into the last segment when it has the same
 * holder. */
static kcr_err segs_push(segs *l, uint64_t start, int who)
{
    if (l->n > 0 && l->s[l->n - 1].who == who)
        return KCR_OK;
    return segs_insert(l, l->n, (seg){start, who});
}

/* Moves `amount` from slot `donor` to slot `taker`, cut from the tail of
 * the donor's largest segment (the first of equals), so the donor keeps its
 * number of ranges and the taker gets one piece: a donor holding 1/k in at
 * most k segments always has one of at least 1/k^2, more than the
 * 1/(k(k+1)) it gives. Should rounding ever leave it short, the rest comes
 * from the next largest. */
static kcr_err take_tail(segs *l, int donor, int taker, uint64_t amount)
{
    while (amount > 0) {
        size_t best = l->n;
        for (size_t j = 0; j < l->n; j++)
            if (l->s[j].who == donor && (best == l->n || seg_len(l, j) > seg_len(l, best)))
                best = j;
        if (best == l->n)
            return KCR_OK; /* the donor has nothing left */
        uint64_t len = seg_len(l, best);
        if (amount >= len) {
            l->s[best].who = taker;
            amount -= len;
            continue;
        }
        uint64_t end = best + 1 < l->n ? l->s[best + 1].start : 0;
        return segs_insert(l, best + 1, (seg){end - amount, taker});
    }
    return KCR_OK;
}

static uint64_t slot_measure(const segs *l, int slot)
{
    uint64_t sum = 0;
    for (size_t j = 0; j < l->n; j++) {
        if (l->s[j].who != slot)
            continue;
        uint64_t len = seg_len(l, j);
        sum = len > UINT64_MAX - sum ? UINT64_MAX : sum + len;
    }
    return sum;
}

/* The layout of slots 0 .. m-1 (m >= 1), adjacent segments of one slot
 * merged. */
static kcr_err lay_out(int m, segs *l)
{
    kcr_err err = segs_insert(l, 0, (seg){0, 0});
    for (int k = 1; k < m && err == KCR_OK; k++)
        for (int i = 0; i < k && err == KCR_OK; i++)
            err = take_tail(l, i, k, slot_measure(l, i) / (uint64_t)(k + 1));
    if (err != KCR_OK)
        return err;
    size_t w = 0;
    for (size_t j = 0; j < l->n; j++)
        if (w == 0 || l->s[w - 1].who != l->s[j].who)
            l->s[w++] = l->s[j];
    l->n = w;
    return KCR_OK;
}

static uint64_t mix64(uint64_t x)
{
    x += UINT64_C(0x9e3779b97f4a7c15);
    x = (x ^ (x >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    x = (x ^ (x >> 27)) * UINT64_C(0x94d049bb133111eb);
    return x ^ (x >> 31);
}

/* The member that takes grid cell `cell` of vacant slot `vacant`: the
 * highest rendezvous score over the placed members' slots. */
static int rendezvous(const kcr__ring *r, uint64_t cell, int vacant)
{
    int best = -1;
    uint64_t best_score = 0;
    for (int s = 0; s < KCR__RING_MAX_SLOTS; s++) {
        if (r->slot_member[s] < 0)
            continue;
        uint64_t score = mix64(cell << 16 | (uint64_t)vacant << 8 | (uint64_t)s);
        if (best < 0 || score > best_score) {
            best = r->slot_member[s];
            best_score = score;
        }
    }
    return best;
}

/* Fills r->out from the layout: held slots go to their member, vacant ones
 * cell by cell to the rendezvous winner. */
static kcr_err assign(kcr__ring *r, const segs *l)
{
    kcr_err err = KCR_OK;
    for (size_t j = 0; j < l->n && err == KCR_OK; j++) {
        int member = r->slot_member[l->s[j].who];
        if (member >= 0) {
            err = segs_push(&r->out, l->s[j].start, member);
            continue;
        }
        uint64_t p = l->s[j].start;
        uint64_t last = p + (seg_len(l, j) - 1); /* inclusive */
        for (;;) {
            uint64_t cell = p >> CELL_SHIFT;
            err = segs_push(&r->out, p, rendezvous(r, cell, l->s[j].who));
            uint64_t cell_last = p | ((UINT64_C(1) << CELL_SHIFT) - 1);
            if (err != KCR_OK || cell_last >= last)
                break;
            p = cell_last + 1;
        }
    }
    return err;
}

static int by_identity(const void *a, const void *b)
{
    return strcmp(((const kcr__ring_member *)a)->identity, ((const kcr__ring_member *)b)->identity);
}

kcr_err kcr__ring_build(const kcr__ring_member *members, size_t n, kcr__ring **out)
{
    *out = NULL;
    kcr__ring_member *sorted = malloc((n ? n : 1) * sizeof *sorted);
    kcr__ring *r = calloc(1, sizeof *r);
    if (r) {
        r->ids = calloc(n ? n : 1, sizeof *r->ids);
        r->slots = calloc(n ? n : 1, sizeof *r->slots);
        r->placed = calloc(n ? n : 1, sizeof *r->placed);
    }
    if (!sorted || !r || !r->ids || !r->slots || !r->placed) {
        free(sorted);
        kcr__ring_free(r);
        return kcr__fail(KCR_ERR_NOMEM, "out of memory building the shard ring");
    }
    if (n)
        memcpy(sorted, members, n * sizeof *sorted);
    qsort(sorted, n, sizeof *sorted, by_identity);
    kcr_err err = KCR_OK;
    for (size_t i = 0; i < n && err == KCR_OK; i++) {
        const char *id = sorted[i].identity;
        if (!id || !*id)
            err = kcr__fail(KCR_ERR_INVALID, "shard ring: a member has no identity");
        else if (i > 0 && strcmp(id, sorted[i - 1].identity) == 0)
            err = kcr__fail(KCR_ERR_INVALID, "shard ring: identity \"%s\" appears twice", id);
        else if (!(r->ids[i] = strdup(id)))
            err = kcr__fail(KCR_ERR_NOMEM, "out of memory building the shard ring");
        r->slots[i] = sorted[i].slot;
        r->n = i + 1;
    }
    free(sorted);
    /* Sorted by identity, so the first claimant of a slot is the smallest. */
    int m = 0;
    for (int s = 0; s < KCR__RING_MAX_SLOTS; s++)
        r->slot_member[s] = -1;
    for (size_t i = 0; i < r->n && err == KCR_OK; i++) {
        int s = r->slots[i];
        if (s >= 0 && s < KCR__RING_MAX_SLOTS && r->slot_member[s] < 0) {
            r->slot_member[s] = (int)i;
            r->placed[i] = true;
            m = s + 1 > m ? s + 1 : m;
        }
    }
    segs layout = {0};
    if (err == KCR_OK && m == 0)
        err = segs_push(&r->out, 0, -1);
    else if (err == KCR_OK)
        err = lay_out(m, &layout);
    if (err == KCR_OK && m > 0)
        err = assign(r, &layout);
    free(layout.s);
    if (err != KCR_OK) {
        kcr__ring_free(r);
        return err;
    }
    *out = r;
    return KCR_OK;
}

void kcr__ring_free(kcr__ring *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n; i++)
        free(r->ids[i]);
    free(r->ids);
    free(r->slots);
    free(r->placed);
    free(r->out.s);
    free(r);
}

kcr_err kcr__ring_copy(const kcr__ring *r, kcr__ring **out)
{
    kcr__ring_member *members = calloc(r->n ? r->n : 1, sizeof *members);
    if (!members)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory copying the shard ring");
    for (size_t i = 0; i < r->n; i++)
        members[i] = (kcr__ring_member){r->ids[i], r->slots[i]};
    kcr_err err = kcr__ring_build(members, r->n, out);
    free(members);
    return err;
}

const char *kcr__ring_owner(const kcr__ring *r, uint64_t hash)
{
    size_t lo = 0, hi = r->out.n; /* the last segment starting at or before hash */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (r->out.s[mid].start <= hash)
            lo = mid;
        else
            hi = mid;
    }
    int who = r->out.s[lo].who;
    return who >= 0 ? r->ids[who] : NULL;
}

static int member_index(const kcr__ring *r, const char *identity)
{
    size_t lo = 0, hi = r->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(r->ids[mid], identity);
        if (c == 0)
            return (int)mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

bool kcr__ring_same_members(const kcr__ring *r, const kcr__ring_member *members, size_t n)
{
    if (!r || n != r->n)
        return false;
    for (size_t i = 0; i < n; i++) {
        int who = members[i].identity ? member_index(r, members[i].identity) : -1;
        if (who < 0 || r->slots[who] != members[i].slot)
            return false;
    }
    return true;
}

kcr_err kcr__ring_ranges(const kcr__ring *r, const char *identity, kcr__ranges *out)
{
    kcr__ranges_clear(out);
    int who = identity ? member_index(r, identity) : -1;
    if (who < 0)
        return KCR_OK;
    for (size_t j = 0; j < r->out.n; j++) {
        if (r->out.s[j].who != who)
            continue;
        uint64_t end = j + 1 < r->out.n ? r->out.s[j + 1].start : 0;
        kcr_err err = kcr__ranges_append(out, r->out.s[j].start, end);
        if (err != KCR_OK) {
            kcr__ranges_clear(out);
            return err;
        }
    }
    return KCR_OK;
}

bool kcr__ring_placed(const kcr__ring *r, const char *identity)
{
    int who = identity ? member_index(r, identity) : -1;
    return who >= 0 && r->placed[who];
}

size_t kcr__ring_size(const kcr__ring *r)
{
    return r->n;
}

const char *kcr__ring_placed_at(const kcr__ring *r, size_t i)
{
    return i < r->n && r->placed[i] ? r->ids[i] : NULL;
}

int kcr__ring_free_slot(const kcr__ring *r)
{
    int s = 0;
    while (s < KCR__RING_MAX_SLOTS && r->slot_member[s] >= 0)
        s++;
    return s;
}

bool kcr__ring_slot_held(const kcr__ring *r, int slot)
{
    return slot >= 0 && slot < KCR__RING_MAX_SLOTS && r->slot_member[slot] >= 0;
}
