/* The metrics registry and its text exposition: exact text of a small
 * registry, escaping, histogram buckets, float formatting, concurrent
 * updates, registration rules, the series limit, collectors. */
#include <criterion/criterion.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kcr/metrics.h"

static kcr_metrics *reg;

static void setup(void)
{
    cr_assert_eq(kcr_metrics_new(NULL, &reg), KCR_OK);
}

static void teardown(void)
{
    kcr_metrics_free(reg);
    reg = NULL;
}

static kcr_metric_family *family(const char *name, kcr_metric_type type, const char *help,
                                 const char *const *labels, size_t n_labels)
{
    kcr_metric_desc d = {name, help, type, labels, n_labels, NULL, 0};
    kcr_metric_family *f;
    cr_assert_eq(kcr_metrics_register(reg, &d, &f), KCR_OK, "%s: %s", name, kcr_last_error());
    return f;
}

static kcr_metric *series(kcr_metric_family *f, const char *const *values)
{
    kcr_metric *s;
    cr_assert_eq(kcr_metric_family_series(f, values, &s), KCR_OK, "%s", kcr_last_error());
    return s;
}

/* The exposition; the caller frees it. */
static char *text(void)
{
    char *out;
    size_t len;
    cr_assert_eq(kcr_metrics_write_text(reg, &out, &len), KCR_OK, "%s", kcr_last_error());
    cr_assert_eq(len, strlen(out));
    return out;
}

Test(metrics, exact_text_of_a_small_registry, .init = setup, .fini = teardown)
{
    static const char *const code_method[] = {"code", "method"};
    static const double bounds[] = {0.1, 1};
    kcr_metric_family *req = family("http_requests_total", KCR_METRIC_COUNTER,
                                    "Requests served.", code_method, 2);
    kcr_metric_family *temp = family("room_temperature_celsius", KCR_METRIC_GAUGE,
                                     "Temperature.", NULL, 0);
    kcr_metric_desc hd = {"latency_seconds", "Latency.", KCR_METRIC_HISTOGRAM, NULL, 0, bounds, 2};
    kcr_metric_family *lat;
    cr_assert_eq(kcr_metrics_register(reg, &hd, &lat), KCR_OK);

    /* created out of order: the exposition sorts them */
    kcr_metric_add(series(req, (const char *const[]){"500", "POST"}), 2);
    kcr_metric_inc(series(req, (const char *const[]){"200", "GET"}));
    kcr_metric_inc(series(req, (const char *const[]){"200", "GET"}));
    kcr_metric_inc(series(req, (const char *const[]){"200", "DELETE"}));
    kcr_metric_set(series(temp, NULL), 21.5);
    kcr_metric *l = series(lat, NULL);
    kcr_metric_observe(l, 0.05);
    kcr_metric_observe(l, 0.1); /* le is inclusive */
    kcr_metric_observe(l, 0.5);
    kcr_metric_observe(l, 3);

    char *out = text();
    cr_assert_str_eq(out, "# HELP http_requests_total Requests served.\n"
                          "# TYPE http_requests_total counter\n"
                          "http_requests_total{code=\"200\",method=\"DELETE\"} 1\n"
                          "http_requests_total{code=\"200\",method=\"GET\"} 2\n"
                          "http_requests_total{code=\"500\",method=\"POST\"} 2\n"
                          "# HELP latency_seconds Latency.\n"
                          "# TYPE latency_seconds histogram\n"
                          "latency_seconds_bucket{le=\"0.1\"} 2\n"
                          "latency_seconds_bucket{le=\"1\"} 3\n"
                          "latency_seconds_bucket{le=\"+Inf\"} 4\n"
                          "latency_seconds_sum 3.65\n"
                          "latency_seconds_count 4\n"
                          "# HELP room_temperature_celsius Temperature.\n"
                          "# TYPE room_temperature_celsius gauge\n"
                          "room_temperature_celsius 21.5\n");
    free(out);
}

