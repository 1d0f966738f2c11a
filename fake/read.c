/* get and list: stored objects are handed out by reference, never copied;
 * metadata-only requests get PartialObjectMetadata views; lists are paged
 * with opaque continue tokens and selected by label and field selectors. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base64.h"
#include "core/error.h"
#include "fake/fake_internal.h"
#include "object/stamp.h"

kcr_object *kcr__fake_metadata_view(const kcr_object *obj)
{
    kcr_object_edit *e = NULL;
    kcr_object *out = NULL;
    if (kcr_object_edit_new(NULL, &e) == KCR_OK &&
        kcr_object_edit_set_string(e, "kind", "PartialObjectMetadata") == KCR_OK &&
        kcr_object_edit_set_string(e, "apiVersion", "meta.k8s.io/v1") == KCR_OK &&
        kcr_object_edit_set_value(e, "metadata", kcr_object_get(obj, "metadata")) == KCR_OK)
        kcr_object_edit_freeze(e, &out);
    kcr_object_edit_free(e);
    return out;
}

static const char *obj_label(const char *key, void *ud)
{
    return kcr_object_label(ud, key);
}

static const char *obj_field(const char *key, void *ud)
{
    if (strcmp(key, "metadata.name") == 0)
        return kcr_object_name(ud);
    if (strcmp(key, "metadata.namespace") == 0)
        return kcr_object_namespace(ud);
    return NULL;
}

bool kcr__fake_selects(const kcr__selector *labels, const kcr__selector *fields,
                       const kcr_object *obj)
{
    return obj && kcr__selector_matches(labels, obj_label, (void *)obj) &&
           kcr__selector_matches(fields, obj_field, (void *)obj);
}

kcr_err kcr__fake_parse_selectors(const kcr__list_options *opts, kcr__selector **labels,
                                  kcr__selector **fields, kcr_status *st)
{
    *labels = *fields = NULL;
    if (kcr__selector_parse(opts->label_selector, labels) != KCR_OK)
        return kcr__fake_bad_request(st, kcr_last_error());
    if (kcr__field_selector_parse(opts->field_selector, fields) != KCR_OK) {
        kcr__selector_free(*labels);
        *labels = NULL;
        return kcr__fake_bad_request(st, kcr_last_error());
    }
    return KCR_OK;
}

kcr_err kcr__fake_parse_shard(const kcr_fake *f, const kcr__list_options *opts, kcr__fshard *out,
                              kcr_status *st)
{
    memset(out, 0, sizeof *out);
    if (f->opts.ignore_shard_selector || !opts->shard_selector || !*opts->shard_selector)
        return KCR_OK;
    if (kcr_shard_selector_parse(opts->shard_selector, &out->field, &out->ranges, &out->n) !=
        KCR_OK)
        return kcr__fake_status(st, 500, "InternalError", NULL, NULL, "invalid shard selector: %s",
                                kcr_last_error());
    if (out->field == KCR_SHARD_BY_CONTROLLER) { /* kcr's own: no apiserver knows it */
        kcr__fake_shard_clear(out);
        return kcr__fake_status(st, 500, "InternalError", NULL, NULL,
                                "invalid shard selector: unsupported field path \"%s\"",
                                kcr_shard_field_path(KCR_SHARD_BY_CONTROLLER));
    }
    return KCR_OK;
}

bool kcr__fake_shard_selects(const kcr__fshard *s, const kcr_object *obj)
{
    return s->n == 0 || kcr_shard_match(obj, s->field, s->ranges, s->n);
}

void kcr__fake_shard_clear(kcr__fshard *s)
{
    free(s->ranges);
    memset(s, 0, sizeof *s);
}

/* A sharded list's shardInfo: the selector in normal form. */
static kcr_err fill_shard_info(const kcr__fshard *s, kcr_shard_info *info)
{
    kcr_shard_info_clear(info);
    kcr_err err = kcr_shard_selector_format(s->field, s->ranges, s->n, &info->selector);
    info->present = err == KCR_OK;
    return err;
}

