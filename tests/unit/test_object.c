/* Object model: parsing, accessors, values, paths and round trips. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kcr/kcr.h"
#include "object/object_builder.h"
#include "object/object_internal.h"
#include "unit/object_fixtures.h"

Test(object, metadata_accessors)
{
    kcr_object *o = parse_str(POD_JSON);
    cr_assert_not_null(o, "%s", kcr_last_error());
    cr_assert_str_eq(kcr_object_api_version(o), "v1");
    cr_assert_str_eq(kcr_object_kind(o), "Pod");
    cr_assert_str_eq(kcr_object_namespace(o), "default");
    cr_assert_str_eq(kcr_object_name(o), "web-0");
    cr_assert_str_eq(kcr_object_uid(o), "1111-2222");
    cr_assert_str_eq(kcr_object_resource_version(o), "4711");
    cr_assert_eq(kcr_object_generation(o), 3);
    cr_assert(kcr_object_is_deleting(o));
    cr_assert_str_eq(kcr_object_deletion_timestamp(o), "2024-01-02T03:04:05Z");
    kcr_object_unref(o);
}

Test(object, absent_fields_are_empty_strings)
{
    kcr_object *o = parse_str("{\"metadata\":{\"name\":\"n\"}}");
    cr_assert_not_null(o);
    cr_assert_str_eq(kcr_object_namespace(o), "");
    cr_assert_str_eq(kcr_object_kind(o), "");
    cr_assert_str_eq(kcr_object_uid(o), "");
    cr_assert_eq(kcr_object_generation(o), 0);
    cr_assert_not(kcr_object_is_deleting(o));
    cr_assert_str_eq(kcr_object_deletion_timestamp(o), "");
    cr_assert_null(kcr_object_label(o, "app"));
    cr_assert_eq(kcr_value_get_type(kcr_object_labels(o)), KCR_VALUE_ABSENT);
    cr_assert_eq(kcr_object_owner_ref_count(o), 0);
    kcr_owner_ref ref;
    cr_assert_not(kcr_object_controller_ref(o, &ref));
    cr_assert_eq(kcr_object_finalizer_count(o), 0);
    cr_assert_null(kcr_object_finalizer(o, 0));
    kcr_object_unref(o);
}

Test(object, labels_and_annotations)
{
    kcr_object *o = parse_str(POD_JSON);
    cr_assert_str_eq(kcr_object_label(o, "app"), "web");
    cr_assert_str_eq(kcr_object_label(o, "app.kubernetes.io/name"), "frontend");
    cr_assert_null(kcr_object_label(o, "missing"));
    cr_assert_str_eq(kcr_object_annotation(o, "note"), "hello \"world\"");
    kcr_value labels = kcr_object_labels(o);
    cr_assert_eq(kcr_value_get_type(labels), KCR_VALUE_OBJECT);
    cr_assert_eq(kcr_value_len(labels), 2);
    const char *k;
    size_t kl;
    kcr_value v = kcr_value_entry(labels, 1, &k, &kl);
    cr_assert_str_eq(k, "app.kubernetes.io/name");
    cr_assert_eq(kl, strlen("app.kubernetes.io/name"));
    cr_assert_str_eq(kcr_value_string(v, NULL), "frontend");
    v = kcr_value_entry(labels, 2, &k, NULL);
    cr_assert_eq(kcr_value_get_type(v), KCR_VALUE_ABSENT);
    cr_assert_null(k);
    cr_assert_eq(kcr_value_len(kcr_object_annotations(o)), 1);
    kcr_object_unref(o);
}

Test(object, owner_references_and_finalizers)
{
    kcr_object *o = parse_str(POD_JSON);
    cr_assert_eq(kcr_object_owner_ref_count(o), 2);
    kcr_owner_ref r;
    cr_assert(kcr_object_owner_ref(o, 1, &r));
    cr_assert_str_eq(r.kind, "ConfigMap");
    cr_assert_str_eq(r.uid, "cm-1");
    cr_assert_not(r.controller);
    cr_assert_not(kcr_object_owner_ref(o, 2, &r));
    cr_assert(kcr_object_controller_ref(o, &r));
    cr_assert_str_eq(r.api_version, "apps/v1");
    cr_assert_str_eq(r.kind, "ReplicaSet");
    cr_assert_str_eq(r.name, "web-abc");
    cr_assert(r.controller);
    cr_assert(r.block_owner_deletion);
    cr_assert_eq(kcr_object_finalizer_count(o), 1);
    cr_assert_str_eq(kcr_object_finalizer(o, 0), "example.com/cleanup");
    cr_assert(kcr_object_has_finalizer(o, "example.com/cleanup"));
    cr_assert_not(kcr_object_has_finalizer(o, "other"));
    kcr_object_unref(o);
}

Test(object, typed_values)
{
    kcr_object *o = parse_str(POD_JSON);
    kcr_value v = kcr_object_get(o, "spec.replicas");
    cr_assert_eq(kcr_value_get_type(v), KCR_VALUE_INT);
    cr_assert_eq(kcr_value_int(v), 2);
    cr_assert_eq(kcr_value_float(v), 2.0);
    v = kcr_object_get(o, "spec.ratio");
    cr_assert_eq(kcr_value_get_type(v), KCR_VALUE_FLOAT);
    cr_assert_eq(kcr_value_float(v), 0.25);
    cr_assert_str_eq(kcr_value_string(v, NULL), "0.25");
    cr_assert_eq(kcr_value_int(kcr_object_get(o, "spec.big")), INT64_C(12345678901234));
    cr_assert_eq(kcr_value_int(kcr_object_get(o, "spec.neg")), -7);
    v = kcr_object_get(o, "spec.huge");
    cr_assert_eq(kcr_value_get_type(v), KCR_VALUE_FLOAT, "integers beyond int64 keep their text");
    cr_assert_str_eq(kcr_value_string(v, NULL), "123456789012345678901234567890");
    cr_assert_eq(kcr_value_get_type(kcr_object_get(o, "spec.on")), KCR_VALUE_BOOL);
    cr_assert(kcr_value_bool(kcr_object_get(o, "spec.on")));
    cr_assert_not(kcr_value_bool(kcr_object_get(o, "spec.off")));
    cr_assert_eq(kcr_value_get_type(kcr_object_get(o, "spec.nothing")), KCR_VALUE_NULL);
    v = kcr_object_get(o, "spec.empty");
    cr_assert_eq(kcr_value_get_type(v), KCR_VALUE_STRING);
    cr_assert_str_eq(kcr_value_string(v, NULL), "");
    cr_assert_eq(kcr_value_get_type(kcr_object_get(o, "spec.emptyMap")), KCR_VALUE_OBJECT);
    cr_assert_eq(kcr_value_len(kcr_object_get(o, "spec.emptyMap")), 0);
    cr_assert_eq(kcr_value_get_type(kcr_object_get(o, "spec.emptyList")), KCR_VALUE_ARRAY);
    cr_assert_eq(kcr_value_len(kcr_object_get(o, "spec.emptyList")), 0);
    cr_assert_eq(kcr_value_len(kcr_object_get(o, "metadata.name")), 5);
    cr_assert_null(kcr_value_string(kcr_object_get(o, "spec.replicas"), NULL));
    cr_assert_eq(kcr_value_int(kcr_object_get(o, "metadata.name")), 0);
    kcr_object_unref(o);
}

Test(object, paths)
{
    kcr_object *o = parse_str(POD_JSON);
    kcr_value v;
    cr_assert_eq(kcr_object_lookup(o, "status.conditions[0].type", &v), KCR_OK);
    cr_assert_str_eq(kcr_value_string(v, NULL), "Ready");
    cr_assert_str_eq(kcr_value_string(kcr_object_get(o, "status.conditions[1].type"), NULL),
                     "Scheduled");
    cr_assert_eq(kcr_value_int(kcr_object_get(o, "spec.containers[0].ports[0].containerPort")), 80);
    cr_assert_str_eq(
        kcr_value_string(kcr_object_get(o, "metadata.labels[\"app.kubernetes.io/name\"]"), NULL),
        "frontend");
    cr_assert_str_eq(kcr_value_string(kcr_object_get(o, "[\"metadata\"][\"name\"]"), NULL),
                     "web-0");
    cr_assert_eq(kcr_object_lookup(o, "", &v), KCR_OK);
    cr_assert_eq(kcr_value_get_type(v), KCR_VALUE_OBJECT);
    cr_assert_eq(kcr_object_lookup(o, "status.conditions[2].type", &v), KCR_ERR_NOT_FOUND);
    cr_assert_eq(kcr_value_get_type(v), KCR_VALUE_ABSENT);
    cr_assert_eq(kcr_object_lookup(o, "spec.missing.deeper", &v), KCR_ERR_NOT_FOUND);
    cr_assert_eq(kcr_object_lookup(o, "spec.replicas.x", &v), KCR_ERR_NOT_FOUND);
    const char *bad[] = {"spec..replicas", "spec.", ".spec", "spec[", "spec[x]", "spec[0",
                         "a[\"b\"", "a[\"b\\q\"]", "a.[0]", "a]"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_assert_eq(kcr_object_lookup(o, bad[i], &v), KCR_ERR_INVALID, "path %s", bad[i]);
        cr_assert_str_not_empty(kcr_last_error());
    }
    kcr_value spec = kcr_object_get(o, "spec");
    cr_assert_eq(kcr_value_int(kcr_value_get(spec, "containers[0].ports[0].containerPort")), 80);
    cr_assert_eq(kcr_value_int(kcr_value_member(spec, "replicas")), 2);
    cr_assert_eq(kcr_value_get_type(kcr_value_at(spec, 0)), KCR_VALUE_ABSENT);
    kcr_object_unref(o);
}

Test(object, escaped_key_with_quote_and_backslash)
{
    kcr_object *o = parse_str("{\"metadata\":{\"name\":\"n\"},\"m\":{\"a\\\"b\\\\c\":1}}");
    cr_assert_not_null(o);
    cr_assert_eq(kcr_value_int(kcr_object_get(o, "m[\"a\\\"b\\\\c\"]")), 1);
    kcr_object_unref(o);
}

static char *to_json(const kcr_object *o)
{
    char *s = NULL;
    size_t len = 0;
    cr_assert_eq(kcr_object_to_json(o, &s, &len), KCR_OK, "%s", kcr_last_error());
    cr_assert_eq(strlen(s), len);
    return s;
}

Test(object, round_trip_is_stable)
{
    kcr_object *o = parse_str(POD_JSON);
    char *first = to_json(o);
    cr_assert_str_eq(first, POD_JSON, "compact input serializes back byte for byte");
    kcr_object *o2 = parse_str(first);
    cr_assert_not_null(o2);
    char *second = to_json(o2);
    cr_assert_str_eq(first, second);
    cr_assert(kcr_value_equal(kcr_object_root(o), kcr_object_root(o2)));
    free(first);
    free(second);
    kcr_object_unref(o);
    kcr_object_unref(o2);
}

Test(object, round_trip_normalizes_whitespace_and_escapes)
{
    const char *in = "{ \"metadata\" : { \"name\" : \"a\\u00e9\\/b\\u0000c\\n\" } ,"
                     " \"x\" : [ 1 , -0 , 1.50 , 1e3 ] }";
    kcr_object *o = parse_str(in);
    cr_assert_not_null(o, "%s", kcr_last_error());
    size_t len;
    const char *name = kcr_value_string(kcr_object_get(o, "metadata.name"), &len);
    cr_assert_eq(len, 8, "escapes decoded, NUL kept");
    cr_assert_eq(memcmp(name, "a\xc3\xa9/b\0c\n", 8), 0);
    char *first = to_json(o);
    kcr_object *o2 = parse_str(first);
    char *second = to_json(o2);
    cr_assert_str_eq(first, second);
    cr_assert_str_eq(second, "{\"metadata\":{\"name\":\"a\xc3\xa9/b\\u0000c\\n\"},"
                             "\"x\":[1,-0,1.50,1e3]}");
    free(first);
    free(second);
    kcr_object_unref(o);
    kcr_object_unref(o2);
}

Test(object, refcount_and_memory_size)
{
    kcr_object *o = parse_str(POD_JSON);
    cr_assert_eq(kcr_object_ref(o), o);
    cr_assert_null(kcr_object_ref(NULL));
    kcr_object_unref(o);
    cr_assert_str_eq(kcr_object_name(o), "web-0");
    cr_assert_lt(kcr_object_memory_size(o), strlen(POD_JSON) * 3 / 2);
    kcr_object_unref(o);
    kcr_object_unref(NULL);
}

Test(object, compact_layout_dedups_strings_and_keys)
{
    /* 50 entries sharing keys and values cost far less than their JSON. */
    char json[8192];
    size_t n = (size_t)snprintf(json, sizeof json, "{\"metadata\":{\"name\":\"x\"},\"items\":[");
    for (int i = 0; i < 50; i++)
        n += (size_t)snprintf(json + n, sizeof json - n,
                              "%s{\"someLongKeyName\":\"a-fairly-long-repeated-value\",\"i\":%d}",
                              i ? "," : "", i);
    snprintf(json + n, sizeof json - n, "]}");
    kcr_object *o = parse_str(json);
    cr_assert_not_null(o);
    cr_assert_lt(kcr_object_memory_size(o), strlen(json) / 2);
    cr_assert_eq(kcr_value_int(kcr_object_get(o, "items[49].i")), 49);
    kcr_object_unref(o);
}

