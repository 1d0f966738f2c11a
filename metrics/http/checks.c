/* Health checks and the /healthz, /readyz answers, as Kubernetes components
 * and controller-runtime give them: "ok", or on failure (always listed) every
 * check as "[+]name ok" / "[-]name failed: reason withheld" and "<probe> check
 * failed"; ?verbose lists them with the reasons and "<probe> check passed";
 * ?exclude=NAME skips a check; /<probe>/<name> runs one. A probe without
 * checks has the implicit "ping", which always passes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics/http/server.h"
#include "core/error.h"
#include "core/log.h"

enum { MAX_EXCLUDES = 32 };

static kcr_err ping(char **message, void *user_data)
{
    return KCR_OK;
}

static kcr__health_check ping_check = {"ping", ping, NULL};

void kcr__health_checks_free(kcr__health_checks *c)
{
    for (size_t i = 0; i < c->n; i++) {
        free(c->v[i]->name);
        free(c->v[i]);
    }
    free(c->v);
    memset(c, 0, sizeof *c);
}

static bool valid_check_name(const char *name)
{
    if (!name || !*name)
        return false;
    for (const char *p = name; *p; p++)
        if (*p <= ' ' || *p == '/' || *p == '?' || *p == '#' || *p == '%' || *p == 0x7f)
            return false;
    return true;
}

kcr_err kcr_health_server_add_check(kcr_health_server *s, kcr_health_probe probe,
                                    const char *name, kcr_health_check_fn fn, void *user_data)
{
    if (!s || !fn || (probe != KCR_PROBE_HEALTHZ && probe != KCR_PROBE_READYZ))
        return kcr__fail(KCR_ERR_INVALID, "kcr_health_server_add_check: bad argument");
    if (!valid_check_name(name))
        return kcr__fail(KCR_ERR_INVALID,
                         "health check name \"%s\" must be non-empty, printable, without "
                         "spaces, '/', '?', '#' or '%%'",
                         name ? name : "(null)");
    kcr__health_checks *list = probe == KCR_PROBE_HEALTHZ ? &s->healthz : &s->readyz;
    kcr__health_check *c = calloc(1, sizeof *c);
    if (!c || !(c->name = strdup(name))) {
        free(c);
        return kcr__fail(KCR_ERR_NOMEM, "health check %s: out of memory", name);
    }
    c->fn = fn;
    c->user_data = user_data;
    pthread_mutex_lock(&s->lock);
    kcr_err err = KCR_OK;
    for (size_t i = 0; i < list->n && err == KCR_OK; i++)
        if (strcmp(list->v[i]->name, name) == 0)
            err = kcr__fail(KCR_ERR_EXISTS, "health check %s is already added", name);
    if (err == KCR_OK && list->n == list->cap) {
        size_t cap = list->cap ? list->cap * 2 : 4;
        kcr__health_check **v = realloc(list->v, cap * sizeof *v);
        if (v) {
            list->v = v;
            list->cap = cap;
        } else {
            err = kcr__fail(KCR_ERR_NOMEM, "health check %s: out of memory", name);
        }
    }
    if (err == KCR_OK)
        list->v[list->n++] = c;
    pthread_mutex_unlock(&s->lock);
    if (err != KCR_OK) {
        free(c->name);
        free(c);
    }
    return err;
}

/* ---- a request's checks --------------------------------------------------------------- */

typedef struct query {
    bool verbose;
    const char *exclude[MAX_EXCLUDES];
    bool matched[MAX_EXCLUDES];
    size_t n_exclude;
} query;

static enum MHD_Result query_arg(void *cls, enum MHD_ValueKind kind, const char *key,
                                 const char *value)
{
    query *q = cls;
    if (strcmp(key, "verbose") == 0)
        q->verbose = true;
    else if (strcmp(key, "exclude") == 0 && value && q->n_exclude < MAX_EXCLUDES)
        q->exclude[q->n_exclude++] = value;
    return MHD_YES;
}

static bool excluded(query *q, const char *name)
{
    bool hit = false;
    for (size_t i = 0; i < q->n_exclude; i++)
        if (strcmp(q->exclude[i], name) == 0)
            hit = q->matched[i] = true;
    return hit;
}

