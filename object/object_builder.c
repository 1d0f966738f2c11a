/* The streaming builder (object/object_builder.h) and the freeze that turns
 * what it wrote into an immutable kcr_object: the only writer of the object
 * layout described in object/object_internal.h. */
#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "object/object_builder.h"
#include "object/object_internal.h"
#include "object/utf8.h"

/* ---- builder ------------------------------------------------------------ */

#define KEY_NONE UINT32_MAX
#define DEDUP_MAX_LEN 128

struct frame {
    uint32_t start; /* index into ents of this container's first word */
    uint32_t key;   /* pending key of a map frame, KEY_NONE when none */
    bool is_map;
};

struct dslot {
    uint32_t hash;
    uint32_t off;
    uint32_t gen;
};

struct kcr__object_builder {
    unsigned char *arena;
    size_t len, cap;
    uint32_t *ents; /* words of the open containers, innermost last */
    size_t nents, cap_ents;
    struct dslot *dedup; /* strings and local keys of this object */
    size_t dcap, dcount;
    uint32_t gen;
    uint32_t *scratch; /* key table for dedup_pairs of big maps */
    size_t scap;
    int depth;
    bool done;
    bool failed;
    uint32_t root;
    struct frame frames[KCR__MAX_DEPTH];
};

kcr__object_builder *kcr__object_builder_new(void)
{
    /* frames (4 KiB) are written as containers open: zeroing them would be
     * most of the cost of parsing a small object */
    kcr__object_builder *b = malloc(sizeof *b);
    if (b) {
        memset(b, 0, offsetof(kcr__object_builder, frames));
        b->gen = 1;
    }
    return b;
}

void kcr__object_builder_free(kcr__object_builder *b)
{
    if (!b)
        return;
    free(b->arena);
    free(b->ents);
    free(b->dedup);
    free(b->scratch);
    free(b);
}

/* Each thread's spare builder, freed when the thread ends. */
static pthread_key_t spare_key;
static pthread_once_t spare_once = PTHREAD_ONCE_INIT;
static bool spare_ok;

static void spare_free(void *b)
{
    kcr__object_builder_free(b);
}

static void spare_init(void)
{
    spare_ok = pthread_key_create(&spare_key, spare_free) == 0;
}

/* A spare keeps at most this much in its arena (a bigger object's arena is
 * not worth holding on to between objects). */
#define SPARE_MAX_ARENA (64 * 1024)

kcr__object_builder *kcr__object_builder_take(void)
{
    pthread_once(&spare_once, spare_init);
    kcr__object_builder *b = spare_ok ? pthread_getspecific(spare_key) : NULL;
    if (!b)
        return kcr__object_builder_new();
    pthread_setspecific(spare_key, NULL);
    kcr__object_builder_reset(b);
    return b;
}

void kcr__object_builder_give(kcr__object_builder *b)
{
    if (!b)
        return;
    if (!spare_ok || b->cap > SPARE_MAX_ARENA || pthread_getspecific(spare_key) ||
        pthread_setspecific(spare_key, b) != 0)
        kcr__object_builder_free(b);
}

void kcr__object_builder_reset(kcr__object_builder *b)
{
    b->len = 0;
    b->nents = 0;
    b->depth = 0;
    b->done = false;
    b->failed = false;
    b->root = 0;
    b->dcount = 0;
    if (++b->gen == 0) {
        if (b->dedup)
            memset(b->dedup, 0, b->dcap * sizeof *b->dedup);
        b->gen = 1;
    }
}

bool kcr__object_builder_done(const kcr__object_builder *b)
{
    return b->done;
}

static kcr_err bfail(kcr__object_builder *b, kcr_err err, const char *what)
{
    b->failed = true;
    return kcr__fail(err, "%s", what);
}

/* Strings and keys are checked here, by the one validator, not by yajl
 * (the parsers set yajl_dont_validate_strings), so every way into an object
 * gives the same answer. */
static kcr_err check_utf8(kcr__object_builder *b, const char *s, size_t len, const char *what)
{
    size_t ok = kcr__utf8_valid_prefix(s, len);
    if (ok == len)
        return KCR_OK;
    b->failed = true;
    return kcr__fail(KCR_ERR_PARSE, "%s is not valid UTF-8 (byte %zu of the %zu-byte %s)", what,
                     ok, len, what);
}

