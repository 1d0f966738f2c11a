/* The string map (see strmap.h): nodes in a core/keytab table. */
#include "core/strmap.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

struct node {
    void *value;
    uint32_t len;
    char key[];
};

static struct node *find(const struct kcr__strmap *m, const char *key, size_t len, uint64_t *hash)
{
    if (!m->tab.slots || len > UINT32_MAX)
        return NULL;
    *hash = kcr__keytab_hash(&m->tab, key, len);
    return kcr__keytab_find(&m->tab, key, len, *hash);
}

void *kcr__strmap_get(const struct kcr__strmap *m, const char *key)
{
    uint64_t h;
    struct node *n = find(m, key, strlen(key), &h);
    return n ? n->value : NULL;
}

kcr_err kcr__strmap_put(struct kcr__strmap *m, const char *key, void *value, void **old)
{
    size_t len = strlen(key);
    if (old)
        *old = NULL;
    if (len > UINT32_MAX)
        return kcr__fail(KCR_ERR_INVALID, "a map key of %zu bytes is too long", len);
    if (!m->tab.slots &&
        kcr__keytab_init(&m->tab, 0, offsetof(struct node, key), offsetof(struct node, len)) != 0)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory making a map");
    uint64_t h = kcr__keytab_hash(&m->tab, key, len);
    struct node *n = kcr__keytab_find(&m->tab, key, len, h);
    if (n) {
        if (old)
            *old = n->value;
        n->value = value;
        return KCR_OK;
    }
    n = malloc(sizeof *n + len + 1);
    if (!n)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory copying a key");
    n->value = value;
    n->len = (uint32_t)len;
    memcpy(n->key, key, len + 1);
    if (kcr__keytab_insert(&m->tab, h, n) != 0) {
        free(n);
        return kcr__fail(KCR_ERR_NOMEM, "out of memory growing a map");
    }
    return KCR_OK;
}

void *kcr__strmap_remove(struct kcr__strmap *m, const char *key)
{
    uint64_t h;
    struct node *n = find(m, key, strlen(key), &h);
    if (!n)
        return NULL;
    kcr__keytab_remove(&m->tab, h, n);
    void *v = n->value;
    free(n);
    return v;
}

void kcr__strmap_clear(struct kcr__strmap *m, void (*free_value)(void *))
{
    for (size_t i = 0; m->tab.slots && i <= m->tab.mask; i++) {
        struct node *n = m->tab.slots[i].node;
        if (!n)
            continue;
        if (free_value)
            free_value(n->value);
        free(n);
    }
    kcr__keytab_destroy(&m->tab);
    memset(m, 0, sizeof *m);
}

size_t kcr__strmap_len(const struct kcr__strmap *m)
{
    return m->tab.count;
}

bool kcr__strmap_next(const struct kcr__strmap *m, size_t *pos, const char **key, void **value)
{
    for (; m->tab.slots && *pos <= m->tab.mask; (*pos)++) {
        const struct node *n = m->tab.slots[*pos].node;
        if (!n)
            continue;
        (*pos)++;
        if (key)
            *key = n->key;
        if (value)
            *value = n->value;
        return true;
    }
    return false;
}
