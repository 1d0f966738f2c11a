/* create, update, patch and delete. Each goes through the one write
 * preamble (preamble.c), builds the next state of the object as a kcr__node
 * tree (a parsed body, or the stored object edited by a merge patch or a
 * JSON Patch from object/), and hands it to the object table (objects.c),
 * which applies the server's rules and freezes it once. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/log.h"
#include "fake/fake_internal.h"

static const char NOMEM[] = "fake: out of memory";

static bool valid_name(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 253)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
        if (!alnum && !((c == '-' || c == '.') && i > 0 && i + 1 < n))
            return false;
    }
    return true;
}

/* ---- create ------------------------------------------------------------------------------- */

/* Names a created object (generateName), checks its name and namespace
 * and stores it (lock held; takes doc). */
static kcr_err create_locked(kcr__fake_write *w, struct kcr__node *doc, kcr_object **out)
{
    kcr_fake *f = w->f;
    struct kcr__node *md = kcr__fake_metadata_of(doc);
    if (!md) {
        kcr__node_free(doc);
        return kcr__fail(KCR_ERR_NOMEM, NOMEM);
    }
    const char *name = kcr__fake_meta_str(doc, "name");
    const char *gen = kcr__fake_meta_str(doc, "generateName");
    kcr_err err = KCR_OK;
    if ((!name || !*name) && gen && *gen) {
        static const char alphabet[] = "bcdfghjklmnpqrstvwxz2456789";
        char generated[300];
        snprintf(generated, sizeof generated, "%.240s", gen);
        size_t n = strlen(generated);
        for (int i = 0; i < 5; i++)
            generated[n + (size_t)i] = alphabet[kcr__fake_rand(f) % (sizeof alphabet - 1)];
        generated[n + 5] = '\0';
        if (!kcr__node_set(md, "name", 4, kcr__node_str(KCR__N_STR, generated, n + 5)))
            err = kcr__fail(KCR_ERR_NOMEM, NOMEM);
        name = kcr__fake_meta_str(doc, "name");
    }
    if (err == KCR_OK && (!name || !*name))
        err = kcr__fake_status(w->st, 422, "Invalid", w->res, "",
                               "%s is invalid: metadata.name: Required value: name or "
                               "generateName is required",
                               w->res->resource);
    else if (err == KCR_OK && !valid_name(name)) {
        char detail[600];
        snprintf(detail, sizeof detail,
                 "Invalid value: \"%.300s\": a lowercase RFC 1123 subdomain must consist of "
                 "lower case alphanumeric characters, '-' or '.', and must start and end with an "
                 "alphanumeric character",
                 name);
        err = kcr__fake_invalid(w->st, w->res, name, "FieldValueInvalid", "metadata.name", detail);
    }
    /* The namespace: the request's, which a body's must agree with;
     * cluster-scoped objects have none. */
    const kcr__disc_entry *e = kcr__fake_find_resource(f, w->res);
    const char *body_ns = kcr__fake_meta_str(doc, "namespace");
    const char *ns = w->ns;
    bool namespaced = e ? e->r.namespaced : (ns && *ns) || (body_ns && *body_ns);
    char *where = NULL;
    if (err == KCR_OK && !namespaced) {
        kcr__fake_remove(md, "namespace");
        where = strdup("");
    } else if (err == KCR_OK) {
        if (!ns || !*ns)
            ns = body_ns;
        if (!ns || !*ns)
            err = kcr__fake_bad_request(w->st, "the namespace of the object is required");
        else if (body_ns && *body_ns && strcmp(body_ns, ns) != 0)
            err = kcr__fake_bad_request(w->st, "the namespace of the provided object does not "
                                               "match the namespace sent on the request");
        else if (!(where = strdup(ns)) ||
                 !kcr__node_set(md, "namespace", 9,
                                kcr__node_str(KCR__N_STR, where, strlen(where))))
            err = kcr__fail(KCR_ERR_NOMEM, NOMEM);
    }
    if (err == KCR_OK && !where)
        err = kcr__fail(KCR_ERR_NOMEM, NOMEM);
    bool found = false;
    size_t pos = 0;
    if (err == KCR_OK) {
        pos = kcr__fake_find(f, w->rkey, where, name, &found);
        if (found) {
            char q[300];
            kcr__fake_qualified(w->res, q, sizeof q);
            err = kcr__fake_status(w->st, 409, "AlreadyExists", w->res, name,
                                   "%s \"%s\" already exists", q, name);
        }
    }
    if (err == KCR_OK) {
        err = kcr__fake_store_create(w, pos, where, doc, out);
        doc = NULL;
    }
    kcr__node_free(doc);
    free(where);
    return err;
}

