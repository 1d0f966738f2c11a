/* The metrics registry: families sorted by name under the registry's mutex,
 * series sorted by label values under their family's mutex (registration and
 * lookup only: updates are lock-free, see metrics_value.c). */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "metrics/metrics_impl.h"
#include "core/abi.h"
#include "core/error.h"
#include "core/grow.h"

enum { DEFAULT_MAX_SERIES = 10000 };

static const double default_buckets[] = {.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10};

kcr_err (kcr_metrics_new)(size_t opts_size, const kcr_metrics_options *opts, kcr_metrics **out)
{
    KCR__ABI_OPTS(kcr_metrics_options, opts, opts_size);
    if (!out)
        return kcr__fail(KCR_ERR_INVALID, "kcr_metrics_new: out is NULL");
    *out = NULL;
    kcr_metrics *m = calloc(1, sizeof *m);
    if (!m)
        return kcr__fail(KCR_ERR_NOMEM, "kcr_metrics_new: out of memory");
    m->max_series = opts && opts->max_series_per_family ? opts->max_series_per_family
                                                        : DEFAULT_MAX_SERIES;
    pthread_mutex_init(&m->lock, NULL);
    pthread_mutex_init(&m->collect_lock, NULL);
    *out = m;
    return KCR_OK;
}

static void free_strings(char **s, size_t n)
{
    if (!s)
        return;
    for (size_t i = 0; i < n; i++)
        free(s[i]);
    free(s);
}

static void series_free(kcr_metric *s)
{
    free_strings(s->label_values, s->family->n_labels);
    free(s->bucket_hits);
    free(s);
}

static void family_free(kcr_metric_family *f)
{
    for (size_t i = 0; i < f->n_series; i++)
        series_free(f->series[i]);
    free(f->series);
    pthread_mutex_destroy(&f->lock);
    free(f->name);
    free(f->help);
    free_strings(f->label_names, f->n_labels);
    free(f->buckets);
    free(f);
}

void kcr_metrics_free(kcr_metrics *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->n_owned; i++)
        m->owned[i].free_fn(m->owned[i].p);
    free(m->owned);
    for (size_t i = 0; i < m->n_families; i++)
        family_free(m->families[i]);
    free(m->families);
    free(m->collectors);
    pthread_mutex_destroy(&m->lock);
    pthread_mutex_destroy(&m->collect_lock);
    free(m);
}

/* ---- validation ---------------------------------------------------------------------- */

static bool name_char(char c, bool first, bool colon)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colon && c == ':') ||
           (!first && c >= '0' && c <= '9');
}

static bool valid_name(const char *s, bool colon)
{
    if (!s || !*s)
        return false;
    for (const char *p = s; *p; p++)
        if (!name_char(*p, p == s, colon))
            return false;
    return true;
}

/* Well-formed UTF-8 (the text format's label values and help must be). */
static bool valid_utf8(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        unsigned c = *p++;
        int more;
        unsigned min;
        if (c < 0x80)
            continue;
        if ((c & 0xE0) == 0xC0) {
            more = 1, min = 0x80, c &= 0x1F;
        } else if ((c & 0xF0) == 0xE0) {
            more = 2, min = 0x800, c &= 0x0F;
        } else if ((c & 0xF8) == 0xF0) {
            more = 3, min = 0x10000, c &= 0x07;
        } else {
            return false;
        }
        for (; more; more--, p++) {
            if ((*p & 0xC0) != 0x80)
                return false;
            c = c << 6 | (*p & 0x3F);
        }
        if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF))
            return false;
    }
    return true;
}

