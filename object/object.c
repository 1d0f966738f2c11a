/* kcr_object: reading the layout (map lookups, the store key hash),
 * reference counting and the metadata accessors. The layout is described in
 * object/object_internal.h; object_builder.c writes it. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "object/object_internal.h"
#include "object/value.h"

/* ---- layout lookups ----------------------------------------------------- */

void kcr__object_index(kcr_object *o)
{
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
    o->key_hash = kcr__object_key_hash(kcr__ref_cstr(o, o->field[KCR__F_NAMESPACE]),
                                       kcr__ref_cstr(o, o->field[KCR__F_NAME]));
}

kcr_err kcr_object_from_value(kcr_value v, kcr_object **out)
{
    if (!out)
        return kcr__fail(KCR_ERR_INVALID, "kcr_object_from_value: out is NULL");
    *out = NULL;
    if (kcr_value_get_type(v) != KCR_VALUE_OBJECT)
        return kcr__fail(KCR_ERR_INVALID, "kcr_object_from_value: the value is not a JSON object");
    const kcr_object *src = v.obj;
    kcr_object *o = malloc(sizeof *o + src->size);
    if (!o)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory copying an object");
    atomic_init(&o->refs, 1);
    o->size = src->size;
    o->root = v.ref; /* refs are arena offsets: the copy reads like the source */
    memcpy(o->data, src->data, src->size);
    kcr__object_index(o);
    *out = o;
    return KCR_OK;
}

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