kcr_err kcr__fake_get(kcr_client *c, const kcr_resource *res, const char *ns, const char *name,
                      const kcr__get_options *opts, kcr_object **out, kcr_status *st)
{
    kcr_fake *f = KCR__FAKE(c);
    kcr_err err = kcr__fake_begin(f, KCR_FAKE_GET, res, ns, name, opts->subresource, NULL, st);
    if (err != KCR_OK)
        return err;
    /* GET .../status answers the whole object, as the apiserver does */
    if (opts->subresource && strcmp(opts->subresource, "status") != 0)
        return kcr__fake_unsupported_sub(st, res, opts->subresource);
    char *rkey = kcr__fake_rkey(res);
    if (!rkey)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory");
    pthread_mutex_lock(&f->lock);
    bool found;
    size_t pos = kcr__fake_find(f, rkey, kcr__fake_scope_ns(f, res, ns), name, &found);
    kcr_object *obj = found ? kcr_object_ref(f->objs[pos]->obj) : NULL;
    pthread_mutex_unlock(&f->lock);
    free(rkey);
    if (!found)
        err = kcr__fake_not_found(st, res, name);
    if (obj && opts->metadata_only) {
        kcr_object *view = kcr__fake_metadata_view(obj);
        kcr_object_unref(obj);
        obj = view;
        if (!obj)
            err = kcr__fail(KCR_ERR_NOMEM, "out of memory");
    }
    if (out)
        *out = obj;
    else
        kcr_object_unref(obj);
    return err;
}

/* A list item with the List's type, as a client reads it: items of a List
 * carry the List's kind (without "List") and apiVersion. The stored object
 * itself when it has them (the common case), else a stamped copy. */
static kcr_err typed_item(kcr_object *obj, const char *kind, const char *api_version,
                          kcr_object **out)
{
    if ((!*kind || strcmp(kcr_object_kind(obj), kind) == 0) &&
        strcmp(kcr_object_api_version(obj), api_version) == 0) {
        *out = kcr_object_ref(obj);
        return KCR_OK;
    }
    return kcr__object_stamp_type(obj, api_version, kind, out);
}

/* Hands the page's items to fn, typed as the List's items. */
static kcr_err serve_page(const char *kind, const char *api_version, bool metadata_only,
                          kcr_object **items, size_t n, kcr_list_item_fn fn, void *ud)
{
    kcr_err err = KCR_OK;
    for (size_t i = 0; err == KCR_OK && i < n; i++) {
        kcr_object *item = NULL;
        if (metadata_only) {
            item = kcr__fake_metadata_view(items[i]);
            if (!item)
                err = kcr__fail(KCR_ERR_NOMEM, "fake list: out of memory");
        } else {
            err = typed_item(items[i], kind, api_version, &item);
        }
        if (err == KCR_OK && fn)
            err = fn(item, ud);
        kcr_object_unref(item);
    }
    return err;
}

/* A continue token: base64 of "<namespace>\x1f<name>\x1f<rv>" of the last
 * item sent and the version an Exact list reads (0: the current state). */
static kcr_err parse_continue(const char *token, char **after_ns, char **after_name, uint64_t *at,
                              kcr_status *st)
{
    *after_ns = *after_name = NULL;
    if (!token || !*token)
        return KCR_OK;
    char *raw = NULL;
    size_t raw_len = 0;
    char *sep = NULL;
    char *sep2 = NULL;
    if (kcr__base64_decode(token, strlen(token), &raw, &raw_len) == KCR_OK &&
        (sep = memchr(raw, '\x1f', raw_len)))
        sep2 = memchr(sep + 1, '\x1f', raw_len - (size_t)(sep + 1 - raw));
    if (!sep2) {
        free(raw);
        return kcr__fake_bad_request(st, "invalid continue token");
    }
    *sep = *sep2 = '\0';
    *at = strtoull(sep2 + 1, NULL, 10);
    *after_ns = strdup(raw);
    *after_name = strdup(sep + 1);
    free(raw);
    if (!*after_ns || !*after_name) {
        free(*after_ns);
        free(*after_name);
        *after_ns = *after_name = NULL;
        return kcr__fail(KCR_ERR_NOMEM, "out of memory");
    }
    return KCR_OK;
}

