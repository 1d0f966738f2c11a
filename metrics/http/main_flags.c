/* kcr_main_parse and kcr_main_usage: the kubebuilder-style command line of
 * kcr_main_run, from one table of flags (so --help lists what is parsed). */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/abi.h"
#include "core/error.h"
#include "kcr/main.h"

typedef enum flag_kind {
    F_STRING,
    F_BOOL,
    F_WORKERS,
    F_QPS,
    F_BURST,
    F_LEVEL,
    F_ALL_NS,
    F_VERBOSE,
    F_HELP
} flag_kind;

typedef struct flag {
    const char *name;  /* "--kubeconfig" */
    const char *alias; /* "-n", or NULL */
    flag_kind kind;
    const char *value; /* what the value is, for --help ("PATH"); NULL: no value */
    const char *help;
    size_t offset; /* F_STRING: where in kcr_main_flags */
} flag;

#define AT(field) offsetof(kcr_main_flags, field)

static const flag flags[] = {
    {"--kubeconfig", NULL, F_STRING, "PATH",
     "kubeconfig file (default: $KUBECONFIG, in-cluster, ~/.kube/config)", AT(kubeconfig)},
    {"--context", NULL, F_STRING, "NAME", "kubeconfig context (default: the current one)",
     AT(context)},
    {"--namespace", "-n", F_STRING, "NS", "watch only this namespace (default: all)", AT(ns)},
    {"--all-namespaces", "-A", F_ALL_NS, NULL, "watch every namespace", 0},
    {"--leader-elect", NULL, F_BOOL, NULL,
     "run the controllers only while holding the leader Lease", 0},
    {"--leader-election-id", NULL, F_STRING, "NAME", "the Lease's name", AT(leader_election_id)},
    {"--leader-election-namespace", NULL, F_STRING, "NS",
     "the Lease's namespace (default: the client's)", AT(leader_election_namespace)},
    {"--metrics-bind-address", NULL, F_STRING, "ADDR",
     "metrics endpoint, host:port or :port, 0 for off", AT(metrics_bind_address)},
    {"--health-probe-bind-address", NULL, F_STRING, "ADDR",
     "/healthz and /readyz, host:port or :port, 0 for off", AT(health_probe_bind_address)},
    {"--zap-log-level", NULL, F_LEVEL, "LEVEL", "error, warn, info, debug or trace", 0},
    {"-v", NULL, F_VERBOSE, NULL, "debug log lines (--zap-log-level=debug)", 0},
    {"--workers", NULL, F_WORKERS, "N", "concurrent reconciles per controller, 1 to 1000", 0},
    {"--kube-api-qps", NULL, F_QPS, "N",
     "the client's requests per second, a negative number for no limit (default 50)", 0},
    {"--kube-api-burst", NULL, F_BURST, "N", "the client's burst, 1 to 1000000 (default 100)", 0},
    {"--help", "-h", F_HELP, NULL, "show this help", 0},
};

static const char *const level_names[] = {"error", "warn", "info", "debug", "trace"};

static kcr_err check_options(const kcr_main_options *o)
{
    if (!o || !o->name || !*o->name)
        return kcr__fail(KCR_ERR_INVALID, "kcr_main: options with a name are required");
    return KCR_OK;
}

static void defaults(const kcr_main_options *o, kcr_main_flags *f)
{
    *f = (kcr_main_flags){
        .leader_election_id = o->name,
        .metrics_bind_address =
            o->default_metrics_bind_address ? o->default_metrics_bind_address : ":8080",
        .health_probe_bind_address =
            o->default_health_probe_bind_address ? o->default_health_probe_bind_address : ":8081",
        .log_level = o->set_default_log_level ? o->default_log_level : KCR_LOG_INFO,
        .workers = o->default_workers > 0 ? o->default_workers : 1};
}

static const flag *find(const char *a, size_t len)
{
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) {
        const flag *f = &flags[i];
        if ((strlen(f->name) == len && strncmp(a, f->name, len) == 0) ||
            (f->alias && strlen(f->alias) == len && strncmp(a, f->alias, len) == 0))
            return f;
    }
    return NULL;
}

