/* Fixture for the fake API tests (test_fake*.c): a fake and a client on it,
 * create/str shorthands, a ConfigMap list collecting "ns/name", and a watch
 * handler recording what it saw. */
#ifndef KCR_TEST_FAKE_FIXTURE_H
#define KCR_TEST_FAKE_FIXTURE_H

#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "kcr/kcr.h"
#include "kcr/fake.h"

static const kcr_resource CM = {"", "v1", "configmaps"};
static const kcr_resource DEPLOY = {"apps", "v1", "deployments"};
static const kcr_resource NS = {"", "v1", "namespaces"};

static inline void nap_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static kcr_fake *fake;
static kcr_client *c;

static inline void setup(void)
{
    cr_assert_eq(kcr_fake_new(NULL, &fake), KCR_OK);
    cr_assert_eq(kcr_fake_client(fake, "default", &c), KCR_OK);
}

static inline void teardown(void)
{
    kcr_client_free(c);
    kcr_fake_free(fake);
}

static inline kcr_object *create(const kcr_resource *res, const char *ns, const char *json)
{
    kcr_object *o = NULL;
    kcr_err err = kcr_client_create(c, &(kcr_request){.resource = res, .ns = ns, .body = json}, &o);
    cr_assert_eq(err, KCR_OK, "create %s: %s", json, kcr_last_error());
    return o;
}

static inline const char *str(const kcr_object *o, const char *path)
{
    const char *s = kcr_value_string(kcr_object_get(o, path), NULL);
    return s ? s : "";
}

struct names {
    int n;
    char v[32][32];
};

static inline kcr_err collect(kcr_object *o, void *ud)
{
    struct names *n = ud;
    if (n->n < 32)
        snprintf(n->v[n->n], 32, "%s/%s", kcr_object_namespace(o), kcr_object_name(o));
    n->n++;
    return KCR_OK;
}

static inline struct names list(const char *ns, const char *selector)
{
    struct names n = {0};
    kcr_err err =
        kcr_client_list(c, &(kcr_request){.resource = &CM, .ns = ns, .label_selector = selector},
                        collect, &n, NULL);
    cr_assert_eq(err, KCR_OK, "%s: %s", selector ? selector : "", kcr_last_error());
    return n;
}

struct seen {
    pthread_mutex_t lock;
    int n;
    kcr_watch_event_type type[64];
    char name[64][32];
    char rv[64][16];
    bool end_marker[64];
    int stop_after;
};

static inline kcr_err on_event(const kcr_watch_event *ev, void *ud)
{
    struct seen *s = ud;
    pthread_mutex_lock(&s->lock);
    if (s->n < 64) {
        s->type[s->n] = ev->type;
        snprintf(s->name[s->n], 32, "%s", ev->object ? kcr_object_name(ev->object) : "");
        snprintf(s->rv[s->n], 16, "%s", ev->resource_version);
        s->end_marker[s->n] = ev->initial_events_end;
    }
    s->n++;
    int n = s->n;
    pthread_mutex_unlock(&s->lock);
    return s->stop_after && n >= s->stop_after ? KCR_ERR_CANCELED : KCR_OK;
}

#endif