Test(metrics, empty_registry_and_unused_families_write_nothing, .init = setup, .fini = teardown)
{
    char *out = text();
    cr_assert_str_eq(out, "");
    free(out);
    static const char *const l[] = {"x"};
    family("labelled_total", KCR_METRIC_COUNTER, "No series yet.", l, 1);
    out = text();
    cr_assert_str_eq(out, "");
    free(out);
    family("plain_total", KCR_METRIC_COUNTER, "Its one series exists at once.", NULL, 0);
    out = text();
    cr_assert_str_eq(out, "# HELP plain_total Its one series exists at once.\n"
                          "# TYPE plain_total counter\n"
                          "plain_total 0\n");
    free(out);
}

Test(metrics, label_values_and_help_are_escaped, .init = setup, .fini = teardown)
{
    static const char *const l[] = {"path"};
    kcr_metric_family *f =
        family("odd_total", KCR_METRIC_COUNTER, "Back\\slash, \"quotes\" and\nnewline.", l, 1);
    kcr_metric_inc(series(f, (const char *const[]){"C:\\dir \"x\"\nnext"}));
    kcr_metric_inc(series(f, (const char *const[]){"caf\xc3\xa9"}));
    char *out = text();
    cr_assert_str_eq(out, "# HELP odd_total Back\\\\slash, \"quotes\" and\\nnewline.\n"
                          "# TYPE odd_total counter\n"
                          "odd_total{path=\"C:\\\\dir \\\"x\\\"\\nnext\"} 1\n"
                          "odd_total{path=\"caf\xc3\xa9\"} 1\n");
    free(out);
}

Test(metrics, special_floats_and_precision, .init = setup, .fini = teardown)
{
    static const char *const l[] = {"case"};
    kcr_metric_family *g = family("value", KCR_METRIC_GAUGE, "Values.", l, 1);
    kcr_metric_set(series(g, (const char *const[]){"a_pos_inf"}), INFINITY);
    kcr_metric_set(series(g, (const char *const[]){"b_neg_inf"}), -INFINITY);
    kcr_metric_set(series(g, (const char *const[]){"c_nan"}), NAN);
    kcr_metric_set(series(g, (const char *const[]){"d_tenth"}), 0.1);
    kcr_metric_set(series(g, (const char *const[]){"e_third"}), 1.0 / 3);
    kcr_metric_set(series(g, (const char *const[]){"f_big"}), 1e21);
    kcr_metric_set(series(g, (const char *const[]){"g_negative"}), -2.5);
    kcr_metric_set(series(g, (const char *const[]){"h_integer"}), 1234567890);
    char *out = text();
    cr_assert_str_eq(out, "# HELP value Values.\n"
                          "# TYPE value gauge\n"
                          "value{case=\"a_pos_inf\"} +Inf\n"
                          "value{case=\"b_neg_inf\"} -Inf\n"
                          "value{case=\"c_nan\"} NaN\n"
                          "value{case=\"d_tenth\"} 0.1\n"
                          "value{case=\"e_third\"} 0.3333333333333333\n"
                          "value{case=\"f_big\"} 1e+21\n"
                          "value{case=\"g_negative\"} -2.5\n"
                          "value{case=\"h_integer\"} 1234567890\n");
    free(out);
}

Test(metrics, histogram_buckets_are_cumulative_with_labels, .init = setup, .fini = teardown)
{
    static const char *const l[] = {"op"};
    static const double bounds[] = {1e-8, 0.5, 2};
    kcr_metric_desc d = {"op_seconds", "Op time.", KCR_METRIC_HISTOGRAM, l, 1, bounds, 3};
    kcr_metric_family *f;
    cr_assert_eq(kcr_metrics_register(reg, &d, &f), KCR_OK);
    kcr_metric *s = series(f, (const char *const[]){"read"});
    kcr_metric_observe(s, 0);   /* first bucket */
    kcr_metric_observe(s, 2);   /* le="2" (inclusive) */
    kcr_metric_observe(s, 100); /* only +Inf */
    kcr_metric_observe(s, NAN); /* only +Inf; the sum becomes NaN as in client_golang */
    cr_assert_eq(kcr_metric_value(s), 4.0);
    char *out = text();
    cr_assert_str_eq(out, "# HELP op_seconds Op time.\n"
                          "# TYPE op_seconds histogram\n"
                          "op_seconds_bucket{op=\"read\",le=\"1e-08\"} 1\n"
                          "op_seconds_bucket{op=\"read\",le=\"0.5\"} 1\n"
                          "op_seconds_bucket{op=\"read\",le=\"2\"} 2\n"
                          "op_seconds_bucket{op=\"read\",le=\"+Inf\"} 4\n"
                          "op_seconds_sum{op=\"read\"} NaN\n"
                          "op_seconds_count{op=\"read\"} 4\n");
    free(out);
}

