/* kcr_store: the thread-safe indexer.
 *
 * Lean by design, since every cached object pays for it:
 *  - the item table is an open-addressing array of object pointers; the key
 *    is not stored but read from the object (namespace and name are cached
 *    in its header, with the key's hash), so an item costs 8 bytes / load;
 *  - each index maps a value (stored once, inline after its set header) to a
 *    set of object pointers built the same way; sets borrow the item table's
 *    reference, so indexing adds no refcount traffic;
 *  - an index value whose set becomes empty is freed at once (pruned).
 * One pthread rwlock guards everything: readers share it. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/error.h"
#include "core/probe.h"
#include "object/object_internal.h"
#include "store/store_internal.h"

/* ---- object sets -------------------------------------------------------- */

struct objset {
    kcr_object **slots;
    uint32_t cap, len;
};

struct keyref {
    const char *ns;
    size_t ns_len;
    const char *name;
    uint32_t hash;
};

static struct keyref keyref_of(const kcr_object *o)
{
    const char *ns = kcr_object_namespace(o);
    struct keyref k = {ns, strlen(ns), kcr_object_name(o), o->key_hash};
    return k;
}

static bool key_matches(const kcr_object *o, const struct keyref *k)
{
    if (o->key_hash != k->hash)
        return false;
    const char *ns = kcr_object_namespace(o);
    return strncmp(ns, k->ns, k->ns_len) == 0 && ns[k->ns_len] == '\0' &&
           strcmp(kcr_object_name(o), k->name) == 0;
}

static kcr_object **set_slot(const struct objset *s, const struct keyref *k)
{
    if (!s->cap)
        return NULL;
    for (uint32_t i = k->hash & (s->cap - 1);; i = (i + 1) & (s->cap - 1)) {
        kcr_object *o = s->slots[i];
        if (!o || key_matches(o, k))
            return &s->slots[i];
    }
}

static kcr_object *set_find(const struct objset *s, const struct keyref *k)
{
    kcr_object **slot = set_slot(s, k);
    return slot ? *slot : NULL;
}

static bool set_resize(struct objset *s, uint32_t cap)
{
    kcr_object **slots = calloc(cap, sizeof *slots);
    if (!slots)
        return false;
    for (uint32_t i = 0; i < s->cap; i++) {
        kcr_object *o = s->slots[i];
        if (!o)
            continue;
        uint32_t j = o->key_hash & (cap - 1);
        while (slots[j])
            j = (j + 1) & (cap - 1);
        slots[j] = o;
    }
    free(s->slots);
    s->slots = slots;
    s->cap = cap;
    return true;
}

/* Puts obj in, replacing the object with the same key; *old gets it. */
static bool set_put(struct objset *s, kcr_object *obj, kcr_object **old)
{
    struct keyref k = keyref_of(obj);
    kcr_object **slot = set_slot(s, &k);
    if (slot && *slot) {
        *old = *slot;
        *slot = obj;
        return true;
    }
    *old = NULL;
    if ((s->len + 1) * 4 > s->cap * 3) {
        if (!set_resize(s, s->cap ? s->cap * 2 : 4))
            return false;
        slot = set_slot(s, &k);
    }
    *slot = obj;
    s->len++;
    return true;
}

static kcr_object *set_remove(struct objset *s, const struct keyref *k)
{
    kcr_object **slot = set_slot(s, k);
    if (!slot || !*slot)
        return NULL;
    kcr_object *o = *slot;
    uint32_t mask = s->cap - 1, i = (uint32_t)(slot - s->slots), j = i;
    s->slots[i] = NULL;
    for (;;) {
        j = (j + 1) & mask;
        if (!s->slots[j])
            break;
        if (!kcr__probe_stays(i, s->slots[j]->key_hash & mask, j)) {
            s->slots[i] = s->slots[j];
            s->slots[j] = NULL;
            i = j;
        }
    }
    s->len--;
    if (s->cap > 16 && s->len * 8 < s->cap)
        set_resize(s, s->cap / 2); /* a failed shrink is harmless */
    return o;
}

