/* kcr_object: building (the streaming builder and kcr_object_parse),
 * reference counting, metadata accessors and serialization. The layout is
 * described in object/object_internal.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yajl/yajl_gen.h>
#include <yajl/yajl_parse.h>

#include "core/error.h"
#include "object/object_builder.h"
#include "object/object_internal.h"
#include "object/value.h"

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
    kcr__object_builder *b = calloc(1, sizeof *b);
    if (b)
        b->gen = 1;
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

kcr_err kcr__object_builder_string(kcr__object_builder *b, const char *text, size_t len)
{
    kcr_err err = check(b);
    if (err)
        return err;
    if (len == 0)
        return add_value(b, KCR__REF_EMPTY_STR);
    uint32_t off;
    if ((err = put_string(b, text, len, &off, false)) != KCR_OK)
        return err;
    return add_value(b, KCR__REF(KCR__T_STR, off));
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

kcr_err kcr__object_builder_map_key(kcr__object_builder *b, const char *key, size_t len)
{
    kcr_err err = check(b);
    if (err)
        return err;
    if (b->depth == 0 || !b->frames[b->depth - 1].is_map)
        return bfail(b, KCR_ERR_PARSE, "key outside an object");
    struct frame *f = &b->frames[b->depth - 1];
    if (f->key != KEY_NONE)
        return bfail(b, KCR_ERR_PARSE, "key without a value");
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

/* ---- freezing ----------------------------------------------------------- */

uint32_t kcr__map_get_id(const kcr_object *o, uint32_t map, uint32_t id)
{
    if (KCR__REF_TAG(map) != KCR__T_MAP)
        return KCR__REF_ABSENT;
    uint32_t n = kcr__ref_count(o, map);
    const unsigned char *p = kcr__ref_items(o, map);
    uint32_t want = id | KCR__KEY_INTERNED;
    for (uint32_t i = 0; i < n; i++, p += 8)
        if (kcr__rd32(p) == want)
            return kcr__rd32(p + 4);
    return KCR__REF_ABSENT;
}

uint32_t kcr__map_get(const kcr_object *o, uint32_t map, const char *key, size_t len, uint32_t id)
{
    if (KCR__REF_TAG(map) != KCR__T_MAP)
        return KCR__REF_ABSENT;
    if (id != KCR__INTERN_NONE)
        return kcr__map_get_id(o, map, id);
    uint32_t n = kcr__ref_count(o, map);
    const unsigned char *p = kcr__ref_items(o, map);
    for (uint32_t i = 0; i < n; i++, p += 8) {
        uint32_t k = kcr__rd32(p);
        if (k & KCR__KEY_INTERNED)
            continue;
        size_t l;
        const char *s = kcr__str_at(o->data + k, &l);
        if (l == len && memcmp(s, key, len) == 0)
            return kcr__rd32(p + 4);
    }
    return KCR__REF_ABSENT;
}

const char *kcr__ref_cstr(const kcr_object *o, uint32_t ref)
{
    if (KCR__REF_TAG(ref) != KCR__T_STR)
        return "";
    size_t len;
    return kcr__str_at(o->data + KCR__REF_PAYLOAD(ref), &len);
}

uint32_t kcr__object_key_hash(const char *ns, const char *name)
{
    size_t nl = strlen(ns), ml = strlen(name);
    char small[256];
    char *k = nl + ml + 1 <= sizeof small ? small : malloc(nl + ml + 1);
    if (!k)
        return 0; /* only a worse hash: lookups still compare keys */
    memcpy(k, ns, nl);
    if (nl)
        k[nl++] = '/';
    memcpy(k + nl, name, ml);
    uint32_t h = kcr__hash_bytes(k, nl + ml);
    if (k != small)
        free(k);
    return h;
}

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

    uint32_t md = kcr__map_get_id(o, o->root, KCR__K_METADATA);
    o->field[KCR__F_METADATA] = md;
    o->field[KCR__F_API_VERSION] = kcr__map_get_id(o, o->root, KCR__K_API_VERSION);
    o->field[KCR__F_KIND] = kcr__map_get_id(o, o->root, KCR__K_KIND);
    static const struct {
        int field, key;
    } meta[] = {
        {KCR__F_NAMESPACE, KCR__K_NAMESPACE},
        {KCR__F_NAME, KCR__K_NAME},
        {KCR__F_UID, KCR__K_UID},
        {KCR__F_RESOURCE_VERSION, KCR__K_RESOURCE_VERSION},
        {KCR__F_GENERATION, KCR__K_GENERATION},
        {KCR__F_LABELS, KCR__K_LABELS},
        {KCR__F_ANNOTATIONS, KCR__K_ANNOTATIONS},
        {KCR__F_OWNER_REFERENCES, KCR__K_OWNER_REFERENCES},
        {KCR__F_FINALIZERS, KCR__K_FINALIZERS},
        {KCR__F_DELETION_TIMESTAMP, KCR__K_DELETION_TIMESTAMP},
    };
    for (size_t i = 0; i < sizeof meta / sizeof meta[0]; i++)
        o->field[meta[i].field] = kcr__map_get_id(o, md, (uint32_t)meta[i].key);

    const char *name = kcr__ref_cstr(o, o->field[KCR__F_NAME]);
    if (require_name && name[0] == '\0') {
        free(o);
        return kcr__fail(KCR_ERR_PARSE, md == KCR__REF_ABSENT
                                            ? "object has no metadata"
                                            : "object has no metadata.name (or it is not a "
                                              "non-empty string)");
    }
    o->key_hash = kcr__object_key_hash(kcr__ref_cstr(o, o->field[KCR__F_NAMESPACE]), name);
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