kcr_err kcr__fake_create_doc(kcr_fake *f, const kcr_resource *res, const char *ns,
                             struct kcr__node *doc, kcr_object **out, kcr_status *st)
{
    kcr__fake_write w = {.f = f, .res = res, .ns = ns, .st = st, .rkey = kcr__fake_rkey(res)};
    if (!w.rkey) {
        kcr__node_free(doc);
        return kcr__fail(KCR_ERR_NOMEM, NOMEM);
    }
    pthread_mutex_lock(&f->lock);
    kcr_err err = create_locked(&w, doc, out);
    pthread_mutex_unlock(&f->lock);
    kcr__fake_write_end(&w);
    return err;
}

kcr_err kcr__fake_create(kcr_client *c, const kcr_resource *res, const char *ns, const char *json,
                         size_t len, const kcr__write_options *opts, kcr_object **out,
                         kcr_status *st)
{
    kcr__fake_write w;
    kcr_err err = kcr__fake_write_begin(&w, KCR__FAKE(c), KCR_FAKE_CREATE, res, ns, NULL,
                                        opts->subresource, opts->dry_run, json, len, st);
    if (err != KCR_OK)
        return err;
    pthread_mutex_lock(&w.f->lock);
    err = create_locked(&w, w.body, out);
    w.body = NULL;
    pthread_mutex_unlock(&w.f->lock);
    kcr__fake_write_end(&w);
    return err;
}

/* ---- update and patch --------------------------------------------------------------------- */

/* `status` (taken, NULL: none) as the status of doc. */
static bool put_status(struct kcr__node *doc, struct kcr__node *status)
{
    if (status)
        return kcr__node_set(doc, "status", 6, status);
    kcr__fake_remove(doc, "status");
    return true;
}

/* Detaches doc's status (NULL when it has none). */
static struct kcr__node *take_status(struct kcr__node *doc)
{
    ptrdiff_t i = kcr__node_find(doc, "status", 6);
    return i >= 0 ? kcr__node_take_at(doc, (size_t)i) : NULL;
}

/* What a write to the main resource or to the status subresource stores:
 * the main resource keeps the stored status; the status subresource changes
 * only the status; a resource without a status subresource stores the write
 * as is. Takes `written`; NULL when out of memory. */
static struct kcr__node *split_status(const kcr__fake_write *w, struct kcr__node *written)
{
    if (!w->has_status)
        return written; /* no status subresource: the status is an ordinary field */
    kcr_value stored_status = kcr_object_get(w->cur->obj, "status");
    if (!w->status_only) {
        struct kcr__node *s = kcr_value_get_type(stored_status) != KCR_VALUE_ABSENT
                                  ? kcr__node_from_value(stored_status)
                                  : NULL;
        if ((kcr_value_get_type(stored_status) != KCR_VALUE_ABSENT && !s) ||
            !put_status(written, s)) {
            kcr__node_free(written);
            return NULL;
        }
        return written;
    }
    struct kcr__node *s = take_status(written);
    kcr__node_free(written);
    struct kcr__node *next = kcr__node_from_value(kcr_object_root(w->cur->obj));
    if (!next || !put_status(next, s)) {
        kcr__node_free(next);
        return NULL;
    }
    return next;
}

