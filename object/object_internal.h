/* Internal: the in-memory layout of a kcr_object, shared by the files of the
 * object model (object_builder.c writes it; object.c, object_value.c,
 * object_edit.c, serialize.c read it) and the store.
 *
 * An object is ONE allocation: this header followed by an arena holding the
 * JSON tree. Every value is a 32-bit "ref":
 *
 *   low 3 bits = tag, high 29 bits = payload
 *   SPECIAL  payload 0 absent, 1 null, 2 false, 3 true
 *   SMALLINT payload = value + 2^28 (integers in [-2^28, 2^28))
 *   STR      payload = arena offset of a string: varint length, bytes, NUL
 *   NUM      payload = offset of a string holding a number's original text
 *            (non-integers and integers outside int64)
 *   INT64    payload = offset of 8 bytes (native int64)
 *   ARR      payload = offset (4-aligned) of u32 count, then count refs
 *   MAP      payload = offset (4-aligned) of u32 count, then count pairs
 *            (key, value); a key with its top bit set is an interned key id
 *            (object/intern.h), otherwise the offset of a STR-encoded string
 *   EMPTY    payload 0 empty map, 1 empty array, 2 empty string
 *
 * Strings and keys within one object are deduplicated; containers are
 * written after their children, so the root map comes last. Map entries keep
 * the input order (serialization reproduces it). */
#ifndef KCR_OBJECT_OBJECT_INTERNAL_H
#define KCR_OBJECT_OBJECT_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "kcr/object.h"
#include "object/intern.h"

enum {
    KCR__T_SPECIAL = 0,
    KCR__T_SMALLINT = 1,
    KCR__T_STR = 2,
    KCR__T_NUM = 3,
    KCR__T_INT64 = 4,
    KCR__T_ARR = 5,
    KCR__T_MAP = 6,
    KCR__T_EMPTY = 7
};

#define KCR__REF(tag, payload) ((uint32_t)(payload) << 3 | (uint32_t)(tag))
#define KCR__REF_TAG(r) ((r)&7u)
#define KCR__REF_PAYLOAD(r) ((r) >> 3)
#define KCR__REF_ABSENT 0u
#define KCR__REF_NULL KCR__REF(KCR__T_SPECIAL, 1)
#define KCR__REF_FALSE KCR__REF(KCR__T_SPECIAL, 2)
#define KCR__REF_TRUE KCR__REF(KCR__T_SPECIAL, 3)
#define KCR__REF_EMPTY_MAP KCR__REF(KCR__T_EMPTY, 0)
#define KCR__REF_EMPTY_ARR KCR__REF(KCR__T_EMPTY, 1)
#define KCR__REF_EMPTY_STR KCR__REF(KCR__T_EMPTY, 2)
#define KCR__SMALLINT_BIAS (INT64_C(1) << 28)
#define KCR__KEY_INTERNED 0x80000000u
#define KCR__MAX_ARENA (UINT32_C(1) << 28) /* 256 MiB: offsets fit the payload */
#define KCR__MAX_DEPTH 256

/* Refs of frequently read fields, found once when the object is frozen. */
enum {
    KCR__F_API_VERSION,
    KCR__F_KIND,
    KCR__F_NAMESPACE,
    KCR__F_NAME,
    KCR__F_UID,
    KCR__F_RESOURCE_VERSION,
    KCR__F_GENERATION,
    KCR__F_LABELS,
    KCR__F_ANNOTATIONS,
    KCR__F_OWNER_REFERENCES,
    KCR__F_FINALIZERS,
    KCR__F_DELETION_TIMESTAMP,
    KCR__F_METADATA,
    KCR__F_COUNT_
};

struct kcr_object {
    _Atomic uint32_t refs;
    uint32_t size;     /* arena bytes */
    uint32_t root;     /* ref of the root map */
    uint32_t key_hash; /* kcr__hash_bytes of the store key "namespace/name" or "name" */
    uint32_t field[KCR__F_COUNT_];
    unsigned char data[];
};

