/* Object keys, tombstones and result lists. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "store/store_internal.h"

char *kcr__object_key(const kcr_object *obj)
{
    const char *ns = kcr_object_namespace(obj), *name = kcr_object_name(obj);
    size_t nl = strlen(ns), ml = strlen(name);
    char *k = malloc(nl + ml + 2);
    if (!k)
        return NULL;
    if (nl) {
        memcpy(k, ns, nl);
        k[nl++] = '/';
    }
    memcpy(k + nl, name, ml + 1);
    return k;
}

kcr_err kcr_store_key(const kcr_object *obj, char **out)
{
    if (!obj || !out)
        return kcr__fail(KCR_ERR_INVALID, "kcr_store_key: NULL argument");
    if (!kcr_object_name(obj)[0])
        return kcr__fail(KCR_ERR_INVALID, "kcr_store_key: object has no metadata.name");
    *out = kcr__object_key(obj);
    return *out ? KCR_OK : kcr__fail(KCR_ERR_NOMEM, "out of memory making a key");
}

kcr_err kcr_store_split_key(const char *key, const char **ns, size_t *ns_len, const char **name)
{
    if (!key || !ns || !ns_len || !name)
        return kcr__fail(KCR_ERR_INVALID, "kcr_store_split_key: NULL argument");
    const char *slash = strchr(key, '/');
    if (!slash) {
        *ns = key;
        *ns_len = 0;
        *name = key;
    } else {
        if (strchr(slash + 1, '/'))
            return kcr__fail(KCR_ERR_INVALID, "unexpected key format: \"%s\"", key);
        *ns = key;
        *ns_len = (size_t)(slash - key);
        *name = slash + 1;
    }
    if (!**name)
        return kcr__fail(KCR_ERR_INVALID, "key \"%s\" has an empty name", key);
    return KCR_OK;
}

kcr_err kcr_store_key_parts(const char *key, char *ns, size_t ns_size, char *name, size_t name_size)
{
    if (!ns || !name || ns_size == 0 || name_size == 0)
        return kcr__fail(KCR_ERR_INVALID, "kcr_store_key_parts: no buffer");
    *ns = *name = '\0';
    const char *n, *nm;
    size_t nl;
    kcr_err err = kcr_store_split_key(key, &n, &nl, &nm);
    if (err != KCR_OK)
        return err;
    size_t ml = strlen(nm);
    if (nl >= ns_size || ml >= name_size)
        return kcr__fail(KCR_ERR_TOO_LARGE, "key \"%.300s\": %s longer than the %zu-byte buffer",
                         key, nl >= ns_size ? "namespace" : "name",
                         nl >= ns_size ? ns_size : name_size);
    memcpy(ns, n, nl);
    ns[nl] = '\0';
    memcpy(name, nm, ml + 1);
    return KCR_OK;
}

void kcr_string_list_free(kcr_string_list *list)
{
    if (!list)
        return;
    for (size_t i = 0; i < list->len; i++)
        free(list->items[i]);
    free(list->items);
    list->items = NULL;
    list->len = 0;
}

void kcr_object_list_free(kcr_object_list *list)
{
    if (!list)
        return;
    for (size_t i = 0; i < list->len; i++)
        kcr_object_unref(list->items[i]);
    free(list->items);
    list->items = NULL;
    list->len = 0;
}

/* ---- tombstones --------------------------------------------------------- */

struct kcr_tombstone {
    _Atomic uint32_t refs;
    kcr_object *object;
    char key[];
};

kcr_err kcr_tombstone_new(const char *key, const kcr_object *obj, kcr_tombstone **out)
{
    if (out)
        *out = NULL;
    if (!key || !out)
        return kcr__fail(KCR_ERR_INVALID, "kcr_tombstone_new: NULL argument");
    size_t len = strlen(key);
    kcr_tombstone *t = malloc(sizeof *t + len + 1);
    if (!t)
        return kcr__fail(KCR_ERR_NOMEM, "kcr_tombstone_new: out of memory");
    atomic_init(&t->refs, 1);
    t->object = kcr_object_ref(obj);
    memcpy(t->key, key, len + 1);
    *out = t;
    return KCR_OK;
}

kcr_tombstone *kcr_tombstone_ref(const kcr_tombstone *t)
{
    kcr_tombstone *m = (kcr_tombstone *)t;
    if (m)
        atomic_fetch_add_explicit(&m->refs, 1, memory_order_relaxed);
    return m;
}

void kcr_tombstone_unref(const kcr_tombstone *t)
{
    kcr_tombstone *m = (kcr_tombstone *)t;
    if (m && atomic_fetch_sub_explicit(&m->refs, 1, memory_order_acq_rel) == 1) {
        kcr_object_unref(m->object);
        free(m);
    }
}

const char *kcr_tombstone_key(const kcr_tombstone *t)
{
    return t->key;
}

const kcr_object *kcr_tombstone_object(const kcr_tombstone *t)
{
    return t->object;
}