/* ---- parsing with yajl -------------------------------------------------- */


#define CB(call)                                                                                   \
    do {                                                                                           \
        struct kcr__parse_ctx *c = ctx;                                                                      \
        c->err = (call);                                                                           \
        return c->err == KCR_OK;                                                                   \
    } while (0)

static int cb_null(void *ctx)
{
    CB(kcr__object_builder_null(c->b));
}
static int cb_bool(void *ctx, int v)
{
    CB(kcr__object_builder_bool(c->b, v != 0));
}
static int cb_number(void *ctx, const char *s, size_t l)
{
    CB(kcr__object_builder_number(c->b, s, l));
}
static int cb_string(void *ctx, const unsigned char *s, size_t l)
{
    CB(kcr__object_builder_string(c->b, (const char *)s, l));
}
static int cb_start_map(void *ctx)
{
    CB(kcr__object_builder_start_map(c->b));
}
static int cb_map_key(void *ctx, const unsigned char *s, size_t l)
{
    CB(kcr__object_builder_map_key(c->b, (const char *)s, l));
}
static int cb_end_map(void *ctx)
{
    CB(kcr__object_builder_end_map(c->b));
}
static int cb_start_array(void *ctx)
{
    CB(kcr__object_builder_start_array(c->b));
}
static int cb_end_array(void *ctx)
{
    CB(kcr__object_builder_end_array(c->b));
}

const yajl_callbacks kcr__object_yajl_callbacks = {
    cb_null,     cb_bool,    NULL,           NULL,        cb_number, cb_string,
    cb_start_map, cb_map_key, cb_end_map, cb_start_array, cb_end_array,
};

static kcr_err parse(const char *json, size_t len, kcr_object **out, bool require_name)
{
    if (!out)
        return kcr__fail(KCR_ERR_INVALID, "kcr_object_parse: out is NULL");
    *out = NULL;
    if (!json)
        return kcr__fail(KCR_ERR_INVALID, "kcr_object_parse: json is NULL");
    if (len == 0) /* like the client calls: 0 means a NUL-terminated string */
        len = strlen(json);
    struct kcr__parse_ctx c = {kcr__object_builder_new(), KCR_OK};
    if (!c.b)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory parsing an object");
    yajl_handle h = yajl_alloc(&kcr__object_yajl_callbacks, NULL, &c);
    if (!h) {
        kcr__object_builder_free(c.b);
        return kcr__fail(KCR_ERR_NOMEM, "out of memory parsing an object");
    }
    kcr_err err = KCR_OK;
    yajl_status st = yajl_parse(h, (const unsigned char *)(json ? json : ""), len);
    size_t at = yajl_get_bytes_consumed(h);
    if (st == yajl_status_ok) {
        st = yajl_complete_parse(h);
        at = len;
    }
    if (st == yajl_status_client_canceled) {
        char detail[256];
        snprintf(detail, sizeof detail, "%s", kcr_last_error());
        err = kcr__fail(c.err, "JSON object: %s (at byte %zu)", detail, at ? at - 1 : 0);
    } else if (st != yajl_status_ok) {
        unsigned char *msg = yajl_get_error(h, 0, (const unsigned char *)json, len);
        size_t n = msg ? strlen((char *)msg) : 0;
        while (n && (msg[n - 1] == '\n' || msg[n - 1] == ' '))
            msg[--n] = '\0';
        err = kcr__fail(KCR_ERR_PARSE, "invalid JSON at byte %zu of %zu: %s", at, len,
                        msg ? (char *)msg : "parse error");
        if (msg)
            yajl_free_error(h, msg);
    } else if (!kcr__object_builder_done(c.b)) {
        err = kcr__fail(KCR_ERR_PARSE, "invalid JSON: no object in %zu bytes", len);
    } else {
        err = freeze(c.b, out, require_name);
    }
    yajl_free(h);
    kcr__object_builder_free(c.b);
    return err;
}

