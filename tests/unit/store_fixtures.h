/* Object makers for the store tests. */
#ifndef KCR_TEST_STORE_FIXTURES_H
#define KCR_TEST_STORE_FIXTURES_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "kcr/kcr.h"

/* Constructors that fail the test instead of returning an error. */
static inline kcr_store *new_store(void)
{
    kcr_store *s = NULL;
    cr_assert_eq(kcr_store_new(&s), KCR_OK, "kcr_store_new: %s", kcr_last_error());
    return s;
}

static inline kcr_fifo *new_fifo(void)
{
    kcr_fifo *f = NULL;
    cr_assert_eq(kcr_fifo_new(&f), KCR_OK, "kcr_fifo_new: %s", kcr_last_error());
    return f;
}

static inline kcr_delta_fifo *new_delta_fifo(const kcr_delta_fifo_options *opts)
{
    kcr_delta_fifo *f = NULL;
    cr_assert_eq(kcr_delta_fifo_new(opts, &f), KCR_OK, "kcr_delta_fifo_new: %s", kcr_last_error());
    return f;
}

static inline kcr_tombstone *new_tombstone(const char *key, const kcr_object *obj)
{
    kcr_tombstone *t = NULL;
    cr_assert_eq(kcr_tombstone_new(key, obj, &t), KCR_OK, "kcr_tombstone_new: %s",
                 kcr_last_error());
    return t;
}

/* A ConfigMap ns/name (ns may be "" for cluster-scoped) with label app=app
 * and a resourceVersion. */
static inline kcr_object *mk(const char *ns, const char *name, const char *app, const char *rv)
{
    char json[512];
    if (ns[0])
        snprintf(json, sizeof json,
                 "{\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"%s\",\"namespace\":\"%s\","
                 "\"resourceVersion\":\"%s\",\"labels\":{\"app\":\"%s\"}}}",
                 name, ns, rv, app);
    else
        snprintf(json, sizeof json,
                 "{\"kind\":\"Node\",\"metadata\":{\"name\":\"%s\",\"resourceVersion\":\"%s\","
                 "\"labels\":{\"app\":\"%s\"}}}",
                 name, rv, app);
    kcr_object *o = NULL;
    kcr_object_parse(json, strlen(json), &o);
    return o;
}

static inline bool list_has(const kcr_string_list *l, const char *s)
{
    for (size_t i = 0; i < l->len; i++)
        if (strcmp(l->items[i], s) == 0)
            return true;
    return false;
}

static inline void sleep_us(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

#endif