/* The common end of update and patch (lock held): the name rule, the
 * preconditions and the conflict rule, the status split, the store. Takes
 * `written`; uid (NULL: none) may point into it. */
static kcr_err write_locked(kcr__fake_write *w, struct kcr__node *written, const char *uid,
                            kcr_object **out)
{
    kcr_err err = kcr__fake_write_check_name(w, written);
    if (err == KCR_OK)
        err = kcr__fake_write_preconditions(w, uid, kcr__fake_meta_str(written, "resourceVersion"),
                                            KCR__FAKE_RV_OPTIMISTIC);
    if (err != KCR_OK) {
        kcr__node_free(written);
        return err;
    }
    struct kcr__node *next = split_status(w, written);
    if (!next)
        return kcr__fail(KCR_ERR_NOMEM, NOMEM);
    return kcr__fake_store_update(w, next, false, out);
}

kcr_err kcr__fake_update(kcr_client *c, const kcr_resource *res, const char *ns, const char *name,
                         const char *json, size_t len, const kcr__write_options *opts,
                         kcr_object **out, kcr_status *st)
{
    kcr__fake_write w;
    kcr_err err = kcr__fake_write_begin(&w, KCR__FAKE(c), KCR_FAKE_UPDATE, res, ns, name,
                                        opts->subresource, opts->dry_run, json, len, st);
    if (err != KCR_OK)
        return err;
    pthread_mutex_lock(&w.f->lock);
    err = kcr__fake_write_locate(&w);
    if (err == KCR_OK) {
        /* An update's metadata.uid is a precondition, as the apiserver's
         * UpdatedObjectInfo makes it. */
        const char *uid = kcr__fake_meta_str(w.body, "uid");
        err = write_locked(&w, w.body, uid && *uid ? uid : NULL, out);
        w.body = NULL;
    }
    pthread_mutex_unlock(&w.f->lock);
    kcr__fake_write_end(&w);
    return err;
}

/* Applies a merge or JSON patch to the stored object: the patched tree
 * (*out) or the apiserver's answer for a patch that does not apply. */
static kcr_err apply_patch(kcr__fake_write *w, kcr_patch_type type, const char *patch, size_t len,
                           struct kcr__node **out)
{
    *out = NULL;
    kcr_object_edit *e = NULL;
    kcr_err err = kcr_object_edit_new(w->cur->obj, &e);
    if (err != KCR_OK)
        return err;
    err = type == KCR_PATCH_JSON ? kcr_object_edit_json_patch(e, patch, len)
                                         : kcr_object_edit_merge_patch(e, patch, len);
    if (err == KCR_OK && e->root->t != KCR__N_MAP)
        err = kcr__fail(KCR_ERR_INVALID, "the patched object is not a JSON object");
    if (err == KCR_OK) {
        *out = e->root;
        e->root = NULL;
    }
    kcr_object_edit_free(e);
    if (err == KCR_OK || err == KCR_ERR_NOMEM)
        return err;
    if (err == KCR_ERR_PARSE) /* not a patch document at all */
        return kcr__fake_bad_request(w->st, kcr_last_error());
    if (type == KCR_PATCH_JSON) {
        /* The apiserver answers any failed JSON patch operation (a failed
         * test too) with this bare 422, without saying which. */
        kcr__log(KCR_LOG_DEBUG, "fake", "JSON patch of %s rejected: %s", w->name, kcr_last_error());
        return kcr__fake_status(w->st, 422, "Invalid", NULL, NULL,
                                "the server rejected our request due to an error in our request");
    }
    return kcr__fake_status(w->st, 422, "Invalid", w->res, w->name, "%s", kcr_last_error());
}

/* The first character of a body that is not white space. */
static char first_char(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\n' && s[i] != '\r')
            return s[i];
    return '\0';
}

/* Server-side apply, approximated as a merge patch, creates a missing
 * object from the applied configuration. */