/* Clears (and grows) the scratch table to hold at least 2n slots. */
static kcr_err builder_scratch(kcr__object_builder *b, size_t n, size_t *mask)
{
    size_t cap = 64;
    while (cap < 2 * n)
        cap *= 2;
    if (cap > b->scap) {
        uint32_t *p = realloc(b->scratch, cap * 2 * sizeof *p);
        if (!p)
            return kcr__fail(KCR_ERR_NOMEM, "out of memory");
        b->scratch = p;
        b->scap = cap;
    }
    memset(b->scratch, 0, cap * 2 * sizeof *b->scratch);
    *mask = cap - 1;
    return KCR_OK;
}

static kcr_err reserve(kcr__object_builder *b, size_t more)
{
    if (b->len + more <= b->cap)
        return KCR_OK;
    if (b->len + more > KCR__MAX_ARENA)
        return bfail(b, KCR_ERR_TOO_LARGE, "object larger than 256 MiB");
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + more)
        cap *= 2;
    unsigned char *p = realloc(b->arena, cap);
    if (!p)
        return bfail(b, KCR_ERR_NOMEM, "out of memory building an object");
    b->arena = p;
    b->cap = cap;
    return KCR_OK;
}

static kcr_err push_words(kcr__object_builder *b, uint32_t w0, uint32_t w1, int n)
{
    if (b->nents + 2 > b->cap_ents) {
        size_t cap = b->cap_ents ? b->cap_ents * 2 : 256;
        uint32_t *p = realloc(b->ents, cap * sizeof *p);
        if (!p)
            return bfail(b, KCR_ERR_NOMEM, "out of memory building an object");
        b->ents = p;
        b->cap_ents = cap;
    }
    b->ents[b->nents++] = w0;
    if (n == 2)
        b->ents[b->nents++] = w1;
    return KCR_OK;
}

static bool same_str(const kcr__object_builder *b, uint32_t off, const char *s, size_t len)
{
    size_t l;
    const char *p = kcr__str_at(b->arena + off, &l);
    return l == len && memcmp(p, s, len) == 0;
}

static kcr_err dedup_grow(kcr__object_builder *b)
{
    size_t cap = b->dcap ? b->dcap * 2 : 256;
    struct dslot *d = calloc(cap, sizeof *d);
    if (!d)
        return bfail(b, KCR_ERR_NOMEM, "out of memory building an object");
    for (size_t i = 0; i < b->dcap; i++) {
        struct dslot s = b->dedup[i];
        if (s.gen != b->gen)
            continue;
        size_t j = s.hash & (cap - 1);
        while (d[j].gen == b->gen)
            j = (j + 1) & (cap - 1);
        d[j] = s;
    }
    free(b->dedup);
    b->dedup = d;
    b->dcap = cap;
    return KCR_OK;
}

/* Appends a string (varint length, bytes, NUL), reusing an identical short
 * string of this object (any identical one with `always_dedup`, as for keys,
 * so that equal keys have equal refs); *off gets its arena offset. */
static kcr_err put_string(kcr__object_builder *b, const char *s, size_t len, uint32_t *off,
                          bool always_dedup)
{
    struct dslot *slot = NULL;
    uint32_t hash = 0;
    kcr_err err;
    if (len <= DEDUP_MAX_LEN || always_dedup) {
        if ((b->dcount + 1) * 2 > b->dcap && (err = dedup_grow(b)) != KCR_OK)
            return err;
        hash = kcr__hash_bytes(s, len);
        size_t j = hash & (b->dcap - 1);
        while (b->dedup[j].gen == b->gen) {
            if (b->dedup[j].hash == hash && same_str(b, b->dedup[j].off, s, len)) {
                *off = b->dedup[j].off;
                return KCR_OK;
            }
            j = (j + 1) & (b->dcap - 1);
        }
        slot = &b->dedup[j];
    }
    if ((err = reserve(b, len + 6)) != KCR_OK)
        return err;
    *off = (uint32_t)b->len;
    unsigned char *p = b->arena + b->len;
    size_t n = len;
    while (n >= 0x80) {
        *p++ = (unsigned char)(n | 0x80);
        n >>= 7;
    }
    *p++ = (unsigned char)n;
    memcpy(p, s, len);
    p[len] = '\0';
    b->len = (size_t)(p - b->arena) + len + 1;
    if (slot) {
        slot->hash = hash;
        slot->off = *off;
        slot->gen = b->gen;
        b->dcount++;
    }
    return KCR_OK;
}

