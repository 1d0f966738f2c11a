/* Decoders asked to drop metadata.managedFields build objects without it,
 * at every chunk split, and keep every other member, including members of
 * the same name elsewhere in the object. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "client/decode.h"
#include "kcr/kcr.h"

#define MANAGED                                                                                    \
    "\"managedFields\":[{\"manager\":\"kubectl\",\"operation\":\"Update\",\"fieldsV1\":"           \
    "{\"f:data\":{\"f:k\":{}}},\"time\":\"2026-12-03T10:00:00Z\"}]"

/* Item a: managedFields last in metadata, and a lookalike in data and in a
 * nested metadata (a pod template's) that must stay. Item b: managedFields
 * first, null. Item c: none. */
#define ITEM_A                                                                                     \
    "{\"metadata\":{\"name\":\"a\",\"namespace\":\"ns\",\"resourceVersion\":\"10\"," MANAGED "},"  \
    "\"data\":{\"managedFields\":\"kept\"},\"spec\":{\"template\":{\"metadata\":{" MANAGED "}}}}"
#define ITEM_B                                                                                     \
    "{\"metadata\":{\"managedFields\":null,\"name\":\"b\",\"resourceVersion\":\"11\"},\"data\":{}}"
#define ITEM_C "{\"metadata\":{\"name\":\"c\",\"resourceVersion\":\"12\"}}"

static const char list_body[] = "{\"kind\":\"ConfigMapList\",\"apiVersion\":\"v1\",\"metadata\":"
                                "{\"resourceVersion\":\"99\"},\"items\":[" ITEM_A "," ITEM_B
                                "," ITEM_C "]}";

static const char watch_body[] = "{\"type\":\"ADDED\",\"object\":" ITEM_A "}\n"
                                 "{\"object\":" ITEM_B ",\"type\":\"MODIFIED\"}\n";

typedef struct seen {
    int n;
    char *json[4];
} seen;

static void keep(seen *s, const kcr_object *obj)
{
    cr_assert_lt(s->n, 4);
    cr_assert_eq(kcr_object_to_json(obj, &s->json[s->n], NULL), KCR_OK, "%s", kcr_last_error());
    s->n++;
}

static kcr_err on_item(kcr_object *obj, void *ud)
{
    keep(ud, obj);
    return KCR_OK;
}

static kcr_err on_event(const kcr_watch_event *ev, void *ud)
{
    keep(ud, ev->object);
    return KCR_OK;
}

static void clear(seen *s)
{
    for (int i = 0; i < s->n; i++)
        free(s->json[i]);
    s->n = 0;
}

static size_t count(const char *hay, const char *needle)
{
    size_t n = 0;
    for (const char *p = hay; (p = strstr(p, needle)) != NULL; p++)
        n++;
    return n;
}

/* What item a and b look like once built without the top-level one. */
static void check_a(const char *json)
{
    cr_assert_not_null(strstr(json, "\"name\":\"a\""), "%s", json);
    cr_assert_not_null(strstr(json, "\"managedFields\":\"kept\""), "%s", json);
    cr_assert_eq(count(json, "\"manager\":\"kubectl\""), 1, "the template's copy stays: %s",
                 json);
    cr_assert_not_null(strstr(json, "\"metadata\":{\"name\":\"a\",\"namespace\":\"ns\","
                                    "\"resourceVersion\":\"10\"}"),
                       "%s", json);
}

static void check_b(const char *json)
{
    /* list items also get the list's apiVersion and kind */
    cr_assert_not_null(strstr(json, "{\"metadata\":{\"name\":\"b\",\"resourceVersion\":\"11\"},"
                                    "\"data\":{}"),
                       "%s", json);
    cr_assert_null(strstr(json, "managedFields"), "%s", json);
}

Test(decode_managed_fields, list_items_lose_only_the_top_level_member_at_every_split)
{
    size_t len = strlen(list_body);
    for (size_t split = 0; split <= len; split++) {
        seen s = {0};
        kcr__list_decoder *d = kcr__list_decoder_new(0, on_item, &s);
        cr_assert_not_null(d);
        kcr__list_decoder_drop_managed_fields(d);
        cr_assert_eq(kcr__list_decoder_feed(d, list_body, split), KCR_OK, "%s", kcr_last_error());
        cr_assert_eq(kcr__list_decoder_feed(d, list_body + split, len - split), KCR_OK, "%s",
                     kcr_last_error());
        kcr_list_meta meta = {0};
        cr_assert_eq(kcr__list_decoder_finish(d, &meta), KCR_OK, "%s", kcr_last_error());
        cr_assert_eq(s.n, 3);
        check_a(s.json[0]);
        check_b(s.json[1]);
        cr_assert_not_null(strstr(s.json[2], "\"name\":\"c\""));
        cr_assert_str_eq(meta.resource_version, "99");
        kcr_list_meta_clear(&meta);
        kcr__list_decoder_free(d);
        clear(&s);
    }
}

Test(decode_managed_fields, watch_objects_lose_only_the_top_level_member_at_every_split)
{
    size_t len = strlen(watch_body);
    for (size_t split = 0; split <= len; split++) {
        seen s = {0};
        kcr__watch_decoder *d = kcr__watch_decoder_new(0, on_event, &s);
        cr_assert_not_null(d);
        kcr__watch_decoder_drop_managed_fields(d);
        cr_assert_eq(kcr__watch_decoder_feed(d, watch_body, split), KCR_OK, "%s",
                     kcr_last_error());
        cr_assert_eq(kcr__watch_decoder_feed(d, watch_body + split, len - split), KCR_OK, "%s",
                     kcr_last_error());
        cr_assert_eq(kcr__watch_decoder_finish(d), KCR_OK, "%s", kcr_last_error());
        cr_assert_eq(s.n, 2);
        check_a(s.json[0]);
        check_b(s.json[1]);
        kcr__watch_decoder_free(d);
        clear(&s);
    }
}

Test(decode_managed_fields, kept_unless_asked)
{
    seen s = {0};
    kcr__list_decoder *d = kcr__list_decoder_new(0, on_item, &s);
    cr_assert_not_null(d);
    cr_assert_eq(kcr__list_decoder_feed(d, list_body, strlen(list_body)), KCR_OK);
    kcr_list_meta meta = {0};
    cr_assert_eq(kcr__list_decoder_finish(d, &meta), KCR_OK);
    cr_assert_eq(s.n, 3);
    cr_assert_eq(count(s.json[0], "\"manager\":\"kubectl\""), 2, "%s", s.json[0]);
    cr_assert_not_null(strstr(s.json[1], "\"managedFields\":null"), "%s", s.json[1]);
    kcr_list_meta_clear(&meta);
    kcr__list_decoder_free(d);
    clear(&s);
}

Test(decode_managed_fields, an_item_over_the_limit_still_fails_when_the_excess_is_dropped)
{
    /* the dropped member still counts against max_item_bytes: a server
     * sending huge managedFields cannot slip past the limit */
    seen s = {0};
    kcr__list_decoder *d = kcr__list_decoder_new(64, on_item, &s);
    cr_assert_not_null(d);
    kcr__list_decoder_drop_managed_fields(d);
    kcr_err err = kcr__list_decoder_feed(d, list_body, strlen(list_body));
    if (err == KCR_OK) {
        kcr_list_meta meta = {0};
        err = kcr__list_decoder_finish(d, &meta);
        kcr_list_meta_clear(&meta);
    }
    cr_assert_eq(err, KCR_ERR_TOO_LARGE, "%s", kcr_last_error());
    kcr__list_decoder_free(d);
    clear(&s);
}
