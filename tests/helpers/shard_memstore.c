/* The in-memory shard Lease store of tests/helpers/shard_memstore.h. */
#include "helpers/shard_memstore.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static kcr_err mem_list(const char *ring, kcr__shard_lease_list *out, void *user_data)
{
    memstore_handle *h = user_data;
    kcr__shard_lease_list_clear(out);
    if (h->partitioned)
        return kcr_set_error(KCR_ERR_TRANSPORT, "partitioned from the API");
    memstore *t = h->table;
    t->lists++;
    out->items = calloc(t->leases.n ? t->leases.n : 1, sizeof *out->items);
    if (!out->items)
        return KCR_ERR_NOMEM;
    for (size_t i = 0; i < t->leases.n; i++) {
        if (strcmp(t->rings[i], ring) != 0)
            continue;
        kcr_err err = kcr__shard_lease_copy(&t->leases.items[i], &out->items[out->n]);
        if (err != KCR_OK) {
            kcr__shard_lease_list_clear(out);
            return err;
        }
        out->n++;
    }
    return KCR_OK;
}

kcr__shard_lease *memstore_find(memstore *t, const char *identity)
{
    for (size_t i = 0; i < t->leases.n; i++)
        if (strcmp(t->leases.items[i].identity, identity) == 0)
            return &t->leases.items[i];
    return NULL;
}

static kcr_err mem_put(const char *ring, const kcr__shard_lease *lease, char **version,
                       void *user_data)
{
    memstore_handle *h = user_data;
    *version = NULL;
    if (h->partitioned)
        return kcr_set_error(KCR_ERR_TRANSPORT, "partitioned from the API");
    memstore *t = h->table;
    t->puts++;
    kcr__shard_lease *cur = memstore_find(t, lease->identity);
    if (!*lease->version && cur)
        return kcr_set_error(KCR_ERR_EXISTS, "lease %s exists", lease->identity);
    if (*lease->version && !cur)
        return kcr_set_error(KCR_ERR_NOT_FOUND, "lease %s not found", lease->identity);
    if (cur && strcmp(cur->version, lease->version) != 0)
        return kcr_set_error(KCR_ERR_CONFLICT, "lease %s: stale version", lease->identity);
    kcr__shard_lease copy;
    kcr_err err = kcr__shard_lease_copy(lease, &copy);
    if (err != KCR_OK)
        return err;
    char v[32];
    snprintf(v, sizeof v, "%lld", ++t->next_version);
    free(copy.version);
    copy.version = strdup(v);
    *version = strdup(v);
    if (cur) {
        kcr__shard_lease_clear(cur);
        *cur = copy;
        return KCR_OK;
    }
    size_t n = t->leases.n + 1;
    t->leases.items = realloc(t->leases.items, n * sizeof *t->leases.items);
    t->rings = realloc(t->rings, n * sizeof *t->rings);
    t->leases.items[n - 1] = copy;
    t->rings[n - 1] = strdup(ring);
    t->leases.n = n;
    return KCR_OK;
}

static const kcr__lease_store_ops mem_ops = {mem_list, mem_put};

void memstore_init(memstore_handle *h, memstore *table)
{
    h->store = (kcr__lease_store){&mem_ops, h};
    h->table = table;
    h->partitioned = false;
}

void memstore_free(memstore *t)
{
    for (size_t i = 0; i < t->leases.n; i++)
        free(t->rings[i]);
    free(t->rings);
    kcr__shard_lease_list_clear(&t->leases);
    memset(t, 0, sizeof *t);
}
