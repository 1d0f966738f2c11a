/* Streaming LIST and watch decoders: every chunk split, one byte at a time,
 * size limits, truncation, ERROR/BOOKMARK events, bad input. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/decode.h"
#include "core/error.h"
#include "kcr/kcr.h"

static const char list_body[] =
    "{\"kind\":\"ConfigMapList\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":\"4711\","
    "\"continue\":\"eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ\",\"remainingItemCount\":3},\"items\":["
    "{\"metadata\":{\"name\":\"a\",\"namespace\":\"ns1\",\"resourceVersion\":\"10\","
    "\"labels\":{\"app\":\"x\"}},\"data\":{\"k\":\"v \\u00e9\\n\",\"n\":[1,2.5e3,-0,true,null]}},"
    "{\"metadata\":{\"name\":\"b\",\"namespace\":\"ns1\",\"resourceVersion\":\"11\"},"
    "\"data\":{}},"
    "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"c\","
    "\"resourceVersion\":\"12\"}}]}";

struct collected {
    int n;
    char names[16][16];
    char rvs[16][16];
    char kinds[16][32];
    char api_versions[16][32];
    int stop_after; /* return KCR_ERR_CANCELED after this many; 0: never */
};

static kcr_err collect_item(kcr_object *obj, void *ud)
{
    struct collected *c = ud;
    if (c->n < 16) {
        snprintf(c->names[c->n], sizeof c->names[0], "%s", kcr_object_name(obj));
        snprintf(c->rvs[c->n], sizeof c->rvs[0], "%s", kcr_object_resource_version(obj));
        snprintf(c->kinds[c->n], sizeof c->kinds[0], "%s", kcr_object_kind(obj));
        snprintf(c->api_versions[c->n], sizeof c->api_versions[0], "%s",
                 kcr_object_api_version(obj));
    }
    c->n++;
    if (c->stop_after && c->n >= c->stop_after)
        return KCR_ERR_CANCELED;
    return KCR_OK;
}

/* Decodes `body` fed as [0, split) and [split, len), checking the result. */
static void check_list_split(const char *body, size_t len, size_t split)
{
    struct collected c = {0};
    kcr__list_decoder *d = kcr__list_decoder_new(0, collect_item, &c);
    cr_assert_not_null(d);
    cr_assert_eq(kcr__list_decoder_feed(d, body, split), KCR_OK, "split %zu: %s", split,
                 kcr_last_error());
    cr_assert_eq(kcr__list_decoder_feed(d, body + split, len - split), KCR_OK, "split %zu: %s",
                 split, kcr_last_error());
    kcr_list_meta meta = {0};
    cr_assert_eq(kcr__list_decoder_finish(d, &meta), KCR_OK, "split %zu", split);
    cr_assert_eq(c.n, 3, "split %zu gave %d items", split, c.n);
    cr_assert_str_eq(c.names[0], "a");
    cr_assert_str_eq(c.names[1], "b");
    cr_assert_str_eq(c.names[2], "c");
    cr_assert_str_eq(c.rvs[2], "12");
    for (int i = 0; i < 3; i++) {
        cr_assert_str_eq(c.kinds[i], "ConfigMap", "split %zu item %d", split, i);
        cr_assert_str_eq(c.api_versions[i], "v1", "split %zu item %d", split, i);
    }
    cr_assert_str_eq(meta.resource_version, "4711");
    cr_assert_str_eq(meta.continue_token, "eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ");
    cr_assert(meta.has_remaining_item_count);
    cr_assert_eq(meta.remaining_item_count, 3);
    kcr_list_meta_clear(&meta);
    kcr__list_decoder_free(d);
}

Test(list_decoder, every_split_point)
{
    size_t len = strlen(list_body);
    for (size_t split = 0; split <= len; split++)
        check_list_split(list_body, len, split);
}

Test(list_decoder, one_byte_at_a_time)
{
    struct collected c = {0};
    kcr__list_decoder *d = kcr__list_decoder_new(0, collect_item, &c);
    for (size_t i = 0; list_body[i]; i++)
        cr_assert_eq(kcr__list_decoder_feed(d, list_body + i, 1), KCR_OK, "byte %zu", i);
    kcr_list_meta meta = {0};
    cr_assert_eq(kcr__list_decoder_finish(d, &meta), KCR_OK);
    cr_assert_eq(c.n, 3);
    cr_assert_eq(kcr__list_decoder_items(d), 3);
    kcr_list_meta_clear(&meta);
    kcr__list_decoder_free(d);
}

