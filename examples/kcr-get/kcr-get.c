/* kcr-get: a small kubectl-get-like CLI on kcr's public API.
 *
 *   kcr-get [--kubeconfig F] [--context C] [-n NS | -A] RESOURCE [NAME] [-o json|yaml]
 *
 * RESOURCE is resolved through discovery ("cm", "configmaps", "deploy",
 * "deployments.apps", "Lease" ...). The default output is the server-side
 * table (Accept: application/json;as=Table;v=v1;g=meta.k8s.io), falling back
 * to NAME/NAMESPACE/AGE from a list; like kubectl, -A adds a NAMESPACE column
 * only for namespaced resources. -o json / -o yaml print the object or a
 * List, the same content in either syntax.
 *
 * KCR_LOG=error|warn|info|debug|trace logs kcr's records to stderr. */
#include <kcr/kcr.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "yaml_out.h"

static void usage(void)
{
    fprintf(stderr, "usage: kcr-get [--kubeconfig FILE] [--context NAME] [-n NAMESPACE | -A] "
                    "RESOURCE [NAME] [-o json|yaml]\n");
    exit(2);
}

/* ---- a tiny table printer ---- */

typedef struct table {
    size_t cols, rows, cap;
    char **cells; /* rows x cols */
} table;

static void table_add(table *t, char **row)
{
    if (t->rows == t->cap) {
        t->cap = t->cap ? t->cap * 2 : 16;
        t->cells = realloc(t->cells, t->cap * t->cols * sizeof *t->cells);
        if (!t->cells)
            exit(1);
    }
    for (size_t c = 0; c < t->cols; c++)
        t->cells[t->rows * t->cols + c] = row[c];
    t->rows++;
}

static void table_print(table *t)
{
    size_t *w = calloc(t->cols, sizeof *w);
    for (size_t r = 0; r < t->rows; r++)
        for (size_t c = 0; c < t->cols; c++) {
            size_t n = strlen(t->cells[r * t->cols + c]);
            if (n > w[c])
                w[c] = n;
        }
    for (size_t r = 0; r < t->rows; r++) {
        for (size_t c = 0; c < t->cols; c++)
            printf(c + 1 < t->cols ? "%-*s   " : "%-*s", c + 1 < t->cols ? (int)w[c] : 0,
                   t->cells[r * t->cols + c]);
        printf("\n");
    }
    for (size_t i = 0; i < t->rows * t->cols; i++)
        free(t->cells[i]);
    free(t->cells);
    free(w);
}

static char *upper(const char *s)
{
    char *u = strdup(s);
    if (!u) {
        fprintf(stderr, "kcr-get: out of memory\n");
        exit(1);
    }
    for (char *p = u; *p; p++)
        if (*p >= 'a' && *p <= 'z')
            *p = (char)(*p - 'a' + 'A');
    return u;
}

/* ---- AGE like kubectl: 5s, 3m, 2h, 4d ---- */

static char *age(const char *ts)
{
    int64_t created;
    char buf[32] = "<unknown>";
    if (ts && kcr_time_parse(ts, &created) == KCR_OK) {
        long long a = (long long)time(NULL) - created;
        if (a < 0)
            a = 0;
        if (a < 120)
            snprintf(buf, sizeof buf, "%llds", a);
        else if (a < 7200)
            snprintf(buf, sizeof buf, "%lldm", a / 60);
        else if (a < 172800)
            snprintf(buf, sizeof buf, "%lldh", a / 3600);
        else
            snprintf(buf, sizeof buf, "%lldd", a / 86400);
    }
    return strdup(buf);
}

/* ---- a growable string for -o json|yaml ---- */

typedef struct outbuf {
    char *s;
    size_t len, cap;
} outbuf;

static void text_add(outbuf *t, const char *s, size_t n)
{
    if (t->len + n + 1 > t->cap) {
        t->cap = (t->len + n + 1) * 2;
        t->s = realloc(t->s, t->cap);
        if (!t->s) {
            fprintf(stderr, "kcr-get: out of memory\n");
            exit(1);
        }
    }
    memcpy(t->s + t->len, s, n);
    t->len += n;
    t->s[t->len] = '\0';
}

/* Prints a JSON document as JSON or as YAML. */
static int print_document(const char *json, size_t len, const char *output)
{
    if (strcmp(output, "json") == 0) {
        printf("%.*s\n", (int)len, json);
        return 0;
    }
    kcr_object *doc = NULL;
    if (kcr_object_parse_any(json, len, &doc) != KCR_OK ||
        yaml_write(stdout, kcr_object_root(doc)) != KCR_OK) {
        fprintf(stderr, "error: cannot print YAML: %s\n", kcr_last_error());
        kcr_object_unref(doc);
        return 1;
    }
    kcr_object_unref(doc);
    return 0;
}

/* ---- list fallback and JSON output ---- */