kcr_err kcr_object_parse(const char *json, size_t len, kcr_object **out)
{
    return parse(json, len, out, true);
}

kcr_err kcr_object_parse_any(const char *json, size_t len, kcr_object **out)
{
    return parse(json, len, out, false);
}

kcr_err kcr__document_parse(const char *json, size_t len, const char *what, kcr_object **out)
{
    *out = NULL;
    if (!json || (len == 0 && !*json))
        return kcr__fail(KCR_ERR_PARSE, "%s: empty", what);
    kcr_err err = kcr_object_parse_any(json, len, out);
    return err == KCR_OK ? KCR_OK : kcr__refail(err, "%s: ", what);
}

/* ---- references and accessors ------------------------------------------ */

kcr_object *kcr_object_ref(const kcr_object *obj)
{
    kcr_object *o = (kcr_object *)obj;
    if (o)
        atomic_fetch_add_explicit(&o->refs, 1, memory_order_relaxed);
    return o;
}

void kcr_object_unref(const kcr_object *obj)
{
    kcr_object *o = (kcr_object *)obj;
    if (o && atomic_fetch_sub_explicit(&o->refs, 1, memory_order_acq_rel) == 1)
        free(o);
}

void kcr__object_unref_wipe(const kcr_object *obj)
{
    kcr_object *o = (kcr_object *)obj;
    if (o && atomic_fetch_sub_explicit(&o->refs, 1, memory_order_acq_rel) == 1) {
        /* volatile stores, so the wipe of memory about to be freed stays */
        volatile unsigned char *p = o->data;
        for (uint32_t i = 0; i < o->size; i++)
            p[i] = 0;
        free(o);
    }
}

size_t kcr_object_memory_size(const kcr_object *obj)
{
    return sizeof *obj + obj->size;
}

const char *kcr_object_api_version(const kcr_object *obj)
{
    return kcr__ref_cstr(obj, obj->field[KCR__F_API_VERSION]);
}

const char *kcr_object_kind(const kcr_object *obj)
{
    return kcr__ref_cstr(obj, obj->field[KCR__F_KIND]);
}

const char *kcr_object_namespace(const kcr_object *obj)
{
    return kcr__ref_cstr(obj, obj->field[KCR__F_NAMESPACE]);
}

const char *kcr_object_name(const kcr_object *obj)
{
    return kcr__ref_cstr(obj, obj->field[KCR__F_NAME]);
}

const char *kcr_object_uid(const kcr_object *obj)
{
    return kcr__ref_cstr(obj, obj->field[KCR__F_UID]);
}

const char *kcr_object_resource_version(const kcr_object *obj)
{
    return kcr__ref_cstr(obj, obj->field[KCR__F_RESOURCE_VERSION]);
}

bool kcr__ref_int(const kcr_object *o, uint32_t ref, int64_t *out)
{
    if (KCR__REF_TAG(ref) == KCR__T_SMALLINT) {
        *out = (int64_t)KCR__REF_PAYLOAD(ref) - KCR__SMALLINT_BIAS;
        return true;
    }
    if (KCR__REF_TAG(ref) == KCR__T_INT64) {
        memcpy(out, o->data + KCR__REF_PAYLOAD(ref), 8);
        return true;
    }
    return false;
}

int64_t kcr_object_generation(const kcr_object *obj)
{
    int64_t v = 0;
    return kcr__ref_int(obj, obj->field[KCR__F_GENERATION], &v) ? v : 0;
}

bool kcr_object_is_deleting(const kcr_object *obj)
{
    uint32_t r = obj->field[KCR__F_DELETION_TIMESTAMP];
    return r != KCR__REF_ABSENT && r != KCR__REF_NULL;
}

