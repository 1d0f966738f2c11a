/* The client's server-side shard selector (kcr_request.shard_selector and
 * .shard_info) against a loopback HTTP server playing an apiserver with the
 * ShardedListAndWatch gate on (a list answers with metadata.shardInfo), off
 * (the parameter ignored, no shardInfo) and given a malformed selector (500
 * with the parser's words, as the apiserver answers). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/decode.h"
#include "helpers/http_loopback.h"
#include "kcr/kcr.h"

#define SEL_TEXT "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')"
#define SEL_QUERY                                                                                  \
    "shardSelector=shardRange%28object.metadata.uid%2C%20%270x0000000000000000%27%2C%20"           \
    "%270x8000000000000000%27%29"

static const char *const LIST_HEAD = "{\"kind\":\"ConfigMapList\",\"apiVersion\":\"v1\","
                                     "\"metadata\":{\"resourceVersion\":\"12\"";
static const char *const LIST_ITEMS =
    ",\"items\":[{\"metadata\":{\"name\":\"a\",\"namespace\":\"team\",\"uid\":\"u1\"}}]}";

/* Gate on: shardInfo echoes the selector; a bad one is a 500. */
static void gate_on(int fd, const char *req)
{
    char body[1024];
    if (strstr(req, "shardSelector=bad"))
        status_reply(fd, 500, "InternalError",
                     "invalid shard selector: unsupported function \\\"bad\\\"");
    else if (strstr(req, "watch=true"))
        watch_stream(fd, req);
    else if (strstr(req, SEL_QUERY)) {
        snprintf(body, sizeof body, "%s,\"shardInfo\":{\"selector\":\"%s\"},\"continue\":\"\"}%s",
                 LIST_HEAD, SEL_TEXT, LIST_ITEMS);
        json_reply(fd, 200, body);
    } else {
        snprintf(body, sizeof body, "%s}%s", LIST_HEAD, LIST_ITEMS);
        json_reply(fd, 200, body);
    }
}

/* Gate off: the parameter is ignored. */
static void gate_off(int fd, const char *req)
{
    char body[1024];
    snprintf(body, sizeof body, "%s}%s", LIST_HEAD, LIST_ITEMS);
    json_reply(fd, 200, body);
}

static kcr_err count_item(kcr_object *o, void *ud)
{
    (*(int *)ud)++;
    return KCR_OK;
}

Test(shard_client, list_sends_selector_and_returns_shard_info, .fini = stop_server)
{
    start_server(gate_on, NULL);
    kcr_shard_info info = {0};
    kcr_list_meta meta = {0};
    int n = 0;
    cr_assert_eq(kcr_client_list(client,
                                 &(kcr_request){.resource = &CM,
                                                .ns = "team",
                                                .shard_selector = SEL_TEXT,
                                                .shard_info = &info},
                                 count_item, &n, &meta),
                 KCR_OK, "%s", kcr_last_error());
    HAS("GET /api/v1/namespaces/team/configmaps?" SEL_QUERY " HTTP/1.1");
    cr_expect_eq(n, 1);
    cr_expect_str_eq(meta.resource_version, "12", "the metadata around shardInfo still reads");
    cr_assert(info.present);
    cr_expect_str_eq(info.selector, SEL_TEXT);
    kcr_list_meta_clear(&meta);

    /* a list without a selector clears what the struct held */
    cr_assert_eq(kcr_client_list(client,
                                 &(kcr_request){.resource = &CM, .ns = "team", .shard_info = &info},
                                 NULL, NULL, NULL),
                 KCR_OK);
    cr_expect_not(info.present);
    cr_expect_null(info.selector);
    kcr_shard_info_clear(&info);
    kcr_shard_info_clear(NULL);
}

Test(shard_client, gate_off_answers_without_shard_info, .fini = stop_server)
{
    start_server(gate_off, NULL);
    kcr_shard_info info = {.present = true, .selector = strdup("stale")};
    cr_assert_eq(
        kcr_client_list(
            client,
            &(kcr_request){.resource = &CM, .shard_selector = SEL_TEXT, .shard_info = &info}, NULL,
            NULL, NULL),
        KCR_OK);
    HAS("?" SEL_QUERY " ");
    cr_expect_not(info.present, "no shardInfo in the answer: the server ignored the selector");
    cr_expect_null(info.selector);
}

