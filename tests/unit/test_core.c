/* Error names, per-thread error detail, log handler and level filtering. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/error.h"
#include "core/grow.h"
#include "core/log.h"
#include "core/strmap.h"
#include "kcr/kcr.h"

Test(error, every_code_has_a_distinct_name)
{
    for (int a = KCR_OK; a <= KCR_ERR_TLS; a++) {
        cr_assert_str_neq(kcr_strerror((kcr_err)a), "unknown error", "code %d unnamed", a);
        for (int b = a + 1; b <= KCR_ERR_TLS; b++)
            cr_assert_str_neq(kcr_strerror((kcr_err)a), kcr_strerror((kcr_err)b));
    }
    cr_assert_str_eq(kcr_strerror((kcr_err)999), "unknown error");
}

static void *fail_on_other_thread(void *arg)
{
    kcr__fail(KCR_ERR_PARSE, "other thread %d", 2);
    return NULL;
}

Test(error, last_error_is_per_thread)
{
    cr_assert_eq(kcr__fail(KCR_ERR_CONFIG, "context \"%s\" not found", "dev"), KCR_ERR_CONFIG);
    pthread_t t;
    pthread_create(&t, NULL, fail_on_other_thread, NULL);
    pthread_join(t, NULL);
    cr_assert_str_eq(kcr_last_error(), "context \"dev\" not found");
    kcr__clear_error();
    cr_assert_str_eq(kcr_last_error(), "");
}

struct captured {
    int count;
    kcr_log_level level;
    char module[32];
    char message[128];
};

static void capture(kcr_log_level level, const char *module, const char *message, void *data)
{
    struct captured *c = data;
    c->count++;
    c->level = level;
    strncpy(c->module, module, sizeof c->module - 1);
    strncpy(c->message, message, sizeof c->message - 1);
}

Test(log, silent_without_handler_and_filtered_by_level)
{
    struct captured c = {0};
    kcr__log(KCR_LOG_ERROR, "test", "nobody listens");
    kcr_log_set_handler(capture, &c);
    kcr_log_set_level(KCR_LOG_WARN);
    kcr__log(KCR_LOG_INFO, "test", "dropped");
    cr_assert_eq(c.count, 0);
    kcr__log(KCR_LOG_WARN, "reflector", "watch ended after %d s", 42);
    cr_assert_eq(c.count, 1);
    cr_assert_eq(c.level, KCR_LOG_WARN);
    cr_assert_str_eq(c.module, "reflector");
    cr_assert_str_eq(c.message, "watch ended after 42 s");
    kcr_log_set_handler(NULL, NULL);
    kcr__log(KCR_LOG_ERROR, "test", "after removal");
    cr_assert_eq(c.count, 1);
    cr_assert_str_eq(kcr_log_level_name(KCR_LOG_TRACE), "TRACE");
}

Test(version, matches_headers)
{
    cr_assert_str_eq(kcr_version(), KCR_VERSION_STRING);
    cr_assert_eq(KCR_VERSION_NUMBER >> 16, KCR_VERSION_MAJOR);
}

Test(log, levels_by_name_and_from_the_environment)
{
    kcr_log_level l = KCR_LOG_ERROR;
    cr_assert_eq(kcr_log_level_parse("TRACE", &l), KCR_OK);
    cr_assert_eq(l, KCR_LOG_TRACE);
    cr_assert_eq(kcr_log_level_parse("warn", &l), KCR_OK);
    cr_assert_eq(l, KCR_LOG_WARN);
    cr_assert_eq(kcr_log_level_parse("loud", &l), KCR_ERR_INVALID);
    cr_assert(strstr(kcr_last_error(), "loud") != NULL, "%s", kcr_last_error());
    cr_assert_eq(kcr_log_level_parse(NULL, &l), KCR_ERR_INVALID);

    unsetenv("KCR_LOG");
    cr_assert_not(kcr_log_from_env());
    cr_assert_not(kcr__log_enabled(KCR_LOG_ERROR), "no handler unless asked for");
    setenv("KCR_LOG", "nonsense", 1);
    cr_assert_not(kcr_log_from_env());
    cr_assert_not(kcr__log_enabled(KCR_LOG_ERROR));
    setenv("KCR_LOG", "debug", 1);
    cr_assert(kcr_log_from_env());
    cr_assert(kcr__log_enabled(KCR_LOG_DEBUG));
    cr_assert_not(kcr__log_enabled(KCR_LOG_TRACE));
    kcr_log_set_handler(NULL, NULL);
    kcr_log_set_level(KCR_LOG_INFO);
    unsetenv("KCR_LOG");
}

Test(buf, grows_keeps_nuls_and_formats)
{
    kcr__buf b = {0};
    for (int i = 0; i < 1000; i++)
        cr_assert_eq(kcr__buf_printf(&b, "%03d,", i), KCR_OK);
    cr_assert_eq(b.len, 4000);
    cr_assert_eq(strncmp(b.s + 3996, "999,", 4), 0);
    cr_assert_eq(b.s[b.len], '\0');
    cr_assert_eq(kcr__buf_add(&b, "a\0b", 3), KCR_OK);
    cr_assert_eq(b.len, 4003);
    cr_assert_eq(memcmp(b.s + 4000, "a\0b", 3), 0);
    char long_text[2000];
    memset(long_text, 'x', sizeof long_text - 1);
    long_text[sizeof long_text - 1] = '\0';
    cr_assert_eq(kcr__buf_printf(&b, "<%s>", long_text), KCR_OK); /* past the stack scratch */
    cr_assert_eq(b.len, 4003 + 2001);
    cr_assert_eq(b.s[b.len - 1], '>');
    kcr__buf_free(&b);
    cr_assert_null(b.s);
    cr_assert_eq(b.len, 0);
}