Test(list_decoder, items_arrive_before_the_body_ends)
{
    /* The first item is delivered as soon as its closing brace is fed. */
    struct collected c = {0};
    kcr__list_decoder *d = kcr__list_decoder_new(0, collect_item, &c);
    const char *end_of_a = strstr(list_body, "null]}}") + strlen("null]}}");
    cr_assert_eq(kcr__list_decoder_feed(d, list_body, (size_t)(end_of_a - list_body)), KCR_OK);
    cr_assert_eq(c.n, 1);
    cr_assert_str_eq(c.names[0], "a");
    kcr__list_decoder_free(d);
}

Test(list_decoder, empty_and_missing_items)
{
    const char *bodies[] = {"{\"kind\":\"PodList\",\"metadata\":{\"resourceVersion\":\"5\"},\"items\":[]}",
                            "{\"metadata\":{\"resourceVersion\":\"6\"},\"items\":null}",
                            "{\"metadata\":{\"resourceVersion\":\"7\"}}"};
    for (size_t i = 0; i < 3; i++) {
        struct collected c = {0};
        kcr__list_decoder *d = kcr__list_decoder_new(0, collect_item, &c);
        cr_assert_eq(kcr__list_decoder_feed(d, bodies[i], strlen(bodies[i])), KCR_OK);
        kcr_list_meta meta = {0};
        cr_assert_eq(kcr__list_decoder_finish(d, &meta), KCR_OK);
        cr_assert_eq(c.n, 0);
        cr_assert_eq(meta.resource_version[0], '5' + (char)i);
        cr_assert_str_eq(meta.continue_token, "");
        cr_assert_not(meta.has_remaining_item_count);
        kcr_list_meta_clear(&meta);
        kcr__list_decoder_free(d);
    }
}

/* yajl hands numbers over as unterminated text; the buffer may end right there. */
Test(list_decoder, number_at_the_end_of_a_chunk)
{
    const char *body = "{\"metadata\":{\"remainingItemCount\":12345678901}}";
    const char *cut = strstr(body, "}}");
    kcr__list_decoder *d = kcr__list_decoder_new(0, NULL, NULL);
    size_t first = (size_t)(cut - body);
    char *exact = malloc(first); /* exactly sized, so reading past it is caught */
    memcpy(exact, body, first);
    cr_assert_eq(kcr__list_decoder_feed(d, exact, first), KCR_OK);
    free(exact);
    cr_assert_eq(kcr__list_decoder_feed(d, cut, strlen(cut)), KCR_OK);
    kcr_list_meta meta = {0};
    cr_assert_eq(kcr__list_decoder_finish(d, &meta), KCR_OK);
    cr_assert_eq(meta.remaining_item_count, 12345678901LL);
    kcr_list_meta_clear(&meta);
    kcr__list_decoder_free(d);
}

/* The List's type after its items (JSON key order is free): every split
 * point, items in order, nested "kind" keys ignored, an item with its own
 * apiVersion kept as it is (client-go stamps only items with neither). */
static const char type_last_body[] =
    "{\"metadata\":{\"resourceVersion\":\"7\"},\"items\":["
    "{\"metadata\":{\"name\":\"a\"},\"spec\":{\"kind\":\"nested\",\"apiVersion\":\"x\"}},"
    "{\"apiVersion\":\"other/v2\",\"metadata\":{\"name\":\"b\"}},"
    "{\"metadata\":{\"name\":\"c\",\"ownerReferences\":[{\"kind\":\"Foo\"}]}}],"
    "\"kind\":\"DeploymentList\",\"apiVersion\":\"apps/v1\"}";