struct list_out {
    table t;
    outbuf doc; /* -o: the List's JSON */
    bool json, first, namespaced;
};

static kcr_err on_item(kcr_object *obj, void *ud)
{
    struct list_out *o = ud;
    if (o->json) {
        char *j = NULL;
        size_t n = 0;
        if (kcr_object_to_json(obj, &j, &n) != KCR_OK)
            return KCR_ERR_NOMEM;
        if (!o->first)
            text_add(&o->doc, ",", 1);
        text_add(&o->doc, j, n);
        o->first = false;
        free(j);
        return KCR_OK;
    }
    char *row[3] = {strdup(kcr_object_name(obj)),
                    o->namespaced ? strdup(kcr_object_namespace(obj)) : NULL,
                    age(kcr_value_string(kcr_object_get(obj, "metadata.creationTimestamp"), NULL))};
    if (!o->namespaced) {
        row[1] = row[2];
        row[2] = NULL;
    }
    table_add(&o->t, row);
    return KCR_OK;
}

/* Prints the server's Table; false when the server did not give one. */
static bool print_server_table(kcr_client *c, const kcr_api_resource *r, const char *ns,
                               const char *name, bool all)
{
    char path[2048];
    if (r->group[0])
        snprintf(path, sizeof path, "/apis/%s/%s", r->group, r->version);
    else
        snprintf(path, sizeof path, "/api/%s", r->version);
    size_t len = strlen(path);
    if (ns && *ns)
        len += (size_t)snprintf(path + len, sizeof path - len, "/namespaces/%s", ns);
    len += (size_t)snprintf(path + len, sizeof path - len, "/%s", r->resource);
    if (name)
        snprintf(path + len, sizeof path - len, "/%s", name);
    char *body = NULL;
    size_t body_len = 0;
    kcr_status st = {0};
    kcr_err err = kcr_client_request(
        c, path,
        &(kcr_raw_options){.method = "GET",
                           .accept = "application/json;as=Table;v=v1;g=meta.k8s.io",
                           .status = &st},
        &body, &body_len);
    if (err != KCR_OK) {
        if (err != KCR_ERR_UNSUPPORTED) {
            fprintf(stderr, "Error from server (%s): %s\n", st.reason && *st.reason ? st.reason : kcr_strerror(err),
                    st.message && *st.message ? st.message : kcr_last_error());
            kcr_status_clear(&st);
            exit(1);
        }
        kcr_status_clear(&st);
        return false;
    }
    kcr_object *tbl = NULL;
    if (kcr_object_parse_any(body, body_len, &tbl) != KCR_OK ||
        strcmp(kcr_object_kind(tbl), "Table") != 0) {
        free(body);
        kcr_object_unref(tbl);
        return false;
    }
    free(body);
    kcr_value defs = kcr_object_get(tbl, "columnDefinitions");
    kcr_value rows = kcr_object_get(tbl, "rows");
    if (kcr_value_len(rows) == 0) {
        if (ns && *ns)
            fprintf(stderr, "No resources found in %s namespace.\n", ns);
        else
            fprintf(stderr, "No resources found\n");
        kcr_object_unref(tbl);
        return true;
    }
    size_t shown[64], n_shown = 0;
    for (size_t i = 0; i < kcr_value_len(defs) && n_shown < 64; i++)
        if (kcr_value_int(kcr_value_member(kcr_value_at(defs, i), "priority")) == 0)
            shown[n_shown++] = i;
    table t = {.cols = n_shown + (all ? 1 : 0)};
    char **row = calloc(t.cols, sizeof *row);
    size_t k = 0;
    if (all)
        row[k++] = strdup("NAMESPACE");
    for (size_t i = 0; i < n_shown; i++)
        row[k++] = upper(kcr_value_string(kcr_value_member(kcr_value_at(defs, shown[i]), "name"), NULL));
    table_add(&t, row);
    for (size_t ri = 0; ri < kcr_value_len(rows); ri++) {
        kcr_value rv = kcr_value_at(rows, ri);
        kcr_value cells = kcr_value_member(rv, "cells");
        k = 0;
        if (all) {
            const char *rns = kcr_value_string(kcr_value_get(rv, "object.metadata.namespace"), NULL);
            row[k++] = strdup(rns ? rns : "");
        }
        for (size_t i = 0; i < n_shown; i++) {
            kcr_value cell = kcr_value_at(cells, shown[i]);
            const char *s = kcr_value_string(cell, NULL);
            char *text = NULL;
            if (s)
                text = strdup(s);
            else if (kcr_value_to_json(cell, &text, NULL) != KCR_OK)
                text = strdup("");
            row[k++] = text;
        }
        table_add(&t, row);
    }
    free(row);
    table_print(&t);
    kcr_object_unref(tbl);
    return true;
}

