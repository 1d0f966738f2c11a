/* The JSON reader (object/json_reader.h): the events it reports, written out
 * as text, are the same however the input is split; escapes, numbers and
 * literals decode as JSON says; every kind of bad input is an error with an
 * offset. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "object/json_reader.h"

/* The events so far as text: one letter per event, strings and numbers with
 * their bytes in brackets (and '+' when reported ASCII). */
typedef struct trace {
    char s[8192];
    size_t len;
    int stop_after; /* stop at this event (1-based), 0 never */
    int n;
    kcr__jreader *r;
    bool skip_next_start; /* a key "y" was seen: skip the container it opens */
} trace;

/* When set (by the skip tests), the callback asks the reader to skip the
 * value of every key "x" and the contents of a container opened as the value
 * of a key "y" (kcr__jreader_skip_value). */
static bool skip_x_and_y;

static void add(trace *t, const char *s, size_t n)
{
    cr_assert_lt(t->len + n, sizeof t->s);
    memcpy(t->s + t->len, s, n);
    t->len += n;
    t->s[t->len] = '\0';
}

static bool on_event(void *ud, const kcr__jev *ev)
{
    trace *t = ud;
    static const char letters[] = "nbNSK{}[]";
    add(t, &letters[ev->type], 1);
    if (ev->type == KCR__JEV_BOOL)
        add(t, ev->b ? "t" : "f", 1);
    if (ev->type == KCR__JEV_NUMBER || ev->type == KCR__JEV_STRING || ev->type == KCR__JEV_KEY) {
        add(t, "<", 1);
        add(t, ev->s, ev->len);
        add(t, ev->type != KCR__JEV_NUMBER && ev->ascii ? ">+" : ">", ev->ascii ? 2 : 1);
    }
    if (skip_x_and_y && ev->type == KCR__JEV_KEY && ev->len == 1 && ev->s[0] == 'x')
        kcr__jreader_skip_value(t->r);
    if (skip_x_and_y && t->skip_next_start &&
        (ev->type == KCR__JEV_START_MAP || ev->type == KCR__JEV_START_ARRAY))
        kcr__jreader_skip_value(t->r);
    t->skip_next_start = ev->type == KCR__JEV_KEY && ev->len == 1 && ev->s[0] == 'y';
    return ++t->n != t->stop_after;
}

/* Reads json in pieces of `step` bytes (0: whole); the status of the last
 * call; the events into t. */
static kcr__jreader_status read_in(const char *json, size_t len, size_t step, bool multi, trace *t,
                                   size_t *err_at)
{
    kcr__jreader *r = kcr__jreader_new(multi, on_event, t);
    cr_assert_not_null(r);
    t->r = r;
    kcr__jreader_status st = KCR__JR_OK;
    if (!step)
        step = len ? len : 1;
    for (size_t off = 0; st == KCR__JR_OK && off < len; off += step)
        st = kcr__jreader_feed(r, json + off, len - off < step ? len - off : step);
    if (st == KCR__JR_OK)
        st = kcr__jreader_complete(r);
    if (st == KCR__JR_ERROR) {
        bool oom = true;
        const char *msg = kcr__jreader_error(r, err_at, &oom);
        cr_assert_not_null(msg);
        cr_assert(!oom);
    }
    kcr__jreader_free(r);
    return st;
}

/* The events of json, checked equal at every chunk size. */
static kcr__jreader_status read_all(const char *json, bool multi, trace *out, size_t *err_at)
{
    size_t len = strlen(json);
    trace whole = {0};
    size_t at_whole = 0;
    kcr__jreader_status st = read_in(json, len, 0, multi, &whole, &at_whole);
    for (size_t step = 1; step < len; step++) {
        trace t = {0};
        size_t at = 0;
        cr_assert_eq(read_in(json, len, step, multi, &t, &at), st, "%s at step %zu", json, step);
        cr_assert_str_eq(t.s, whole.s, "%s at step %zu", json, step);
        if (st == KCR__JR_ERROR)
            cr_assert_eq(at, at_whole, "%s at step %zu", json, step);
    }
    *out = whole;
    if (err_at)
        *err_at = at_whole;
    return st;
}