Test(list_decoder, items_get_the_lists_type_when_it_comes_after_them)
{
    size_t len = strlen(type_last_body);
    for (size_t split = 0; split <= len; split++) {
        struct collected c = {0};
        kcr__list_decoder *d = kcr__list_decoder_new(0, collect_item, &c);
        cr_assert_eq(kcr__list_decoder_feed(d, type_last_body, split), KCR_OK);
        cr_assert_eq(kcr__list_decoder_feed(d, type_last_body + split, len - split), KCR_OK);
        cr_assert_eq(kcr__list_decoder_finish(d, NULL), KCR_OK, "split %zu: %s", split,
                     kcr_last_error());
        cr_assert_eq(c.n, 3, "split %zu", split);
        cr_assert_str_eq(c.names[0], "a");
        cr_assert_str_eq(c.names[1], "b");
        cr_assert_str_eq(c.names[2], "c");
        cr_assert_str_eq(c.kinds[0], "Deployment", "split %zu", split);
        cr_assert_str_eq(c.api_versions[0], "apps/v1", "split %zu", split);
        cr_assert_str_eq(c.kinds[1], "", "split %zu: has its own apiVersion", split);
        cr_assert_str_eq(c.api_versions[1], "other/v2", "split %zu", split);
        cr_assert_str_eq(c.kinds[2], "Deployment", "split %zu", split);
        cr_assert_str_eq(c.api_versions[2], "apps/v1", "split %zu", split);
        kcr__list_decoder_free(d);
    }
}

Test(list_decoder, metadata_only_and_untyped_lists)
{
    /* PartialObjectMetadataList: the apiserver types its items; one without
     * gets the List's type too */
    const char *meta =
        "{\"kind\":\"PartialObjectMetadataList\",\"apiVersion\":\"meta.k8s.io/v1\",\"items\":["
        "{\"kind\":\"PartialObjectMetadata\",\"apiVersion\":\"meta.k8s.io/v1\","
        "\"metadata\":{\"name\":\"a\"}},{\"metadata\":{\"name\":\"b\"}}]}";
    struct collected c = {0};
    kcr__list_decoder *d = kcr__list_decoder_new(0, collect_item, &c);
    cr_assert_eq(kcr__list_decoder_feed(d, meta, strlen(meta)), KCR_OK);
    cr_assert_eq(c.n, 2, "typed List: items delivered while the body streams");
    cr_assert_eq(kcr__list_decoder_finish(d, NULL), KCR_OK);
    for (int i = 0; i < 2; i++) {
        cr_assert_str_eq(c.kinds[i], "PartialObjectMetadata");
        cr_assert_str_eq(c.api_versions[i], "meta.k8s.io/v1");
    }
    kcr__list_decoder_free(d);

    /* no type anywhere: items come through untouched at the end */
    const char *bare =
        "{\"items\":[{\"metadata\":{\"name\":\"a\"}},{\"metadata\":{\"name\":\"b\"}}]}";
    memset(&c, 0, sizeof c);
    d = kcr__list_decoder_new(0, collect_item, &c);
    cr_assert_eq(kcr__list_decoder_feed(d, bare, strlen(bare)), KCR_OK);
    cr_assert_eq(kcr__list_decoder_finish(d, NULL), KCR_OK);
    cr_assert_eq(c.n, 2);
    cr_assert_eq(kcr__list_decoder_items(d), 2);
    cr_assert_str_eq(c.kinds[1], "");
    kcr__list_decoder_free(d);

    /* a callback error while the held items are handed over stops the list */
    memset(&c, 0, sizeof c);
    c.stop_after = 1;
    d = kcr__list_decoder_new(0, collect_item, &c);
    cr_assert_eq(kcr__list_decoder_feed(d, type_last_body, strlen(type_last_body)),
                 KCR_ERR_CANCELED);
    cr_assert_eq(c.n, 1);
    cr_assert_str_eq(c.kinds[0], "Deployment");
    kcr__list_decoder_free(d);
}

Test(list_decoder, callback_error_stops_the_list)
{
    struct collected c = {.stop_after = 2};
    kcr__list_decoder *d = kcr__list_decoder_new(0, collect_item, &c);
    cr_assert_eq(kcr__list_decoder_feed(d, list_body, strlen(list_body)), KCR_ERR_CANCELED);
    cr_assert_eq(c.n, 2);
    cr_assert_eq(kcr__list_decoder_finish(d, NULL), KCR_ERR_CANCELED);
    kcr__list_decoder_free(d);
}

static kcr_err decode_list(const char *body, size_t max)
{
    struct collected c = {0};
    kcr__list_decoder *d = kcr__list_decoder_new(max, collect_item, &c);
    kcr_err err = kcr__list_decoder_feed(d, body, strlen(body));
    if (err == KCR_OK)
        err = kcr__list_decoder_finish(d, NULL);
    kcr__list_decoder_free(d);
    return err;
}

