/* The fake's object table and what the server sets when it writes one: the
 * resourceVersion counter (one for the whole fake, as etcd's revision),
 * uid, creationTimestamp, generation (bumped when anything outside metadata
 * and status changes, and when an object is marked for deletion), and the
 * finalizer rule (an object marked for deletion goes when its last
 * finalizer does). Objects are immutable kcr_objects; a write builds the
 * next state as a kcr__node tree and freezes it once. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/grow.h"
#include "fake/fake_internal.h"
#include "kcr/time.h"

char *kcr__fake_rkey(const kcr_resource *res)
{
    const char *g = res->group ? res->group : "";
    size_t len = strlen(g) + strlen(res->resource) + 2;
    char *k = malloc(len);
    if (k)
        snprintf(k, len, "%s/%s", g, res->resource);
    return k;
}

static int key_cmp(const char *rkey, const char *ns, const char *name, const kcr__fobj *o)
{
    int c = strcmp(rkey, o->rkey);
    if (c == 0)
        c = strcmp(ns, o->ns);
    if (c == 0)
        c = strcmp(name, o->name);
    return c;
}

size_t kcr__fake_find(kcr_fake *f, const char *rkey, const char *ns, const char *name, bool *found)
{
    size_t lo = 0, hi = f->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = key_cmp(rkey, ns, name, f->objs[mid]);
        if (c == 0) {
            *found = true;
            return mid;
        }
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    *found = false;
    return lo;
}

const char *kcr__fake_scope_ns(kcr_fake *f, const kcr_resource *res, const char *ns)
{
    const kcr__disc_entry *e = kcr__fake_find_resource(f, res);
    if ((e && !e->r.namespaced) || !ns)
        return "";
    return ns;
}

void kcr__fake_fobj_free(kcr__fobj *o)
{
    if (!o)
        return;
    free(o->rkey);
    free(o->ns);
    free(o->name);
    kcr_object_unref(o->obj);
    free(o);
}

static void rv_text(uint64_t rv, char buf[24])
{
    snprintf(buf, 24, "%" PRIu64, rv);
}

static void make_uid(kcr_fake *f, char out[37])
{
    uint64_t a = kcr__fake_rand(f), b = kcr__fake_rand(f);
    snprintf(out, 37, "%08" PRIx32 "-%04" PRIx32 "-4%03" PRIx32 "-%04" PRIx32 "-%012" PRIx64,
             (uint32_t)(a >> 32), (uint32_t)(a >> 16) & 0xffff, (uint32_t)a & 0xfff,
             ((uint32_t)(b >> 48) & 0x3fff) | 0x8000, b & UINT64_C(0xffffffffffff));
}

static void now_rfc3339(char *buf, size_t size)
{
    kcr_time_format(kcr__wall_ns() / KCR_NS_PER_S, buf, size);
}

static kcr_err freeze(struct kcr__node *doc, kcr_object **out)
{
    kcr_object_edit e = {.root = doc};
    return kcr_object_edit_freeze(&e, out);
}

static const char NOMEM[] = "fake: out of memory";

/* ---- writes ---------------------------------------------------------------------------------- */

/* Gives doc the resource's kind and apiVersion where the body left them
 * out: the apiserver always stores (and answers with) a typed object. */
static bool stamp_type(const kcr__fake_write *w, struct kcr__node *doc)
{
    const kcr__disc_entry *e = kcr__fake_find_resource(w->f, w->res);
    if (!kcr__fake_member(doc, "kind") && e && *e->r.kind &&
        !kcr__node_put_str(doc, "kind", e->r.kind))
        return false;
    if (kcr__fake_member(doc, "apiVersion"))
        return true;
    char av[400];
    if (w->res->group && *w->res->group)
        snprintf(av, sizeof av, "%s/%s", w->res->group, w->res->version);
    else
        snprintf(av, sizeof av, "%s", w->res->version);
    return kcr__node_put_str(doc, "apiVersion", av);
}

kcr_err kcr__fake_store_create(kcr__fake_write *w, size_t pos, const char *ns,
                               struct kcr__node *doc, kcr_object **out)
{
    kcr_fake *f = w->f;
    struct kcr__node *md = kcr__fake_metadata_of(doc);
    char buf[64];
    bool ok = md != NULL;
    rv_text(f->rv + 1, buf);
    ok = ok && kcr__node_put_str(md, "resourceVersion", buf);
    make_uid(f, buf);
    ok = ok && kcr__node_put_str(md, "uid", buf);
    now_rfc3339(buf, sizeof buf);
    ok = ok && kcr__node_put_str(md, "creationTimestamp", buf) &&
         kcr__node_put_int(md, "generation", 1);
    if (md)
        kcr__fake_remove(md, "deletionTimestamp");
    ok = ok && stamp_type(w, doc);
    kcr_err err = ok ? KCR_OK : kcr__fail(KCR_ERR_NOMEM, NOMEM);
    kcr__fobj *o = NULL;
    if (err == KCR_OK) {
        o = calloc(1, sizeof *o);
        const char *name = kcr__fake_meta_str(doc, "name");
        if (!o || !(o->rkey = strdup(w->rkey)) || !(o->ns = strdup(ns)) || !name ||
            !(o->name = strdup(name)))
            err = kcr__fail(KCR_ERR_NOMEM, NOMEM);
    }
    if (err == KCR_OK && (err = freeze(doc, &o->obj)) != KCR_OK)
        err = kcr__fake_bad_request(w->st, kcr_last_error());
    kcr__fobj **grown = NULL;
    if (err == KCR_OK && !(grown = kcr__grow(f->objs, &f->cap, f->n, sizeof *f->objs, 64)))
        err = kcr__fail(KCR_ERR_NOMEM, NOMEM);
    else if (grown)
        f->objs = grown;
    kcr__node_free(doc);
    if (err != KCR_OK) {
        kcr__fake_fobj_free(o);
        return err;
    }
    f->rv++;
    memmove(f->objs + pos + 1, f->objs + pos, (f->n - pos) * sizeof *f->objs);
    f->objs[pos] = o;
    f->n++;
    if (strcmp(w->rkey, "apiextensions.k8s.io/customresourcedefinitions") == 0)
        kcr__fake_register_crd(f, o->obj);
    kcr__fake_emit(f, KCR_WATCH_ADDED, o->rkey, o->ns, o->obj, NULL);
    if (out)
        *out = kcr_object_ref(o->obj);
    return KCR_OK;
}

