/* Open-addressing string map with linear probing (see strmap.h). */
#include "core/strmap.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/hash.h"
#include "core/probe.h"

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
        if (!kcr__probe_stays(i, home(m->slots[j].hash, m->cap), j)) {
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
