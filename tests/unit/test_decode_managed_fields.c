/* Decoders asked to drop metadata.managedFields build objects without it,
 * at every chunk split, and keep every other member, including members of
 * the same name elsewhere in the object; what they drop is parsed (invalid
 * JSON in it is an error) but never built, and they give what building the
 * object and stripping it gave. */
#include <criterion/criterion.h>
#include <stdio.h>
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

/* Decodes one watch event with managedFields dropped (or not), whole and one
 * byte at a time; the object's JSON (the same both ways) into s. */
static kcr_err decode_event(const char *body, bool drop, seen *s)
{
    kcr_err first = KCR_OK;
    for (int pass = 0; pass < 2; pass++) {
        seen t = {0};
        kcr__watch_decoder *d = kcr__watch_decoder_new(0, on_event, &t);
        cr_assert_not_null(d);
        if (drop)
            kcr__watch_decoder_drop_managed_fields(d);
        size_t len = strlen(body), step = pass ? 1 : len;
        kcr_err err = KCR_OK;
        for (size_t off = 0; err == KCR_OK && off < len; off += step)
            err = kcr__watch_decoder_feed(d, body + off, step);
        if (err == KCR_OK)
            err = kcr__watch_decoder_finish(d);
        kcr__watch_decoder_free(d);
        if (pass == 0) {
            first = err;
            *s = t;
            continue;
        }
        cr_assert_eq(err, first);
        cr_assert_eq(t.n, s->n);
        for (int i = 0; i < t.n; i++)
            cr_assert_str_eq(t.json[i], s->json[i]);
        clear(&t);
    }
    return first;
}

Test(decode_managed_fields, malformed_managed_fields_are_never_built)
{
    /* shapes the apiserver never sends, bytes the builder would refuse
     * (invalid UTF-8, a key repeated, nesting past the builder's limit):
     * dropped, they cost nothing but the parse */
    static char deep[1200];
    size_t n = 0;
    for (int i = 0; i < 300; i++)
        deep[n++] = '[';
    for (int i = 0; i < 300; i++)
        deep[n++] = ']';
    deep[n] = '\0';
    const char *values[] = {"\"a string\"", "42", "{\"f:x\":{\"f:x\":{}}}",
                            "[{\"manager\":\"\xff\xfe\",\"manager\":1}]", deep};
    for (size_t v = 0; v < sizeof values / sizeof *values; v++) {
        char body[2048];
        snprintf(body, sizeof body,
                 "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"m\",\"managedFields\":"
                 "%s,\"resourceVersion\":\"5\"},\"data\":{\"k\":\"v\"}}}\n",
                 values[v]);
        seen s = {0};
        cr_assert_eq(decode_event(body, true, &s), KCR_OK, "%s: %s", values[v], kcr_last_error());
        cr_assert_eq(s.n, 1);
        cr_assert_str_eq(s.json[0], "{\"metadata\":{\"name\":\"m\",\"resourceVersion\":\"5\"},"
                                    "\"data\":{\"k\":\"v\"}}");
        clear(&s);
    }
    /* kept, the invalid UTF-8 and the nesting are errors, as before */
    for (size_t v = 3; v < 5; v++) {
        char body[2048];
        snprintf(body, sizeof body,
                 "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"m\",\"managedFields\":"
                 "%s,\"resourceVersion\":\"5\"}}}\n",
                 values[v]);
        seen s = {0};
        cr_assert_eq(decode_event(body, false, &s), KCR_ERR_PARSE, "%s", values[v]);
        clear(&s);
    }
    /* invalid JSON inside the dropped member is still invalid JSON */
    seen s = {0};
    cr_assert_eq(decode_event("{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"m\","
                              "\"managedFields\":[{\"a\":tru}]}}}\n",
                              true, &s),
                 KCR_ERR_PARSE);
    clear(&s);
}

Test(decode_managed_fields, huge_managed_fields_decode_to_the_small_object)
{
    /* 4,000 entries, ~400 KB: parsed, never built */
    size_t cap = 4000 * 120 + 512, n = 0;
    char *body = malloc(cap);
    cr_assert_not_null(body);
    n += (size_t)snprintf(body + n, cap - n,
                          "{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":\"h\","
                          "\"managedFields\":[");
    for (int i = 0; i < 4000; i++)
        n += (size_t)snprintf(body + n, cap - n,
                              "%s{\"manager\":\"m%d\",\"operation\":\"Apply\",\"fieldsV1\":"
                              "{\"f:data\":{\"f:k%d\":{}}},\"time\":\"2026-12-04T10:00:00Z\"}",
                              i ? "," : "", i, i);
    n += (size_t)snprintf(body + n, cap - n, "],\"resourceVersion\":\"7\"}}}\n");
    cr_assert_lt(n, cap - 1);
    seen s = {0};
    kcr__watch_decoder *d = kcr__watch_decoder_new(0, on_event, &s);
    cr_assert_not_null(d);
    kcr__watch_decoder_drop_managed_fields(d);
    for (size_t off = 0; off < n; off += 1000)
        cr_assert_eq(kcr__watch_decoder_feed(d, body + off, n - off < 1000 ? n - off : 1000),
                     KCR_OK, "%s", kcr_last_error());
    cr_assert_eq(kcr__watch_decoder_finish(d), KCR_OK, "%s", kcr_last_error());
    cr_assert_eq(s.n, 1);
    cr_assert_str_eq(s.json[0], "{\"metadata\":{\"name\":\"h\",\"resourceVersion\":\"7\"}}");
    kcr__watch_decoder_free(d);
    clear(&s);
    free(body);
}

static kcr_err on_item_stripped(kcr_object *obj, void *ud)
{
    kcr_object *t = NULL;
    cr_assert_eq(kcr_object_strip_managed_fields(obj, &t, NULL), KCR_OK);
    keep(ud, t);
    kcr_object_unref(t);
    return KCR_OK;
}

Test(decode_managed_fields, dropping_gives_what_building_and_stripping_gave)
{
    /* the informer's path before the drop: build whole, then the transform */
    seen built = {0}, dropped = {0};
    kcr__list_decoder *d = kcr__list_decoder_new(0, on_item_stripped, &built);
    cr_assert_not_null(d);
    cr_assert_eq(kcr__list_decoder_feed(d, list_body, strlen(list_body)), KCR_OK);
    cr_assert_eq(kcr__list_decoder_finish(d, NULL), KCR_OK);
    kcr__list_decoder_free(d);
    d = kcr__list_decoder_new(0, on_item, &dropped);
    cr_assert_not_null(d);
    kcr__list_decoder_drop_managed_fields(d);
    cr_assert_eq(kcr__list_decoder_feed(d, list_body, strlen(list_body)), KCR_OK);
    cr_assert_eq(kcr__list_decoder_finish(d, NULL), KCR_OK);
    kcr__list_decoder_free(d);
    cr_assert_eq(built.n, 3);
    cr_assert_eq(dropped.n, 3);
    for (int i = 0; i < 3; i++)
        cr_assert_str_eq(dropped.json[i], built.json[i]);
    clear(&built);
    clear(&dropped);
}
