/* kcr_quantity against the facts of apimachinery v0.37's resource.Quantity
 * tests (quantity_test.go: TestQuantityParse, TestQuantityString,
 * TestQuantityParseEmit, TestParseQuantity), restated as canonical texts. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "kcr/quantity.h"

typedef struct canon_case {
    const char *in;
    const char *canonical;
    kcr_quantity_format format;
} canon_case;

#define DSI KCR_QUANTITY_DECIMAL_SI
#define BSI KCR_QUANTITY_BINARY_SI
#define DEX KCR_QUANTITY_DECIMAL_EXPONENT

static const canon_case canon[] = {
    /* zeros keep their family but always print "0" */
    {"0", "0", DSI}, {"0n", "0", DSI}, {"0u", "0", DSI}, {"0m", "0", DSI}, {"0Ki", "0", BSI},
    {"0k", "0", DSI}, {"0Mi", "0", BSI}, {"0M", "0", DSI}, {"0Gi", "0", BSI}, {"0G", "0", DSI},
    {"0Ti", "0", BSI}, {"0T", "0", DSI}, {"00", "0", DSI}, {"0.0", "0", DSI}, {"0e5", "0", DEX},
    {"1", "1", DSI},
    /* binary suffixes */
    {"1Ki", "1Ki", BSI}, {"8Ki", "8Ki", BSI}, {"7Mi", "7Mi", BSI}, {"6Gi", "6Gi", BSI},
    {"5Ti", "5Ti", BSI}, {"4Pi", "4Pi", BSI}, {"3Ei", "3Ei", BSI}, {"10Ti", "10Ti", BSI},
    {"100Ti", "100Ti", BSI}, {"1024Mi", "1Gi", BSI}, {"1536Mi", "1536Mi", BSI},
    {"1.5Gi", "1536Mi", BSI}, {"1025", "1025", DSI}, {"1025Ki", "1025Ki", BSI},
    {"307200Ki", "300Mi", BSI}, {"1025024Mi", "1001Gi", BSI},
    /* decimal suffixes */
    {"5n", "5n", DSI}, {"4u", "4u", DSI}, {"3m", "3m", DSI}, {"9", "9", DSI}, {"8k", "8k", DSI},
    {"50k", "50k", DSI}, {"7M", "7M", DSI}, {"6G", "6G", DSI}, {"5T", "5T", DSI},
    {"40T", "40T", DSI}, {"300T", "300T", DSI}, {"2P", "2P", DSI}, {"1E", "1E", DSI},
    {"12E", "12E", DSI}, {"1000M", "1G", DSI}, {"0.001T", "1G", DSI}, {"1000u", "1m", DSI},
    {"1000m", "1", DSI}, {"1080000000n", "1080m", DSI}, {"1.08", "1080m", DSI},
    /* decimal exponents */
    {"1E-3", "1e-3", DEX}, {"1e3", "1e3", DEX}, {"1E6", "1e6", DEX}, {"1e9", "1e9", DEX},
    {"1E12", "1e12", DEX}, {"1e15", "1e15", DEX}, {"1E18", "1e18", DEX}, {"1e14", "100e12", DEX},
    {"1e13", "10e12", DEX}, {".001e12", "1e9", DEX}, {"0.001e0", "1e-3", DEX},
    {"1000e-12", "1e-9", DEX}, {"1e0", "1", DEX}, {"1e+3", "1e3", DEX}, {"1e003", "1e3", DEX},
    /* looks like floating point */
    {"100.035k", "100035", DSI}, {"0.001", "1m", DSI}, {"0.0005k", "500m", DSI},
    {"0.005", "5m", DSI}, {"0.05", "50m", DSI}, {"0.5", "500m", DSI}, {"0.00050k", "500m", DSI},
    {"0.00500", "5m", DSI}, {"0.05000", "50m", DSI}, {"0.50000", "500m", DSI},
    {"0.5e0", "500e-3", DEX}, {"0.5e-1", "50e-3", DEX}, {"0.5e-2", "5e-3", DEX},
    {"10.035M", "10035k", DSI}, {"1.2e3", "1200", DEX}, {"1.3E+6", "1300e3", DEX},
    {"1.40e9", "1400e6", DEX}, {"1.53E12", "1530e9", DEX}, {"1.6e15", "1600e12", DEX},
    {"1.7E18", "1700e15", DEX}, {"9.01", "9010m", DSI}, {"8.1k", "8100", DSI},
    {"7.123456M", "7123456", DSI}, {"6.987654321G", "6987654321", DSI}, {"5.444T", "5444G", DSI},
    {"40.1T", "40100G", DSI}, {"300.2T", "300200G", DSI}, {"2.5P", "2500T", DSI},
    {"1.01E", "1010P", DSI}, {"1.5", "1500m", DSI}, {"1.2345", "1234500u", DSI},
    /* saturate or round: up to the next nano, binary capped at 2^63-1 */
    {"3.001n", "4n", DSI}, {"1.1E-9", "2e-9", DEX}, {"0.0000000001", "1n", DSI},
    {"0.0000000005", "1n", DSI}, {"0.00000000050", "1n", DSI}, {"0.5e-9", "1e-9", DEX},
    {"0.9n", "1n", DSI}, {"0.00000012345", "124n", DSI}, {"0.00000012354", "124n", DSI},
    {"1e-2147483648", "1e-9", DEX},
    {"9Ei", "9223372036854775807", BSI}, {"9223372036854775807Ki", "9223372036854775807", BSI},
    {"8Ei", "9223372036854775807", BSI}, {"7.99999999999999999999Ei", "9223372036854775807", BSI},
    {"7.5Ei", "7680Pi", BSI},
    /* fractional binary */
    {"100.035Ki", "102435840m", BSI}, {"0.5Mi", "512Ki", BSI}, {"0.5Ki", "512", BSI},
    {"0.05Gi", "53687091200m", BSI}, {"0.025Ti", "27487790694400m", BSI},
    {".001Ki", "1024m", BSI}, {".000001Ki", "1024u", DSI}, {".000000001Ki", "1024n", DSI},
    {".000000000001Ki", "2n", DSI}, {"0.000000000001Ki", "2n", DSI},
    /* written by trolls */
    {".001", "1m", DSI}, {".0001k", "100m", DSI}, {"1.", "1", DSI}, {"1.G", "1G", DSI},
    {".", "0", DSI}, {"-.", "0", DSI}, {"-", "0", DSI}, {"+", "0", DSI}, {"-0", "0", DSI},
    {"+1", "1", DSI}, {"007", "7", DSI},
    /* beyond int64 (TestParseQuantity) */
    {"999999999999999999", "999999999999999999", DSI},
    {"999999999999999999.1", "999999999999999999100m", DSI},
    {"9999999999999999999", "9999999999999999999", DSI},
    {"10000000000000000001", "10000000000000000001", DSI},
    {"9223372036854775806000m", "9223372036854775806", DSI},
    {"9223372036854775808.1", "9223372036854775808100m", DSI},
    {"1000000000000000000", "1E", DSI}, {"1.000000000000000001E", "1000000000000000001", DSI},
    {"1.0000000000000000001E", "1000000000000000000100m", DSI},
    {"10000000000000000000000m", "10E", DSI}, {"10.000000000000000001E", "10000000000000000001", DSI},
    {"18446744073709551616", "18446744073709551616", DSI},
    /* past the E suffix: an exponent, where v0.37 drops the suffix */
    {"1000E", "1e21", DSI}, {"1234567E", "1234567E", DSI},
    {"99999999999999999999999999999999999999", "99999999999999999999999999999999999999", DSI},
};