static void expect(const char *json, const char *events)
{
    trace t;
    cr_assert_eq(read_all(json, false, &t, NULL), KCR__JR_OK, "%s", json);
    cr_assert_str_eq(t.s, events, "%s", json);
}

static void expect_error(const char *json, size_t at)
{
    trace t;
    size_t got = 0;
    cr_assert_eq(read_all(json, false, &t, &got), KCR__JR_ERROR, "%s: %s", json, t.s);
    cr_assert_eq(got, at, "%s: error at %zu", json, got);
}

Test(json_reader, values_and_structure)
{
    expect("{}", "{}");
    expect(" [ ] ", "[]");
    expect("{\"a\":1,\"b\":[true,false,null,\"x\"],\"c\":{}}",
           "{K<a>+N<1>K<b>+[btbfnS<x>+]K<c>+{}}");
    expect("\"just a string\"", "S<just a string>+");
    expect("-0.5e+10", "N<-0.5e+10>");
    expect("[0,-1,2.25,1E5,3e-2,10]", "[N<0>N<-1>N<2.25>N<1E5>N<3e-2>N<10>]");
    expect("\t\r\n{\"k\" :\t\"v\"}\n", "{K<k>+S<v>+}");
}

Test(json_reader, escapes)
{
    expect("[\"a\\nb\\t\\\"\\\\\\/\\b\\f\\r\"]", "[S<a\nb\t\"\\/\b\f\r>+]");
    expect("[\"\\u00e9\"]", "[S<\xc3\xa9>]");
    expect("[\"\\u20AC\"]", "[S<\xe2\x82\xac>]");
    expect("[\"\\ud83d\\ude00\"]", "[S<\xf0\x9f\x98\x80>]");
    /* lone surrogates become U+FFFD, as Go's decoder makes them */
    expect("[\"\\ud800x\"]", "[S<\xef\xbf\xbdx>]");
    expect("[\"\\udc00\"]", "[S<\xef\xbf\xbd>]");
    expect("[\"\\ud800\\u0041\"]", "[S<\xef\xbf\xbd" "A>]");
    /* a high surrogate last in its string: the next string is not its pair */
    expect("[\"a\\ud800\"]", "[S<a\xef\xbf\xbd>]");
    expect("[\"\\ud800\",\"\\udc00\",\"\\u00e9\\ud83d\\ude00\\n0123456789abcdef\"]",
           "[S<\xef\xbf\xbd>S<\xef\xbf\xbd>S<\xc3\xa9\xf0\x9f\x98\x80\n0123456789abcdef>]");
    /* raw UTF-8 passes (the builder checks it), not reported ASCII */
    expect("{\"caf\xc3\xa9\":\"\xe2\x82\xac\"}", "{K<caf\xc3\xa9>S<\xe2\x82\xac>}");
    /* ASCII is decided over the whole string, past the first 8 bytes too */
    expect("[\"0123456789abcdef\xc3\xa9\",\"0123456789abcdefghij\"]",
           "[S<0123456789abcdef\xc3\xa9>S<0123456789abcdefghij>+]");
}

Test(json_reader, a_nul_escape_is_one_byte)
{
    trace t;
    cr_assert_eq(read_all("[\"a\\u0000b\"]", false, &t, NULL), KCR__JR_OK);
    cr_assert_eq(t.len, 9);
    cr_assert_eq(memcmp(t.s, "[S<a\0b>+]", 9), 0);
}

