/* The informer factory: one shared informer per resource + namespace +
 * selectors + metadata_only. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/error.h"
#include "kcr/informer.h"

typedef struct entry {
    char *id; /* group/version/resource|ns|label|field|meta */
    kcr_informer *inf;
    struct entry *next;
} entry;

struct kcr_informer_factory {
    kcr_client *client;
    kcr_informer_options defaults;
    char *d_ns, *d_label, *d_field, *d_shard; /* copies behind defaults' strings */
    pthread_mutex_t mu;
    entry *entries;
    bool started;
    bool stopped; /* after kcr_informer_factory_stop: no start, no new informers */
};

static char *dup_opt(const char *s, bool *oom)
{
    if (!s)
        return NULL;
    char *d = strdup(s);
    if (!d)
        *oom = true;
    return d;
}

kcr_err kcr_informer_factory_new(kcr_client *client, const kcr_informer_options *defaults,
                                 kcr_informer_factory **out)
{
    if (out)
        *out = NULL;
    if (!client || !out)
        return kcr__fail(KCR_ERR_INVALID, "kcr_informer_factory_new: NULL argument");
    kcr_informer_factory *f = calloc(1, sizeof *f);
    if (!f)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory");
    f->client = client;
    bool oom = false;
    if (defaults) {
        f->defaults = *defaults;
        f->defaults.reflector.ns = f->d_ns = dup_opt(defaults->reflector.ns, &oom);
        f->defaults.reflector.label_selector = f->d_label =
            dup_opt(defaults->reflector.label_selector, &oom);
        f->defaults.reflector.field_selector = f->d_field =
            dup_opt(defaults->reflector.field_selector, &oom);
        f->defaults.reflector.shard_selector = f->d_shard =
            dup_opt(defaults->reflector.shard_selector, &oom);
    }
    pthread_mutex_init(&f->mu, NULL);
    if (oom) {
        kcr_informer_factory_free(f);
        return kcr__fail(KCR_ERR_NOMEM, "out of memory");
    }
    *out = f;
    return KCR_OK;
}

static char *make_id(const kcr_resource *res, const kcr_informer_options *o)
{
    const kcr_reflector_options *r = &o->reflector;
    const char *parts[] = {res->group ? res->group : "", res->version, res->resource,
                           r->ns ? r->ns : "",
                           r->label_selector ? r->label_selector : "",
                           r->field_selector ? r->field_selector : "",
                           r->shard_selector ? r->shard_selector : "",
                           r->metadata_only ? "meta" : "full"};
    size_t len = 1;
    for (size_t i = 0; i < sizeof parts / sizeof *parts; i++)
        len += strlen(parts[i]) + 1;
    char *id = malloc(len);
    if (!id)
        return NULL;
    char *p = id;
    for (size_t i = 0; i < sizeof parts / sizeof *parts; i++) {
        size_t l = strlen(parts[i]);
        memcpy(p, parts[i], l);
        p += l;
        *p++ = '\x1f'; /* a separator no selector or name contains */
    }
    *p = '\0';
    return id;
}

kcr_err kcr_informer_factory_informer(kcr_informer_factory *f, const kcr_resource *res,
                                      const kcr_informer_options *opts, kcr_informer **out)
{
    if (!f || !res || !res->version || !res->resource || !out)
        return kcr__fail(KCR_ERR_INVALID, "kcr_informer_factory_informer: NULL argument");
    *out = NULL;
    if (!opts)
        opts = &f->defaults;
    char *id = make_id(res, opts);
    if (!id)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory");
    pthread_mutex_lock(&f->mu);
    if (f->stopped) {
        pthread_mutex_unlock(&f->mu);
        free(id);
        return kcr__fail(
            KCR_ERR_STATE,
            "kcr_informer_factory_informer: the factory was stopped; create a new one");
    }
    for (entry *e = f->entries; e; e = e->next)
        if (strcmp(e->id, id) == 0) {
            *out = e->inf;
            pthread_mutex_unlock(&f->mu);
            free(id);
            return KCR_OK;
        }
    entry *e = calloc(1, sizeof *e);
    kcr_err err = e ? kcr_informer_new(f->client, res, opts, &e->inf)
                    : kcr__fail(KCR_ERR_NOMEM, "out of memory");
    if (err == KCR_OK && f->started)
        err = kcr_informer_start(e->inf);
    if (err != KCR_OK) {
        if (e)
            kcr_informer_free(e->inf);
        free(e);
        free(id);
        pthread_mutex_unlock(&f->mu);
        return err;
    }
    e->id = id;
    e->next = f->entries;
    f->entries = e;
    *out = e->inf;
    pthread_mutex_unlock(&f->mu);
    return KCR_OK;
}

