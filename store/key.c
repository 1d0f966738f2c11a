/* Object keys, tombstones, result lists, and the small containers used by
 * the FIFOs (store_internal.h). */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "object/intern.h"
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

kcr_tombstone *kcr_tombstone_new(const char *key, const kcr_object *obj)
{
    if (!key)
        return NULL;
    size_t len = strlen(key);
    kcr_tombstone *t = malloc(sizeof *t + len + 1);
    if (!t)
        return NULL;
    atomic_init(&t->refs, 1);
    t->object = kcr_object_ref(obj);
    memcpy(t->key, key, len + 1);
    return t;
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

/* ---- string map --------------------------------------------------------- */

static size_t home(uint32_t hash, size_t cap)
{
    return hash & (cap - 1);
}

static struct kcr__strmap_slot *find(const struct kcr__strmap *m, const char *key, uint32_t h)
{
    if (!m->cap)
        return NULL;
    for (size_t i = home(h, m->cap);; i = (i + 1) & (m->cap - 1)) {
        struct kcr__strmap_slot *s = &m->slots[i];
        if (!s->key)
            return NULL;
        if (s->hash == h && strcmp(s->key, key) == 0)
            return s;
    }
}

void *kcr__strmap_get(const struct kcr__strmap *m, const char *key)
{
    struct kcr__strmap_slot *s = find(m, key, kcr__hash_bytes(key, strlen(key)));
    return s ? s->value : NULL;
}

static void place(struct kcr__strmap_slot *slots, size_t cap, struct kcr__strmap_slot s)
{
    size_t i = home(s.hash, cap);
    while (slots[i].key)
        i = (i + 1) & (cap - 1);
    slots[i] = s;
}

kcr_err kcr__strmap_put(struct kcr__strmap *m, const char *key, void *value, void **old)
{
    uint32_t h = kcr__hash_bytes(key, strlen(key));
    struct kcr__strmap_slot *s = find(m, key, h);
    if (old)
        *old = s ? s->value : NULL;
    if (s) {
        s->value = value;
        return KCR_OK;
    }
    if ((m->len + 1) * 4 > m->cap * 3) {
        size_t cap = m->cap ? m->cap * 2 : 16;
        struct kcr__strmap_slot *slots = calloc(cap, sizeof *slots);
        if (!slots)
            return kcr__fail(KCR_ERR_NOMEM, "out of memory growing a map");
        for (size_t i = 0; i < m->cap; i++)
            if (m->slots[i].key)
                place(slots, cap, m->slots[i]);
        free(m->slots);
        m->slots = slots;
        m->cap = cap;
    }
    char *k = strdup(key);
    if (!k)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory copying a key");
    struct kcr__strmap_slot ns = {k, h, value};
    place(m->slots, m->cap, ns);
    m->len++;
    return KCR_OK;
}

void *kcr__strmap_remove(struct kcr__strmap *m, const char *key)
{
    struct kcr__strmap_slot *s = find(m, key, kcr__hash_bytes(key, strlen(key)));
    if (!s)
        return NULL;
    void *v = s->value;
    free(s->key);
    /* Backward-shift deletion keeps probe chains intact without tombstones. */
    size_t mask = m->cap - 1, i = (size_t)(s - m->slots), j = i;
    m->slots[i].key = NULL;
    for (;;) {
        j = (j + 1) & mask;
        if (!m->slots[j].key)
            break;
        size_t k = home(m->slots[j].hash, m->cap);
        if ((j > i && (k <= i || k > j)) || (j < i && (k <= i && k > j))) {
            m->slots[i] = m->slots[j];
            m->slots[j].key = NULL;
            i = j;
        }
    }
    m->len--;
    return v;
}

void kcr__strmap_clear(struct kcr__strmap *m, void (*free_value)(void *))
{
    for (size_t i = 0; i < m->cap; i++)
        if (m->slots[i].key) {
            if (free_value)
                free_value(m->slots[i].value);
            free(m->slots[i].key);
        }
    free(m->slots);
    m->slots = NULL;
    m->cap = m->len = 0;
}

/* ---- pointer deque ------------------------------------------------------ */

kcr_err kcr__ptrq_push(struct kcr__ptrq *q, void *p)
{
    if (q->len == q->cap) {
        size_t cap = q->cap ? q->cap * 2 : 16;
        void **items = malloc(cap * sizeof *items);
        if (!items)
            return kcr__fail(KCR_ERR_NOMEM, "out of memory growing a queue");
        for (size_t i = 0; i < q->len; i++)
            items[i] = q->items[(q->head + i) % q->cap];
        free(q->items);
        q->items = items;
        q->head = 0;
        q->cap = cap;
    }
    q->items[(q->head + q->len++) % q->cap] = p;
    return KCR_OK;
}

void *kcr__ptrq_pop(struct kcr__ptrq *q)
{
    if (!q->len)
        return NULL;
    void *p = q->items[q->head];
    q->head = (q->head + 1) % q->cap;
    q->len--;
    return p;
}

void *kcr__ptrq_at(const struct kcr__ptrq *q, size_t i)
{
    return i < q->len ? q->items[(q->head + i) % q->cap] : NULL;
}

void kcr__ptrq_free(struct kcr__ptrq *q)
{
    free(q->items);
    q->items = NULL;
    q->head = q->len = q->cap = 0;
}