Test(quantity, canonical_text_and_format)
{
    for (size_t i = 0; i < sizeof canon / sizeof canon[0]; i++) {
        kcr_quantity q;
        char buf[KCR_QUANTITY_TEXT_MAX];
        cr_assert_eq(kcr_quantity_parse_str(canon[i].in, &q), KCR_OK, "%s: %s", canon[i].in,
                     kcr_last_error());
        size_t n = kcr_quantity_to_string(&q, buf, sizeof buf);
        cr_expect_str_eq(buf, canon[i].canonical, "%s", canon[i].in);
        cr_expect_eq(n, strlen(canon[i].canonical));
        cr_expect_eq(q.format, (uint8_t)canon[i].format, "%s: format %d", canon[i].in, q.format);

        /* the canonical text parses to the same value */
        kcr_quantity back;
        cr_assert_eq(kcr_quantity_parse_str(buf, &back), KCR_OK, "%s", buf);
        cr_expect_eq(kcr_quantity_cmp(&q, &back), 0, "%s -> %s", canon[i].in, buf);

        /* and its negation prints with a minus, unless it is zero */
        char neg_in[128];
        snprintf(neg_in, sizeof neg_in, "-%s", canon[i].in[0] == '+' || canon[i].in[0] == '-'
                                                   ? canon[i].in + 1
                                                   : canon[i].in);
        cr_assert_eq(kcr_quantity_parse_str(neg_in, &q), KCR_OK, "%s", neg_in);
        kcr_quantity_to_string(&q, buf, sizeof buf);
        if (strcmp(canon[i].canonical, "0") == 0 || canon[i].in[0] == '-') {
            cr_expect_str_eq(buf, "0", "%s", neg_in);
        } else {
            char want[128];
            snprintf(want, sizeof want, "-%s", canon[i].canonical);
            cr_expect_str_eq(buf, want, "%s", neg_in);
        }
    }
}