Test(list_decoder, bad_input_gives_clear_errors)
{
    cr_assert_eq(decode_list("<html><body>502 Bad Gateway</body></html>", 0), KCR_ERR_PARSE);
    cr_assert_str_not_empty(kcr_last_error());
    cr_assert_eq(decode_list("[1,2]", 0), KCR_ERR_PARSE);
    cr_assert_eq(decode_list("{\"items\":[1]}", 0), KCR_ERR_PARSE);
    cr_assert(strstr(kcr_last_error(), "not an object") != NULL, "%s", kcr_last_error());
    cr_assert_eq(decode_list("{\"items\":[{\"metadata\":{}}]}", 0), KCR_ERR_PARSE);
    cr_assert_eq(decode_list("{\"items\":[{\"metadata\":{\"name\":\"a\"}}", 0), KCR_ERR_PARSE);
    cr_assert(strstr(kcr_last_error(), "ended early") != NULL, "%s", kcr_last_error());
    cr_assert_eq(decode_list("", 0), KCR_ERR_PARSE);
    cr_assert_eq(decode_list("{} {}", 0), KCR_ERR_PARSE);
}

Test(list_decoder, item_over_the_limit)
{
    char body[4096];
    char big[2048];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    snprintf(body, sizeof body, "{\"items\":[{\"metadata\":{\"name\":\"a\"},\"data\":\"%s\"}]}",
             big);
    cr_assert_eq(decode_list(body, 1024), KCR_ERR_TOO_LARGE);
    cr_assert(strstr(kcr_last_error(), "1024") != NULL, "%s", kcr_last_error());
    cr_assert_eq(decode_list(body, 8192), KCR_OK);
}

/* ---------------------------------- watch ---------------------------------- */

static const char watch_stream[] =
    "{\"type\":\"ADDED\",\"object\":{\"kind\":\"ConfigMap\",\"apiVersion\":\"v1\",\"metadata\":"
    "{\"name\":\"a\",\"namespace\":\"d\",\"resourceVersion\":\"100\"},\"data\":{\"x\":\"1\"}}}\n"
    "{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":\"a\",\"namespace\":\"d\","
    "\"resourceVersion\":\"101\"},\"data\":{\"x\":\"2\"}}}\n"
    "{\"object\":{\"metadata\":{\"name\":\"b\",\"resourceVersion\":\"102\"}},\"type\":\"DELETED\"}\n"
    "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"ConfigMap\",\"apiVersion\":\"v1\",\"metadata\":"
    "{\"resourceVersion\":\"103\",\"annotations\":{\"k8s.io/initial-events-end\":\"true\"}}}}\n"
    "{\"object\":{\"metadata\":{\"resourceVersion\":\"104\"}},\"type\":\"BOOKMARK\"}\r\n";

struct events {
    int n;
    kcr_watch_event_type types[16];
    char names[16][16];
    char rvs[16][16];
    bool end_marker[16];
    int error_code;
    char error_reason[32];
};

static kcr_err collect_event(const kcr_watch_event *ev, void *ud)
{
    struct events *e = ud;
    if (e->n < 16) {
        e->types[e->n] = ev->type;
        snprintf(e->names[e->n], sizeof e->names[0], "%s",
                 ev->object ? kcr_object_name(ev->object) : "");
        snprintf(e->rvs[e->n], sizeof e->rvs[0], "%s", ev->resource_version);
        e->end_marker[e->n] = ev->initial_events_end;
    }
    if (ev->type == KCR_WATCH_ERROR) {
        e->error_code = ev->status->code;
        snprintf(e->error_reason, sizeof e->error_reason, "%s", ev->status->reason);
    }
    e->n++;
    return KCR_OK;
}

static void check_stream(const struct events *e)
{
    cr_assert_eq(e->n, 5);
    cr_assert_eq(e->types[0], KCR_WATCH_ADDED);
    cr_assert_str_eq(e->names[0], "a");
    cr_assert_str_eq(e->rvs[0], "100");
    cr_assert_eq(e->types[1], KCR_WATCH_MODIFIED);
    cr_assert_str_eq(e->rvs[1], "101");
    cr_assert_eq(e->types[2], KCR_WATCH_DELETED, "type after object works");
    cr_assert_str_eq(e->names[2], "b");
    cr_assert_eq(e->types[3], KCR_WATCH_BOOKMARK);
    cr_assert_str_eq(e->rvs[3], "103");
    cr_assert(e->end_marker[3]);
    cr_assert_eq(e->types[4], KCR_WATCH_BOOKMARK);
    cr_assert_str_eq(e->rvs[4], "104");
    cr_assert_not(e->end_marker[4]);
}