Test(buf, json_string_escapes_quotes_backslashes_and_controls)
{
    kcr__buf b = {0};
    const char in[] = "a\"b\\c\n\x01"
                      "d\xc3\xa9";
    cr_assert_eq(kcr__buf_json_string(&b, in, sizeof in - 1), KCR_OK);
    cr_assert_str_eq(b.s, "\"a\\\"b\\\\c\\u000a\\u0001d\xc3\xa9\"");
    kcr__buf_free(&b);
    cr_assert_eq(kcr__buf_json_string(&b, "", 0), KCR_OK);
    cr_assert_str_eq(b.s, "\"\"");
    kcr__buf_free(&b);
}

Test(buf, out_of_memory_is_sticky)
{
    kcr__buf b = {0};
    cr_assert_eq(kcr__buf_str(&b, "ok"), KCR_OK);
    b.oom = true; /* as after a failed realloc */
    cr_assert_eq(kcr__buf_str(&b, "more"), KCR_ERR_NOMEM);
    cr_assert_eq(b.len, 2);
    kcr__buf_free(&b);
    cr_assert_not(b.oom);
    /* A length that cannot be allocated fails without touching memory. */
    cr_assert_eq(kcr__buf_add(&b, "x", (size_t)-1 / 2), KCR_ERR_NOMEM);
    cr_assert(b.oom);
    cr_assert_eq(kcr__buf_str(&b, "y"), KCR_ERR_NOMEM);
    kcr__buf_free(&b);
}

Test(strmap, put_get_replace_remove_iterate_through_growth_and_shrink)
{
    struct kcr__strmap m = {0};
    cr_assert_null(kcr__strmap_get(&m, "absent")); /* a zeroed map is empty */
    cr_assert_null(kcr__strmap_remove(&m, "absent"));
    size_t pos = 0;
    cr_assert_not(kcr__strmap_next(&m, &pos, NULL, NULL));
    char key[32];
    for (uintptr_t i = 1; i <= 5000; i++) {
        snprintf(key, sizeof key, "ns-%lu/name", (unsigned long)i);
        cr_assert_eq(kcr__strmap_put(&m, key, (void *)i, NULL), KCR_OK);
    }
    cr_assert_eq(kcr__strmap_len(&m), 5000);
    void *old = NULL;
    cr_assert_eq(kcr__strmap_put(&m, "ns-7/name", (void *)70000, &old), KCR_OK);
    cr_assert_eq((uintptr_t)old, 7);
    cr_assert_eq(kcr__strmap_len(&m), 5000, "a replace adds no key");
    for (uintptr_t i = 1; i <= 5000; i += 2) { /* drop the odd ones: the table shrinks */
        snprintf(key, sizeof key, "ns-%lu/name", (unsigned long)i);
        cr_assert_eq((uintptr_t)kcr__strmap_remove(&m, key), i == 7 ? 70000 : i);
    }
    cr_assert_eq(kcr__strmap_len(&m), 2500);
    size_t seen = 0;
    uintptr_t sum = 0;
    const char *k;
    void *v;
    for (pos = 0; kcr__strmap_next(&m, &pos, &k, &v);) {
        seen++;
        sum += (uintptr_t)v;
        cr_assert_eq(kcr__strmap_get(&m, k), v, "%s", k);
    }
    cr_assert_eq(seen, 2500);
    cr_assert_eq(sum, (uintptr_t)2500 * 2501, "the even values 2..5000");
    cr_assert_null(kcr__strmap_get(&m, "ns-1/name"));
    cr_assert_eq((uintptr_t)kcr__strmap_get(&m, "ns-2/name"), 2);
    kcr__strmap_clear(&m, NULL);
    cr_assert_eq(kcr__strmap_len(&m), 0);
    cr_assert_eq(kcr__strmap_put(&m, "again", (void *)1, NULL), KCR_OK, "usable after clear");
    kcr__strmap_clear(&m, NULL);
}

Test(grow, doubles_keeps_contents_and_refuses_overflow)
{
    size_t cap = 0;
    int *v = NULL;
    for (size_t n = 0; n < 1000; n++) {
        int *g = kcr__grow(v, &cap, n, sizeof *v, 4);
        cr_assert_not_null(g);
        v = g;
        cr_assert_gt(cap, n);
        v[n] = (int)n;
        if (n == 0)
            cr_assert_eq(cap, 4, "the first growth makes room for `first`");
    }
    cr_assert_eq(cap, 1024);
    for (size_t n = 0; n < 1000; n++)
        cr_assert_eq(v[n], (int)n);
    cr_assert_eq(kcr__grow(v, &cap, 10, sizeof *v, 4), v, "room already: same array");
    size_t big = (size_t)-1 / 2;
    cr_assert_null(kcr__grow(v, &cap, big, sizeof *v, 4), "an overflowing size is refused");
    cr_assert_eq(cap, 1024, "and the capacity is left as it was");
    free(v);
}
