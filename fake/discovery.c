/* What the fake serves: a registry of common built-in resources, resources
 * registered by the test (kcr_fake_register) and those defined by
 * CustomResourceDefinitions created in the fake; discovery resolves over it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "fake/fake_internal.h"

static const struct builtin {
    const char *group, *version, *resource, *singular, *kind, *shorts;
    bool namespaced;
} builtins[] = {
    {"", "v1", "configmaps", "configmap", "ConfigMap", "cm", true},
    {"", "v1", "secrets", "secret", "Secret", NULL, true},
    {"", "v1", "pods", "pod", "Pod", "po", true},
    {"", "v1", "services", "service", "Service", "svc", true},
    {"", "v1", "serviceaccounts", "serviceaccount", "ServiceAccount", "sa", true},
    {"", "v1", "endpoints", "endpoints", "Endpoints", "ep", true},
    {"", "v1", "events", "event", "Event", "ev", true},
    {"", "v1", "persistentvolumeclaims", "persistentvolumeclaim", "PersistentVolumeClaim", "pvc",
     true},
    {"", "v1", "namespaces", "namespace", "Namespace", "ns", false},
    {"", "v1", "nodes", "node", "Node", "no", false},
    {"", "v1", "persistentvolumes", "persistentvolume", "PersistentVolume", "pv", false},
    {"apps", "v1", "deployments", "deployment", "Deployment", "deploy", true},
    {"apps", "v1", "replicasets", "replicaset", "ReplicaSet", "rs", true},
    {"apps", "v1", "statefulsets", "statefulset", "StatefulSet", "sts", true},
    {"apps", "v1", "daemonsets", "daemonset", "DaemonSet", "ds", true},
    {"batch", "v1", "jobs", "job", "Job", NULL, true},
    {"batch", "v1", "cronjobs", "cronjob", "CronJob", "cj", true},
    {"coordination.k8s.io", "v1", "leases", "lease", "Lease", NULL, true},
    {"events.k8s.io", "v1", "events", "event", "Event", "ev", true},
    {"apiextensions.k8s.io", "v1", "customresourcedefinitions", "customresourcedefinition",
     "CustomResourceDefinition", "crd,crds", false},
};

static const char CRD_RKEY[] = "apiextensions.k8s.io/customresourcedefinitions";

kcr_err kcr_fake_register(kcr_fake *f, const kcr_api_resource *r, const char *short_names)
{
    if (!f || !r || !r->version[0] || !r->resource[0])
        return kcr__fail(KCR_ERR_INVALID, "register: a resource with version and plural required");
    char *copy = strdup(short_names ? short_names : "");
    if (!copy)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory");
    const char *names[32];
    size_t n = 0;
    for (char *save = NULL, *t = strtok_r(copy, ",", &save); t && n < 32;
         t = strtok_r(NULL, ",", &save))
        names[n++] = t;
    pthread_mutex_lock(&f->lock);
    kcr_err err = kcr__disc_add(&f->disc, r, names, n, true);
    pthread_mutex_unlock(&f->lock);
    free(copy);
    return err;
}

kcr_err kcr__fake_register_builtins(kcr_fake *f)
{
    kcr_err err = KCR_OK;
    for (size_t i = 0; err == KCR_OK && i < sizeof builtins / sizeof *builtins; i++) {
        const struct builtin *b = &builtins[i];
        kcr_api_resource r;
        memset(&r, 0, sizeof r);
        snprintf(r.group, sizeof r.group, "%s", b->group);
        snprintf(r.version, sizeof r.version, "%s", b->version);
        snprintf(r.resource, sizeof r.resource, "%s", b->resource);
        snprintf(r.singular, sizeof r.singular, "%s", b->singular);
        snprintf(r.kind, sizeof r.kind, "%s", b->kind);
        r.namespaced = b->namespaced;
        err = kcr_fake_register(f, &r, b->shorts);
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

bool kcr__fake_served(kcr_fake *f, const kcr_resource *res)
{
    const char *g = res->group ? res->group : "";
    for (size_t i = 0; i < f->disc.n; i++)
        if (strcmp(f->disc.e[i].r.group, g) == 0 &&
            strcmp(f->disc.e[i].r.version, res->version) == 0 &&
            strcmp(f->disc.e[i].r.resource, res->resource) == 0)
            return true;
    return false;
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
        kcr__disc_add(&f->disc, &r, sn, n_short, i == 0);
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
    return err;
}
