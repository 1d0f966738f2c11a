/* The test kit's caches: listed from the fake on every sync; each
 * difference (added, changed, gone) goes through kcr__route exactly as an
 * informer's notification would. */
#include <stdlib.h>
#include <string.h>

#include "testkit/testkit_internal.h"
#include "core/error.h"

static bool same(const char *a, const char *b)
{
    return strcmp(a ? a : "", b ? b : "") == 0;
}

void kcr__tk_cache_free(tk_cache *c)
{
    if (!c)
        return;
    free(c->group), free(c->version), free(c->resource), free(c->ns);
    free(c->label_selector), free(c->field_selector);
    kcr_store_free(c->store);
    free(c->srcs);
    free(c);
}

static tk_cache *cache_for(kcr_testkit *tk, const kcr__source *s)
{
    for (size_t i = 0; i < tk->n_caches; i++) {
        tk_cache *c = tk->caches[i];
        if (same(c->group, s->group) && same(c->version, s->version) &&
            same(c->resource, s->resource) && same(c->ns, s->ns) &&
            same(c->label_selector, s->label_selector) &&
            same(c->field_selector, s->field_selector) && c->metadata_only == s->metadata_only)
            return c;
    }
    tk_cache **nc = realloc(tk->caches, (tk->n_caches + 1) * sizeof *nc);
    if (!nc)
        return NULL;
    tk->caches = nc;
    tk_cache *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->group = strdup(s->group);
    c->version = strdup(s->version);
    c->resource = strdup(s->resource);
    c->ns = s->ns ? strdup(s->ns) : NULL;
    c->label_selector = s->label_selector ? strdup(s->label_selector) : NULL;
    c->field_selector = s->field_selector ? strdup(s->field_selector) : NULL;
    c->metadata_only = s->metadata_only;
    if (!c->group || !c->version || !c->resource || (s->ns && !c->ns) ||
        (s->label_selector && !c->label_selector) || (s->field_selector && !c->field_selector) ||
        kcr_store_new(&c->store) != KCR_OK ||
        kcr_store_add_index(c->store, KCR_INDEX_NAMESPACE, kcr_index_namespace, NULL)) {
        kcr__tk_cache_free(c);
        return NULL;
    }
    tk->caches[tk->n_caches++] = c;
    return c;
}

kcr_err kcr__tk_bind_source(kcr_testkit *tk, kcr__source *src)
{
    tk_cache *c = cache_for(tk, src);
    if (!c)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory making a test kit cache");
    kcr__source **ns = realloc(c->srcs, (c->n_srcs + 1) * sizeof *ns);
    if (!ns)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory making a test kit cache");
    c->srcs = ns;
    c->srcs[c->n_srcs++] = src;
    src->cache = c->store;
    return KCR_OK;
}

static kcr_err collect(kcr_object *obj, void *ud)
{
    return kcr_store_add(ud, obj);
}

static void route_all(tk_cache *c, kcr_change ch, const kcr_object *old_obj, const kcr_object *obj,
                      bool initial)
{
    for (size_t i = 0; i < c->n_srcs; i++)
        kcr__route(c->srcs[i], NULL, ch, old_obj, obj, initial);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Lists c from the fake and applies the differences to its store, routing each. */
static kcr_err sync_cache(kcr_testkit *tk, tk_cache *c)
{
    kcr_store *now;
    kcr_err err = kcr_store_new(&now);
    if (err != KCR_OK)
        return err;
    kcr_resource res = {c->group, c->version, c->resource};
    kcr_status st = {0};
    err = kcr_client_list(tk->client,
                          &(kcr_request){.resource = &res,
                                         .ns = c->ns,
                                         .label_selector = c->label_selector,
                                         .field_selector = c->field_selector,
                                         .metadata_only = c->metadata_only,
                                         .status = &st},
                          collect, now, NULL);
    kcr_status_clear(&st);
    if (err != KCR_OK && c->n_srcs)
        err = kcr__refail(err, "test kit: listing for controller \"%s\" %s%s: ",
                          c->srcs[0]->ctl->name, c->srcs[0]->label,
                          c->n_srcs > 1 ? " (and the other sources sharing its cache)" : "");
    kcr_string_list keys = {0};
    if (err == KCR_OK)
        err = kcr_store_list_keys(now, &keys);
    if (err != KCR_OK) {
        kcr_store_free(now);
        return err;
    }
    bool initial = !c->listed;
    c->listed = true;
    if (keys.len)
        qsort(keys.items, keys.len, sizeof *keys.items, cmp_str);
    for (size_t i = 0; i < keys.len; i++) {
        kcr_object *obj = kcr_store_get_by_key(now, keys.items[i]);
        kcr_object *old = kcr_store_get_by_key(c->store, keys.items[i]);
        if (!old || strcmp(kcr_object_resource_version(old), kcr_object_resource_version(obj))) {
            kcr_store_update(c->store, obj);
            route_all(c, old ? KCR_CHANGE_UPDATED : KCR_CHANGE_ADDED, old, obj, initial);
        }
        kcr_object_unref(old);
        kcr_object_unref(obj);
    }
    kcr_string_list_free(&keys);
    if (kcr_store_list_keys(c->store, &keys) == KCR_OK) {
        if (keys.len)
            qsort(keys.items, keys.len, sizeof *keys.items, cmp_str);
        for (size_t i = 0; i < keys.len; i++) {
            kcr_object *gone = kcr_store_get_by_key(now, keys.items[i]);
            if (!gone) {
                kcr_object *old = kcr_store_get_by_key(c->store, keys.items[i]);
                kcr_store_delete_key(c->store, keys.items[i]);
                route_all(c, KCR_CHANGE_DELETED, NULL, old, false);
                kcr_object_unref(old);
            }
            kcr_object_unref(gone);
        }
        kcr_string_list_free(&keys);
    }
    kcr_store_free(now);
    return KCR_OK;
}

kcr_err kcr_testkit_sync(kcr_testkit *tk)
{
    if (!tk)
        return kcr__fail(KCR_ERR_INVALID, "kcr_testkit_sync: NULL kit");
    for (size_t i = 0; i < tk->n_caches; i++) {
        kcr_err err = sync_cache(tk, tk->caches[i]);
        if (err != KCR_OK)
            return err;
    }
    return KCR_OK;
}

kcr_err kcr_testkit_resync(kcr_testkit *tk)
{
    kcr_err err = kcr_testkit_sync(tk);
    for (size_t i = 0; err == KCR_OK && i < tk->n_ctls; i++) {
        kcr__source *p = &tk->ctls[i]->c->sources[0];
        if (!tk->ctls[i]->c->resync_ms)
            continue;
        kcr_string_list keys = {0};
        err = kcr_store_list_keys(p->cache, &keys);
        if (keys.len)
            qsort(keys.items, keys.len, sizeof *keys.items, cmp_str);
        for (size_t j = 0; err == KCR_OK && j < keys.len; j++) {
            kcr_object *obj = kcr_store_get_by_key(p->cache, keys.items[j]);
            if (obj)
                kcr__route(p, keys.items[j], KCR_CHANGE_UPDATED, obj, obj, false);
            kcr_object_unref(obj);
        }
        kcr_string_list_free(&keys);
    }
    return err;
}