static kcr_err fill_meta(kcr_list_meta *meta, uint64_t rv, uint64_t at, kcr_object **items,
                         size_t n_items, int64_t remaining)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%" PRIu64, rv);
    meta->resource_version = strdup(buf);
    meta->continue_token = NULL;
    if (remaining > 0 && n_items > 0) {
        const kcr_object *last = items[n_items - 1];
        size_t cap = strlen(kcr_object_namespace(last)) + strlen(kcr_object_name(last)) + 24;
        char *raw = malloc(cap);
        if (raw) {
            int len = snprintf(raw, cap, "%s\x1f%s\x1f%" PRIu64, kcr_object_namespace(last),
                               kcr_object_name(last), at);
            meta->continue_token = kcr__base64_encode(raw, (size_t)len);
            free(raw);
        }
        meta->remaining_item_count = remaining;
        meta->has_remaining_item_count = true;
    } else {
        meta->continue_token = strdup("");
    }
    if (!meta->resource_version || !meta->continue_token) {
        kcr_list_meta_clear(meta);
        return kcr__fail(KCR_ERR_NOMEM, "out of memory");
    }
    return KCR_OK;
}

/* The position of (ns, name) in v (n entries sorted by namespace, then
 * name), or where it goes; *found says which. */
static size_t view_find(const kcr__fobj *v, size_t n, const char *ns, const char *name, bool *found)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(v[mid].ns, ns);
        if (!c)
            c = strcmp(v[mid].name, name);
        if (!c) {
            *found = true;
            return mid;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    *found = false;
    return lo;
}

/* The objects of rkey as they were at resourceVersion `at`, sorted like
 * f->objs (borrowed: valid under the lock): the current ones with the
 * history after `at` undone, newest first. The caller checked that the
 * history reaches back to `at`. Lock held. */
static kcr_err view_at(kcr_fake *f, const char *rkey, uint64_t at, kcr__fobj **out, size_t *n_out)
{
    bool found;
    size_t first = kcr__fake_find(f, rkey, "", "", &found), n = 0;
    while (first + n < f->n && strcmp(f->objs[first + n]->rkey, rkey) == 0)
        n++;
    kcr__fobj *v = malloc((n + f->hist_len + 1) * sizeof *v);
    if (!v)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++)
        v[i] = *f->objs[first + i];
    for (size_t k = f->hist_len; k-- > 0;) {
        const kcr__fevent *e = &f->hist[(f->hist_start + k) % f->opts.history_size];
        if (e->rv <= at)
            break;
        if (strcmp(e->rkey, rkey) != 0)
            continue;
        const char *name = kcr_object_name(e->obj);
        size_t i = view_find(v, n, e->ns, name, &found);
        /* before an ADDED the object was not there; before a MODIFIED or
         * DELETED it was in its old or final state */
        kcr_object *before = e->type == KCR_WATCH_MODIFIED ? e->old
                             : e->type == KCR_WATCH_DELETED ? e->obj
                                                            : NULL;
        if (!before && found) {
            memmove(&v[i], &v[i + 1], (n - i - 1) * sizeof *v);
            n--;
        } else if (before && found) {
            v[i].obj = before;
        } else if (before) {
            memmove(&v[i + 1], &v[i], (n - i) * sizeof *v);
            v[i] = (kcr__fobj){.rkey = e->rkey, .ns = e->ns, .name = (char *)name, .obj = before};
            n++;
        }
    }
    *out = v;
    *n_out = n;
    return KCR_OK;
}

/* The version an Exact list at `rvs` reads into *at, or the Status of
 * one the fake cannot serve (not a number, compacted, in the future); lock
 * held. */
static kcr_err exact_version(kcr_fake *f, const char *rvs, uint64_t *at, kcr_status *st)
{
    char *end;
    *at = rvs && *rvs ? strtoull(rvs, &end, 10) : 0;
    if (!rvs || !*rvs || *end || *rvs == '-' || *at == 0)
        return kcr__fake_bad_request(st, "resourceVersionMatch=Exact needs a resourceVersion "
                                         "other than 0 (a number for the fake)");
    if (*at > f->rv)
        return kcr__fake_status(st, 504, "Timeout", NULL, NULL,
                                "Too large resource version: %" PRIu64 ", current: %" PRIu64, *at,
                                f->rv);
    if (*at < f->compacted_rv)
        return kcr__fake_status(st, 410, "Expired", NULL, NULL,
                                "The resourceVersion for the provided list is too old.");
    return KCR_OK;
}