Test(watch_decoder, every_split_point)
{
    size_t len = strlen(watch_stream);
    for (size_t split = 0; split <= len; split++) {
        struct events e = {0};
        kcr__watch_decoder *d = kcr__watch_decoder_new(0, collect_event, &e);
        cr_assert_eq(kcr__watch_decoder_feed(d, watch_stream, split), KCR_OK, "split %zu: %s",
                     split, kcr_last_error());
        cr_assert_eq(kcr__watch_decoder_feed(d, watch_stream + split, len - split), KCR_OK,
                     "split %zu: %s", split, kcr_last_error());
        cr_assert_eq(kcr__watch_decoder_finish(d), KCR_OK, "split %zu", split);
        check_stream(&e);
        kcr__watch_decoder_free(d);
    }
}

Test(watch_decoder, one_byte_at_a_time_and_three_way_splits)
{
    size_t len = strlen(watch_stream);
    struct events e = {0};
    kcr__watch_decoder *d = kcr__watch_decoder_new(0, collect_event, &e);
    for (size_t i = 0; i < len; i++)
        cr_assert_eq(kcr__watch_decoder_feed(d, watch_stream + i, 1), KCR_OK);
    cr_assert_eq(kcr__watch_decoder_finish(d), KCR_OK);
    check_stream(&e);
    cr_assert_eq(kcr__watch_decoder_events(d), 5);
    kcr__watch_decoder_free(d);
    for (size_t a = 0; a <= len; a += 7)
        for (size_t b = a; b <= len; b += 13) {
            struct events e2 = {0};
            d = kcr__watch_decoder_new(0, collect_event, &e2);
            cr_assert_eq(kcr__watch_decoder_feed(d, watch_stream, a), KCR_OK);
            cr_assert_eq(kcr__watch_decoder_feed(d, watch_stream + a, b - a), KCR_OK);
            cr_assert_eq(kcr__watch_decoder_feed(d, watch_stream + b, len - b), KCR_OK);
            cr_assert_eq(kcr__watch_decoder_finish(d), KCR_OK);
            check_stream(&e2);
            kcr__watch_decoder_free(d);
        }
}

Test(watch_decoder, error_event_decodes_the_status_and_stops)
{
    const char *s =
        "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"5\"}}}\n"
        "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},"
        "\"status\":\"Failure\",\"message\":\"too old resource version: 5 (900)\",\"reason\":"
        "\"Expired\",\"code\":410}}\n"
        "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"never\"}}}\n";
    size_t len = strlen(s);
    for (size_t split = 0; split <= len; split++) {
        struct events e = {0};
        kcr__watch_decoder *d = kcr__watch_decoder_new(0, collect_event, &e);
        kcr_err err = kcr__watch_decoder_feed(d, s, split);
        if (err == KCR_OK)
            err = kcr__watch_decoder_feed(d, s + split, len - split);
        cr_assert_eq(err, KCR_ERR_GONE, "split %zu", split);
        cr_assert_eq(e.n, 2);
        cr_assert_eq(e.types[1], KCR_WATCH_ERROR);
        cr_assert_eq(e.error_code, 410);
        cr_assert_str_eq(e.error_reason, "Expired");
        const kcr_status *st = kcr__watch_decoder_status(d);
        cr_assert_not_null(st);
        cr_assert_str_eq(st->message, "too old resource version: 5 (900)");
        cr_assert(strstr(kcr_last_error(), "410 Expired") != NULL, "%s", kcr_last_error());
        kcr__watch_decoder_free(d);
    }
}

Test(watch_decoder, too_large_resource_version_cause)
{
    const char *s = "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"status\":\"Failure\","
                    "\"message\":\"Timeout: Too large resource version\",\"reason\":\"Timeout\","
                    "\"details\":{\"causes\":[{\"reason\":\"ResourceVersionTooLarge\",\"message\":"
                    "\"Too large resource version\"}],\"retryAfterSeconds\":1},\"code\":504}}";
    struct events e = {0};
    kcr__watch_decoder *d = kcr__watch_decoder_new(0, collect_event, &e);
    cr_assert_eq(kcr__watch_decoder_feed(d, s, strlen(s)), KCR_ERR_API);
    const kcr_status *st = kcr__watch_decoder_status(d);
    cr_assert_eq(st->code, 504);
    cr_assert_eq(st->details.n_causes, 1);
    cr_assert_str_eq(st->details.causes[0].type, "ResourceVersionTooLarge");
    cr_assert_eq(st->details.retry_after_seconds, 1);
    kcr__watch_decoder_free(d);
}