Test(json_reader, bad_input_is_an_error_at_its_offset)
{
    expect_error("{\"a\":01}", 5);
    expect_error("[1.]", 1);
    expect_error("[-]", 1);
    expect_error("[1e]", 1);
    expect_error("[.5]", 1);
    expect_error("[+1]", 1);
    expect_error("[tru]", 1);
    expect_error("[nul]", 1);
    expect_error("[truex]", 5); /* true, then x */
    expect_error("[truee]", 1);
    expect_error("[x]", 1);
    expect_error("{'a':1}", 1);
    expect_error("[\"a\nb\"]", 3);
    expect_error("[\"a\\xb\"]", 1);
    expect_error("[\"\\u12G4\"]", 1);
    expect_error("[\"\\u12\"]", 1);
    expect_error("{\"a\" 1}", 5);
    expect_error("{\"a\":1,}", 7);
    expect_error("[1,]", 3);
    expect_error("[1 2]", 3);
    expect_error("{1:2}", 1);
    expect_error("[}", 1);
    expect_error("{]", 1);
    expect_error("]", 0);
    expect_error(":", 0);
    expect_error("{} {}", 3);
    expect_error("{} x", 3);
    /* the end of the input */
    expect_error("", 0);
    expect_error("   ", 3);
    expect_error("{\"a\":", 5);
    expect_error("[\"abc", 5);
    expect_error("[", 1);
}

Test(json_reader, a_stream_of_values)
{
    trace t;
    cr_assert_eq(read_all("{\"a\":1}\n{}[] 12 \"s\"", true, &t, NULL), KCR__JR_OK);
    cr_assert_str_eq(t.s, "{K<a>+N<1>}{}[]N<12>S<s>+");
    /* a number at the very end ends with the input */
    cr_assert_eq(read_all("{} 7", true, &t, NULL), KCR__JR_OK);
    cr_assert_str_eq(t.s, "{}N<7>");
    cr_assert_eq(read_all("", true, &t, NULL), KCR__JR_OK);
    cr_assert_str_eq(t.s, "");
    size_t at;
    cr_assert_eq(read_all("{}\n{\"a\"", true, &t, &at), KCR__JR_ERROR);
    cr_assert_eq(at, 7);
}

Test(json_reader, long_tokens_split_byte_by_byte)
{
    static char json[6000];
    size_t n = 0;
    n += (size_t)snprintf(json + n, sizeof json - n, "{\"");
    for (int i = 0; i < 1000; i++)
        json[n++] = 'k';
    n += (size_t)snprintf(json + n, sizeof json - n, "\":\"");
    for (int i = 0; i < 1000; i++) {
        memcpy(json + n, i % 2 ? "\\n" : "ab", 2);
        n += 2;
    }
    n += (size_t)snprintf(json + n, sizeof json - n, "\",\"n\":");
    for (int i = 0; i < 500; i++)
        json[n++] = (char)('1' + i % 9);
    json[n++] = '}';
    json[n] = '\0';
    trace whole = {0}, bytes = {0};
    size_t at;
    cr_assert_eq(read_in(json, n, 0, false, &whole, &at), KCR__JR_OK);
    cr_assert_eq(read_in(json, n, 1, false, &bytes, &at), KCR__JR_OK);
    cr_assert_str_eq(bytes.s, whole.s);
    /* {, the key, the 1500-byte decoded string, "n", the number, } */
    cr_assert_eq(whole.len, 1 + 1004 + 1504 + 5 + 503 + 1, "%zu", whole.len);
}

Test(json_reader, the_callback_stops_the_reader)
{
    trace t = {.stop_after = 2};
    kcr__jreader *r = kcr__jreader_new(false, on_event, &t);
    cr_assert_not_null(r);
    cr_assert_eq(kcr__jreader_feed(r, "{\"a\":[1,2]}", 11), KCR__JR_STOPPED);
    cr_assert_str_eq(t.s, "{K<a>+");
    /* the offset reported during the callback: after the key's quote */
    cr_assert_eq(kcr__jreader_consumed(r), 4);
    cr_assert_eq(kcr__jreader_feed(r, "}", 1), KCR__JR_STOPPED);
    cr_assert_eq(kcr__jreader_complete(r), KCR__JR_STOPPED);
    kcr__jreader_free(r);
}