Test(metrics, default_histogram_buckets, .init = setup, .fini = teardown)
{
    kcr_metric_family *f = family("d_seconds", KCR_METRIC_HISTOGRAM, "Default.", NULL, 0);
    (void)f;
    char *out = text();
    const char *bounds[] = {"0.005", "0.01", "0.025", "0.05", "0.1", "0.25",
                            "0.5",   "1",    "2.5",   "5",    "10",  "+Inf"};
    const char *p = out;
    for (size_t i = 0; i < sizeof bounds / sizeof *bounds; i++) {
        char line[64];
        snprintf(line, sizeof line, "d_seconds_bucket{le=\"%s\"} 0\n", bounds[i]);
        const char *at = strstr(p, line);
        cr_assert_not_null(at, "missing or out of order: %s in\n%s", line, out);
        p = at + strlen(line);
    }
    cr_assert_not_null(strstr(out, "d_seconds_sum 0\nd_seconds_count 0\n"), "%s", out);
    free(out);
}

Test(metrics, updates_of_the_wrong_kind_are_ignored, .init = setup, .fini = teardown)
{
    kcr_metric *c = series(family("c_total", KCR_METRIC_COUNTER, "C.", NULL, 0), NULL);
    kcr_metric *g = series(family("g", KCR_METRIC_GAUGE, "G.", NULL, 0), NULL);
    kcr_metric *h = series(family("h", KCR_METRIC_HISTOGRAM, "H.", NULL, 0), NULL);
    kcr_metric_add(c, 5);
    kcr_metric_add(c, -1); /* counters only go up */
    kcr_metric_set(c, 100);
    kcr_metric_observe(c, 1);
    cr_assert_eq(kcr_metric_value(c), 5.0);
    kcr_metric_inc(g);
    kcr_metric_add(g, -3);
    kcr_metric_observe(g, 1);
    cr_assert_eq(kcr_metric_value(g), -2.0);
    kcr_metric_inc(h);
    kcr_metric_set(h, 7);
    cr_assert_eq(kcr_metric_value(h), 0.0);
    kcr_metric_inc(NULL);
    cr_assert_eq(kcr_metric_value(NULL), 0.0);
}

enum { THREADS = 4, PER_THREAD = 100000 };

static void *hammer(void *arg)
{
    kcr_metric **s = arg;
    for (int i = 0; i < PER_THREAD; i++) {
        kcr_metric_inc(s[0]);
        kcr_metric_add(s[1], 0.5);
        kcr_metric_observe(s[2], (double)(i % 3));
    }
    return NULL;
}

