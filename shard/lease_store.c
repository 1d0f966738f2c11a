/* Shard Lease records (lease_store.h): clearing and copying. */
#include "shard/lease_store.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"

void kcr__shard_lease_clear(kcr__shard_lease *l)
{
    free(l->identity);
    free(l->holder);
    free(l->held);
    free(l->version);
    memset(l, 0, sizeof *l);
    l->slot = -1;
}

void kcr__shard_lease_list_clear(kcr__shard_lease_list *list)
{
    for (size_t i = 0; i < list->n; i++)
        kcr__shard_lease_clear(&list->items[i]);
    free(list->items);
    list->items = NULL;
    list->n = 0;
}

kcr_err kcr__shard_lease_copy(const kcr__shard_lease *src, kcr__shard_lease *dst)
{
    *dst = *src;
    dst->identity = strdup(src->identity ? src->identity : "");
    dst->holder = strdup(src->holder ? src->holder : "");
    dst->held = strdup(src->held ? src->held : "");
    dst->version = strdup(src->version ? src->version : "");
    if (!dst->identity || !dst->holder || !dst->held || !dst->version) {
        kcr__shard_lease_clear(dst);
        return kcr__fail(KCR_ERR_NOMEM, "out of memory copying a shard Lease");
    }
    return KCR_OK;
}