kcr_err kcr__fake_list(kcr_client *c, const kcr_resource *res, const char *ns,
                       const kcr__list_options *opts, kcr_list_item_fn fn, void *ud,
                       kcr_list_meta *meta, kcr_status *st)
{
    kcr_fake *f = KCR__FAKE(c);
    kcr_err err = kcr__fake_begin(f, KCR_FAKE_LIST, res, ns, NULL, NULL, NULL, st);
    if (err != KCR_OK)
        return err;
    kcr__fshard shard;
    if ((err = kcr__fake_parse_shard(f, opts, &shard, st)) != KCR_OK)
        return err;
    kcr__selector *labels, *fields;
    if ((err = kcr__fake_parse_selectors(opts, &labels, &fields, st)) != KCR_OK) {
        kcr__fake_shard_clear(&shard);
        return err;
    }
    char *after_ns = NULL, *after_name = NULL;
    char *rkey = NULL;
    kcr_object **items = NULL;
    size_t n_items = 0;
    int64_t remaining = 0;
    uint64_t rv = 0, at = 0; /* at: the version an Exact list reads (0: now) */
    kcr__fobj *view = NULL;
    size_t n_view = 0;
    char kind[256] = "", api_version[256];
    if (res->group && *res->group)
        snprintf(api_version, sizeof api_version, "%s/%s", res->group, res->version);
    else
        snprintf(api_version, sizeof api_version, "%s", res->version);
    err = parse_continue(opts->continue_token, &after_ns, &after_name, &at, st);
    if (err == KCR_OK && !(rkey = kcr__fake_rkey(res)))
        err = kcr__fail(KCR_ERR_NOMEM, "out of memory");
    if (err == KCR_OK) {
        pthread_mutex_lock(&f->lock);
        const char *sns = kcr__fake_scope_ns(f, res, ns);
        const kcr__disc_entry *de = kcr__fake_find_resource(f, res);
        if (de)
            snprintf(kind, sizeof kind, "%s", de->r.kind);
        bool exact = !opts->continue_token && opts->resource_version_match &&
                     strcmp(opts->resource_version_match, "Exact") == 0;
        if (exact)
            err = exact_version(f, opts->resource_version, &at, st);
        else if (at && at < f->compacted_rv)
            err = kcr__fake_status(st, 410, "Expired", NULL, NULL,
                                   "The provided continue parameter is too old to display a "
                                   "consistent list result. You can start a new list without the "
                                   "continue parameter.");
        if (err == KCR_OK && at)
            err = view_at(f, rkey, at, &view, &n_view);
        rv = at ? at : f->rv;
        bool found;
        size_t first = kcr__fake_find(f, rkey, "", "", &found);
        items = err == KCR_OK ? calloc((view ? n_view : f->n) + 1, sizeof *items) : NULL;
        for (size_t k = 0; items; k++) {
            kcr__fobj *o = view ? (k < n_view ? &view[k] : NULL)
                         : first + k < f->n && strcmp(f->objs[first + k]->rkey, rkey) == 0
                             ? f->objs[first + k]
                             : NULL;
            if (!o)
                break;
            if (*sns && strcmp(o->ns, sns) != 0)
                continue;
            if (after_ns) {
                int cmp = strcmp(o->ns, after_ns);
                if (cmp < 0 || (cmp == 0 && strcmp(o->name, after_name) <= 0))
                    continue;
            }
            if (!kcr__fake_selects(labels, fields, o->obj) ||
                !kcr__fake_shard_selects(&shard, o->obj))
                continue;
            if (opts->limit > 0 && (int64_t)n_items >= opts->limit)
                remaining++;
            else
                items[n_items++] = kcr_object_ref(o->obj);
        }
        pthread_mutex_unlock(&f->lock);
        free(view);
        if (err == KCR_OK && !items)
            err = kcr__fail(KCR_ERR_NOMEM, "out of memory");
    }
    if (err == KCR_OK)
        err = serve_page(kind, api_version, opts->metadata_only, items, n_items, fn, ud);
    if (err == KCR_OK && meta)
        err = fill_meta(meta, rv, at, items, n_items, remaining);
    if (err == KCR_OK && shard.n && opts->shard_info)
        err = fill_shard_info(&shard, opts->shard_info);
    for (size_t i = 0; i < n_items; i++)
        kcr_object_unref(items[i]);
    free(items);
    free(rkey);
    free(after_ns);
    free(after_name);
    kcr__selector_free(labels);
    kcr__selector_free(fields);
    kcr__fake_shard_clear(&shard);
    return err;
}