static kcr_err check_desc(const kcr_metric_desc *d, const double **buckets, size_t *n_buckets)
{
    if (!valid_name(d->name, true))
        return kcr__fail(KCR_ERR_INVALID, "metric name \"%s\" is not [a-zA-Z_:][a-zA-Z0-9_:]*",
                         d->name ? d->name : "(null)");
    if (d->type != KCR_METRIC_COUNTER && d->type != KCR_METRIC_GAUGE &&
        d->type != KCR_METRIC_HISTOGRAM)
        return kcr__fail(KCR_ERR_INVALID, "metric %s: unknown type %d", d->name, (int)d->type);
    if (d->help && !valid_utf8(d->help))
        return kcr__fail(KCR_ERR_INVALID, "metric %s: help is not UTF-8", d->name);
    if (d->n_labels && !d->label_names)
        return kcr__fail(KCR_ERR_INVALID, "metric %s: %zu labels but no names", d->name,
                         d->n_labels);
    for (size_t i = 0; i < d->n_labels; i++) {
        const char *l = d->label_names[i];
        if (!valid_name(l, false) || strncmp(l, "__", 2) == 0)
            return kcr__fail(KCR_ERR_INVALID,
                             "metric %s: label name \"%s\" is not [a-zA-Z_][a-zA-Z0-9_]* "
                             "(or starts with the reserved __)",
                             d->name, l ? l : "(null)");
        if (d->type == KCR_METRIC_HISTOGRAM && strcmp(l, "le") == 0)
            return kcr__fail(KCR_ERR_INVALID, "histogram %s: the label \"le\" is reserved",
                             d->name);
        for (size_t j = 0; j < i; j++)
            if (strcmp(l, d->label_names[j]) == 0)
                return kcr__fail(KCR_ERR_INVALID, "metric %s: label \"%s\" given twice",
                                 d->name, l);
    }
    *buckets = NULL;
    *n_buckets = 0;
    if (d->type != KCR_METRIC_HISTOGRAM)
        return KCR_OK;
    const double *b = d->buckets;
    size_t n = d->n_buckets;
    if (!b || !n) {
        b = default_buckets;
        n = sizeof default_buckets / sizeof *default_buckets;
    }
    if (isinf(b[n - 1]) && b[n - 1] > 0)
        n--; /* +Inf is implied; accept it spelled out */
    for (size_t i = 0; i < n; i++)
        if (!isfinite(b[i]) || (i && b[i] <= b[i - 1]))
            return kcr__fail(KCR_ERR_INVALID,
                             "histogram %s: buckets must be finite and strictly ascending "
                             "(bucket %zu is %g)",
                             d->name, i, b[i]);
    *buckets = b;
    *n_buckets = n;
    return KCR_OK;
}

/* Whether an existing family has the shape `d` asks for. */
static bool same_shape(const kcr_metric_family *f, const kcr_metric_desc *d,
                       const double *buckets, size_t n_buckets)
{
    if (f->type != d->type || f->n_labels != d->n_labels || f->n_buckets != n_buckets)
        return false;
    for (size_t i = 0; i < f->n_labels; i++)
        if (strcmp(f->label_names[i], d->label_names[i]) != 0)
            return false;
    for (size_t i = 0; i < n_buckets; i++)
        if (f->buckets[i] != buckets[i])
            return false;
    return true;
}

static char **copy_strings(const char *const *s, size_t n)
{
    char **c = calloc(n ? n : 1, sizeof *c);
    for (size_t i = 0; c && i < n; i++) {
        if (!(c[i] = strdup(s[i]))) {
            free_strings(c, i);
            return NULL;
        }
    }
    return c;
}

static kcr_metric_family *family_new(kcr_metrics *m, const kcr_metric_desc *d,
                                     const double *buckets, size_t n_buckets)
{
    kcr_metric_family *f = calloc(1, sizeof *f);
    if (!f)
        return NULL;
    f->registry = m;
    f->type = d->type;
    f->n_labels = d->n_labels;
    f->n_buckets = n_buckets;
    f->name = strdup(d->name);
    f->help = strdup(d->help ? d->help : "");
    f->label_names = copy_strings(d->label_names, d->n_labels);
    f->buckets = malloc((n_buckets ? n_buckets : 1) * sizeof *f->buckets);
    pthread_mutex_init(&f->lock, NULL);
    if (!f->name || !f->help || !f->label_names || !f->buckets) {
        family_free(f);
        return NULL;
    }
    if (n_buckets)
        memcpy(f->buckets, buckets, n_buckets * sizeof *buckets);
    return f;
}