Test(object, parse_any_accepts_nameless_objects)
{
    const char *bm = "{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":\"9\"}}";
    kcr_object *o = NULL;
    cr_assert_eq(kcr_object_parse(bm, strlen(bm), &o), KCR_ERR_PARSE);
    cr_assert_null(o);
    cr_assert_eq(kcr_object_parse_any(bm, strlen(bm), &o), KCR_OK);
    cr_assert_str_eq(kcr_object_resource_version(o), "9");
    cr_assert_str_eq(kcr_object_name(o), "");
    kcr_object_unref(o);
}

Test(object, from_value_reads_like_a_parse_of_the_value)
{
    kcr_object *doc = parse_str("{\"metadata\":{\"name\":\"review\"},\"request\":{\"object\":"
                                "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\","
                                "\"namespace\":\"ns\",\"labels\":{\"a\":\"b\"}},\"spec\":{\"n\":[1,2]}},"
                                "\"empty\":{},\"list\":[1]}}");
    kcr_object *o = NULL;
    cr_assert_eq(kcr_object_from_value(kcr_object_get(doc, "request.object"), &o), KCR_OK);
    kcr_object_unref(doc); /* the copy stands alone */
    cr_assert_str_eq(kcr_object_kind(o), "Pod");
    cr_assert_str_eq(kcr_object_name(o), "p");
    cr_assert_str_eq(kcr_object_namespace(o), "ns");
    cr_assert_str_eq(kcr_object_label(o, "a"), "b");
    cr_assert_eq(kcr_value_int(kcr_object_get(o, "spec.n[1]")), 2);
    char *json;
    size_t len;
    cr_assert_eq(kcr_object_to_json(o, &json, &len), KCR_OK);
    cr_assert_str_eq(json, "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\","
                           "\"namespace\":\"ns\",\"labels\":{\"a\":\"b\"}},\"spec\":{\"n\":[1,2]}}");
    free(json);
    kcr_object *same = parse_str("{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":"
                                 "\"p\",\"namespace\":\"ns\",\"labels\":{\"a\":\"b\"}},\"spec\":{\"n\":[1,2]}}");
    char *patch;
    cr_assert_eq(kcr_object_json_patch_diff(same, o, &patch, &len), KCR_OK);
    cr_assert_str_eq(patch, "[]", "the copy diffs as equal to a parse of the same JSON");
    free(patch);
    kcr_object_unref(same);
    kcr_object_unref(o);
    doc = parse_str("{\"metadata\":{\"name\":\"n\"},\"empty\":{},\"list\":[1]}");
    cr_assert_eq(kcr_object_from_value(kcr_object_get(doc, "empty"), &o), KCR_OK);
    cr_assert_eq(kcr_value_len(kcr_object_root(o)), 0);
    cr_assert_str_eq(kcr_object_name(o), "");
    kcr_object_unref(o);
    cr_assert_eq(kcr_object_from_value(kcr_object_get(doc, "list"), &o), KCR_ERR_INVALID);
    cr_assert_null(o);
    cr_assert_eq(kcr_object_from_value(kcr_object_get(doc, "missing"), &o), KCR_ERR_INVALID);
    kcr_object_unref(doc);
}