Test(quantity, refused)
{
    static const char *bad[] = {"",       "1.1.M", "1+1.0M", "0.1mi", "0.1am", "aoeu", ".5i",
                                "1i",     "-3.01i", "-3.01e-", " 1",  "1 ",    "1e",   "1K",
                                "1ki",    "1Ee3",  "1e3k",   "1ke3",  "1e+",   "1e1.5", "--1",
                                "1.5.5",  "1Mi5",  "0x10",   "1e-"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        kcr_quantity q = {.exp = 77};
        kcr_err err = kcr_quantity_parse_str(bad[i], &q);
        cr_expect_eq(err, KCR_ERR_PARSE, "\"%s\" gave %d", bad[i], err);
        cr_expect_eq(q.exp, 77, "\"%s\" wrote *out", bad[i]);
        if (bad[i][0] != '\0')
            cr_expect(strstr(kcr_last_error(), bad[i]) != NULL, "%s", kcr_last_error());
    }
    /* an embedded NUL is not part of a quantity */
    kcr_quantity q;
    cr_expect_eq(kcr_quantity_parse("1\0k", 3, &q), KCR_ERR_PARSE);
    cr_expect_eq(kcr_quantity_parse_str(NULL, &q), KCR_ERR_PARSE);
    cr_expect_eq(kcr_quantity_parse("1", 1, NULL), KCR_ERR_INVALID);
    cr_expect_eq(kcr_quantity_parse(NULL, 3, &q), KCR_ERR_INVALID);
}

Test(quantity, beyond_kcr_limits)
{
    kcr_quantity q;
    /* 39 significant digits do not fit a 128-bit mantissa */
    cr_expect_eq(kcr_quantity_parse_str("999999999999999999999999999999999999999", &q),
                 KCR_ERR_TOO_LARGE);
    /* exponents Go would wrap */
    cr_expect_eq(kcr_quantity_parse_str("1e2147483648", &q), KCR_ERR_TOO_LARGE);
    cr_expect_eq(kcr_quantity_parse_str("1e-99999999999999999999", &q), KCR_ERR_TOO_LARGE);
    cr_expect_eq(kcr_quantity_parse_str("1e2147483647", &q), KCR_OK);
    char buf[KCR_QUANTITY_TEXT_MAX];
    kcr_quantity_to_string(&q, buf, sizeof buf);
    cr_expect_str_eq(buf, "10e2147483646");
    /* trailing zeros fold into the exponent: many digits, few significant */
    cr_expect_eq(kcr_quantity_parse_str("100000000000000000000000000000000000000000000000000", &q),
                 KCR_OK);
    kcr_quantity_to_string(&q, buf, sizeof buf);
    cr_expect_str_eq(buf, "100e48");
}

