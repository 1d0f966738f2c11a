/* Discovery documents (aggregated and legacy) and kubectl-style resolution
 * of what a user typed to a group/version/resource. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "client/client_impl.h"
#include "core/error.h"
#include "core/grow.h"
#include "object/value.h"

static void copy_field(char *dst, size_t size, const char *src)
{
    snprintf(dst, size, "%s", src ? src : "");
}

kcr_err kcr__disc_add(kcr__disc_table *t, const kcr_api_resource *r, const char *const *shorts,
                      size_t n_short, bool preferred)
{
    kcr__disc_entry *grown = kcr__grow(t->e, &t->cap, t->n, sizeof *t->e, 64);
    if (!grown)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory adding a discovered resource");
    t->e = grown;
    kcr__disc_entry *e = &t->e[t->n];
    memset(e, 0, sizeof *e);
    e->r = *r;
    e->preferred = preferred;
    e->verbs = KCR__VERB_ALL;
    if (n_short) {
        e->short_names = calloc(n_short, sizeof *e->short_names);
        if (!e->short_names)
            return kcr__fail(KCR_ERR_NOMEM, "out of memory adding a discovered resource");
        for (size_t i = 0; i < n_short; i++) {
            if (!(e->short_names[i] = strdup(shorts[i]))) {
                for (size_t j = 0; j < i; j++)
                    free(e->short_names[j]);
                free(e->short_names);
                return kcr__fail(KCR_ERR_NOMEM, "out of memory adding a discovered resource");
            }
        }
        e->n_short = n_short;
    }
    t->n++;
    return KCR_OK;
}

void kcr__disc_clear(kcr__disc_table *t)
{
    for (size_t i = 0; i < t->n; i++) {
        for (size_t j = 0; j < t->e[i].n_short; j++)
            free(t->e[i].short_names[j]);
        free(t->e[i].short_names);
        for (size_t j = 0; j < t->e[i].n_subs; j++)
            free(t->e[i].subs[j].name);
        free(t->e[i].subs);
    }
    free(t->e);
    memset(t, 0, sizeof *t);
}

unsigned kcr__disc_verbs(const char *csv)
{
    static const struct {
        const char *name;
        unsigned bit;
    } names[] = {{"get", KCR__VERB_GET},       {"list", KCR__VERB_LIST},
                 {"watch", KCR__VERB_WATCH},   {"create", KCR__VERB_CREATE},
                 {"update", KCR__VERB_UPDATE}, {"patch", KCR__VERB_PATCH},
                 {"delete", KCR__VERB_DELETE}, {"deletecollection", KCR__VERB_DELETECOLLECTION}};
    unsigned bits = 0;
    for (const char *p = csv ? csv : ""; *p;) {
        size_t n = strcspn(p, ",");
        for (size_t i = 0; i < sizeof names / sizeof *names; i++)
            if (strlen(names[i].name) == n && memcmp(names[i].name, p, n) == 0)
                bits |= names[i].bit;
        p += n + (p[n] == ',');
    }
    return bits;
}

kcr_err kcr__disc_add_sub(kcr__disc_entry *e, const char *name, unsigned verbs)
{
    kcr__disc_sub *subs = realloc(e->subs, (e->n_subs + 1) * sizeof *subs);
    if (!subs)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory adding a subresource");
    e->subs = subs;
    if (!(subs[e->n_subs].name = strdup(name)))
        return kcr__fail(KCR_ERR_NOMEM, "out of memory adding a subresource");
    subs[e->n_subs++].verbs = verbs;
    return KCR_OK;
}

const kcr__disc_sub *kcr__disc_find_sub(const kcr__disc_entry *e, const char *name)
{
    for (size_t i = 0; i < e->n_subs; i++)
        if (strcmp(e->subs[i].name, name) == 0)
            return &e->subs[i];
    return NULL;
}

/* The bits of a JSON array of verb names. */
static unsigned verbs_of(kcr_value arr)
{
    if (kcr_value_get_type(arr) != KCR_VALUE_ARRAY)
        return KCR__VERB_ALL;
    unsigned bits = 0;
    for (size_t i = 0; i < kcr_value_len(arr); i++)
        bits |= kcr__disc_verbs(kcr__value_str(kcr_value_at(arr, i)));
    return bits;
}

/* Adds one resource; its shortNames from the array `shorts`. */
static kcr_err add_from(kcr__disc_table *t, kcr_api_resource *r, kcr_value shorts,
                        bool preferred)
{
    const char *names[64];
    size_t n = 0;
    size_t len = kcr_value_get_type(shorts) == KCR_VALUE_ARRAY ? kcr_value_len(shorts) : 0;
    for (size_t i = 0; i < len && n < 64; i++)
        if ((names[n] = kcr__value_str(kcr_value_at(shorts, i))))
            n++;
    return kcr__disc_add(t, r, names, n, preferred);
}

