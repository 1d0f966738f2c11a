/* What the fake serves: a registry of common built-in resources, resources
 * registered by the test (kcr_fake_register) and those defined by
 * CustomResourceDefinitions created in the fake; discovery resolves over it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "fake/builtins.h"
#include "fake/fake_internal.h"

/* The built-in resources of testenv's Kubernetes version, captured from its
 * kube-apiserver by fake/gen-builtins. */
static const kcr__fake_builtin builtins[] = {
#define ROW KCR__FAKE_BUILTIN_ROW
#include "fake/builtins.inc"
#undef ROW
};

static const char CRD_RKEY[] = "apiextensions.k8s.io/customresourcedefinitions";

const char *kcr__fake_builtins_version(void)
{
    return KCR__FAKE_BUILTINS_VERSION;
}

/* Adds r with its comma-separated short names (NULL: none), verbs (bits) and
 * subresources ("status:get,patch,update;scale:get"); lock held. */
static kcr_err add_resource(kcr_fake *f, const kcr_api_resource *r, const char *short_names,
                            bool preferred, unsigned verbs, const char *subresources)
{
    char *copy = strdup(short_names ? short_names : "");
    char *subs = strdup(subresources ? subresources : "");
    if (!copy || !subs) {
        free(copy), free(subs);
        return kcr__fail(KCR_ERR_NOMEM, "out of memory");
    }
    const char *names[32];
    size_t n = 0;
    for (char *save = NULL, *t = strtok_r(copy, ",", &save); t && n < 32;
         t = strtok_r(NULL, ",", &save))
        names[n++] = t;
    kcr_err err = kcr__disc_add(&f->disc, r, names, n, preferred);
    kcr__disc_entry *e = err == KCR_OK ? &f->disc.e[f->disc.n - 1] : NULL;
    if (e)
        e->verbs = verbs;
    for (char *save = NULL, *t = strtok_r(subs, ";", &save); err == KCR_OK && t;
         t = strtok_r(NULL, ";", &save)) {
        char *colon = strchr(t, ':');
        if (colon)
            *colon = '\0';
        err = kcr__disc_add_sub(e, t, colon ? kcr__disc_verbs(colon + 1) : KCR__VERB_ALL);
    }
    free(copy), free(subs);
    return err;
}

/* A registered resource or a CRD's: every verb, with status and scale. */
static const char CUSTOM_SUBS[] = "status:get,patch,update;scale:get,patch,update";

kcr_err kcr_fake_register(kcr_fake *f, const kcr_api_resource *r, const char *short_names)
{
    if (!f || !r || !r->version[0] || !r->resource[0])
        return kcr__fail(KCR_ERR_INVALID, "register: a resource with version and plural required");
    pthread_mutex_lock(&f->lock);
    kcr_err err = add_resource(f, r, short_names, true, KCR__VERB_ALL, CUSTOM_SUBS);
    pthread_mutex_unlock(&f->lock);
    return err;
}

kcr_err kcr__fake_register_builtins(kcr_fake *f)
{
    kcr_err err = KCR_OK;
    for (size_t i = 0; err == KCR_OK && i < sizeof builtins / sizeof *builtins; i++) {
        const kcr__fake_builtin *b = &builtins[i];
        kcr_api_resource r;
        memset(&r, 0, sizeof r);
        snprintf(r.group, sizeof r.group, "%s", b->group);
        snprintf(r.version, sizeof r.version, "%s", b->version);
        snprintf(r.resource, sizeof r.resource, "%s", b->resource);
        snprintf(r.singular, sizeof r.singular, "%s", b->singular);
        snprintf(r.kind, sizeof r.kind, "%s", b->kind);
        r.namespaced = b->namespaced;
        err = add_resource(f, &r, b->shorts, b->preferred, kcr__disc_verbs(b->verbs),
                           b->subresources);
    }
    return err;
}

const kcr__disc_entry *kcr__fake_find_resource(kcr_fake *f, const kcr_resource *res)
{
    const char *g = res->group ? res->group : "";
    for (size_t i = 0; i < f->disc.n; i++)
        if (strcmp(f->disc.e[i].r.group, g) == 0 &&
            strcmp(f->disc.e[i].r.resource, res->resource) == 0)
            return &f->disc.e[i];
    return NULL;
}