/* Runs a check; on failure *reason is a malloc'd one-line reason. */
static bool run(const kcr__health_check *c, char **reason)
{
    char *message = NULL;
    kcr_err err = c->fn(&message, c->user_data);
    *reason = NULL;
    if (err == KCR_OK) {
        free(message);
        return true;
    }
    if (!message || !*message) {
        free(message);
        message = strdup(kcr_strerror(err));
    }
    for (char *p = message; p && *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    *reason = message;
    return false;
}

/* A copy of the probe's check pointers (the implicit ping when none). */
static kcr__health_check **snapshot(kcr_health_server *s, kcr_health_probe probe, size_t *n)
{
    const kcr__health_checks *list = probe == KCR_PROBE_HEALTHZ ? &s->healthz : &s->readyz;
    pthread_mutex_lock(&s->lock);
    size_t count = list->n ? list->n : 1;
    kcr__health_check **v = malloc(count * sizeof *v);
    if (v && list->n)
        memcpy(v, list->v, count * sizeof *v);
    else if (v)
        v[0] = &ping_check;
    pthread_mutex_unlock(&s->lock);
    *n = count;
    return v;
}

static void one(const kcr__health_check *c, FILE *out, kcr__probe_reply *reply)
{
    char *reason;
    if (run(c, &reason)) {
        fputs("ok", out);
        reply->status = MHD_HTTP_OK;
    } else {
        fprintf(out, "internal server error: %s\n", reason ? reason : "out of memory");
        reply->status = MHD_HTTP_INTERNAL_SERVER_ERROR;
        free(reason);
    }
}

static void all(kcr__health_check **checks, size_t n, query *q, const char *probe_name,
                FILE *out, kcr__probe_reply *reply)
{
    bool failed = false;
    for (size_t i = 0; i < n; i++) {
        const char *name = checks[i]->name;
        char *reason;
        if (excluded(q, name)) {
            fprintf(out, "[+]%s excluded: ok\n", name);
        } else if (run(checks[i], &reason)) {
            fprintf(out, "[+]%s ok\n", name);
        } else {
            failed = true;
            kcr__log(KCR_LOG_DEBUG, "health", "%s check %s failed: %s", probe_name, name,
                     reason ? reason : "out of memory");
            fprintf(out, "[-]%s failed: %s\n", name,
                    q->verbose && reason ? reason : "reason withheld");
            free(reason);
        }
    }
    for (size_t i = 0; i < q->n_exclude; i++)
        if (!q->matched[i])
            fprintf(out, "warn: some health checks cannot be excluded: no matches for \"%s\"\n",
                    q->exclude[i]);
    reply->status = failed ? MHD_HTTP_INTERNAL_SERVER_ERROR : MHD_HTTP_OK;
    if (failed || q->verbose)
        fprintf(out, "%s check %s\n", probe_name, failed ? "failed" : "passed");
}

kcr_err kcr__health_probe(kcr_health_server *s, kcr_health_probe probe, const char *path_name,
                          struct MHD_Connection *conn, kcr__probe_reply *reply)
{
    const char *probe_name = probe == KCR_PROBE_HEALTHZ ? "healthz" : "readyz";
    reply->body = NULL;
    size_t n, body_len;
    kcr__health_check **checks = snapshot(s, probe, &n);
    FILE *out = checks ? open_memstream(&reply->body, &body_len) : NULL;
    if (!out) {
        free(checks);
        return kcr__fail(KCR_ERR_NOMEM, "%s: out of memory answering a probe", probe_name);
    }
    if (path_name) {
        size_t i = 0;
        while (i < n && strcmp(checks[i]->name, path_name) != 0)
            i++;
        if (i < n) {
            one(checks[i], out, reply);
        } else {
            fputs("404 page not found\n", out);
            reply->status = MHD_HTTP_NOT_FOUND;
        }
    }
    query q = {0};
    if (!path_name) {
        MHD_get_connection_values(conn, MHD_GET_ARGUMENT_KIND, query_arg, &q);
        all(checks, n, &q, probe_name, out, reply);
    }
    free(checks);
    if (fclose(out) != 0 || !reply->body) {
        free(reply->body);
        reply->body = NULL;
        return kcr__fail(KCR_ERR_NOMEM, "%s: out of memory answering a probe", probe_name);
    }
    if (!path_name && reply->status == MHD_HTTP_OK && !q.verbose) {
        /* the listing is only for failures and ?verbose */
        free(reply->body);
        if (!(reply->body = strdup("ok")))
            return kcr__fail(KCR_ERR_NOMEM, "%s: out of memory answering a probe", probe_name);
    }
    return KCR_OK;
}