const char *kcr_object_deletion_timestamp(const kcr_object *obj)
{
    return kcr__ref_cstr(obj, obj->field[KCR__F_DELETION_TIMESTAMP]);
}

static const char *map_lookup_cstr(const kcr_object *o, uint32_t map, const char *key)
{
    size_t len = strlen(key);
    uint32_t r = kcr__map_get(o, map, key, len, kcr__intern_find(key, len, kcr__hash_bytes(key, len)));
    if (!kcr__ref_is_str(r))
        return NULL;
    size_t l;
    return kcr__ref_str(o, r, &l);
}

const char *kcr_object_label(const kcr_object *obj, const char *key)
{
    return map_lookup_cstr(obj, obj->field[KCR__F_LABELS], key);
}

const char *kcr_object_annotation(const kcr_object *obj, const char *key)
{
    return map_lookup_cstr(obj, obj->field[KCR__F_ANNOTATIONS], key);
}

static kcr_value view(const kcr_object *o, uint32_t ref)
{
    kcr_value v = {ref == KCR__REF_ABSENT ? NULL : o, ref};
    return v;
}

kcr_value kcr_object_labels(const kcr_object *obj)
{
    uint32_t r = obj->field[KCR__F_LABELS];
    return view(obj, kcr__ref_is_map(r) ? r : KCR__REF_ABSENT);
}

kcr_value kcr_object_annotations(const kcr_object *obj)
{
    uint32_t r = obj->field[KCR__F_ANNOTATIONS];
    return view(obj, kcr__ref_is_map(r) ? r : KCR__REF_ABSENT);
}

size_t kcr_object_owner_ref_count(const kcr_object *obj)
{
    uint32_t r = obj->field[KCR__F_OWNER_REFERENCES];
    return KCR__REF_TAG(r) == KCR__T_ARR ? kcr__ref_count(obj, r) : 0;
}

static const char *member_cstr(const kcr_object *o, uint32_t map, uint32_t id)
{
    return kcr__ref_cstr(o, kcr__map_get_id(o, map, id));
}

bool kcr_object_owner_ref(const kcr_object *obj, size_t i, kcr_owner_ref *out)
{
    if (i >= kcr_object_owner_ref_count(obj))
        return false;
    uint32_t r = obj->field[KCR__F_OWNER_REFERENCES];
    uint32_t m = kcr__rd32(kcr__ref_items(obj, r) + 4 * i);
    out->api_version = member_cstr(obj, m, KCR__K_API_VERSION);
    out->kind = member_cstr(obj, m, KCR__K_KIND);
    out->name = member_cstr(obj, m, KCR__K_NAME);
    out->uid = member_cstr(obj, m, KCR__K_UID);
    out->controller = kcr__map_get_id(obj, m, KCR__K_CONTROLLER) == KCR__REF_TRUE;
    out->block_owner_deletion =
        kcr__map_get_id(obj, m, KCR__K_BLOCK_OWNER_DELETION) == KCR__REF_TRUE;
    return true;
}

bool kcr_object_controller_ref(const kcr_object *obj, kcr_owner_ref *out)
{
    size_t n = kcr_object_owner_ref_count(obj);
    for (size_t i = 0; i < n; i++)
        if (kcr_object_owner_ref(obj, i, out) && out->controller)
            return true;
    return false;
}

size_t kcr_object_finalizer_count(const kcr_object *obj)
{
    uint32_t r = obj->field[KCR__F_FINALIZERS];
    return KCR__REF_TAG(r) == KCR__T_ARR ? kcr__ref_count(obj, r) : 0;
}

const char *kcr_object_finalizer(const kcr_object *obj, size_t i)
{
    if (i >= kcr_object_finalizer_count(obj))
        return NULL;
    uint32_t r = kcr__rd32(kcr__ref_items(obj, obj->field[KCR__F_FINALIZERS]) + 4 * i);
    if (!kcr__ref_is_str(r))
        return NULL;
    size_t l;
    return kcr__ref_str(obj, r, &l);
}

bool kcr_object_has_finalizer(const kcr_object *obj, const char *finalizer)
{
    size_t n = kcr_object_finalizer_count(obj);
    for (size_t i = 0; i < n; i++) {
        const char *f = kcr_object_finalizer(obj, i);
        if (f && strcmp(f, finalizer) == 0)
            return true;
    }
    return false;
}

/* ---- serialization ------------------------------------------------------ */