Test(object, value_equality)
{
    kcr_object *a = parse_str("{\"metadata\":{\"name\":\"n\"},\"x\":{\"a\":1,\"b\":[true,null]}}");
    kcr_object *b = parse_str("{\"x\":{\"b\":[true,null],\"a\":1},\"metadata\":{\"name\":\"n\"}}");
    kcr_object *c = parse_str("{\"metadata\":{\"name\":\"n\"},\"x\":{\"a\":1,\"b\":[true,false]}}");
    cr_assert(kcr_value_equal(kcr_object_root(a), kcr_object_root(b)), "key order ignored");
    cr_assert_not(kcr_value_equal(kcr_object_root(a), kcr_object_root(c)));
    cr_assert_not(kcr_value_equal(kcr_object_get(a, "x.a"), kcr_object_get(a, "x.b")));
    kcr_object_unref(a);
    kcr_object_unref(b);
    kcr_object_unref(c);
}

Test(object, value_to_json)
{
    kcr_object *o = parse_str(POD_JSON);
    char *s;
    size_t len;
    cr_assert_eq(kcr_value_to_json(kcr_object_get(o, "status.conditions[0]"), &s, &len), KCR_OK);
    cr_assert_str_eq(s, "{\"type\":\"Ready\",\"status\":\"True\"}");
    free(s);
    cr_assert_eq(kcr_value_to_json(kcr_object_get(o, "nope"), &s, &len), KCR_ERR_NOT_FOUND);
    kcr_object_unref(o);
}