Test(json_reader, skipped_values_report_nothing)
{
    skip_x_and_y = true;
    expect("{\"a\":1,\"x\":{\"b\":[1,{\"c\":\"d\\n\"}],\"e\":{}},\"f\":2}",
           "{K<a>+N<1>K<x>+K<f>+N<2>}");
    expect("{\"x\":\"s\\u00e9\",\"e\":[]}", "{K<x>+K<e>+[]}");
    expect("{\"x\":-1.5e3,\"x\":null,\"x\":[],\"e\":true}", "{K<x>+K<x>+K<x>+K<e>+bt}");
    /* skipped at its opening bracket: the rest of it, its end included */
    expect("{\"y\":[1,[2],{\"x\":3}],\"e\":1}", "{K<y>+[K<e>+N<1>}");
    expect("[{\"y\":{\"a\":{}}},{\"y\":{}}]", "[{K<y>+{}{K<y>+{}]");
    /* in a stream, the next value is reported again */
    trace t;
    cr_assert_eq(read_all("{\"x\":[1,2]}\n{\"y\":{\"k\":1}}\n{\"a\":\"b\"}", true, &t, NULL),
                 KCR__JR_OK);
    cr_assert_str_eq(t.s, "{K<x>+}{K<y>+{}{K<a>+S<b>+}");
}

/* json is an error at the same offset whether the value of "x" is skipped
 * or not. */
static void expect_error_skipped_or_not(const char *json, size_t at)
{
    skip_x_and_y = false;
    expect_error(json, at);
    skip_x_and_y = true;
    expect_error(json, at);
}

Test(json_reader, a_skipped_value_is_checked_all_the_same)
{
    expect_error_skipped_or_not("{\"x\":01}", 5);
    expect_error_skipped_or_not("{\"x\":[1,{\"a\":tru}]}", 13);
    expect_error_skipped_or_not("{\"x\":\"a\\qb\"}", 5);
    expect_error_skipped_or_not("{\"x\":{\"k\":\"\\u12G4\"}}", 10);
    expect_error_skipped_or_not("{\"x\":[\"a\nb\"]}", 8);
    expect_error_skipped_or_not("{\"x\":{\"a\" 1}}", 10);
    expect_error_skipped_or_not("{\"x\":[1,]}", 8);
    expect_error_skipped_or_not("{\"x\":[1}", 7);
    expect_error_skipped_or_not("{\"x\":{\"a\":[]]}", 12);
    expect_error_skipped_or_not("{\"x\":[[[", 8);
}

Test(json_reader, an_escape_anywhere_in_a_long_string)
{
    /* escapes before, across and after each 16-byte block of the decoder */
    for (size_t pos = 0; pos <= 40; pos++) {
        char json[128], want[128];
        size_t n = 0, w = 0;
        json[n++] = '[';
        json[n++] = '"';
        want[w++] = '[';
        want[w++] = 'S';
        want[w++] = '<';
        for (size_t i = 0; i < 41; i++) {
            if (i == pos) {
                memcpy(json + n, "\\\"\\u0041", 8);
                n += 8;
                memcpy(want + w, "\"A", 2);
                w += 2;
            }
            json[n++] = (char)('a' + i % 26);
            want[w++] = (char)('a' + i % 26);
        }
        memcpy(json + n, "\"]", 3);
        memcpy(want + w, ">+]", 4);
        expect(json, want);
    }
}

Test(json_reader, a_skipped_value_deeper_than_the_first_stack)
{
    /* 200 levels: past the reader's first stack of 64, grown while skipping */
    char json[512];
    size_t n = (size_t)snprintf(json, sizeof json, "{\"x\":");
    for (int i = 0; i < 200; i++)
        json[n++] = '[';
    json[n++] = '1';
    for (int i = 0; i < 200; i++)
        json[n++] = ']';
    snprintf(json + n, sizeof json - n, ",\"e\":2}");
    skip_x_and_y = true;
    expect(json, "{K<x>+K<e>+N<2>}");
}