/* Applies one flag with its value (NULL for flags without one). */
static kcr_err apply(const flag *f, const char *shown, const char *v, kcr_main_flags *out)
{
    switch (f->kind) {
    case F_STRING:
        if (!*v)
            return kcr__fail(KCR_ERR_INVALID, "flag %s needs a non-empty value", shown);
        *(const char **)((char *)out + f->offset) = v;
        return KCR_OK;
    case F_BOOL:
        if (v && strcmp(v, "true") != 0 && strcmp(v, "false") != 0)
            return kcr__fail(KCR_ERR_INVALID, "flag %s takes true or false, not \"%s\"", shown, v);
        out->leader_elect = !v || strcmp(v, "true") == 0;
        return KCR_OK;
    case F_WORKERS: {
        char *end;
        long n = strtol(v, &end, 10);
        if (!*v || *end || n < 1 || n > 1000)
            return kcr__fail(KCR_ERR_INVALID, "flag %s wants a number from 1 to 1000, not \"%s\"",
                             shown, v);
        out->workers = (int)n;
        return KCR_OK;
    }
    case F_QPS: {
        char *end;
        double q = strtod(v, &end);
        if (!*v || *end || !isfinite(q))
            return kcr__fail(KCR_ERR_INVALID, "flag %s wants a number, not \"%s\"", shown, v);
        out->kube_api_qps = q;
        return KCR_OK;
    }
    case F_BURST: {
        char *end;
        long n = strtol(v, &end, 10);
        if (!*v || *end || n < 1 || n > 1000000)
            return kcr__fail(KCR_ERR_INVALID,
                             "flag %s wants a number from 1 to 1000000, not \"%s\"", shown, v);
        out->kube_api_burst = (int32_t)n;
        return KCR_OK;
    }
    case F_LEVEL:
        for (int i = 0; i < 5; i++)
            if (strcmp(v, level_names[i]) == 0) {
                out->log_level = (kcr_log_level)i;
                return KCR_OK;
            }
        return kcr__fail(KCR_ERR_INVALID,
                         "flag %s wants error, warn, info, debug or trace, not \"%s\"", shown, v);
    case F_ALL_NS:
        out->ns = NULL;
        return KCR_OK;
    case F_VERBOSE:
        out->log_level = KCR_LOG_DEBUG;
        return KCR_OK;
    case F_HELP:
        out->help = true;
        return KCR_OK;
    }
    return kcr__fail(KCR_ERR_INVALID, "flag %s: unknown kind", shown);
}

kcr_err (kcr_main_parse)(size_t opts_size, const kcr_main_options *opts, int argc, char **argv,
                         kcr_main_flags *out)
{
    KCR__ABI_OPTS(kcr_main_options, opts, opts_size);
    kcr_err err = check_options(opts);
    if (err != KCR_OK)
        return err;
    if (!out)
        return kcr__fail(KCR_ERR_INVALID, "kcr_main_parse: NULL out");
    defaults(opts, out);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *eq = strncmp(a, "--", 2) == 0 ? strchr(a, '=') : NULL;
        const flag *f = find(a, eq ? (size_t)(eq - a) : strlen(a));
        if (!f)
            return kcr__fail(KCR_ERR_INVALID, "unknown flag %s", a);
        const char *v = eq ? eq + 1 : NULL;
        bool wants_value = f->value != NULL;
        if (v && !wants_value && f->kind != F_BOOL)
            return kcr__fail(KCR_ERR_INVALID, "flag %.*s takes no value", (int)(eq - a), a);
        if (wants_value && !v) {
            if (i + 1 >= argc)
                return kcr__fail(KCR_ERR_INVALID, "flag %s needs a value (%s)", a, f->value);
            v = argv[++i];
        }
        if ((err = apply(f, f->name, v, out)) != KCR_OK)
            return err;
    }
    return KCR_OK;
}

kcr_err (kcr_main_usage)(size_t opts_size, const kcr_main_options *opts, char **out)
{
    KCR__ABI_OPTS(kcr_main_options, opts, opts_size);
    kcr_err err = check_options(opts);
    if (err != KCR_OK)
        return err;
    if (!out)
        return kcr__fail(KCR_ERR_INVALID, "kcr_main_usage: NULL out");
    *out = NULL;
    kcr_main_flags d;
    defaults(opts, &d);
    size_t len = 0;
    FILE *b = open_memstream(out, &len);
    if (!b)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory writing the usage");
    fprintf(b, "usage: %s [flags]\n", opts->name);
    if (opts->description)
        fprintf(b, "%s\n", opts->description);
    fprintf(b, "\nflags:\n");
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) {
        const flag *f = &flags[i];
        char head[64];
        snprintf(head, sizeof head, "%s%s%s%s%s", f->alias ? f->alias : "", f->alias ? ", " : "",
                 f->name, f->value ? " " : "", f->value ? f->value : "");
        fprintf(b, "  %-36s %s", head, f->help);
        const char *dflt =
            f->kind == F_STRING ? *(const char *const *)((const char *)&d + f->offset) : NULL;
        if (dflt)
            fprintf(b, " (default %s)", dflt);
        else if (f->kind == F_WORKERS)
            fprintf(b, " (default %d)", d.workers);
        else if (f->kind == F_LEVEL)
            fprintf(b, " (default %s)", level_names[d.log_level]);
        fprintf(b, "\n");
    }
    bool failed = ferror(b) != 0;
    if (fclose(b) != 0 || failed) {
        free(*out);
        *out = NULL;
        return kcr__fail(KCR_ERR_NOMEM, "out of memory writing the usage");
    }
    return KCR_OK;
}