/* The streaming builder, fed by hand as the client's decoders do. */
Test(object, builder_streams_events_and_is_reusable)
{
    kcr__object_builder *b = kcr__object_builder_new();
    for (int round = 0; round < 2; round++) {
        cr_assert_eq(kcr__object_builder_start_map(b), KCR_OK);
        cr_assert_eq(kcr__object_builder_map_key(b, "metadata", 8), KCR_OK);
        cr_assert_eq(kcr__object_builder_start_map(b), KCR_OK);
        cr_assert_eq(kcr__object_builder_map_key(b, "name", 4), KCR_OK);
        cr_assert_eq(kcr__object_builder_string(b, round ? "two" : "one", 3), KCR_OK);
        cr_assert_eq(kcr__object_builder_end_map(b), KCR_OK);
        cr_assert_eq(kcr__object_builder_map_key(b, "n", 1), KCR_OK);
        cr_assert_eq(kcr__object_builder_start_array(b), KCR_OK);
        cr_assert_eq(kcr__object_builder_number(b, "42", 2), KCR_OK);
        cr_assert_eq(kcr__object_builder_bool(b, true), KCR_OK);
        cr_assert_eq(kcr__object_builder_null(b), KCR_OK);
        cr_assert_eq(kcr__object_builder_end_array(b), KCR_OK);
        cr_assert_not(kcr__object_builder_done(b));
        cr_assert_eq(kcr__object_builder_end_map(b), KCR_OK);
        cr_assert(kcr__object_builder_done(b));
        kcr_object *o;
        cr_assert_eq(kcr__object_builder_finish(b, &o), KCR_OK);
        cr_assert_str_eq(kcr_object_name(o), round ? "two" : "one");
        cr_assert_eq(kcr_value_int(kcr_object_get(o, "n[0]")), 42);
        kcr_object_unref(o);
    }
    /* Out-of-place events are errors; reset recovers. */
    cr_assert_eq(kcr__object_builder_string(b, "x", 1), KCR_ERR_PARSE);
    kcr__object_builder_reset(b);
    cr_assert_eq(kcr__object_builder_start_map(b), KCR_OK);
    cr_assert_eq(kcr__object_builder_string(b, "x", 1), KCR_ERR_PARSE, "value without key");
    kcr__object_builder_reset(b);
    cr_assert_eq(kcr__object_builder_start_map(b), KCR_OK);
    cr_assert_eq(kcr__object_builder_end_array(b), KCR_ERR_PARSE);
    kcr__object_builder_reset(b);
    kcr_object *o = NULL;
    cr_assert_eq(kcr__object_builder_start_map(b), KCR_OK);
    cr_assert_eq(kcr__object_builder_finish(b, &o), KCR_ERR_PARSE, "incomplete");
    cr_assert_null(o);
    cr_assert_eq(kcr__object_builder_start_map(b), KCR_OK);
    cr_assert_eq(kcr__object_builder_end_map(b), KCR_OK);
    cr_assert_eq(kcr__object_builder_finish(b, &o), KCR_ERR_PARSE, "no metadata.name");
    cr_assert_eq(kcr__object_builder_start_map(b), KCR_OK);
    cr_assert_eq(kcr__object_builder_end_map(b), KCR_OK);
    cr_assert_eq(kcr__object_builder_finish_any(b, &o), KCR_OK);
    kcr_object_unref(o);
    kcr__object_builder_free(b);
}