/* ---- indexes ------------------------------------------------------------ */

struct ivalue {
    struct objset set;
    uint32_t hash;
    char value[];
};

struct index {
    struct index *next;
    kcr_index_fn fn;
    void *user_data;
    struct ivalue **slots; /* open addressing by value */
    size_t cap, len;
    char name[];
};

struct kcr_index_emit {
    kcr__buf b; /* NUL-terminated values back to back */
    size_t n;
};

void kcr_index_emit_value(kcr_index_emit *e, const char *value)
{
    if (!e || !value)
        return;
    if (kcr__buf_add(&e->b, value, strlen(value) + 1) == KCR_OK)
        e->n++;
}

void kcr_index_namespace(const kcr_object *obj, kcr_index_emit *emit, void *user_data)
{
    (void)user_data;
    const char *ns = kcr_object_namespace(obj);
    if (ns[0])
        kcr_index_emit_value(emit, ns);
}

static void emit_run(kcr_index_emit *e, const struct index *ix, const kcr_object *obj)
{
    e->b.len = 0;
    e->b.oom = false;
    e->n = 0;
    if (obj)
        ix->fn(obj, e, ix->user_data);
}

#define EMIT_EACH(e, v)                                                                            \
    for (const char *v = (e)->b.s, *v##_end = (e)->b.s + (e)->b.len; v < v##_end;                  \
         v += strlen(v) + 1)

static bool emitted(const kcr_index_emit *e, const char *value)
{
    EMIT_EACH(e, v)
    if (strcmp(v, value) == 0)
        return true;
    return false;
}

static struct ivalue **ivalue_slot(const struct index *ix, const char *value, uint32_t h)
{
    if (!ix->cap)
        return NULL;
    for (size_t i = h & (ix->cap - 1);; i = (i + 1) & (ix->cap - 1)) {
        struct ivalue *v = ix->slots[i];
        if (!v || (v->hash == h && strcmp(v->value, value) == 0))
            return &ix->slots[i];
    }
}

static struct ivalue *ivalue_find(const struct index *ix, const char *value)
{
    struct ivalue **slot = ivalue_slot(ix, value, kcr__hash_bytes(value, strlen(value)));
    return slot ? *slot : NULL;
}

static struct ivalue *ivalue_get_or_add(struct index *ix, const char *value)
{
    size_t len = strlen(value);
    uint32_t h = kcr__hash_bytes(value, len);
    struct ivalue **slot = ivalue_slot(ix, value, h);
    if (slot && *slot)
        return *slot;
    if ((ix->len + 1) * 4 > ix->cap * 3) {
        size_t cap = ix->cap ? ix->cap * 2 : 8;
        struct ivalue **slots = calloc(cap, sizeof *slots);
        if (!slots)
            return NULL;
        for (size_t i = 0; i < ix->cap; i++) {
            struct ivalue *v = ix->slots[i];
            if (!v)
                continue;
            size_t j = v->hash & (cap - 1);
            while (slots[j])
                j = (j + 1) & (cap - 1);
            slots[j] = v;
        }
        free(ix->slots);
        ix->slots = slots;
        ix->cap = cap;
        slot = ivalue_slot(ix, value, h);
    }
    struct ivalue *v = calloc(1, sizeof *v + len + 1);
    if (!v)
        return NULL;
    v->hash = h;
    memcpy(v->value, value, len + 1);
    *slot = v;
    ix->len++;
    return v;
}

static void ivalue_prune(struct index *ix, struct ivalue *v)
{
    struct ivalue **slot = ivalue_slot(ix, v->value, v->hash);
    size_t mask = ix->cap - 1, i = (size_t)(slot - ix->slots), j = i;
    ix->slots[i] = NULL;
    for (;;) {
        j = (j + 1) & mask;
        if (!ix->slots[j])
            break;
        if (!kcr__probe_stays(i, ix->slots[j]->hash & mask, j)) {
            ix->slots[i] = ix->slots[j];
            ix->slots[j] = NULL;
            i = j;
        }
    }
    ix->len--;
    free(v->set.slots);
    free(v);
}