static kcr_err apply_create(kcr__fake_write *w, const char *patch, size_t len, kcr_object **out)
{
    struct kcr__node *doc;
    kcr_err err = kcr__node_parse(patch, len, &doc);
    if (err != KCR_OK)
        return kcr__fake_bad_request(w->st, kcr_last_error());
    struct kcr__node *md = doc->t == KCR__N_MAP ? kcr__fake_metadata_of(doc) : NULL;
    if (!md || !kcr__node_set(md, "name", 4, kcr__node_str(KCR__N_STR, w->name, strlen(w->name)))) {
        kcr__node_free(doc);
        return kcr__fail(KCR_ERR_NOMEM, NOMEM);
    }
    return create_locked(w, doc, out);
}

kcr_err kcr__fake_patch(kcr_client *c, const kcr_resource *res, const char *ns, const char *name,
                        kcr_patch_type type, const char *patch, size_t len,
                        const kcr__write_options *opts, kcr_object **out, kcr_status *st)
{
    kcr__fake_write w;
    kcr_err err = kcr__fake_write_begin(&w, KCR__FAKE(c), KCR_FAKE_PATCH, res, ns, name,
                                        opts->subresource, opts->dry_run, NULL, 0, st);
    if (err != KCR_OK)
        return err;
    if (!len)
        len = strlen(patch);
    char want = type == KCR_PATCH_JSON ? '[' : '{';
    if (first_char(patch, len) != want) {
        kcr__fake_write_end(&w);
        if (type == KCR_PATCH_APPLY)
            return kcr__fake_status(st, 415, "UnsupportedMediaType", res, name,
                                    "the fake needs a JSON apply configuration");
        return kcr__fake_bad_request(st, type == KCR_PATCH_JSON
                                             ? "a JSON patch must be an array"
                                             : "a merge patch must be a JSON object");
    }
    pthread_mutex_lock(&w.f->lock);
    err = kcr__fake_write_locate(&w);
    if (err == KCR_ERR_NOT_FOUND && type == KCR_PATCH_APPLY) {
        kcr_status_clear(st);
        kcr__clear_error();
        err = apply_create(&w, patch, len, out);
    } else if (err == KCR_OK) {
        struct kcr__node *patched;
        err = apply_patch(&w, type, patch, len, &patched);
        if (err == KCR_OK) /* a patch has no uid precondition */
            err = write_locked(&w, patched, NULL, out);
    }
    pthread_mutex_unlock(&w.f->lock);
    kcr__fake_write_end(&w);
    return err;
}

/* ---- delete ------------------------------------------------------------------------------- */

kcr_err kcr__fake_delete(kcr_client *c, const kcr_resource *res, const char *ns, const char *name,
                         const kcr__delete_options *opts, kcr_object **out, kcr_status *st)
{
    kcr__fake_write w;
    kcr_err err = kcr__fake_write_begin(&w, KCR__FAKE(c), KCR_FAKE_DELETE, res, ns, name, NULL,
                                        opts->dry_run, NULL, 0, st);
    if (err != KCR_OK)
        return err;
    pthread_mutex_lock(&w.f->lock);
    err = kcr__fake_write_locate(&w);
    if (err == KCR_OK)
        err = kcr__fake_write_preconditions(&w, opts->precondition_uid,
                                            opts->precondition_resource_version,
                                            KCR__FAKE_RV_PRECONDITION);
    if (err == KCR_OK) {
        const kcr_object *cur = w.cur->obj;
        if (kcr_object_finalizer_count(cur) == 0) {
            err = kcr__fake_store_remove(&w, out);
        } else if (kcr_object_is_deleting(cur)) { /* already marked: nothing to write */
            if (out)
                *out = kcr_object_ref(cur);
        } else {
            struct kcr__node *next = kcr__node_from_value(kcr_object_root(cur));
            err = next ? kcr__fake_store_update(&w, next, true, out)
                       : kcr__fail(KCR_ERR_NOMEM, NOMEM);
        }
    }
    pthread_mutex_unlock(&w.f->lock);
    kcr__fake_write_end(&w);
    return err;
}