static const char *member_str(kcr_value v, const char *path)
{
    return kcr__value_str(kcr_value_get(v, path));
}

/* One resource of either discovery format; a subresource ("pods/log") is
 * skipped. */
static kcr_err add_entry(kcr__disc_table *t, const char *group, const char *version,
                         const char *plural, const char *singular, const char *kind,
                         bool namespaced, kcr_value short_names, bool preferred)
{
    if (!plural || strchr(plural, '/'))
        return KCR_OK;
    kcr_api_resource r;
    memset(&r, 0, sizeof r);
    copy_field(r.group, sizeof r.group, group);
    copy_field(r.version, sizeof r.version, version);
    copy_field(r.resource, sizeof r.resource, plural);
    copy_field(r.singular, sizeof r.singular, singular);
    copy_field(r.kind, sizeof r.kind, kind);
    r.namespaced = namespaced;
    return add_from(t, &r, short_names, preferred);
}

/* An aggregated discovery entry's verbs and subresources into e. */
static kcr_err add_verbs_and_subs(kcr__disc_entry *e, kcr_value entry)
{
    e->verbs = verbs_of(kcr_value_member(entry, "verbs"));
    kcr_value subs = kcr_value_member(entry, "subresources");
    size_t n = kcr_value_get_type(subs) == KCR_VALUE_ARRAY ? kcr_value_len(subs) : 0;
    kcr_err err = KCR_OK;
    for (size_t i = 0; err == KCR_OK && i < n; i++) {
        kcr_value sub = kcr_value_at(subs, i);
        const char *name = member_str(sub, "subresource");
        if (name)
            err = kcr__disc_add_sub(e, name, verbs_of(kcr_value_member(sub, "verbs")));
    }
    return err;
}

kcr_err kcr__disc_parse_aggregated(kcr_value doc, kcr__disc_table *t)
{
    kcr_value items = kcr_value_member(doc, "items");
    if (kcr_value_get_type(items) != KCR_VALUE_ARRAY)
        return kcr__fail(KCR_ERR_PARSE, "aggregated discovery without items");
    for (size_t i = 0; i < kcr_value_len(items); i++) {
        kcr_value item = kcr_value_at(items, i);
        const char *group = member_str(item, "metadata.name");
        kcr_value versions = kcr_value_member(item, "versions");
        size_t n_versions =
            kcr_value_get_type(versions) == KCR_VALUE_ARRAY ? kcr_value_len(versions) : 0;
        for (size_t v = 0; v < n_versions; v++) {
            kcr_value ver = kcr_value_at(versions, v);
            const char *version = member_str(ver, "version");
            kcr_value res = kcr_value_member(ver, "resources");
            size_t n_res = version && kcr_value_get_type(res) == KCR_VALUE_ARRAY ? kcr_value_len(res)
                                                                                 : 0;
            for (size_t k = 0; k < n_res; k++) {
                kcr_value e = kcr_value_at(res, k);
                const char *scope = member_str(e, "scope");
                size_t n_before = t->n;
                kcr_err err = add_entry(
                    t, group, version, member_str(e, "resource"), member_str(e, "singularResource"),
                    member_str(e, "responseKind.kind"), scope && strcmp(scope, "Namespaced") == 0,
                    kcr_value_member(e, "shortNames"), v == 0);
                if (err == KCR_OK && t->n > n_before)
                    err = add_verbs_and_subs(&t->e[t->n - 1], e);
                if (err != KCR_OK)
                    return err;
            }
        }
    }
    return KCR_OK;
}

kcr_err kcr__disc_parse_resource_list(kcr_value doc, const char *group, const char *version,
                                      bool preferred, kcr__disc_table *t)
{
    kcr_value res = kcr_value_member(doc, "resources");
    if (kcr_value_get_type(res) != KCR_VALUE_ARRAY)
        return kcr__fail(KCR_ERR_PARSE, "APIResourceList for %s/%s without resources", group,
                         version);
    size_t first = t->n;
    for (size_t k = 0; k < kcr_value_len(res); k++) {
        kcr_value e = kcr_value_at(res, k);
        const char *name = member_str(e, "name");
        const char *slash = name ? strchr(name, '/') : NULL;
        kcr_err err = KCR_OK;
        if (slash) { /* "pods/status": a subresource of this list's "pods" */
            for (size_t i = first; i < t->n; i++)
                if (strlen(t->e[i].r.resource) == (size_t)(slash - name) &&
                    memcmp(t->e[i].r.resource, name, (size_t)(slash - name)) == 0) {
                    err = kcr__disc_add_sub(&t->e[i], slash + 1,
                                            verbs_of(kcr_value_member(e, "verbs")));
                    break;
                }
        } else {
            size_t before = t->n;
            err = add_entry(t, group, version, name, member_str(e, "singularName"),
                            member_str(e, "kind"),
                            kcr_value_bool(kcr_value_member(e, "namespaced")),
                            kcr_value_member(e, "shortNames"), preferred);
            if (err == KCR_OK && t->n > before)
                t->e[t->n - 1].verbs = verbs_of(kcr_value_member(e, "verbs"));
        }
        if (err != KCR_OK)
            return err;
    }
    return KCR_OK;
}