static void index_clear(struct index *ix)
{
    for (size_t i = 0; i < ix->cap; i++)
        if (ix->slots[i]) {
            free(ix->slots[i]->set.slots);
            free(ix->slots[i]);
        }
    free(ix->slots);
    ix->slots = NULL;
    ix->cap = ix->len = 0;
}

/* ---- the store ---------------------------------------------------------- */

struct kcr_store {
    pthread_rwlock_t lock;
    struct objset items; /* holds one reference per object */
    struct index *indexes;
    kcr_index_emit e_old, e_new; /* scratch, used under the write lock */
};

kcr_err kcr_store_new(kcr_store **out)
{
    if (!out)
        return kcr__fail(KCR_ERR_INVALID, "kcr_store_new: NULL out");
    *out = NULL;
    kcr_store *s = calloc(1, sizeof *s);
    if (!s)
        return kcr__fail(KCR_ERR_NOMEM, "kcr_store_new: out of memory");
    if (pthread_rwlock_init(&s->lock, NULL) != 0) {
        free(s);
        return kcr__fail(KCR_ERR_NOMEM, "kcr_store_new: cannot create the store's lock");
    }
    *out = s;
    return KCR_OK;
}

static void items_release(struct objset *items)
{
    for (uint32_t i = 0; i < items->cap; i++)
        kcr_object_unref(items->slots[i]);
    free(items->slots);
    items->slots = NULL;
    items->cap = items->len = 0;
}

void kcr_store_free(kcr_store *s)
{
    if (!s)
        return;
    while (s->indexes) {
        struct index *ix = s->indexes;
        s->indexes = ix->next;
        index_clear(ix);
        free(ix);
    }
    items_release(&s->items);
    kcr__buf_free(&s->e_old.b);
    kcr__buf_free(&s->e_new.b);
    pthread_rwlock_destroy(&s->lock);
    free(s);
}

static kcr_err index_insert(struct index *ix, kcr_index_emit *vals, kcr_object *obj)
{
    if (vals->b.oom)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory computing index \"%s\"", ix->name);
    EMIT_EACH(vals, v)
    {
        struct ivalue *iv = ivalue_get_or_add(ix, v);
        kcr_object *old;
        if (!iv || !set_put(&iv->set, obj, &old))
            return kcr__fail(KCR_ERR_NOMEM, "out of memory updating index \"%s\"", ix->name);
    }
    return KCR_OK;
}

static void index_remove(struct index *ix, const kcr_index_emit *vals, const struct keyref *k)
{
    EMIT_EACH(vals, v)
    {
        struct ivalue *iv = ivalue_find(ix, v);
        if (iv && set_remove(&iv->set, k) && iv->set.len == 0)
            ivalue_prune(ix, iv);
    }
}

static kcr_err put_locked(kcr_store *s, kcr_object *obj)
{
    kcr_object *old;
    if (!set_put(&s->items, obj, &old))
        return kcr__fail(KCR_ERR_NOMEM, "out of memory adding to the store");
    kcr_object_ref(obj);
    kcr_err err = KCR_OK;
    for (struct index *ix = s->indexes; ix; ix = ix->next) {
        emit_run(&s->e_new, ix, obj);
        if (old) {
            emit_run(&s->e_old, ix, old);
            struct keyref k = keyref_of(old);
            /* Values the object no longer has lose it... */
            EMIT_EACH(&s->e_old, v)
            if (!emitted(&s->e_new, v)) {
                struct ivalue *iv = ivalue_find(ix, v);
                if (iv && set_remove(&iv->set, &k) && iv->set.len == 0)
                    ivalue_prune(ix, iv);
            }
        }
        /* ...and every current value points at the new object. */
        kcr_err e = index_insert(ix, &s->e_new, obj);
        if (e != KCR_OK)
            err = e;
    }
    kcr_object_unref(old);
    return err;
}

