/* The Prometheus text exposition format 0.0.4: per family "# HELP" and
 * "# TYPE" lines, then one line per series (histograms: cumulative _bucket
 * lines with le up to "+Inf", then _sum and _count). Families come sorted by
 * name, series by label values; floats are written in the C locale with the
 * shortest precision that reads back exactly, and as +Inf, -Inf, NaN. */
#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/buf.h"
#include "metrics/metrics_impl.h"
#include "core/error.h"

static pthread_once_t c_locale_once = PTHREAD_ONCE_INIT;
static locale_t c_locale;

static void make_c_locale(void)
{
    c_locale = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
}

/* v as Prometheus reads it; needs the C locale (for '.' and strtod). */
static void format_double(double v, char buf[32])
{
    if (isnan(v)) {
        snprintf(buf, 32, "NaN");
        return;
    }
    if (isinf(v)) {
        snprintf(buf, 32, "%cInf", v > 0 ? '+' : '-');
        return;
    }
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, 32, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            return;
    }
}

/* Appends s with backslash and newline escaped (and double quotes, in label values). */
static void escaped(kcr__buf *b, const char *s, bool quote)
{
    for (; *s; s++) {
        if (*s == '\\')
            kcr__buf_add(b, "\\\\", 2);
        else if (*s == '\n')
            kcr__buf_add(b, "\\n", 2);
        else if (quote && *s == '"')
            kcr__buf_add(b, "\\\"", 2);
        else
            kcr__buf_add(b, s, 1);
    }
}

/* NAME[SUFFIX]{labels[,le="LE"]} VALUE\n */
static void sample(kcr__buf *b, const kcr_metric *s, const char *suffix, const char *le,
                   const char *value)
{
    const kcr_metric_family *f = s->family;
    kcr__buf_str(b, f->name);
    kcr__buf_str(b, suffix);
    if (f->n_labels || le) {
        kcr__buf_add(b, "{", 1);
        for (size_t i = 0; i < f->n_labels; i++) {
            if (i)
                kcr__buf_add(b, ",", 1);
            kcr__buf_str(b, f->label_names[i]);
            kcr__buf_add(b, "=\"", 2);
            escaped(b, s->label_values[i], true);
            kcr__buf_add(b, "\"", 1);
        }
        if (le) {
            kcr__buf_str(b, f->n_labels ? ",le=\"" : "le=\"");
            kcr__buf_str(b, le);
            kcr__buf_add(b, "\"", 1);
        }
        kcr__buf_add(b, "}", 1);
    }
    kcr__buf_add(b, " ", 1);
    kcr__buf_str(b, value);
    kcr__buf_add(b, "\n", 1);
}

static void histogram(kcr__buf *b, const kcr_metric *s)
{
    const kcr_metric_family *f = s->family;
    char le[32], num[32];
    uint64_t cumulative = 0;
    for (size_t i = 0; i <= f->n_buckets; i++) {
        cumulative += atomic_load_explicit(&s->bucket_hits[i], memory_order_relaxed);
        format_double(i < f->n_buckets ? f->buckets[i] : INFINITY, le);
        snprintf(num, sizeof num, "%llu", (unsigned long long)cumulative);
        sample(b, s, "_bucket", le, num);
    }
    format_double(kcr__metric_double(atomic_load_explicit(&s->value, memory_order_relaxed)), num);
    sample(b, s, "_sum", NULL, num);
    snprintf(num, sizeof num, "%llu", (unsigned long long)cumulative);
    sample(b, s, "_count", NULL, num);
}

static const char *type_name(kcr_metric_type t)
{
    switch (t) {
    case KCR_METRIC_COUNTER: return "counter";
    case KCR_METRIC_GAUGE: return "gauge";
    case KCR_METRIC_HISTOGRAM: return "histogram";
    }
    return "untyped";
}

/* A family without series is left out (it has nothing to say yet). */
static kcr_err family(kcr__buf *b, kcr_metric_family *f)
{
    kcr_metric **series;
    size_t n;
    kcr_err err = kcr__metric_family_snapshot(f, &series, &n);
    if (err != KCR_OK)
        return err;
    if (n) {
        kcr__buf_printf(b, "# HELP %s ", f->name);
        escaped(b, f->help, false);
        kcr__buf_printf(b, "\n# TYPE %s %s\n", f->name, type_name(f->type));
    }
    for (size_t i = 0; i < n; i++) {
        if (f->type == KCR_METRIC_HISTOGRAM) {
            histogram(b, series[i]);
        } else {
            char num[32];
            format_double(kcr_metric_value(series[i]), num);
            sample(b, series[i], "", NULL, num);
        }
    }
    free(series);
    return KCR_OK;
}

static kcr_err run_collectors(kcr_metrics *m)
{
    kcr__metrics_collector *c;
    size_t n;
    kcr_err err = kcr__metrics_collectors(m, &c, &n);
    if (err != KCR_OK)
        return err;
    pthread_mutex_lock(&m->collect_lock);
    for (size_t i = 0; i < n; i++)
        c[i].collect(m, c[i].user_data);
    pthread_mutex_unlock(&m->collect_lock);
    free(c);
    return KCR_OK;
}

kcr_err kcr_metrics_write_text(kcr_metrics *m, char **out, size_t *len)
{
    if (out)
        *out = NULL;
    if (len)
        *len = 0;
    if (!m || !out)
        return kcr__fail(KCR_ERR_INVALID, "kcr_metrics_write_text: NULL argument");
    pthread_once(&c_locale_once, make_c_locale);
    if (c_locale == (locale_t)0)
        return kcr__fail(KCR_ERR_NOMEM, "metrics: cannot create the C locale");
    if (run_collectors(m) != KCR_OK)
        return kcr__fail(KCR_ERR_NOMEM, "metrics: out of memory");
    kcr_metric_family **fams;
    size_t n;
    if (kcr__metrics_families(m, &fams, &n) != KCR_OK)
        return kcr__fail(KCR_ERR_NOMEM, "metrics: out of memory");
    locale_t previous = uselocale(c_locale);
    kcr__buf b = {0};
    kcr__buf_add(&b, "", 0); /* an empty registry still gives "" */
    kcr_err err = KCR_OK;
    for (size_t i = 0; i < n && err == KCR_OK; i++)
        err = family(&b, fams[i]);
    uselocale(previous);
    free(fams);
    if (err != KCR_OK || b.oom) {
        kcr__buf_free(&b);
        return kcr__fail(KCR_ERR_NOMEM, "metrics: out of memory writing the exposition");
    }
    *out = b.s;
    if (len)
        *len = b.len;
    return KCR_OK;
}
