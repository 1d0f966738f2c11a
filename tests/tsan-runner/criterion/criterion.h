/* A stand-in for <criterion/criterion.h> used only by the ThreadSanitizer
 * build: Criterion's sandbox cannot start under TSan (its fixed-address arena
 * collides with TSan's shadow memory: Criterion issue #274), so tests built
 * with -DKCR_SANITIZE=thread compile against this header and runner.c instead.
 *
 * It supports the subset kcr's tests use, and kcr's tests keep to it:
 *   Test(suite, name [, .init = f][, .fini = f][, .timeout = s]
 *        [, .signal = SIG][, .exit_code = N][, .description = "..."])
 *   cr_assert / cr_expect and their _not, _eq, _neq, _lt, _leq, _gt, _geq,
 *   _null, _not_null, _str_eq, _str_neq, _str_empty, _str_not_empty forms,
 *   each with an optional printf-style message; cr_assert_fail; cr_log_*.
 * Each test runs in its own forked process, like Criterion's, with the same
 * closing "Synthesis" line. */
#ifndef KCR_TSAN_CRITERION_SHIM_H
#define KCR_TSAN_CRITERION_SHIM_H

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

struct kcr_shim_test {
    const char *suite;
    const char *name;
    void (*fn)(void);
    void (*init)(void);
    void (*fini)(void);
    double timeout;
    int signal;
    int exit_code;
    const char *description;
    bool disabled;
    struct kcr_shim_test *next;
};

void kcr_shim_register(struct kcr_shim_test *test);
void kcr_shim_fail(bool fatal, const char *file, int line, const char *what, const char *fmt,
                   ...);

#define KCR_SHIM_TEST(suite_, name_, ...)                                                        \
    static void suite_##_##name_##_body(void);                                                   \
    static struct kcr_shim_test suite_##_##name_##_desc = {                                      \
        .suite = #suite_, .name = #name_, .fn = suite_##_##name_##_body, __VA_ARGS__};          \
    __attribute__((constructor)) static void suite_##_##name_##_register(void)                   \
    {                                                                                            \
        kcr_shim_register(&suite_##_##name_##_desc);                                             \
    }                                                                                            \
    static void suite_##_##name_##_body(void)
#define Test(...) KCR_SHIM_TEST(__VA_ARGS__, .next = NULL)

#define KCR_SHIM_CHECK(fatal, cond, what, ...)                                                   \
    do {                                                                                         \
        if (!(cond))                                                                             \
            kcr_shim_fail(fatal, __FILE__, __LINE__, what, __VA_ARGS__);                         \
    } while (0)

/* Every public macro takes __VA_ARGS__ whole and appends "" so that a missing
 * message is an empty format string (and -Wpedantic stays quiet). */
#define KCR_SHIM_1(fatal, cond, ...) KCR_SHIM_CHECK(fatal, cond, #cond, __VA_ARGS__)
#define KCR_SHIM_NOT(fatal, cond, ...) KCR_SHIM_CHECK(fatal, !(cond), "!(" #cond ")", __VA_ARGS__)
#define KCR_SHIM_CMP(fatal, op, a, b, ...)                                                       \
    KCR_SHIM_CHECK(fatal, (a)op(b), #a " " #op " " #b, __VA_ARGS__)
#define KCR_SHIM_STR(fatal, op, a, b, ...)                                                       \
    KCR_SHIM_CHECK(fatal, strcmp((a), (b)) op 0, #a " " #op " " #b, __VA_ARGS__)
#define KCR_SHIM_PTR(fatal, op, p, ...) KCR_SHIM_CHECK(fatal, (p)op NULL, #p " " #op " NULL", __VA_ARGS__)
#define KCR_SHIM_EMPTY(fatal, op, s, ...) KCR_SHIM_CHECK(fatal, (s)[0] op 0, #s " empty", __VA_ARGS__)

#define cr_assert(...) KCR_SHIM_1(true, __VA_ARGS__, "")
#define cr_assert_not(...) KCR_SHIM_NOT(true, __VA_ARGS__, "")
#define cr_assert_eq(...) KCR_SHIM_CMP(true, ==, __VA_ARGS__, "")
#define cr_assert_neq(...) KCR_SHIM_CMP(true, !=, __VA_ARGS__, "")
#define cr_assert_lt(...) KCR_SHIM_CMP(true, <, __VA_ARGS__, "")
#define cr_assert_leq(...) KCR_SHIM_CMP(true, <=, __VA_ARGS__, "")
#define cr_assert_gt(...) KCR_SHIM_CMP(true, >, __VA_ARGS__, "")
#define cr_assert_geq(...) KCR_SHIM_CMP(true, >=, __VA_ARGS__, "")
#define cr_assert_null(...) KCR_SHIM_PTR(true, ==, __VA_ARGS__, "")
#define cr_assert_not_null(...) KCR_SHIM_PTR(true, !=, __VA_ARGS__, "")
#define cr_assert_str_eq(...) KCR_SHIM_STR(true, ==, __VA_ARGS__, "")
#define cr_assert_str_neq(...) KCR_SHIM_STR(true, !=, __VA_ARGS__, "")
#define cr_assert_str_empty(...) KCR_SHIM_EMPTY(true, ==, __VA_ARGS__, "")
#define cr_assert_str_not_empty(...) KCR_SHIM_EMPTY(true, !=, __VA_ARGS__, "")

#define cr_expect(...) KCR_SHIM_1(false, __VA_ARGS__, "")
#define cr_expect_not(...) KCR_SHIM_NOT(false, __VA_ARGS__, "")
#define cr_expect_eq(...) KCR_SHIM_CMP(false, ==, __VA_ARGS__, "")
#define cr_expect_neq(...) KCR_SHIM_CMP(false, !=, __VA_ARGS__, "")
#define cr_expect_lt(...) KCR_SHIM_CMP(false, <, __VA_ARGS__, "")
#define cr_expect_leq(...) KCR_SHIM_CMP(false, <=, __VA_ARGS__, "")
#define cr_expect_gt(...) KCR_SHIM_CMP(false, >, __VA_ARGS__, "")
#define cr_expect_geq(...) KCR_SHIM_CMP(false, >=, __VA_ARGS__, "")
#define cr_expect_null(...) KCR_SHIM_PTR(false, ==, __VA_ARGS__, "")
#define cr_expect_not_null(...) KCR_SHIM_PTR(false, !=, __VA_ARGS__, "")
#define cr_expect_str_eq(...) KCR_SHIM_STR(false, ==, __VA_ARGS__, "")
#define cr_expect_str_neq(...) KCR_SHIM_STR(false, !=, __VA_ARGS__, "")
#define cr_expect_str_empty(...) KCR_SHIM_EMPTY(false, ==, __VA_ARGS__, "")
#define cr_expect_str_not_empty(...) KCR_SHIM_EMPTY(false, !=, __VA_ARGS__, "")

#define cr_assert_fail(...) KCR_SHIM_CHECK(true, false, "cr_assert_fail", "" __VA_ARGS__)

#define cr_log_info(...) (fprintf(stderr, "[----] " __VA_ARGS__), fputc('\n', stderr))
#define cr_log_warn(...) (fprintf(stderr, "[WARN] " __VA_ARGS__), fputc('\n', stderr))
#define cr_log_error(...) (fprintf(stderr, "[ERR ] " __VA_ARGS__), fputc('\n', stderr))

#endif