const kcr__disc_entry *kcr__fake_served(kcr_fake *f, const kcr_resource *res)
{
    const char *g = res->group ? res->group : "";
    for (size_t i = 0; i < f->disc.n; i++)
        if (strcmp(f->disc.e[i].r.group, g) == 0 &&
            strcmp(f->disc.e[i].r.version, res->version) == 0 &&
            strcmp(f->disc.e[i].r.resource, res->resource) == 0)
            return &f->disc.e[i];
    return NULL;
}

bool kcr__fake_is_custom(kcr_fake *f, const kcr_resource *res)
{
    if (!res->group || !*res->group)
        return false; /* a CRD's group always has a dot */
    char name[600];
    snprintf(name, sizeof name, "%s.%s", res->resource, res->group);
    bool found;
    kcr__fake_find(f, CRD_RKEY, "", name, &found);
    return found;
}

static const char *str_at(const kcr_object *o, const char *path)
{
    return kcr_value_string(kcr_object_get(o, path), NULL);
}

void kcr__fake_register_crd(kcr_fake *f, const kcr_object *crd)
{
    const char *group = str_at(crd, "spec.group");
    const char *plural = str_at(crd, "spec.names.plural");
    const char *kind = str_at(crd, "spec.names.kind");
    const char *singular = str_at(crd, "spec.names.singular");
    const char *scope = str_at(crd, "spec.scope");
    kcr_value versions = kcr_object_get(crd, "spec.versions");
    if (!group || !plural || !kind || kcr_value_get_type(versions) != KCR_VALUE_ARRAY)
        return;
    kcr_value shorts = kcr_object_get(crd, "spec.names.shortNames");
    const char *sn[32];
    size_t n_short = 0;
    for (size_t i = 0; i < kcr_value_len(shorts) && n_short < 32; i++) {
        const char *s = kcr_value_string(kcr_value_at(shorts, i), NULL);
        if (s)
            sn[n_short++] = s;
    }
    for (size_t i = 0; i < kcr_value_len(versions); i++) {
        const char *v = kcr_value_string(kcr_value_get(kcr_value_at(versions, i), "name"), NULL);
        if (!v)
            continue;
        kcr_api_resource r;
        memset(&r, 0, sizeof r);
        snprintf(r.group, sizeof r.group, "%s", group);
        snprintf(r.version, sizeof r.version, "%s", v);
        snprintf(r.resource, sizeof r.resource, "%s", plural);
        snprintf(r.kind, sizeof r.kind, "%s", kind);
        snprintf(r.singular, sizeof r.singular, "%s", singular ? singular : "");
        r.namespaced = !scope || strcmp(scope, "Namespaced") == 0;
        if (kcr__disc_add(&f->disc, &r, sn, n_short, i == 0) != KCR_OK)
            continue;
        /* the subresources the version declares, as the apiserver serves them */
        kcr_value subs = kcr_value_get(kcr_value_at(versions, i), "subresources");
        static const char *const names[] = {"status", "scale"};
        for (size_t k = 0; k < 2; k++)
            if (kcr_value_get_type(kcr_value_get(subs, names[k])) == KCR_VALUE_OBJECT)
                kcr__disc_add_sub(&f->disc.e[f->disc.n - 1], names[k],
                                  KCR__VERB_GET | KCR__VERB_PATCH | KCR__VERB_UPDATE);
    }
}

kcr_err kcr__fake_resolve(kcr_client *c, const kcr__disc_query *q, bool refresh,
                          kcr_api_resource *out, kcr_status *st)
{
    (void)refresh;
    (void)st;
    kcr_fake *f = KCR__FAKE(c);
    if (kcr_cancel_triggered(q->cancel))
        return kcr__fail(KCR_ERR_CANCELED, "resolve canceled");
    pthread_mutex_lock(&f->lock);
    kcr_err err = kcr__disc_resolve(&f->disc, q, out);
    pthread_mutex_unlock(&f->lock);
    if (err == KCR_ERR_NOT_FOUND)
        return kcr__fail(err,
                         "%s (the fake serves the built-ins of Kubernetes %s: register others "
                         "with kcr_fake_register() or by creating their "
                         "CustomResourceDefinition in the fake)",
                         kcr_last_error(), kcr__fake_builtins_version());
    return err;
}