/* Removes w->cur with `final` (taken) as its last state. */
static kcr_err remove_as(kcr__fake_write *w, struct kcr__node *final_doc, kcr_object **out)
{
    kcr_fake *f = w->f;
    kcr__fobj *o = w->cur;
    struct kcr__node *md = final_doc ? kcr__fake_metadata_of(final_doc) : NULL;
    char rv[24];
    rv_text(f->rv + 1, rv);
    kcr_object *final = NULL;
    kcr_err err = md && kcr__node_put_str(md, "resourceVersion", rv)
                      ? freeze(final_doc, &final)
                      : kcr__fail(KCR_ERR_NOMEM, NOMEM);
    kcr__node_free(final_doc);
    if (err != KCR_OK)
        return err;
    f->rv++;
    kcr__fake_emit(f, KCR_WATCH_DELETED, o->rkey, o->ns, final, NULL);
    memmove(f->objs + w->pos, f->objs + w->pos + 1, (f->n - w->pos - 1) * sizeof *f->objs);
    f->n--;
    kcr__fake_fobj_free(o);
    w->cur = NULL;
    if (out)
        *out = final;
    else
        kcr_object_unref(final);
    return KCR_OK;
}

kcr_err kcr__fake_store_remove(kcr__fake_write *w, kcr_object **out)
{
    return remove_as(w, kcr__node_from_value(kcr_object_root(w->cur->obj)), out);
}

/* Fields only the server sets: a write keeps the stored ones. */
static const char *const server_owned[] = {
    "uid",  "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation",
    "name", "namespace",         "resourceVersion"};

kcr_err kcr__fake_store_update(kcr__fake_write *w, struct kcr__node *next, bool deleting,
                               kcr_object **out)
{
    kcr_fake *f = w->f;
    kcr__fobj *o = w->cur;
    kcr_value cur = kcr_object_root(o->obj);
    kcr_value cur_md = kcr_value_member(cur, "metadata");
    struct kcr__node *md = kcr__fake_metadata_of(next);
    bool ok = md != NULL;
    for (size_t i = 0; ok && i < sizeof server_owned / sizeof *server_owned; i++)
        ok = kcr__fake_set_value(md, server_owned[i], kcr_value_member(cur_md, server_owned[i]));
    ok = ok && stamp_type(w, next);
    int64_t generation = kcr_object_generation(o->obj);
    bool bump = false;
    if (ok && deleting) {
        char ts[40];
        now_rfc3339(ts, sizeof ts);
        ok = kcr__node_put_str(md, "deletionTimestamp", ts) &&
             kcr__node_put_int(md, "deletionGracePeriodSeconds", 0);
        bump = true; /* the apiserver's markAsDeleting */
    }
    if (!ok) {
        kcr__node_free(next);
        return kcr__fail(KCR_ERR_NOMEM, NOMEM);
    }
    if (kcr__fake_same(next, cur)) { /* a no-op writes nothing */
        kcr__node_free(next);
        if (out)
            *out = kcr_object_ref(o->obj);
        return KCR_OK;
    }
    if ((bump || kcr__fake_spec_changed(next, cur)) && generation > 0 &&
        !kcr__node_put_int(md, "generation", generation + 1)) {
        kcr__node_free(next);
        return kcr__fail(KCR_ERR_NOMEM, NOMEM);
    }
    const struct kcr__node *fz = kcr__fake_member(md, "finalizers");
    bool finalized = !fz || fz->t != KCR__N_ARR || fz->n == 0;
    if (kcr__fake_member(md, "deletionTimestamp") && finalized)
        return remove_as(w, next, out);
    char rv[24];
    rv_text(f->rv + 1, rv);
    kcr_object *obj = NULL;
    kcr_err err = kcr__node_put_str(md, "resourceVersion", rv) ? freeze(next, &obj)
                                                               : kcr__fail(KCR_ERR_NOMEM, NOMEM);
    kcr__node_free(next);
    if (err != KCR_OK)
        return err == KCR_ERR_NOMEM ? err : kcr__fake_bad_request(w->st, kcr_last_error());
    f->rv++;
    kcr_object *old = o->obj;
    o->obj = obj;
    kcr__fake_emit(f, KCR_WATCH_MODIFIED, o->rkey, o->ns, obj, old);
    kcr_object_unref(old);
    if (out)
        *out = kcr_object_ref(obj);
    return KCR_OK;
}