static yajl_gen_status gen_ref(yajl_gen g, const kcr_object *o, uint32_t ref)
{
    yajl_gen_status s = yajl_gen_status_ok;
    size_t len;
    const char *str;
    switch (KCR__REF_TAG(ref)) {
    case KCR__T_SPECIAL:
        if (ref == KCR__REF_NULL)
            return yajl_gen_null(g);
        return yajl_gen_bool(g, ref == KCR__REF_TRUE);
    case KCR__T_SMALLINT:
    case KCR__T_INT64: {
        int64_t v = 0;
        kcr__ref_int(o, ref, &v);
        return yajl_gen_integer(g, (long long)v);
    }
    case KCR__T_STR:
        str = kcr__ref_str(o, ref, &len);
        return yajl_gen_string(g, (const unsigned char *)str, len);
    case KCR__T_NUM:
        str = kcr__ref_str(o, ref, &len);
        return yajl_gen_number(g, str, len);
    case KCR__T_EMPTY:
        if (ref == KCR__REF_EMPTY_MAP) {
            if ((s = yajl_gen_map_open(g)) != yajl_gen_status_ok)
                return s;
            return yajl_gen_map_close(g);
        }
        if (ref == KCR__REF_EMPTY_ARR) {
            if ((s = yajl_gen_array_open(g)) != yajl_gen_status_ok)
                return s;
            return yajl_gen_array_close(g);
        }
        return yajl_gen_string(g, (const unsigned char *)"", 0);
    case KCR__T_ARR: {
        uint32_t n = kcr__ref_count(o, ref);
        const unsigned char *p = kcr__ref_items(o, ref);
        if ((s = yajl_gen_array_open(g)) != yajl_gen_status_ok)
            return s;
        for (uint32_t i = 0; i < n; i++)
            if ((s = gen_ref(g, o, kcr__rd32(p + 4 * i))) != yajl_gen_status_ok)
                return s;
        return yajl_gen_array_close(g);
    }
    case KCR__T_MAP: {
        uint32_t n = kcr__ref_count(o, ref);
        const unsigned char *p = kcr__ref_items(o, ref);
        if ((s = yajl_gen_map_open(g)) != yajl_gen_status_ok)
            return s;
        for (uint32_t i = 0; i < n; i++, p += 8) {
            str = kcr__key_str(o, kcr__rd32(p), &len);
            if ((s = yajl_gen_string(g, (const unsigned char *)str, len)) != yajl_gen_status_ok ||
                (s = gen_ref(g, o, kcr__rd32(p + 4))) != yajl_gen_status_ok)
                return s;
        }
        return yajl_gen_map_close(g);
    }
    }
    return yajl_gen_invalid_string;
}

kcr_err kcr__gen_value(yajl_gen g, const kcr_object *o, uint32_t ref)
{
    yajl_gen_status s = gen_ref(g, o, ref);
    if (s != yajl_gen_status_ok)
        return kcr__fail(s == yajl_gen_invalid_string ? KCR_ERR_INVALID : KCR_ERR_NOMEM,
                         "serializing JSON failed (yajl_gen status %d)", (int)s);
    return KCR_OK;
}

kcr_err kcr_value_to_json(kcr_value v, char **out, size_t *len)
{
    if (!out)
        return kcr__fail(KCR_ERR_INVALID, "kcr_value_to_json: out is NULL");
    *out = NULL;
    if (!v.obj || v.ref == KCR__REF_ABSENT)
        return kcr__fail(KCR_ERR_NOT_FOUND, "kcr_value_to_json: value is absent");
    yajl_gen g = yajl_gen_alloc(NULL);
    if (!g)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory serializing JSON");
    yajl_gen_config(g, yajl_gen_validate_utf8, 1);
    kcr_err err = kcr__gen_value(g, v.obj, v.ref);
    if (err == KCR_OK) {
        const unsigned char *buf;
        size_t n;
        yajl_gen_get_buf(g, &buf, &n);
        *out = malloc(n + 1);
        if (!*out) {
            err = kcr__fail(KCR_ERR_NOMEM, "out of memory serializing JSON");
        } else {
            memcpy(*out, buf, n);
            (*out)[n] = '\0';
            if (len)
                *len = n;
        }
    }
    yajl_gen_free(g);
    return err;
}

kcr_err kcr_object_to_json(const kcr_object *obj, char **out, size_t *len)
{
    if (!obj)
        return kcr__fail(KCR_ERR_INVALID, "kcr_object_to_json: obj is NULL");
    return kcr_value_to_json(view(obj, obj->root), out, len);
}