kcr_err kcr_store_add(kcr_store *s, const kcr_object *obj)
{
    if (!s || !obj)
        return kcr__fail(KCR_ERR_INVALID, "kcr_store_add: NULL argument");
    if (!kcr_object_name(obj)[0])
        return kcr__fail(KCR_ERR_INVALID, "kcr_store_add: object has no name");
    pthread_rwlock_wrlock(&s->lock);
    kcr_err err = put_locked(s, (kcr_object *)obj);
    pthread_rwlock_unlock(&s->lock);
    return err;
}

kcr_err kcr_store_update(kcr_store *s, const kcr_object *obj)
{
    return kcr_store_add(s, obj);
}

static void remove_locked(kcr_store *s, const struct keyref *k)
{
    kcr_object *old = set_remove(&s->items, k);
    if (!old)
        return;
    for (struct index *ix = s->indexes; ix; ix = ix->next) {
        emit_run(&s->e_old, ix, old);
        index_remove(ix, &s->e_old, k);
    }
    kcr_object_unref(old);
}

kcr_err kcr_store_delete(kcr_store *s, const kcr_object *obj)
{
    if (!s || !obj)
        return kcr__fail(KCR_ERR_INVALID, "kcr_store_delete: NULL argument");
    struct keyref k = keyref_of(obj);
    pthread_rwlock_wrlock(&s->lock);
    remove_locked(s, &k);
    pthread_rwlock_unlock(&s->lock);
    return KCR_OK;
}

static bool keyref_parse(const char *key, struct keyref *k)
{
    if (!key || kcr_store_split_key(key, &k->ns, &k->ns_len, &k->name) != KCR_OK)
        return false;
    k->hash = kcr__hash_bytes(key, strlen(key));
    return true;
}

kcr_err kcr_store_delete_key(kcr_store *s, const char *key)
{
    struct keyref k;
    if (!s || !keyref_parse(key, &k))
        return kcr__fail(KCR_ERR_INVALID, "kcr_store_delete_key: bad key \"%s\"", key ? key : "");
    pthread_rwlock_wrlock(&s->lock);
    remove_locked(s, &k);
    pthread_rwlock_unlock(&s->lock);
    return KCR_OK;
}

kcr_object *kcr_store_get_by_key(kcr_store *s, const char *key)
{
    struct keyref k;
    if (!s || !keyref_parse(key, &k))
        return NULL;
    pthread_rwlock_rdlock(&s->lock);
    kcr_object *o = kcr_object_ref(set_find(&s->items, &k));
    pthread_rwlock_unlock(&s->lock);
    return o;
}

kcr_object *kcr_store_get(kcr_store *s, const kcr_object *obj)
{
    if (!s || !obj)
        return NULL;
    struct keyref k = keyref_of(obj);
    pthread_rwlock_rdlock(&s->lock);
    kcr_object *o = kcr_object_ref(set_find(&s->items, &k));
    pthread_rwlock_unlock(&s->lock);
    return o;
}

size_t kcr_store_len(kcr_store *s)
{
    pthread_rwlock_rdlock(&s->lock);
    size_t n = s->items.len;
    pthread_rwlock_unlock(&s->lock);
    return n;
}

/* Copies a set out as references or keys. */
static kcr_err set_export(const struct objset *set, kcr_object_list *objs, kcr_string_list *keys)
{
    size_t n = set ? set->len : 0, at = 0;
    void **arr = n ? malloc(n * sizeof *arr) : NULL;
    if (n && !arr)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory listing the store");
    for (uint32_t i = 0; set && i < set->cap; i++) {
        kcr_object *o = set->slots[i];
        if (!o)
            continue;
        if (objs) {
            arr[at++] = kcr_object_ref(o);
        } else {
            char *k = kcr__object_key(o);
            if (!k) {
                kcr_string_list partial = {(char **)arr, at};
                kcr_string_list_free(&partial);
                return kcr__fail(KCR_ERR_NOMEM, "out of memory listing keys");
            }
            arr[at++] = k;
        }
    }
    if (objs) {
        objs->items = (kcr_object **)arr;
        objs->len = at;
    } else {
        keys->items = (char **)arr;
        keys->len = at;
    }
    return KCR_OK;
}