/* Index of the first family whose name is >= `name`. */
static size_t family_pos(const kcr_metrics *m, const char *name, bool *found)
{
    size_t lo = 0, hi = m->n_families;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (strcmp(m->families[mid]->name, name) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    *found = lo < m->n_families && strcmp(m->families[lo]->name, name) == 0;
    return lo;
}

kcr_err kcr_metrics_register(kcr_metrics *m, const kcr_metric_desc *desc,
                             kcr_metric_family **out)
{
    if (out)
        *out = NULL;
    if (!m || !desc || !out)
        return kcr__fail(KCR_ERR_INVALID, "kcr_metrics_register: NULL argument");
    const double *buckets;
    size_t n_buckets;
    kcr_err err = check_desc(desc, &buckets, &n_buckets);
    if (err != KCR_OK)
        return err;
    pthread_mutex_lock(&m->lock);
    bool found;
    size_t pos = family_pos(m, desc->name, &found);
    if (found) {
        kcr_metric_family *f = m->families[pos];
        bool same = same_shape(f, desc, buckets, n_buckets);
        pthread_mutex_unlock(&m->lock);
        if (!same)
            return kcr__fail(KCR_ERR_EXISTS,
                             "metric %s is already registered with another type, labels or "
                             "buckets",
                             desc->name);
        *out = f;
        return KCR_OK;
    }
    kcr_metric_family *f = NULL;
    kcr_metric_family **grown =
        kcr__grow(m->families, &m->cap_families, m->n_families, sizeof *m->families, 8);
    if (grown) {
        m->families = grown;
        f = family_new(m, desc, buckets, n_buckets);
    }
    if (!f) {
        pthread_mutex_unlock(&m->lock);
        return kcr__fail(KCR_ERR_NOMEM, "metric %s: out of memory", desc->name);
    }
    memmove(m->families + pos + 1, m->families + pos,
            (m->n_families - pos) * sizeof *m->families);
    m->families[pos] = f;
    m->n_families++;
    pthread_mutex_unlock(&m->lock);
    if (f->n_labels == 0) { /* its only series is exported from the start */
        kcr_metric *s;
        if ((err = kcr_metric_family_series(f, NULL, &s)) != KCR_OK)
            return err;
    }
    *out = f;
    return KCR_OK;
}

/* ---- series -------------------------------------------------------------------------- */

static int values_cmp(const kcr_metric_family *f, char *const *a, const char *const *b)
{
    for (size_t i = 0; i < f->n_labels; i++) {
        int c = strcmp(a[i], b[i]);
        if (c)
            return c;
    }
    return 0;
}

static size_t series_pos(const kcr_metric_family *f, const char *const *values, bool *found)
{
    size_t lo = 0, hi = f->n_series;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (values_cmp(f, f->series[mid]->label_values, values) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    *found = lo < f->n_series && values_cmp(f, f->series[lo]->label_values, values) == 0;
    return lo;
}

static kcr_metric *series_new(kcr_metric_family *f, const char *const *values)
{
    kcr_metric *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->family = f;
    s->label_values = copy_strings(values, f->n_labels);
    if (f->type == KCR_METRIC_HISTOGRAM)
        s->bucket_hits = calloc(f->n_buckets + 1, sizeof *s->bucket_hits);
    if (!s->label_values || (f->type == KCR_METRIC_HISTOGRAM && !s->bucket_hits)) {
        series_free(s);
        return NULL;
    }
    atomic_init(&s->value, kcr__metric_bits(0));
    for (size_t i = 0; s->bucket_hits && i <= f->n_buckets; i++)
        atomic_init(&s->bucket_hits[i], 0);
    return s;
}

kcr_err kcr_metric_family_series(kcr_metric_family *f, const char *const *label_values,
                                 kcr_metric **out)
{
    if (out)
        *out = NULL;
    if (!f || !out || (f->n_labels && !label_values))
        return kcr__fail(KCR_ERR_INVALID, "kcr_metric_family_series: NULL argument");
    for (size_t i = 0; i < f->n_labels; i++)
        if (!label_values[i] || !valid_utf8(label_values[i]))
            return kcr__fail(KCR_ERR_INVALID, "metric %s: value of label %s is %s", f->name,
                             f->label_names[i], label_values[i] ? "not UTF-8" : "NULL");
    size_t max = f->registry->max_series;
    pthread_mutex_lock(&f->lock);
    bool found;
    size_t pos = series_pos(f, label_values, &found);
    if (found) {
        *out = f->series[pos];
        pthread_mutex_unlock(&f->lock);
        return KCR_OK;
    }
    if (f->n_series >= max) {
        pthread_mutex_unlock(&f->lock);
        return kcr__fail(KCR_ERR_TOO_LARGE,
                         "metric %s already has %zu series (max_series_per_family): a label "
                         "value is probably unbounded",
                         f->name, max);
    }
    kcr_metric *s = NULL;
    kcr_metric **grown = kcr__grow(f->series, &f->cap_series, f->n_series, sizeof *f->series, 8);
    if (grown) {
        f->series = grown;
        s = series_new(f, label_values);
    }
    if (!s) {
        pthread_mutex_unlock(&f->lock);
        return kcr__fail(KCR_ERR_NOMEM, "metric %s: out of memory", f->name);
    }
    memmove(f->series + pos + 1, f->series + pos, (f->n_series - pos) * sizeof *f->series);
    f->series[pos] = s;
    f->n_series++;
    pthread_mutex_unlock(&f->lock);
    *out = s;
    return KCR_OK;
}

kcr_err kcr__metric_family_snapshot(kcr_metric_family *f, kcr_metric ***out, size_t *n)
{
    *out = NULL;
    *n = 0;
    pthread_mutex_lock(&f->lock);
    kcr_err err = KCR_OK;
    if (f->n_series) {
        *out = malloc(f->n_series * sizeof **out);
        if (*out) {
            memcpy(*out, f->series, f->n_series * sizeof **out);
            *n = f->n_series;
        } else {
            err = kcr__fail(KCR_ERR_NOMEM, "out of memory snapshotting %s", f->name);
        }
    }
    pthread_mutex_unlock(&f->lock);
    return err;
}

/* ---- collectors, owned blocks, snapshots ---------------------------------------------- */

kcr_err kcr_metrics_add_collector(kcr_metrics *m, void (*collect)(kcr_metrics *m, void *user_data),
                                  void *user_data)
{
    if (!m || !collect)
        return kcr__fail(KCR_ERR_INVALID, "kcr_metrics_add_collector: NULL argument");
    pthread_mutex_lock(&m->lock);
    kcr__metrics_collector *grown =
        kcr__grow(m->collectors, &m->cap_collectors, m->n_collectors, sizeof *m->collectors, 8);
    bool ok = grown != NULL;
    if (ok) {
        m->collectors = grown;
        m->collectors[m->n_collectors++] = (kcr__metrics_collector){collect, user_data};
    }
    pthread_mutex_unlock(&m->lock);
    return ok ? KCR_OK : kcr__fail(KCR_ERR_NOMEM, "kcr_metrics_add_collector: out of memory");
}

kcr_err kcr__metrics_own(kcr_metrics *m, void *p, void (*free_fn)(void *p))
{
    pthread_mutex_lock(&m->lock);
    kcr__metrics_owned *grown = kcr__grow(m->owned, &m->cap_owned, m->n_owned, sizeof *m->owned, 8);
    bool ok = grown != NULL;
    if (ok) {
        m->owned = grown;
        m->owned[m->n_owned++] = (kcr__metrics_owned){p, free_fn};
    }
    pthread_mutex_unlock(&m->lock);
    if (ok)
        return KCR_OK;
    free_fn(p);
    return kcr__fail(KCR_ERR_NOMEM, "metrics: out of memory");
}

kcr_err kcr__metrics_families(kcr_metrics *m, kcr_metric_family ***out, size_t *n)
{
    pthread_mutex_lock(&m->lock);
    size_t count = m->n_families;
    kcr_metric_family **c = malloc((count ? count : 1) * sizeof *c);
    if (c && count)
        memcpy(c, m->families, count * sizeof *c);
    pthread_mutex_unlock(&m->lock);
    if (!c)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory listing metric families");
    *out = c;
    *n = count;
    return KCR_OK;
}

kcr_err kcr__metrics_collectors(kcr_metrics *m, kcr__metrics_collector **out, size_t *n)
{
    pthread_mutex_lock(&m->lock);
    size_t count = m->n_collectors;
    kcr__metrics_collector *c = malloc((count ? count : 1) * sizeof *c);
    if (c && count)
        memcpy(c, m->collectors, count * sizeof *c);
    pthread_mutex_unlock(&m->lock);
    if (!c)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory listing metric collectors");
    *out = c;
    *n = count;
    return KCR_OK;
}