static void *reader(void *arg)
{
    kcr_object *o = arg;
    for (int i = 0; i < 2000; i++) {
        if (strcmp(kcr_object_label(o, "app"), "web") != 0)
            return (void *)1;
        kcr_object_ref(o);
        kcr_object_unref(o);
    }
    kcr_object_unref(o);
    return NULL;
}

Test(object, shared_across_threads_without_locks)
{
    kcr_object *o = parse_str(POD_JSON);
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, reader, kcr_object_ref(o));
    for (int i = 0; i < 4; i++) {
        void *r;
        pthread_join(t[i], &r);
        cr_assert_null(r);
    }
    kcr_object_unref(o);
}

static void *parser(void *arg)
{
    (void)arg;
    char json[128];
    for (int i = 0; i < 300; i++) {
        snprintf(json, sizeof json, "{\"metadata\":{\"name\":\"n\"},\"k%d\":%d}", i, i);
        kcr_object *o = parse_str(json);
        if (!o)
            return (void *)1;
        char key[16];
        snprintf(key, sizeof key, "k%d", i);
        if (kcr_value_int(kcr_value_member(kcr_object_root(o), key)) != i)
            return (void *)1;
        kcr_object_unref(o);
    }
    return NULL;
}

Test(object, concurrent_parsing_interns_keys_safely)
{
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, parser, NULL);
    for (int i = 0; i < 4; i++) {
        void *r;
        pthread_join(t[i], &r);
        cr_assert_null(r);
    }
    cr_assert_geq(kcr__intern_count(), 300);
}

Test(object, duplicate_keys_last_wins_like_go)
{
    char json[4096];
    size_t n = (size_t)snprintf(json, sizeof json,
                                "{\"kind\":\"A\",\"metadata\":{\"name\":\"x\"},\"kind\":\"B\","
                                "\"big\":{");
    for (int i = 0; i < 40; i++)
        n += (size_t)snprintf(json + n, sizeof json - n, "\"k%d\":%d,", i % 20, i);
    snprintf(json + n, sizeof json - n, "\"end\":1}}");
    kcr_object *o = parse_str(json);
    cr_assert_not_null(o);
    cr_assert_str_eq(kcr_object_kind(o), "B");
    cr_assert_eq(kcr_value_len(kcr_object_root(o)), 3);
    cr_assert_eq(kcr_value_len(kcr_object_get(o, "big")), 21);
    cr_assert_eq(kcr_value_int(kcr_object_get(o, "big.k3")), 23);
    char *s;
    cr_assert_eq(kcr_object_to_json(o, &s, NULL), KCR_OK);
    cr_assert(strncmp(s, "{\"kind\":\"B\",\"metadata\"", 22) == 0, "%s", s);
    free(s);
    kcr_object_unref(o);
}