kcr_err kcr_store_list(kcr_store *s, kcr_object_list *out)
{
    if (!s || !out)
        return kcr__fail(KCR_ERR_INVALID, "kcr_store_list: NULL argument");
    pthread_rwlock_rdlock(&s->lock);
    kcr_err err = set_export(&s->items, out, NULL);
    pthread_rwlock_unlock(&s->lock);
    return err;
}

kcr_err kcr_store_list_keys(kcr_store *s, kcr_string_list *out)
{
    if (!s || !out)
        return kcr__fail(KCR_ERR_INVALID, "kcr_store_list_keys: NULL argument");
    pthread_rwlock_rdlock(&s->lock);
    kcr_err err = set_export(&s->items, NULL, out);
    pthread_rwlock_unlock(&s->lock);
    return err;
}

kcr_err kcr_store_replace(kcr_store *s, kcr_object *const *objs, size_t n)
{
    if (!s || (n && !objs))
        return kcr__fail(KCR_ERR_INVALID, "kcr_store_replace: NULL argument");
    for (size_t i = 0; i < n; i++)
        if (!objs[i] || !kcr_object_name(objs[i])[0])
            return kcr__fail(KCR_ERR_INVALID, "kcr_store_replace: object %zu has no name", i);
    pthread_rwlock_wrlock(&s->lock);
    struct objset old = s->items;
    memset(&s->items, 0, sizeof s->items);
    for (struct index *ix = s->indexes; ix; ix = ix->next)
        index_clear(ix);
    kcr_err err = KCR_OK;
    for (size_t i = 0; i < n && err == KCR_OK; i++)
        err = put_locked(s, objs[i]);
    pthread_rwlock_unlock(&s->lock);
    items_release(&old);
    return err;
}

kcr_err kcr_store_resync(kcr_store *s)
{
    (void)s;
    return KCR_OK;
}

kcr_err kcr_store_add_index(kcr_store *s, const char *name, kcr_index_fn fn, void *user_data)
{
    if (!s || !name || !fn)
        return kcr__fail(KCR_ERR_INVALID, "kcr_store_add_index: NULL argument");
    size_t len = strlen(name);
    struct index *ix = calloc(1, sizeof *ix + len + 1);
    if (!ix)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory adding an index");
    memcpy(ix->name, name, len + 1);
    ix->fn = fn;
    ix->user_data = user_data;
    pthread_rwlock_wrlock(&s->lock);
    for (struct index *o = s->indexes; o; o = o->next)
        if (strcmp(o->name, name) == 0) {
            pthread_rwlock_unlock(&s->lock);
            free(ix);
            return kcr__fail(KCR_ERR_EXISTS, "index \"%s\" already exists", name);
        }
    kcr_err err = KCR_OK;
    for (uint32_t i = 0; i < s->items.cap && err == KCR_OK; i++)
        if (s->items.slots[i]) {
            emit_run(&s->e_new, ix, s->items.slots[i]);
            err = index_insert(ix, &s->e_new, s->items.slots[i]);
        }
    if (err == KCR_OK) {
        ix->next = s->indexes;
        s->indexes = ix;
    } else {
        index_clear(ix);
        free(ix);
    }
    pthread_rwlock_unlock(&s->lock);
    return err;
}

static struct index *index_named(kcr_store *s, const char *name)
{
    for (struct index *ix = s->indexes; ix; ix = ix->next)
        if (strcmp(ix->name, name) == 0)
            return ix;
    return NULL;
}