static kcr_err add_value(kcr__object_builder *b, uint32_t ref)
{
    if (b->depth == 0)
        return bfail(b, KCR_ERR_PARSE,
                     b->done ? "data after the end of the object" : "top level is not an object");
    struct frame *f = &b->frames[b->depth - 1];
    if (f->is_map) {
        if (f->key == KEY_NONE)
            return bfail(b, KCR_ERR_PARSE, "value without a key");
        uint32_t key = f->key;
        f->key = KEY_NONE;
        return push_words(b, key, ref, 2);
    }
    return push_words(b, ref, 0, 1);
}

static kcr_err check(kcr__object_builder *b)
{
    if (b->failed)
        return kcr__fail(KCR_ERR_STATE, "object builder used after an error without reset");
    return KCR_OK;
}

kcr_err kcr__object_builder_null(kcr__object_builder *b)
{
    kcr_err err = check(b);
    return err ? err : add_value(b, KCR__REF_NULL);
}

kcr_err kcr__object_builder_bool(kcr__object_builder *b, bool value)
{
    kcr_err err = check(b);
    return err ? err : add_value(b, value ? KCR__REF_TRUE : KCR__REF_FALSE);
}

/* Parses a canonical JSON integer (no leading zeros, no "-0") fitting int64. */
static bool canonical_int(const char *s, size_t len, int64_t *out)
{
    size_t i = 0;
    bool neg = false;
    if (len && s[0] == '-') {
        neg = true;
        i = 1;
    }
    if (i >= len || len - i > 19)
        return false;
    if (s[i] == '0' && (len - i > 1 || neg))
        return false;
    uint64_t v = 0;
    for (; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    if (neg) {
        if (v > (uint64_t)INT64_MAX + 1)
            return false;
        *out = v == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)v;
    } else {
        if (v > (uint64_t)INT64_MAX)
            return false;
        *out = (int64_t)v;
    }
    return true;
}

static bool number_syntax_ok(const char *s, size_t len)
{
    size_t i = 0;
    if (i < len && s[i] == '-')
        i++;
    if (i >= len || s[i] < '0' || s[i] > '9')
        return false;
    if (s[i] == '0')
        i++;
    else
        while (i < len && s[i] >= '0' && s[i] <= '9')
            i++;
    if (i < len && s[i] == '.') {
        i++;
        if (i >= len || s[i] < '0' || s[i] > '9')
            return false;
        while (i < len && s[i] >= '0' && s[i] <= '9')
            i++;
    }
    if (i < len && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < len && (s[i] == '+' || s[i] == '-'))
            i++;
        if (i >= len || s[i] < '0' || s[i] > '9')
            return false;
        while (i < len && s[i] >= '0' && s[i] <= '9')
            i++;
    }
    return i == len;
}

kcr_err kcr__object_builder_number(kcr__object_builder *b, const char *text, size_t len)
{
    kcr_err err = check(b);
    if (err)
        return err;
    int64_t v;
    if (canonical_int(text, len, &v)) {
        if (v >= -KCR__SMALLINT_BIAS && v < KCR__SMALLINT_BIAS)
            return add_value(b, KCR__REF(KCR__T_SMALLINT, (uint32_t)(v + KCR__SMALLINT_BIAS)));
        if ((err = reserve(b, 8)) != KCR_OK)
            return err;
        uint32_t off = (uint32_t)b->len;
        memcpy(b->arena + off, &v, 8);
        b->len += 8;
        return add_value(b, KCR__REF(KCR__T_INT64, off));
    }
    /* Anything else must be a JSON number a float64 can hold, like a Go
     * client would decode it. */
    if (len > 64 || !number_syntax_ok(text, len))
        return bfail(b, KCR_ERR_PARSE,
                     len > 64 ? "number too long (over 64 characters)" : "malformed number");
    char buf[72];
    memcpy(buf, text, len);
    buf[len] = '\0';
    double d = strtod(buf, NULL);
    if (d == HUGE_VAL || d == -HUGE_VAL)
        return bfail(b, KCR_ERR_PARSE, "number out of range for a 64-bit float");
    uint32_t off;
    if ((err = put_string(b, text, len, &off, false)) != KCR_OK)
        return err;
    return add_value(b, KCR__REF(KCR__T_NUM, off));
}