static kcr_err decode_watch(const char *s, size_t max)
{
    struct events e = {0};
    kcr__watch_decoder *d = kcr__watch_decoder_new(max, collect_event, &e);
    kcr_err err = kcr__watch_decoder_feed(d, s, strlen(s));
    if (err == KCR_OK)
        err = kcr__watch_decoder_finish(d);
    kcr__watch_decoder_free(d);
    return err;
}

Test(watch_decoder, bad_and_truncated_streams)
{
    cr_assert_eq(decode_watch("", 0), KCR_OK, "an empty stream is a clean end");
    cr_assert_eq(decode_watch("{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"na", 0),
                 KCR_ERR_TRANSPORT);
    cr_assert(strstr(kcr_last_error(), "truncated") != NULL, "%s", kcr_last_error());
    cr_assert_eq(decode_watch("{\"type\":\"ADDED\"}", 0), KCR_ERR_PARSE);
    cr_assert_eq(decode_watch("{\"object\":{\"metadata\":{\"name\":\"x\"}}}", 0), KCR_ERR_PARSE);
    cr_assert_eq(decode_watch("{\"type\":\"WHATEVER\",\"object\":{}}", 0), KCR_ERR_PARSE);
    cr_assert_eq(decode_watch("{\"type\":7,\"object\":{}}", 0), KCR_ERR_PARSE);
    cr_assert_eq(decode_watch("[1]", 0), KCR_ERR_PARSE);
    cr_assert_eq(decode_watch("<html>", 0), KCR_ERR_PARSE);
    cr_assert_eq(decode_watch("{\"type\":\"ADDED\",\"object\":{\"metadata\":{}}}", 0),
                 KCR_ERR_PARSE, "an object without a name");
}

/* A huge line never gets buffered whole: the decoder stops at the limit. */
Test(watch_decoder, one_gigabyte_line_is_too_large, .timeout = 120)
{
    struct events e = {0};
    kcr__watch_decoder *d = kcr__watch_decoder_new(0, collect_event, &e);
    const char *head = "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"x\"},\"data\":\"";
    cr_assert_eq(kcr__watch_decoder_feed(d, head, strlen(head)), KCR_OK);
    size_t chunk = 1 << 20;
    char *buf = malloc(chunk);
    memset(buf, 'y', chunk);
    size_t fed = 0;
    kcr_err err = KCR_OK;
    while (err == KCR_OK && fed < ((size_t)1 << 30)) {
        err = kcr__watch_decoder_feed(d, buf, chunk);
        fed += chunk;
    }
    cr_assert_eq(err, KCR_ERR_TOO_LARGE, "%s", kcr_last_error());
    cr_assert_leq(fed, KCR__DEFAULT_MAX_ITEM_BYTES + 2 * chunk,
                  "stopped after %zu bytes, not at the 64 MiB limit", fed);
    cr_assert_eq(e.n, 0);
    free(buf);
    kcr__watch_decoder_free(d);
}

Test(watch_decoder, event_over_a_small_limit)
{
    char s[8192];
    char big[4096];
    memset(big, 'z', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    snprintf(s, sizeof s, "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"x\"},\"d\":[\"%s\"]}}",
             big);
    cr_assert_eq(decode_watch(s, 1000), KCR_ERR_TOO_LARGE);
    cr_assert_eq(decode_watch(s, 100000), KCR_OK);
}

struct big_item {
    int n;
    size_t len;
};

static kcr_err measure_item(kcr_object *obj, void *ud)
{
    struct big_item *b = ud;
    b->n++;
    size_t len = 0;
    const char *s = kcr_value_string(kcr_object_get(obj, "data.big"), &len);
    b->len = s ? len : 0;
    return KCR_OK;
}

/* A long (legal) token crosses the stash path in small chunks, intact. */
Test(list_decoder, long_token_in_small_chunks)
{
    size_t big = 3 << 20;
    /* typed as the apiserver sends it, so items are delivered as they end */
    const char *head = "{\"kind\":\"ConfigMapList\",\"apiVersion\":\"v1\",\"items\":[{\"metadata\":"
                       "{\"name\":\"a\"},\"data\":{\"big\":\"";
    const char *tail = "\"}},{\"metadata\":{\"name\":\"b\"}}]}";
    size_t len = strlen(head) + big + strlen(tail);
    char *body = malloc(len);
    memcpy(body, head, strlen(head));
    memset(body + strlen(head), 'q', big);
    memcpy(body + strlen(head) + big, tail, strlen(tail));
    struct big_item b = {0};
    kcr__list_decoder *d = kcr__list_decoder_new(0, measure_item, &b);
    for (size_t off = 0; off < len; off += 4096)
        cr_assert_eq(kcr__list_decoder_feed(d, body + off, len - off < 4096 ? len - off : 4096),
                     KCR_OK);
    cr_assert_eq(kcr__list_decoder_finish(d, NULL), KCR_OK);
    cr_assert_eq(b.n, 2);
    kcr__list_decoder_free(d);
    /* first item's string was measured before the second item replaced b.len */
    b = (struct big_item){0};
    d = kcr__list_decoder_new(0, measure_item, &b);
    size_t first_end = strlen(head) + big + 3;
    for (size_t off = 0; off < first_end; off += 4096)
        cr_assert_eq(kcr__list_decoder_feed(d, body + off,
                                            first_end - off < 4096 ? first_end - off : 4096),
                     KCR_OK);
    cr_assert_eq(b.n, 1, "the item is delivered once its end arrived");
    cr_assert_eq(b.len, big);
    kcr__list_decoder_free(d);
    free(body);
}

/* ------------------------- many small items, small limit ------------------------- */

/* 60 items/events of ~300 bytes under a 1 KiB limit (18 KiB in all), fed in
 * chunks smaller than, near and larger than the limit: the limit is per
 * item/event, so every one is decoded. */
enum { SMALL_N = 60, SMALL_MAX = 1024 };

static size_t small_body(char *buf, size_t cap, bool watch)
{
    size_t at = 0;
    if (!watch)
        at += (size_t)snprintf(buf + at, cap - at,
                               "{\"kind\":\"ConfigMapList\",\"apiVersion\":\"v1\",\"items\":[");
    for (int i = 0; i < SMALL_N; i++) {
        char pad[201];
        memset(pad, 'a' + i % 26, sizeof pad - 1);
        pad[sizeof pad - 1] = '\0';
        const char *obj_fmt = "{\"metadata\":{\"name\":\"cm-%03d\",\"resourceVersion\":\"%d\"},"
                              "\"data\":{\"v\":\"%s\"}}";
        if (watch)
            at += (size_t)snprintf(buf + at, cap - at, "{\"type\":\"ADDED\",\"object\":");
        else if (i)
            buf[at++] = ',';
        at += (size_t)snprintf(buf + at, cap - at, obj_fmt, i, 100 + i, pad);
        if (watch)
            at += (size_t)snprintf(buf + at, cap - at, "}\n");
    }
    if (!watch)
        at += (size_t)snprintf(buf + at, cap - at, "]}");
    cr_assert_lt(at, cap);
    return at;
}

static kcr_err count_items(kcr_object *obj, void *ud)
{
    (void)obj;
    (*(int *)ud)++;
    return KCR_OK;
}

static kcr_err count_events(const kcr_watch_event *ev, void *ud)
{
    (void)ev;
    (*(int *)ud)++;
    return KCR_OK;
}

static const size_t small_chunks[] = {1, 7, 300, 700, 1023, 1024, 1025, 1500, 4096, 65536};

Test(list_decoder, many_small_items_over_the_limit_together)
{
    static char body[32768];
    size_t len = small_body(body, sizeof body, false);
    cr_assert_gt(len, 10 * SMALL_MAX);
    for (size_t c = 0; c < sizeof small_chunks / sizeof *small_chunks; c++) {
        int n = 0;
        kcr__list_decoder *d = kcr__list_decoder_new(SMALL_MAX, count_items, &n);
        for (size_t off = 0; off < len; off += small_chunks[c]) {
            size_t k = len - off < small_chunks[c] ? len - off : small_chunks[c];
            kcr_err err = kcr__list_decoder_feed(d, body + off, k);
            cr_assert_eq(err, KCR_OK, "chunk %zu at %zu: %s", small_chunks[c], off,
                         kcr_last_error());
        }
        cr_assert_eq(kcr__list_decoder_finish(d, NULL), KCR_OK);
        cr_assert_eq(n, SMALL_N, "chunk %zu", small_chunks[c]);
        kcr__list_decoder_free(d);
    }
}

Test(watch_decoder, many_small_events_over_the_limit_together)
{
    static char body[32768];
    size_t len = small_body(body, sizeof body, true);
    cr_assert_gt(len, 10 * SMALL_MAX);
    for (size_t c = 0; c < sizeof small_chunks / sizeof *small_chunks; c++) {
        int n = 0;
        kcr__watch_decoder *d = kcr__watch_decoder_new(SMALL_MAX, count_events, &n);
        for (size_t off = 0; off < len; off += small_chunks[c]) {
            size_t k = len - off < small_chunks[c] ? len - off : small_chunks[c];
            kcr_err err = kcr__watch_decoder_feed(d, body + off, k);
            cr_assert_eq(err, KCR_OK, "chunk %zu at %zu: %s", small_chunks[c], off,
                         kcr_last_error());
        }
        cr_assert_eq(kcr__watch_decoder_finish(d), KCR_OK);
        cr_assert_eq(n, SMALL_N, "chunk %zu", small_chunks[c]);
        kcr__watch_decoder_free(d);
    }
}

/* Bad UTF-8 anywhere in a body gets the object layer's validator's answer,
 * whether it is in an item, a key, the List's metadata or a watch event. */
Test(decoders, bad_utf8_is_a_clear_parse_error)
{
    cr_assert_eq(decode_list("{\"items\":[{\"metadata\":{\"name\":\"a\xff\"}}]}", 0), KCR_ERR_PARSE);
    cr_assert(strstr(kcr_last_error(), "list item 0") != NULL, "%s", kcr_last_error());
    cr_assert(strstr(kcr_last_error(), "not valid UTF-8") != NULL, "%s", kcr_last_error());
    cr_assert_eq(decode_list("{\"items\":[{\"metadata\":{\"name\":\"a\"},\"\xed\xa0\x80\":1}]}", 0),
                 KCR_ERR_PARSE);
    cr_assert(strstr(kcr_last_error(), "key is not valid UTF-8") != NULL, "%s", kcr_last_error());
    cr_assert_eq(decode_list("{\"metadata\":{\"continue\":\"\xc0\xaf\"},\"items\":[]}", 0),
                 KCR_ERR_PARSE);
    cr_assert(strstr(kcr_last_error(), "not valid UTF-8") != NULL, "%s", kcr_last_error());
    cr_assert_eq(decode_watch("{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"\xf8\"}}}",
                              0),
                 KCR_ERR_PARSE);
    cr_assert(strstr(kcr_last_error(), "watch event 0") != NULL, "%s", kcr_last_error());
    cr_assert(strstr(kcr_last_error(), "not valid UTF-8") != NULL, "%s", kcr_last_error());
    /* valid multi-byte text passes through unchanged */
    struct collected c = {0};
    kcr__list_decoder *d = kcr__list_decoder_new(0, collect_item, &c);
    const char *ok = "{\"items\":[{\"metadata\":{\"name\":\"caf\xc3\xa9-\xf0\x9f\x90\xb3\"}}]}";
    cr_assert_eq(kcr__list_decoder_feed(d, ok, strlen(ok)), KCR_OK, "%s", kcr_last_error());
    cr_assert_eq(kcr__list_decoder_finish(d, NULL), KCR_OK);
    cr_assert_str_eq(c.names[0], "caf\xc3\xa9-\xf0\x9f\x90\xb3");
    kcr__list_decoder_free(d);
}

/* The ERROR event's Status reaches the user when "type" follows "object". */
Test(watch_decoder, error_event_with_type_after_object)
{
    const char *s = "{\"object\":{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},"
                    "\"status\":\"Failure\",\"message\":\"etcd is sad\",\"reason\":"
                    "\"InternalError\",\"code\":500},\"type\":\"ERROR\"}";
    struct events e = {0};
    kcr__watch_decoder *d = kcr__watch_decoder_new(0, collect_event, &e);
    cr_assert_eq(kcr__watch_decoder_feed(d, s, strlen(s)), KCR_ERR_API);
    cr_assert_eq(e.n, 1);
    cr_assert_eq(e.error_code, 500);
    const kcr_status *st = kcr__watch_decoder_status(d);
    cr_assert_not_null(st);
    cr_assert_str_eq(st->message, "etcd is sad");
    cr_assert(strstr(kcr_last_error(), "etcd is sad") != NULL, "%s", kcr_last_error());
    kcr__watch_decoder_free(d);
}