kcr_err kcr_informer_factory_start(kcr_informer_factory *f)
{
    if (!f)
        return kcr__fail(KCR_ERR_INVALID, "kcr_informer_factory_start: NULL factory");
    kcr_err err = KCR_OK;
    pthread_mutex_lock(&f->mu);
    if (f->stopped)
        err = kcr__fail(KCR_ERR_STATE,
                        "kcr_informer_factory_start: the factory was stopped; create a new one");
    else if (!f->started) {
        f->started = true;
        for (entry *e = f->entries; e && err == KCR_OK; e = e->next)
            err = kcr_informer_start(e->inf);
    }
    pthread_mutex_unlock(&f->mu);
    return err;
}

kcr_err kcr_informer_factory_wait_for_sync(kcr_informer_factory *f, int64_t timeout_ms,
                                           kcr_status *status)
{
    if (!f)
        return kcr__fail(KCR_ERR_INVALID, "kcr_informer_factory_wait_for_sync: NULL factory");
    if (timeout_ms < 0 && kcr__duration_check("kcr_informer_factory_wait_for_sync: timeout_ms", timeout_ms,
                                               KCR__DURATION_INFINITE) != KCR_OK)
        return KCR_ERR_INVALID; /* detail: kcr__duration_check */
    if (timeout_ms > KCR__MAX_DURATION_MS)
        timeout_ms = -1; /* as good as no limit, and its nanoseconds would overflow */
    int64_t deadline = timeout_ms >= 0 ? kcr__now_ns() + timeout_ms * KCR_NS_PER_MS : -1;
    /* Entries are only ever prepended, so a snapshot of the head stays valid. */
    pthread_mutex_lock(&f->mu);
    entry *head = f->entries;
    pthread_mutex_unlock(&f->mu);
    for (entry *e = head; e; e = e->next) {
        int64_t left = -1;
        if (deadline >= 0) {
            left = (deadline - kcr__now_ns()) / KCR_NS_PER_MS;
            if (left < 0)
                left = 0;
        }
        kcr_err err = kcr_informer_wait_for_sync(e->inf, left, status);
        if (err != KCR_OK)
            return err;
    }
    return KCR_OK;
}

void kcr_informer_factory_stop(kcr_informer_factory *f)
{
    if (!f)
        return;
    /* Not under f->mu: stopping joins handler threads, whose callbacks may
     * ask the factory for informers. Entries are only ever prepended (and
     * freed by _free), so the snapshot stays valid. */
    pthread_mutex_lock(&f->mu);
    f->stopped = true;
    entry *head = f->entries;
    pthread_mutex_unlock(&f->mu);
    for (entry *e = head; e; e = e->next)
        kcr_informer_stop(e->inf);
}

void kcr_informer_factory_free(kcr_informer_factory *f)
{
    if (!f)
        return;
    kcr_informer_factory_stop(f);
    while (f->entries) {
        entry *e = f->entries;
        f->entries = e->next;
        kcr_informer_free(e->inf);
        free(e->id);
        free(e);
    }
    pthread_mutex_destroy(&f->mu);
    free(f->d_ns);
    free(f->d_label);
    free(f->d_field);
    free(f->d_shard);
    free(f);
}