static kcr_err add_string(kcr__object_builder *b, const char *text, size_t len, bool ascii)
{
    kcr_err err = check(b);
    if (err)
        return err;
    if (len == 0)
        return add_value(b, KCR__REF_EMPTY_STR);
    if (!ascii && (err = check_utf8(b, text, len, "string")) != KCR_OK)
        return err;
    uint32_t off;
    if ((err = put_string(b, text, len, &off, false)) != KCR_OK)
        return err;
    return add_value(b, KCR__REF(KCR__T_STR, off));
}

kcr_err kcr__object_builder_string(kcr__object_builder *b, const char *text, size_t len)
{
    return add_string(b, text, len, false);
}

kcr_err kcr__object_builder_string_ascii(kcr__object_builder *b, const char *text, size_t len)
{
    return add_string(b, text, len, true);
}

static kcr_err open_container(kcr__object_builder *b, bool is_map)
{
    kcr_err err = check(b);
    if (err)
        return err;
    if (b->depth == 0) {
        if (b->done)
            return bfail(b, KCR_ERR_PARSE, "data after the end of the object");
        if (!is_map)
            return bfail(b, KCR_ERR_PARSE, "top level is not an object");
    } else {
        const struct frame *p = &b->frames[b->depth - 1];
        if (p->is_map && p->key == KEY_NONE)
            return bfail(b, KCR_ERR_PARSE, "value without a key");
    }
    if (b->depth >= KCR__MAX_DEPTH)
        return bfail(b, KCR_ERR_PARSE, "nesting deeper than 256 levels");
    struct frame *f = &b->frames[b->depth++];
    f->start = (uint32_t)b->nents;
    f->key = KEY_NONE;
    f->is_map = is_map;
    return KCR_OK;
}

/* Drops duplicate keys of the `n` (key, value) pairs at `e` in place: the
 * first position is kept with the LAST value, as Go's decoder would leave a
 * map. Equal keys have equal refs (interned ids, or deduplicated local
 * strings). Returns the new pair count. */
static size_t dedup_pairs(kcr__object_builder *b, uint32_t *e, size_t n)
{
    size_t out = 0, mask = 0;
    if (n <= 16 || builder_scratch(b, n, &mask) != KCR_OK) {
        for (size_t i = 0; i < n; i++) {
            size_t j = 0;
            while (j < out && e[2 * j] != e[2 * i])
                j++;
            if (j < out) {
                e[2 * j + 1] = e[2 * i + 1];
            } else {
                e[2 * out] = e[2 * i];
                e[2 * out + 1] = e[2 * i + 1];
                out++;
            }
        }
        return out;
    }
    /* scratch: open addressing of (key, position + 1) pairs */
    for (size_t i = 0; i < n; i++) {
        uint32_t key = e[2 * i];
        size_t h = (key * 0x9E3779B1u) & mask;
        while (b->scratch[2 * h + 1] && b->scratch[2 * h] != key)
            h = (h + 1) & mask;
        if (b->scratch[2 * h + 1]) {
            e[2 * (b->scratch[2 * h + 1] - 1) + 1] = e[2 * i + 1];
        } else {
            b->scratch[2 * h] = key;
            b->scratch[2 * h + 1] = (uint32_t)out + 1;
            e[2 * out] = key;
            e[2 * out + 1] = e[2 * i + 1];
            out++;
        }
    }
    return out;
}