Test(quantity, json_trims_spaces)
{
    kcr_quantity q;
    char buf[KCR_QUANTITY_TEXT_MAX];
    cr_assert_eq(kcr_quantity_parse_json(" \t0.5\n ", 7, &q), KCR_OK);
    kcr_quantity_to_string(&q, buf, sizeof buf);
    cr_expect_str_eq(buf, "500m");
    cr_expect_eq(kcr_quantity_parse_json("  ", 2, &q), KCR_ERR_PARSE);
}

Test(quantity, server_text)
{
    static const struct {
        const char *in, *stored;
    } cases[] = {
        {"0", "0"},         {"+1", "+1"},       {"01", "01"},         {"1.", "1."},
        {"1.G", "1.G"},     {"1E3", "1E3"},     {"1e+3", "1e+3"},     {"1e0", "1e0"},
        {"1025Ki", "1025Ki"}, {"+3Ki", "+3Ki"}, {"100m", "100m"},     {"1Gi", "1Gi"},
        {"0.5", "500m"},    {"1000m", "1"},     {"1024Ki", "1Mi"},    {"8Ki", "8Ki"},
        {"-0", "0"},        {"1e3", "1e3"},     {"1.5Gi", "1536Mi"},  {"2000", "2k"},
        {"0.1", "100m"},    {"1.5", "1500m"},   {".5", "500m"},       {"9Ei", "9223372036854775807"},
        {"123456789012345678", "123456789012345678"},
        {"1234567890123456789", "1234567890123456789"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char buf[KCR_QUANTITY_TEXT_MAX];
        cr_assert_eq(kcr_quantity_server_text(cases[i].in, buf, sizeof buf), KCR_OK, "%s",
                     cases[i].in);
        cr_expect_str_eq(buf, cases[i].stored, "%s", cases[i].in);
    }
    char small[3];
    cr_expect_eq(kcr_quantity_server_text("1500m", small, sizeof small), KCR_ERR_TOO_LARGE);
    cr_expect_eq(kcr_quantity_server_text("abc", small, sizeof small), KCR_ERR_PARSE);
}

static kcr_quantity Q(const char *s)
{
    kcr_quantity q;
    cr_assert_eq(kcr_quantity_parse_str(s, &q), KCR_OK, "%s: %s", s, kcr_last_error());
    return q;
}

static void expect_text(const kcr_quantity *q, const char *want)
{
    char buf[KCR_QUANTITY_TEXT_MAX];
    kcr_quantity_to_string(q, buf, sizeof buf);
    cr_expect_str_eq(buf, want);
}

Test(quantity, compare)
{
    static const struct {
        const char *a, *b;
        int cmp;
    } cases[] = {
        {"0", "0", 0},          {"100m", "50m", 1},     {"50m", "100m", -1},
        {"10000T", "100Gi", 1}, {"0.5", "500m", 0},     {"1Ki", "1024", 0},
        {"1k", "1Ki", -1},      {"1e3", "1k", 0},       {"-1", "1", -1},
        {"-2", "-1", -1},       {"0Ki", "-0", 0},       {"1n", "0", 1},
        {"9.01", "9.010", 0},   {"800m", "1", -1},      {"800m", "790m", 1},
        {"1E", "999999999999999999", 1},
        {"99999999999999999999999999999999999999", "1e38", -1},
        {"1e38", "99999999999999999999999999999999999999", 1},
        {"123", "1230m", 1},    {"-123", "-1230m", -1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        kcr_quantity a = Q(cases[i].a), b = Q(cases[i].b);
        cr_expect_eq(kcr_quantity_cmp(&a, &b), cases[i].cmp, "%s vs %s", cases[i].a, cases[i].b);
        cr_expect_eq(kcr_quantity_cmp(&b, &a), -cases[i].cmp, "%s vs %s", cases[i].b, cases[i].a);
    }
    kcr_quantity z = {0}, one = Q("1"), minus = Q("-3m");
    cr_expect_eq(kcr_quantity_sign(&z), 0);
    cr_expect_eq(kcr_quantity_sign(&one), 1);
    cr_expect_eq(kcr_quantity_sign(&minus), -1);
}

Test(quantity, add_and_sub)
{
    kcr_quantity r;
    kcr_quantity a = Q("100m"), b = Q("1Gi"), zero = Q("0");
    /* a zero operand keeps the other's suffix, in either order (Go's tests) */
    cr_assert_eq(kcr_quantity_add(&a, &zero, &r), KCR_OK);
    expect_text(&r, "100m");
    cr_assert_eq(kcr_quantity_add(&zero, &b, &r), KCR_OK);
    expect_text(&r, "1Gi");
    cr_assert_eq(kcr_quantity_sub(&zero, &b, &r), KCR_OK);
    expect_text(&r, "-1Gi");
    /* the result keeps the first operand's format */
    kcr_quantity half_gi = Q("512Mi"), k = Q("1k");
    cr_assert_eq(kcr_quantity_add(&b, &half_gi, &r), KCR_OK);
    expect_text(&r, "1536Mi");
    cr_assert_eq(kcr_quantity_add(&b, &k, &r), KCR_OK);
    expect_text(&r, "1073742824");
    cr_assert_eq(kcr_quantity_add(&k, &b, &r), KCR_OK);
    expect_text(&r, "1073742824");
    /* exact across scales, and back */
    kcr_quantity n = Q("1n"), big = Q("5E");
    cr_assert_eq(kcr_quantity_add(&big, &n, &r), KCR_OK);
    expect_text(&r, "5000000000000000000000000001n");
    cr_assert_eq(kcr_quantity_sub(&r, &n, &r), KCR_OK);
    expect_text(&r, "5E");
    cr_expect_eq(kcr_quantity_cmp(&r, &big), 0);
    /* sign changes */
    kcr_quantity m3 = Q("3m"), one = Q("1");
    cr_assert_eq(kcr_quantity_sub(&m3, &one, &r), KCR_OK);
    expect_text(&r, "-997m");
    cr_assert_eq(kcr_quantity_add(&r, &one, &r), KCR_OK);
    expect_text(&r, "3m");
    cr_assert_eq(kcr_quantity_sub(&m3, &m3, &r), KCR_OK);
    expect_text(&r, "0");
    cr_expect_eq(kcr_quantity_sign(&r), 0);
    /* overflow is reported, *out untouched */
    kcr_quantity huge = Q("1e100"), before = Q("7");
    r = before;
    cr_expect_eq(kcr_quantity_add(&huge, &n, &r), KCR_ERR_TOO_LARGE);
    cr_expect_eq(kcr_quantity_cmp(&r, &before), 0);
    kcr_quantity nines = Q("99999999999999999999999999999999999999");
    cr_expect_eq(kcr_quantity_add(&nines, &nines, &r), KCR_OK);
    expect_text(&r, "199999999999999999999999999999999999998");
    cr_expect_eq(kcr_quantity_add(&r, &r, &r), KCR_ERR_TOO_LARGE);
    kcr_quantity neg = kcr_quantity_neg(Q("1.5Gi"));
    expect_text(&neg, "-1536Mi");
    kcr_quantity negz = kcr_quantity_neg(zero);
    cr_expect_eq(kcr_quantity_sign(&negz), 0);
    cr_expect_eq(kcr_quantity_add(NULL, &n, &r), KCR_ERR_INVALID);
}

Test(quantity, int64_values)
{
    static const struct {
        const char *in;
        int32_t scale;
        int64_t want;
    } cases[] = {
        {"1n", -9, 1},       {"1n", -6, 1},        {"1n", -3, 1},        {"1n", 0, 1},
        {"1u", -9, 1000},    {"1m", -6, 1000},     {"1", -9, 1000000000}, {"1", 0, 1},
        {"1.5", 0, 2},       {"-1.5", 0, -2},      {"500m", -3, 500},    {"1Gi", 0, 1073741824},
        {"2Ki", -3, 2048000}, {"100", -2, 10000},  {"9223372036854775807", 0, INT64_MAX},
        {"-9223372036854775808", 0, INT64_MIN},    {"9223372036854775807m", -3, INT64_MAX},
        {"1E", 0, 1000000000000000000},            {"1001m", 0, 2},      {"0", 5, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        kcr_quantity q = Q(cases[i].in);
        int64_t v = 42;
        cr_expect_eq(kcr_quantity_scaled_value(&q, cases[i].scale, &v), KCR_OK, "%s", cases[i].in);
        cr_expect_eq(v, cases[i].want, "%s at 10^%d: %lld", cases[i].in, cases[i].scale,
                     (long long)v);
    }
    kcr_quantity q = Q("9223372036854775808");
    int64_t v = 42;
    cr_expect_eq(kcr_quantity_value(&q, &v), KCR_ERR_TOO_LARGE);
    cr_expect_eq(v, 42);
    q = Q("9223372036854775807");
    cr_expect_eq(kcr_quantity_milli_value(&q, &v), KCR_ERR_TOO_LARGE);
    q = Q("-9223372036854775809");
    cr_expect_eq(kcr_quantity_value(&q, &v), KCR_ERR_TOO_LARGE);
    q = Q("2.5");
    cr_expect_eq(kcr_quantity_milli_value(&q, &v), KCR_OK);
    cr_expect_eq(v, 2500);
    q = Q("1e40");
    cr_expect_eq(kcr_quantity_scaled_value(&q, 39, &v), KCR_OK);
    cr_expect_eq(v, 10);
    cr_expect_eq(kcr_quantity_scaled_value(&q, -9, &v), KCR_ERR_TOO_LARGE);
}

Test(quantity, from_int64)
{
    kcr_quantity q;
    cr_assert_eq(kcr_quantity_from_int64(1500, -3, KCR_QUANTITY_DECIMAL_SI, &q), KCR_OK);
    expect_text(&q, "1500m");
    cr_assert_eq(kcr_quantity_from_int64(1536 * 1024 * 1024LL, 0, KCR_QUANTITY_BINARY_SI, &q),
                 KCR_OK);
    expect_text(&q, "1536Mi");
    cr_assert_eq(kcr_quantity_from_int64(3000, 0, KCR_QUANTITY_DECIMAL_EXPONENT, &q), KCR_OK);
    expect_text(&q, "3e3");
    cr_assert_eq(kcr_quantity_from_int64(INT64_MIN, 0, KCR_QUANTITY_DECIMAL_SI, &q), KCR_OK);
    expect_text(&q, "-9223372036854775808");
    int64_t v;
    cr_expect_eq(kcr_quantity_value(&q, &v), KCR_OK);
    cr_expect_eq(v, INT64_MIN);
    cr_assert_eq(kcr_quantity_from_int64(0, 3, KCR_QUANTITY_BINARY_SI, &q), KCR_OK);
    expect_text(&q, "0");
    cr_expect_eq(q.format, KCR_QUANTITY_BINARY_SI);
    cr_expect_eq(kcr_quantity_from_int64(1, -10, KCR_QUANTITY_DECIMAL_SI, &q), KCR_ERR_INVALID);
    cr_expect_eq(kcr_quantity_from_int64(1, 0, (kcr_quantity_format)7, &q), KCR_ERR_INVALID);
}

Test(quantity, to_string_truncates_like_snprintf)
{
    kcr_quantity q = Q("1536Mi");
    char buf[4];
    cr_expect_eq(kcr_quantity_to_string(&q, buf, sizeof buf), 6);
    cr_expect_str_eq(buf, "153");
    cr_expect_eq(kcr_quantity_to_string(&q, NULL, 0), 6);
}