Test(metrics, concurrent_updates_sum_exactly, .init = setup, .fini = teardown)
{
    kcr_metric *s[3] = {
        series(family("hits_total", KCR_METRIC_COUNTER, "Hits.", NULL, 0), NULL),
        series(family("level", KCR_METRIC_GAUGE, "Level.", NULL, 0), NULL),
        series(family("obs", KCR_METRIC_HISTOGRAM, "Obs.", NULL, 0), NULL),
    };
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        cr_assert_eq(pthread_create(&t[i], NULL, hammer, s), 0);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    cr_assert_eq(kcr_metric_value(s[0]), (double)THREADS * PER_THREAD);
    cr_assert_eq(kcr_metric_value(s[1]), THREADS * PER_THREAD * 0.5);
    cr_assert_eq(kcr_metric_value(s[2]), (double)THREADS * PER_THREAD);
    char *out = text();
    /* i % 3 is 0, 1, 2: a third <= 0.005, two thirds <= 1, all <= 2.5 */
    char line[96];
    snprintf(line, sizeof line, "obs_bucket{le=\"2.5\"} %d\n", THREADS * PER_THREAD);
    cr_assert_not_null(strstr(out, line), "%s", out);
    long sum = 0;
    for (int i = 0; i < PER_THREAD; i++)
        sum += i % 3;
    snprintf(line, sizeof line, "obs_sum %ld\n", sum * THREADS);
    cr_assert_not_null(strstr(out, line), "%s wanted %s", out, line);
    free(out);
}

static void *lookup_and_inc(void *arg)
{
    kcr_metric_family *f = arg;
    char v[8];
    for (int i = 0; i < 1000; i++) {
        snprintf(v, sizeof v, "%d", i % 50);
        const char *values[] = {v};
        kcr_metric *s;
        if (kcr_metric_family_series(f, values, &s) != KCR_OK)
            return (void *)1;
        kcr_metric_inc(s);
    }
    return NULL;
}

Test(metrics, concurrent_series_creation_gives_one_series_per_label_set, .init = setup,
     .fini = teardown)
{
    static const char *const l[] = {"k"};
    kcr_metric_family *f = family("keyed_total", KCR_METRIC_COUNTER, "Keyed.", l, 1);
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        cr_assert_eq(pthread_create(&t[i], NULL, lookup_and_inc, f), 0);
    for (int i = 0; i < THREADS; i++) {
        void *r;
        pthread_join(t[i], &r);
        cr_assert_null(r);
    }
    for (int i = 0; i < 50; i++) {
        char v[8];
        snprintf(v, sizeof v, "%d", i);
        cr_assert_eq(kcr_metric_value(series(f, (const char *const[]){v})), THREADS * 20.0);
    }
}

Test(metrics, registering_again_returns_the_family_or_refuses_another_shape, .init = setup,
     .fini = teardown)
{
    static const char *const ab[] = {"a", "b"};
    static const char *const ba[] = {"b", "a"};
    static const double b1[] = {1, 2}, b2[] = {1, 3};
    kcr_metric_family *f = family("x_total", KCR_METRIC_COUNTER, "X.", ab, 2);
    cr_assert_eq(family("x_total", KCR_METRIC_COUNTER, "Other help is fine.", ab, 2), f);
    kcr_metric_family *g;
    kcr_metric_desc d = {"x_total", "X.", KCR_METRIC_GAUGE, ab, 2, NULL, 0};
    cr_assert_eq(kcr_metrics_register(reg, &d, &g), KCR_ERR_EXISTS);
    cr_assert_null(g);
    cr_assert_not_null(strstr(kcr_last_error(), "x_total"), "%s", kcr_last_error());
    d = (kcr_metric_desc){"x_total", "X.", KCR_METRIC_COUNTER, ba, 2, NULL, 0};
    cr_assert_eq(kcr_metrics_register(reg, &d, &g), KCR_ERR_EXISTS);
    d = (kcr_metric_desc){"x_total", "X.", KCR_METRIC_COUNTER, ab, 1, NULL, 0};
    cr_assert_eq(kcr_metrics_register(reg, &d, &g), KCR_ERR_EXISTS);

    kcr_metric_desc h = {"h_seconds", "H.", KCR_METRIC_HISTOGRAM, NULL, 0, b1, 2};
    kcr_metric_family *h1, *h2;
    cr_assert_eq(kcr_metrics_register(reg, &h, &h1), KCR_OK);
    cr_assert_eq(kcr_metrics_register(reg, &h, &h2), KCR_OK);
    cr_assert_eq(h1, h2);
    h.buckets = b2;
    cr_assert_eq(kcr_metrics_register(reg, &h, &h2), KCR_ERR_EXISTS);
}