static kcr_err by_index(kcr_store *s, const char *index, const char *value, kcr_object_list *objs,
                        kcr_string_list *keys)
{
    if (!s || !index || !value || !(objs || keys))
        return kcr__fail(KCR_ERR_INVALID, "index lookup: NULL argument");
    pthread_rwlock_rdlock(&s->lock);
    struct index *ix = index_named(s, index);
    kcr_err err;
    if (!ix) {
        err = kcr__fail(KCR_ERR_NOT_FOUND, "no index named \"%s\"", index);
    } else {
        struct ivalue *iv = ivalue_find(ix, value);
        err = set_export(iv ? &iv->set : NULL, objs, keys);
    }
    pthread_rwlock_unlock(&s->lock);
    return err;
}

kcr_err kcr_store_by_index(kcr_store *s, const char *index, const char *value,
                           kcr_object_list *out)
{
    return by_index(s, index, value, out, NULL);
}

kcr_err kcr_store_index_keys(kcr_store *s, const char *index, const char *value,
                             kcr_string_list *out)
{
    return by_index(s, index, value, NULL, out);
}

kcr_err kcr_store_list_index_values(kcr_store *s, const char *index, kcr_string_list *out)
{
    if (!s || !index || !out)
        return kcr__fail(KCR_ERR_INVALID, "kcr_store_list_index_values: NULL argument");
    out->items = NULL;
    out->len = 0;
    pthread_rwlock_rdlock(&s->lock);
    struct index *ix = index_named(s, index);
    kcr_err err = KCR_OK;
    if (!ix) {
        err = kcr__fail(KCR_ERR_NOT_FOUND, "no index named \"%s\"", index);
    } else if (ix->len) {
        out->items = malloc(ix->len * sizeof *out->items);
        for (size_t i = 0; out->items && i < ix->cap; i++)
            if (ix->slots[i] && !(out->items[out->len++] = strdup(ix->slots[i]->value))) {
                out->len--;
                kcr_string_list_free(out);
                break;
            }
        if (!out->items)
            err = kcr__fail(KCR_ERR_NOMEM, "out of memory listing index values");
    }
    pthread_rwlock_unlock(&s->lock);
    return err;
}

kcr_err kcr_store_index_objects(kcr_store *s, const char *index, const kcr_object *obj,
                                kcr_object_list *out)
{
    if (!s || !index || !obj || !out)
        return kcr__fail(KCR_ERR_INVALID, "kcr_store_index_objects: NULL argument");
    out->items = NULL;
    out->len = 0;
    kcr_index_emit e = {0};
    struct objset u = {0};
    pthread_rwlock_rdlock(&s->lock);
    struct index *ix = index_named(s, index);
    kcr_err err = KCR_OK;
    if (!ix) {
        err = kcr__fail(KCR_ERR_NOT_FOUND, "no index named \"%s\"", index);
    } else {
        emit_run(&e, ix, obj);
        EMIT_EACH(&e, v)
        {
            struct ivalue *iv = ivalue_find(ix, v);
            for (uint32_t i = 0; iv && i < iv->set.cap && err == KCR_OK; i++) {
                kcr_object *old;
                if (iv->set.slots[i] && !set_put(&u, iv->set.slots[i], &old))
                    err = kcr__fail(KCR_ERR_NOMEM, "out of memory in an index lookup");
            }
        }
        if (err == KCR_OK)
            err = set_export(&u, out, NULL);
    }
    pthread_rwlock_unlock(&s->lock);
    free(u.slots);
    kcr__buf_free(&e.b);
    return err;
}

static kcr_err known_list_keys(kcr_string_list *out, void *user_data)
{
    return kcr_store_list_keys(user_data, out);
}

static kcr_object *known_get(const char *key, void *user_data)
{
    return kcr_store_get_by_key(user_data, key);
}

kcr_known_objects kcr_store_known_objects(kcr_store *s)
{
    kcr_known_objects k = {.list_keys = known_list_keys, .get_by_key = known_get, .user_data = s};
    return k;
}