Test(shard_client, watch_sends_selector, .fini = stop_server)
{
    start_server(gate_on, NULL);
    struct evs e = {0};
    cr_assert_eq(watch_with("plain", &(kcr_request){.shard_selector = SEL_TEXT}, &e, NULL), KCR_OK,
                 "%s", kcr_last_error());
    HAS("watch=true&labelSelector=plain&" SEL_QUERY);
    cr_expect_eq(e.n, 2);
    /* "" is no selector */
    cr_assert_eq(watch_with("plain", &(kcr_request){.shard_selector = ""}, &e, NULL), KCR_OK);
    char r[16384];
    request(r, sizeof r);
    cr_expect_null(strstr(r, "shardSelector"), "%s", r);
}

Test(shard_client, malformed_selector_keeps_the_servers_words, .fini = stop_server)
{
    start_server(gate_on, NULL);
    kcr_status st = {0};
    kcr_shard_info info = {0};
    kcr_err err = kcr_client_list(
        client,
        &(kcr_request){
            .resource = &CM, .shard_selector = "bad(", .shard_info = &info, .status = &st},
        NULL, NULL, NULL);
    cr_expect_neq(err, KCR_OK);
    cr_expect_eq(st.code, 500);
    cr_expect(strstr(st.message, "unsupported function") != NULL, "%s", st.message);
    cr_expect_not(info.present);
    kcr_status_clear(&st);
}

/* The decoder reads metadata.shardInfo at any chunking, skips members it
 * does not know (nested ones too), and a shardInfo without a selector is
 * still present. */
Test(shard_client, decoder_reads_shard_info_at_every_split)
{
    static const char body[] =
        "{\"kind\":\"ConfigMapList\",\"apiVersion\":\"v1\",\"metadata\":{\"shardInfo\":{\"future\":"
        "{\"selector\":\"not this\"},\"selector\":\"" SEL_TEXT "\",\"more\":[1,2]},"
        "\"resourceVersion\":\"3\"},\"items\":[{\"metadata\":{\"name\":\"a\"}}]}";
    size_t len = strlen(body);
    for (size_t split = 1; split < len; split++) {
        kcr__list_decoder *d = kcr__list_decoder_new(0, count_item, &(int){0});
        cr_assert_not_null(d);
        cr_assert_eq(kcr__list_decoder_feed(d, body, split), KCR_OK);
        cr_assert_eq(kcr__list_decoder_feed(d, body + split, len - split), KCR_OK);
        kcr_list_meta meta = {0};
        cr_assert_eq(kcr__list_decoder_finish(d, &meta), KCR_OK, "%s", kcr_last_error());
        kcr_shard_info info = {0};
        cr_assert_eq(kcr__list_decoder_shard_info(d, &info), KCR_OK);
        cr_assert(info.present);
        cr_assert_str_eq(info.selector, SEL_TEXT, "split %zu", split);
        cr_assert_str_eq(meta.resource_version, "3");
        kcr_shard_info_clear(&info);
        kcr_list_meta_clear(&meta);
        kcr__list_decoder_free(d);
    }

    static const char empty_info[] =
        "{\"kind\":\"ConfigMapList\",\"metadata\":{\"shardInfo\":{}},\"items\":[]}";
    kcr__list_decoder *d = kcr__list_decoder_new(0, NULL, NULL);
    cr_assert_eq(kcr__list_decoder_feed(d, empty_info, strlen(empty_info)), KCR_OK);
    cr_assert_eq(kcr__list_decoder_finish(d, NULL), KCR_OK);
    kcr_shard_info info = {0};
    cr_assert_eq(kcr__list_decoder_shard_info(d, &info), KCR_OK);
    cr_expect(info.present);
    cr_expect_str_eq(info.selector, "");
    kcr_shard_info_clear(&info);
    kcr__list_decoder_free(d);
}
