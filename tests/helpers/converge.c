/* The informer convergence checker and event tracker (converge.h). */
#include "helpers/converge.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/strmap.h"

struct tracker {
    pthread_mutex_t mu;
    struct kcr__strmap mirror;  /* key -> malloc'd rv */
    struct kcr__strmap adds;    /* key -> count (as pointer) */
    struct kcr__strmap deletes; /* uid -> count */
    struct kcr__strmap expected; /* uid -> 1 */
    tracker_counts counts;
};

int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void sleep_ms(int64_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

tracker *tracker_new(void)
{
    tracker *t = calloc(1, sizeof *t);
    pthread_mutex_init(&t->mu, NULL);
    return t;
}

void tracker_free(tracker *t)
{
    if (!t)
        return;
    kcr__strmap_clear(&t->mirror, free);
    kcr__strmap_clear(&t->adds, NULL);
    kcr__strmap_clear(&t->deletes, NULL);
    kcr__strmap_clear(&t->expected, NULL);
    pthread_mutex_destroy(&t->mu);
    free(t);
}

static void bump(struct kcr__strmap *m, const char *key)
{
    uintptr_t n = (uintptr_t)kcr__strmap_get(m, key);
    kcr__strmap_put(m, key, (void *)(n + 1), NULL);
}

static void mirror_set(tracker *t, const kcr_object *obj)
{
    char *key = NULL;
    if (kcr_store_key(obj, &key) != KCR_OK)
        return;
    void *old = NULL;
    kcr__strmap_put(&t->mirror, key, strdup(kcr_object_resource_version(obj)), &old);
    free(old);
    free(key);
}

/* Counts a callback whose key is not the object's (or the tombstone's). */
static void check_key(tracker *t, const char *key, const kcr_object *obj, const kcr_tombstone *tomb)
{
    char *want = NULL;
    if (tomb)
        want = strdup(kcr_tombstone_key(tomb));
    else if (obj)
        kcr_store_key(obj, &want);
    if (!key || !want || strcmp(key, want) != 0)
        t->counts.wrong_keys++;
    free(want);
}

static void t_add(const char *key, const kcr_object *obj, bool initial, void *ud)
{
    tracker *t = ud;
    pthread_mutex_lock(&t->mu);
    check_key(t, key, obj, NULL);
    t->counts.adds++;
    if (initial)
        t->counts.initial_adds++;
    mirror_set(t, obj);
    bump(&t->adds, key);
    pthread_mutex_unlock(&t->mu);
}

static void t_update(const char *key, const kcr_object *old, const kcr_object *cur, void *ud)
{
    tracker *t = ud;
    pthread_mutex_lock(&t->mu);
    check_key(t, key, cur, NULL);
    if (strcmp(kcr_object_resource_version(old), kcr_object_resource_version(cur)) == 0)
        t->counts.resyncs++;
    else
        t->counts.updates++;
    mirror_set(t, cur);
    pthread_mutex_unlock(&t->mu);
}

static void t_delete(const char *key, const kcr_object *obj, const kcr_tombstone *tomb, void *ud)
{
    tracker *t = ud;
    pthread_mutex_lock(&t->mu);
    check_key(t, key, obj, tomb);
    t->counts.deletes++;
    if (tomb)
        t->counts.tombstones++;
    free(kcr__strmap_remove(&t->mirror, key));
    if (obj && kcr_object_uid(obj)[0])
        bump(&t->deletes, kcr_object_uid(obj));
    pthread_mutex_unlock(&t->mu);
}

kcr_event_handler tracker_handler(tracker *t, int64_t resync_ms)
{
    return (kcr_event_handler){.on_add = t_add,
                               .on_update = t_update,
                               .on_delete = t_delete,
                               .resync_period_ms = resync_ms,
                               .user_data = t};
}

tracker_counts tracker_get_counts(tracker *t)
{
    pthread_mutex_lock(&t->mu);
    tracker_counts c = t->counts;
    pthread_mutex_unlock(&t->mu);
    return c;
}

unsigned tracker_deletes_of_uid(tracker *t, const char *uid)
{
    pthread_mutex_lock(&t->mu);
    unsigned n = (unsigned)(uintptr_t)kcr__strmap_get(&t->deletes, uid);
    pthread_mutex_unlock(&t->mu);
    return n;
}

unsigned tracker_adds_of_key(tracker *t, const char *key)
{
    pthread_mutex_lock(&t->mu);
    unsigned n = (unsigned)(uintptr_t)kcr__strmap_get(&t->adds, key);
    pthread_mutex_unlock(&t->mu);
    return n;
}

char *tracker_rv_of(tracker *t, const char *key)
{
    pthread_mutex_lock(&t->mu);
    const char *rv = kcr__strmap_get(&t->mirror, key);
    char *s = rv ? strdup(rv) : NULL;
    pthread_mutex_unlock(&t->mu);
    return s;
}

void tracker_expect_deleted(tracker *t, const char *uid)
{
    pthread_mutex_lock(&t->mu);
    kcr__strmap_put(&t->expected, uid, (void *)1, NULL);
    pthread_mutex_unlock(&t->mu);
}

/* ---- the checker ---------------------------------------------------------------------- */

typedef struct server_list {
    struct kcr__strmap rv; /* key -> malloc'd rv */
} server_list;

static kcr_err collect(kcr_object *obj, void *ud)
{
    server_list *s = ud;
    char *key = NULL;
    kcr_err err = kcr_store_key(obj, &key);
    if (err == KCR_OK) {
        void *old = NULL;
        kcr__strmap_put(&s->rv, key, strdup(kcr_object_resource_version(obj)), &old);
        free(old);
    }
    free(key);
    return err;
}

/* Compares a key->rv view against the server's. */
static bool same_as_server(const server_list *srv, size_t n, const char *(*rv_of)(void *, const char *),
                           void *self, kcr_string_list *keys, const char *what, char *why,
                           size_t why_len)
{
    if (n != kcr__strmap_len(&srv->rv)) {
        snprintf(why, why_len, "%s has %zu objects, the server %zu", what, n,
                 kcr__strmap_len(&srv->rv));
        return false;
    }
    for (size_t i = 0; i < keys->len; i++) {
        const char *want = kcr__strmap_get(&srv->rv, keys->items[i]);
        const char *have = rv_of(self, keys->items[i]);
        if (!want) {
            snprintf(why, why_len, "%s has %s, the server does not", what, keys->items[i]);
            return false;
        }
        if (!have || strcmp(want, have) != 0) {
            snprintf(why, why_len, "%s has %s at rv %s, the server at %s", what, keys->items[i],
                     have ? have : "(none)", want);
            return false;
        }
    }
    return true;
}

static char rv_buf[64];
static const char *store_rv(void *self, const char *key)
{
    kcr_object *o = kcr_store_get_by_key(self, key);
    if (!o)
        return NULL;
    snprintf(rv_buf, sizeof rv_buf, "%s", kcr_object_resource_version(o));
    kcr_object_unref(o);
    return rv_buf;
}

static const char *mirror_rv(void *self, const char *key)
{
    return kcr__strmap_get(&((tracker *)self)->mirror, key);
}

static bool check_once(kcr_client *c, const kcr_resource *res, const char *ns, const char *sel,
                       kcr_informer *inf, tracker *t, char *why, size_t why_len)
{
    server_list srv = {0};
    kcr_status st = {0};
    kcr_err err = kcr_client_list(
        c, &(kcr_request){.resource = res, .ns = ns, .label_selector = sel, .status = &st}, collect,
        &srv, NULL);
    kcr_status_clear(&st);
    bool ok = err == KCR_OK;
    if (!ok)
        snprintf(why, why_len, "fresh LIST failed: %s: %s", kcr_strerror(err), kcr_last_error());
    if (ok) {
        kcr_string_list keys = {0};
        kcr_store_list_keys(kcr_informer_store(inf), &keys);
        ok = same_as_server(&srv, keys.len, store_rv, kcr_informer_store(inf), &keys, "the cache",
                            why, why_len);
        kcr_string_list_free(&keys);
    }
    if (ok && t) {
        pthread_mutex_lock(&t->mu);
        kcr_string_list keys = {0};
        keys.items = calloc(kcr__strmap_len(&t->mirror) + 1, sizeof *keys.items);
        const char *key;
        for (size_t pos = 0; kcr__strmap_next(&t->mirror, &pos, &key, NULL);)
            keys.items[keys.len++] = strdup(key);
        ok = same_as_server(&srv, kcr__strmap_len(&t->mirror), mirror_rv, t, &keys,
                            "the handler's mirror", why, why_len);
        if (ok && t->counts.wrong_keys) {
            snprintf(why, why_len, "%llu handler callbacks got a key that is not the object's",
                     (unsigned long long)t->counts.wrong_keys);
            ok = false;
        }
        const char *uid;
        for (size_t pos = 0; ok && kcr__strmap_next(&t->expected, &pos, &uid, NULL);) {
            unsigned n = (unsigned)(uintptr_t)kcr__strmap_get(&t->deletes, uid);
            if (n != 1) {
                snprintf(why, why_len, "object uid %s deleted on the server got %u on_delete", uid, n);
                ok = false;
            }
        }
        pthread_mutex_unlock(&t->mu);
        kcr_string_list_free(&keys);
    }
    kcr__strmap_clear(&srv.rv, free);
    return ok;
}

bool converge_wait(kcr_client *c, const kcr_resource *res, const char *ns,
                   const char *label_selector, kcr_informer *inf, tracker *t,
                   int64_t timeout_ms, char *why, size_t why_len)
{
    int64_t deadline = now_ms() + timeout_ms;
    for (;;) {
        if (check_once(c, res, ns, label_selector, inf, t, why, why_len))
            return true;
        if (now_ms() >= deadline)
            return false;
        sleep_ms(50);
    }
}