int main(int argc, char **argv)
{
    kcr_config_options co = {0};
    const char *ns = NULL, *resource = NULL, *name = NULL, *output = NULL;
    kcr_log_from_env(); /* KCR_LOG=trace: kcr's log on stderr */
    bool all = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if ((!strcmp(a, "--kubeconfig") || !strcmp(a, "--context") || !strcmp(a, "-n") ||
             !strcmp(a, "--namespace") || !strcmp(a, "-o")) &&
            i + 1 >= argc)
            usage();
        if (!strcmp(a, "--kubeconfig"))
            co.kubeconfig = argv[++i];
        else if (!strcmp(a, "--context"))
            co.context = argv[++i];
        else if (!strcmp(a, "-n") || !strcmp(a, "--namespace"))
            ns = argv[++i];
        else if (!strcmp(a, "-A") || !strcmp(a, "--all-namespaces"))
            all = true;
        else if (!strcmp(a, "-o"))
            output = argv[++i];
        else if (a[0] == '-')
            usage();
        else if (!resource)
            resource = a;
        else if (!name)
            name = a;
        else
            usage();
    }
    if (output && strcmp(output, "json") != 0 && strcmp(output, "yaml") != 0) {
        fprintf(stderr,
                "error: unable to match a printer suitable for the output format "
                "\"%s\", allowed formats are: json,yaml\n",
                output);
        return 2;
    }
    if (!resource || (all && name))
        usage();

    kcr_config *cfg;
    if (kcr_config_load(&co, &cfg) != KCR_OK) {
        fprintf(stderr, "error: %s\n", kcr_last_error());
        return 1;
    }
    kcr_client *c;
    if (kcr_client_new(cfg, NULL, &c) != KCR_OK) {
        fprintf(stderr, "error: %s\n", kcr_last_error());
        return 1;
    }
    if (!ns)
        ns = kcr_client_namespace(c);
    kcr_api_resource r;
    kcr_status st = {0};
    if (kcr_client_resolve(c, resource, &(kcr_resolve_options){.status = &st}, &r) != KCR_OK) {
        fprintf(stderr, "error: %s\n", kcr_last_error());
        return 1;
    }
    if (!r.namespaced || all)
        ns = "";
    all = all && r.namespaced; /* kubectl: no NAMESPACE column for cluster-scoped kinds */
    kcr_resource gvr = kcr_api_resource_gvr(&r);
    int rc = 0;
    if (output && name) {
        kcr_object *o = NULL;
        char *json = NULL;
        size_t json_len = 0;
        if (kcr_client_get(c,
                           &(kcr_request){.resource = &gvr, .ns = ns, .name = name, .status = &st},
                           &o) != KCR_OK ||
            kcr_object_to_json(o, &json, &json_len) != KCR_OK) {
            fprintf(stderr, "Error from server (%s): %s\n", st.reason ? st.reason : "",
                    kcr_last_error());
            rc = 1;
        } else {
            rc = print_document(json, json_len, output);
        }
        free(json);
        kcr_object_unref(o);
    } else if (output || !print_server_table(c, &r, ns, name, all)) {
        struct list_out o = {.json = output != NULL, .first = true, .namespaced = r.namespaced && !*ns};
        o.t.cols = o.namespaced ? 3 : 2;
        if (!o.json) {
            char *head[3] = {strdup("NAME"), strdup(o.namespaced ? "NAMESPACE" : "AGE"),
                             o.namespaced ? strdup("AGE") : NULL};
            table_add(&o.t, head);
        } else {
            static const char head[] = "{\"apiVersion\":\"v1\",\"kind\":\"List\",\"items\":[";
            text_add(&o.doc, head, sizeof head - 1);
        }
        kcr_request lo = {.resource = &gvr, .ns = ns, .status = &st};
        char sel[512];
        if (name) {
            snprintf(sel, sizeof sel, "metadata.name=%s", name);
            lo.field_selector = sel;
        }
        kcr_list_meta meta = {0};
        do {
            lo.continue_token = meta.continue_token;
            lo.limit = 500;
            kcr_list_meta next = {0};
            if (kcr_client_list(c, &lo, on_item, &o, &next) != KCR_OK) {
                fprintf(stderr, "Error from server (%s): %s\n", st.reason ? st.reason : "",
                        kcr_last_error());
                rc = 1;
                kcr_list_meta_clear(&next);
                break;
            }
            kcr_list_meta_clear(&meta);
            meta = next;
        } while (meta.continue_token && *meta.continue_token);
        kcr_list_meta_clear(&meta);
        if (o.json && rc == 0) {
            static const char tail[] = "],\"metadata\":{\"resourceVersion\":\"\"}}";
            text_add(&o.doc, tail, sizeof tail - 1);
            rc = print_document(o.doc.s, o.doc.len, output);
        } else if (!o.json) {
            table_print(&o.t);
        }
        free(o.doc.s);
    }
    kcr_status_clear(&st);
    kcr_client_free(c);
    kcr_config_free(cfg);
    return rc;
}