static inline uint32_t kcr__rd32(const unsigned char *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* Decodes the varint length at `p`; returns the first byte of the string. */
static inline const char *kcr__str_at(const unsigned char *p, size_t *len)
{
    size_t n = 0;
    int shift = 0;
    for (;;) {
        unsigned char c = *p++;
        n |= (size_t)(c & 0x7f) << shift;
        if (!(c & 0x80))
            break;
        shift += 7;
    }
    *len = n;
    return (const char *)p;
}

/* String of a STR/NUM ref or an EMPTY string. */
static inline const char *kcr__ref_str(const kcr_object *o, uint32_t ref, size_t *len)
{
    if (ref == KCR__REF_EMPTY_STR) {
        *len = 0;
        return "";
    }
    return kcr__str_at(o->data + KCR__REF_PAYLOAD(ref), len);
}

static inline const char *kcr__key_str(const kcr_object *o, uint32_t key, size_t *len)
{
    if (key & KCR__KEY_INTERNED)
        return kcr__intern_str(key & ~KCR__KEY_INTERNED, len);
    return kcr__str_at(o->data + key, len);
}

/* Number of entries of an ARR/MAP ref (0 for EMPTY and scalars). */
static inline uint32_t kcr__ref_count(const kcr_object *o, uint32_t ref)
{
    uint32_t t = KCR__REF_TAG(ref);
    if (t != KCR__T_ARR && t != KCR__T_MAP)
        return 0;
    return kcr__rd32(o->data + KCR__REF_PAYLOAD(ref));
}

/* Pointer to the entries (refs or key/value pairs) of an ARR/MAP ref. */
static inline const unsigned char *kcr__ref_items(const kcr_object *o, uint32_t ref)
{
    return o->data + KCR__REF_PAYLOAD(ref) + 4;
}

static inline bool kcr__ref_is_map(uint32_t ref)
{
    return KCR__REF_TAG(ref) == KCR__T_MAP || ref == KCR__REF_EMPTY_MAP;
}

static inline bool kcr__ref_is_arr(uint32_t ref)
{
    return KCR__REF_TAG(ref) == KCR__T_ARR || ref == KCR__REF_EMPTY_ARR;
}

static inline bool kcr__ref_is_str(uint32_t ref)
{
    return KCR__REF_TAG(ref) == KCR__T_STR || ref == KCR__REF_EMPTY_STR;
}

/* Value of `key` in a map ref, or KCR__REF_ABSENT. `id` is the key's interned
 * id (or KCR__INTERN_NONE). The first matching entry wins. */
uint32_t kcr__map_get(const kcr_object *o, uint32_t map, const char *key, size_t len, uint32_t id);

/* Same for an interned well-known key (object/intern.h KCR__K_*). */
uint32_t kcr__map_get_id(const kcr_object *o, uint32_t map, uint32_t id);

/* The string of a STR ref, or "" (never NULL) when the ref is not a string. */
const char *kcr__ref_cstr(const kcr_object *o, uint32_t ref);

/* Integer of a SMALLINT/INT64 ref; false for other refs. */
bool kcr__ref_int(const kcr_object *o, uint32_t ref, int64_t *out);

/* kcr__hash_bytes of the store key "ns/name" ("name" when ns is ""). */
uint32_t kcr__object_key_hash(const char *ns, const char *name);

/* Fills o->field and o->key_hash from the arena and o->root (an object
 * being made, not yet shared). */
void kcr__object_index(kcr_object *o);

/* Member of an OBJECT value by key bytes (ABSENT when missing). */
kcr_value kcr__value_member_n(kcr_value v, const char *key, size_t len);

/* One step of a path (see kcr_object_lookup). */
struct kcr__path_seg {
    bool is_index;
    size_t index;
    const char *key; /* not NUL-terminated; points into the path or the scratch buffer */
    size_t key_len;
};

/* Reads the next segment of `*path`, advancing it. `scratch` must hold at
 * least strlen(path) + 1 bytes (unescaped quoted keys go there). Returns 1
 * with *seg set, 0 at the end, -1 for a malformed path. */
int kcr__path_next(const char **path, bool first, struct kcr__path_seg *seg, char *scratch);

#endif