Test(metrics, bad_descriptions_are_invalid, .init = setup, .fini = teardown)
{
    static const char *const le[] = {"le"};
    static const char *const reserved[] = {"__name"};
    static const char *const dup[] = {"a", "a"};
    static const char *const bad[] = {"a-b"};
    static const double unsorted[] = {1, 0.5}, nan_bound[] = {NAN};
    const kcr_metric_desc cases[] = {
        {"1starts_with_digit", "", KCR_METRIC_COUNTER, NULL, 0, NULL, 0},
        {"has-dash", "", KCR_METRIC_COUNTER, NULL, 0, NULL, 0},
        {"", "", KCR_METRIC_COUNTER, NULL, 0, NULL, 0},
        {NULL, "", KCR_METRIC_COUNTER, NULL, 0, NULL, 0},
        {"ok", "", (kcr_metric_type)9, NULL, 0, NULL, 0},
        {"ok", "", KCR_METRIC_HISTOGRAM, le, 1, NULL, 0},
        {"ok", "", KCR_METRIC_COUNTER, reserved, 1, NULL, 0},
        {"ok", "", KCR_METRIC_COUNTER, dup, 2, NULL, 0},
        {"ok", "", KCR_METRIC_COUNTER, bad, 1, NULL, 0},
        {"ok", "", KCR_METRIC_COUNTER, NULL, 2, NULL, 0},
        {"ok", "", KCR_METRIC_HISTOGRAM, NULL, 0, unsorted, 2},
        {"ok", "", KCR_METRIC_HISTOGRAM, NULL, 0, nan_bound, 1},
        {"ok", "bad utf-8 \xff", KCR_METRIC_COUNTER, NULL, 0, NULL, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        kcr_metric_family *f;
        cr_assert_eq(kcr_metrics_register(reg, &cases[i], &f), KCR_ERR_INVALID, "case %zu", i);
        cr_assert_str_not_empty(kcr_last_error());
    }
    kcr_metric_family *f;
    cr_assert_eq(kcr_metrics_register(reg, NULL, &f), KCR_ERR_INVALID);
    cr_assert_eq(kcr_metrics_register(NULL, &cases[0], &f), KCR_ERR_INVALID);
    /* colons are allowed in metric names, +Inf spelled out as the last bound too */
    static const double with_inf[] = {1, INFINITY};
    kcr_metric_desc ok = {"ns:sub_seconds", "", KCR_METRIC_HISTOGRAM, NULL, 0, with_inf, 2};
    cr_assert_eq(kcr_metrics_register(reg, &ok, &f), KCR_OK, "%s", kcr_last_error());
}

Test(metrics, bad_label_values_are_invalid, .init = setup, .fini = teardown)
{
    static const char *const l[] = {"a", "b"};
    kcr_metric_family *f = family("v_total", KCR_METRIC_COUNTER, "V.", l, 2);
    kcr_metric *s;
    cr_assert_eq(kcr_metric_family_series(f, (const char *const[]){"x", NULL}, &s),
                 KCR_ERR_INVALID);
    cr_assert_null(s);
    cr_assert_eq(kcr_metric_family_series(f, (const char *const[]){"x", "\xc3("}, &s),
                 KCR_ERR_INVALID);
    cr_assert_eq(kcr_metric_family_series(f, (const char *const[]){"\xed\xa0\x80", "y"}, &s),
                 KCR_ERR_INVALID); /* a UTF-16 surrogate */
    cr_assert_eq(kcr_metric_family_series(f, NULL, &s), KCR_ERR_INVALID);
    cr_assert_eq(kcr_metric_family_series(f, (const char *const[]){"", ""}, &s), KCR_OK);
}

Test(metrics, series_past_the_limit_are_refused)
{
    kcr_metrics_options o = {.max_series_per_family = 3};
    cr_assert_eq(kcr_metrics_new(&o, &reg), KCR_OK);
    static const char *const l[] = {"id"};
    kcr_metric_family *f = family("ids_total", KCR_METRIC_COUNTER, "Ids.", l, 1);
    kcr_metric *first = series(f, (const char *const[]){"1"});
    series(f, (const char *const[]){"2"});
    series(f, (const char *const[]){"3"});
    kcr_metric *s;
    cr_assert_eq(kcr_metric_family_series(f, (const char *const[]){"4"}, &s), KCR_ERR_TOO_LARGE);
    cr_assert_not_null(strstr(kcr_last_error(), "ids_total"), "%s", kcr_last_error());
    /* existing series are still found */
    cr_assert_eq(series(f, (const char *const[]){"1"}), first);
    kcr_metrics_free(reg);
}

static void refresh(kcr_metrics *m, void *user_data)
{
    int *calls = user_data;
    (*calls)++;
    kcr_metric_family *f;
    kcr_metric_desc d = {"refreshed", "Set by a collector.", KCR_METRIC_GAUGE, NULL, 0, NULL, 0};
    kcr_metric *s;
    if (kcr_metrics_register(m, &d, &f) == KCR_OK && kcr_metric_family_series(f, NULL, &s) == KCR_OK)
        kcr_metric_set(s, *calls * 10);
}

Test(metrics, collectors_run_before_each_exposition, .init = setup, .fini = teardown)
{
    int calls = 0;
    cr_assert_eq(kcr_metrics_add_collector(reg, refresh, &calls), KCR_OK);
    cr_assert_eq(kcr_metrics_add_collector(reg, NULL, NULL), KCR_ERR_INVALID);
    char *out = text();
    cr_assert_eq(calls, 1);
    cr_assert_not_null(strstr(out, "\nrefreshed 10\n"), "%s", out);
    free(out);
    out = text();
    cr_assert_not_null(strstr(out, "\nrefreshed 20\n"), "%s", out);
    free(out);
}

/* A collector that sets a counter to an absolute total by adding the
 * difference: correct only if collectors never overlap. */
struct totals {
    atomic_int inside, overlaps;
    kcr_metric *counter;
    int source;
};

static void catch_up(kcr_metrics *m, void *user_data)
{
    struct totals *t = user_data;
    if (atomic_fetch_add(&t->inside, 1) != 0)
        atomic_fetch_add(&t->overlaps, 1);
    t->source += 3; /* the absolute total it mirrors (only touched here) */
    double cur = kcr_metric_value(t->counter);
    sched_yield(); /* widen the read-then-add window */
    kcr_metric_add(t->counter, t->source - cur);
    atomic_fetch_sub(&t->inside, 1);
}

static void *scrape_many(void *arg)
{
    for (int i = 0; i < 200; i++) {
        char *out;
        if (kcr_metrics_write_text(arg, &out, NULL) != KCR_OK)
            return (void *)1;
        free(out);
    }
    return NULL;
}

Test(metrics, collectors_of_concurrent_scrapes_never_overlap, .init = setup, .fini = teardown)
{
    struct totals t = {.counter = series(family("mirrored_total", KCR_METRIC_COUNTER,
                                                "Mirrored.", NULL, 0),
                                         NULL)};
    cr_assert_eq(kcr_metrics_add_collector(reg, catch_up, &t), KCR_OK);
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++)
        cr_assert_eq(pthread_create(&th[i], NULL, scrape_many, reg), 0);
    for (int i = 0; i < THREADS; i++) {
        void *r;
        pthread_join(th[i], &r);
        cr_assert_null(r);
    }
    cr_assert_eq(atomic_load(&t.overlaps), 0);
    cr_assert_eq(kcr_metric_value(t.counter), (double)t.source);
    cr_assert_eq(t.source, 3 * THREADS * 200);
}

Test(metrics, null_arguments)
{
    cr_assert_eq(kcr_metrics_new(NULL, NULL), KCR_ERR_INVALID);
    char *out = (char *)"x";
    cr_assert_eq(kcr_metrics_write_text(NULL, &out, NULL), KCR_ERR_INVALID);
    cr_assert_null(out);
    kcr_metrics_free(NULL);
}