/* "v1", "v2beta3", "v1alpha1" */
static bool looks_like_version(const char *s, size_t len)
{
    if (len < 2 || s[0] != 'v' || !isdigit((unsigned char)s[1]))
        return false;
    size_t i = 1;
    while (i < len && isdigit((unsigned char)s[i]))
        i++;
    if (i == len)
        return true;
    if (len - i > 5 && strncmp(s + i, "alpha", 5) == 0)
        i += 5;
    else if (len - i > 4 && strncmp(s + i, "beta", 4) == 0)
        i += 4;
    else
        return false;
    while (i < len && isdigit((unsigned char)s[i]))
        i++;
    return i == len;
}

static void store_result(const kcr__disc_entry *e, kcr_api_resource *out)
{
    *out = e->r;
    if (!out->singular[0]) { /* legacy core resources omit it: lower-case kind */
        for (size_t i = 0; e->r.kind[i] && i + 1 < sizeof out->singular; i++)
            out->singular[i] = (char)tolower((unsigned char)e->r.kind[i]);
    }
}

kcr_err kcr__disc_resolve(const kcr__disc_table *t, const kcr__disc_query *q,
                          kcr_api_resource *out)
{
    if (!q->name) { /* by group/version/kind */
        for (size_t i = 0; i < t->n; i++) {
            const kcr__disc_entry *e = &t->e[i];
            if (strcmp(e->r.group, q->group ? q->group : "") == 0 &&
                strcmp(e->r.kind, q->kind) == 0 &&
                (q->version && *q->version ? strcmp(e->r.version, q->version) == 0
                                           : e->preferred)) {
                store_result(e, out);
                return KCR_OK;
            }
        }
        return kcr__fail(KCR_ERR_NOT_FOUND, "no resource of kind %s in %s%s%s", q->kind,
                         q->group && *q->group ? q->group : "the core group",
                         q->version && *q->version ? "/" : "",
                         q->version ? q->version : "");
    }
    /* NAME[.VERSION].GROUP */
    char name[254], group[254] = "", version[64] = "";
    bool qualified = false;
    const char *dot = strchr(q->name, '.');
    if (dot) {
        qualified = true;
        snprintf(name, sizeof name, "%.*s", (int)(dot - q->name), q->name);
        const char *rest = dot + 1;
        const char *dot2 = strchr(rest, '.');
        if (dot2 && looks_like_version(rest, (size_t)(dot2 - rest))) {
            snprintf(version, sizeof version, "%.*s", (int)(dot2 - rest), rest);
            snprintf(group, sizeof group, "%s", dot2 + 1);
        } else {
            snprintf(group, sizeof group, "%s", rest);
        }
    } else {
        snprintf(name, sizeof name, "%s", q->name);
    }
    /* Passes in kubectl's order of precedence: plural, singular, short name, kind. */
    for (int pass = 0; pass < 4; pass++) {
        for (size_t i = 0; i < t->n; i++) {
            const kcr__disc_entry *e = &t->e[i];
            if (qualified && strcasecmp(e->r.group, group) != 0)
                continue;
            if (version[0] && strcmp(e->r.version, version) != 0)
                continue;
            bool match = false;
            switch (pass) {
            case 0: match = strcasecmp(e->r.resource, name) == 0; break;
            case 1: match = e->r.singular[0] && strcasecmp(e->r.singular, name) == 0; break;
            case 2:
                for (size_t k = 0; k < e->n_short && !match; k++)
                    match = strcasecmp(e->short_names[k], name) == 0;
                break;
            default: match = strcasecmp(e->r.kind, name) == 0; break;
            }
            if (match) {
                store_result(e, out);
                return KCR_OK;
            }
        }
    }
    return kcr__fail(KCR_ERR_NOT_FOUND, "the server doesn't have a resource type \"%s\"",
                     q->name);
}