static kcr_err close_container(kcr__object_builder *b, bool is_map)
{
    kcr_err err = check(b);
    if (err)
        return err;
    if (b->depth == 0 || b->frames[b->depth - 1].is_map != is_map)
        return bfail(b, KCR_ERR_PARSE, is_map ? "unexpected end of object" : "unexpected end of array");
    struct frame *f = &b->frames[b->depth - 1];
    if (is_map && f->key != KEY_NONE)
        return bfail(b, KCR_ERR_PARSE, "key without a value");
    size_t words = b->nents - f->start;
    if (is_map && words > 2)
        words = 2 * dedup_pairs(b, b->ents + f->start, words / 2);
    uint32_t ref;
    if (words == 0) {
        ref = is_map ? KCR__REF_EMPTY_MAP : KCR__REF_EMPTY_ARR;
    } else {
        size_t pad = (4 - (b->len & 3)) & 3;
        if ((err = reserve(b, pad + 4 + words * 4)) != KCR_OK)
            return err;
        memset(b->arena + b->len, 0, pad);
        b->len += pad;
        uint32_t off = (uint32_t)b->len;
        uint32_t count = (uint32_t)(is_map ? words / 2 : words);
        memcpy(b->arena + off, &count, 4);
        memcpy(b->arena + off + 4, b->ents + f->start, words * 4);
        b->len += 4 + words * 4;
        ref = KCR__REF(is_map ? KCR__T_MAP : KCR__T_ARR, off);
    }
    b->nents = f->start;
    b->depth--;
    if (b->depth == 0) {
        b->root = ref;
        b->done = true;
        return KCR_OK;
    }
    return add_value(b, ref);
}

kcr_err kcr__object_builder_start_map(kcr__object_builder *b)
{
    return open_container(b, true);
}

kcr_err kcr__object_builder_end_map(kcr__object_builder *b)
{
    return close_container(b, true);
}

kcr_err kcr__object_builder_start_array(kcr__object_builder *b)
{
    return open_container(b, false);
}

kcr_err kcr__object_builder_end_array(kcr__object_builder *b)
{
    return close_container(b, false);
}

static kcr_err add_key(kcr__object_builder *b, const char *key, size_t len, bool ascii)
{
    kcr_err err = check(b);
    if (err)
        return err;
    if (b->depth == 0 || !b->frames[b->depth - 1].is_map)
        return bfail(b, KCR_ERR_PARSE, "key outside an object");
    struct frame *f = &b->frames[b->depth - 1];
    if (f->key != KEY_NONE)
        return bfail(b, KCR_ERR_PARSE, "key without a value");
    if (!ascii && (err = check_utf8(b, key, len, "key")) != KCR_OK)
        return err;
    uint32_t id = kcr__intern(key, len, kcr__hash_bytes(key, len));
    if (id != KCR__INTERN_NONE) {
        f->key = id | KCR__KEY_INTERNED;
        return KCR_OK;
    }
    uint32_t off;
    if ((err = put_string(b, key, len, &off, true)) != KCR_OK)
        return err;
    f->key = off;
    return KCR_OK;
}

kcr_err kcr__object_builder_map_key(kcr__object_builder *b, const char *key, size_t len)
{
    return add_key(b, key, len, false);
}

kcr_err kcr__object_builder_map_key_ascii(kcr__object_builder *b, const char *key, size_t len)
{
    return add_key(b, key, len, true);
}

/* ---- freezing ----------------------------------------------------------- */

static kcr_err freeze(kcr__object_builder *b, kcr_object **out, bool require_name)
{
    *out = NULL;
    if (b->failed) {
        kcr__object_builder_reset(b);
        return kcr__fail(KCR_ERR_STATE, "object builder used after an error without reset");
    }
    if (!b->done) {
        kcr__object_builder_reset(b);
        return kcr__fail(KCR_ERR_PARSE, "incomplete object (input ended inside it)");
    }
    kcr_object *o = malloc(sizeof *o + b->len);
    if (!o) {
        kcr__object_builder_reset(b);
        return kcr__fail(KCR_ERR_NOMEM, "out of memory freezing an object");
    }
    atomic_init(&o->refs, 1);
    o->size = (uint32_t)b->len;
    o->root = b->root;
    if (b->len)
        memcpy(o->data, b->arena, b->len);
    kcr__object_builder_reset(b);

    kcr__object_index(o);
    uint32_t md = o->field[KCR__F_METADATA];
    const char *name = kcr__ref_cstr(o, o->field[KCR__F_NAME]);
    if (require_name && name[0] == '\0') {
        free(o);
        return kcr__fail(KCR_ERR_PARSE, md == KCR__REF_ABSENT
                                            ? "object has no metadata"
                                            : "object has no metadata.name (or it is not a "
                                              "non-empty string)");
    }
    *out = o;
    return KCR_OK;
}

kcr_err kcr__object_builder_finish(kcr__object_builder *b, kcr_object **out)
{
    return freeze(b, out, true);
}

kcr_err kcr__object_builder_finish_any(kcr__object_builder *b, kcr_object **out)
{
    return freeze(b, out, false);
}
