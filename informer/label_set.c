/* A label selection of one key's values (label_set.h). */
#include "informer/label_set.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

static char *dup_or_null(const char *s)
{
    return s && *s ? strdup(s) : NULL;
}

static bool same_text(const char *a, const char *b)
{
    return a == b || (a && b && strcmp(a, b) == 0);
}

void kcr__label_set_clear(kcr__label_set *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->values[i]);
    free(s->values);
    free(s->base);
    free(s->key);
    *s = (kcr__label_set){0};
}

kcr_err kcr__label_set_init(kcr__label_set *s, const char *base, const char *key,
                            const char *const *values, size_t n)
{
    kcr__label_set_clear(s);
    s->base = dup_or_null(base);
    s->key = strdup(key);
    s->values = n ? calloc(n, sizeof *s->values) : NULL;
    bool ok = s->key && (s->base || !base || !*base) && (s->values || !n);
    for (size_t i = 0; ok && i < n; i++, s->n++)
        ok = (s->values[i] = strdup(values[i])) != NULL;
    if (ok)
        return KCR_OK;
    kcr__label_set_clear(s);
    return kcr__fail(KCR_ERR_NOMEM, "out of memory");
}

char *kcr__label_set_selector(const kcr__label_set *s)
{
    size_t len = (s->base ? strlen(s->base) + 1 : 0) + strlen(s->key) + 8;
    for (size_t i = 0; i < s->n; i++)
        len += strlen(s->values[i]) + 1;
    char *out = malloc(len);
    if (!out)
        return NULL;
    size_t at = (size_t)snprintf(out, len, "%s%s%s", s->base ? s->base : "", s->base ? "," : "",
                                 s->key);
    if (s->n == 1) {
        snprintf(out + at, len - at, "=%s", s->values[0]);
        return out;
    }
    at += (size_t)snprintf(out + at, len - at, " in (");
    for (size_t i = 0; i < s->n; i++)
        at += (size_t)snprintf(out + at, len - at, "%s%s", i ? "," : "", s->values[i]);
    snprintf(out + at, len - at, ")");
    return out;
}

static bool has_value(const kcr__label_set *s, const char *v)
{
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->values[i], v) == 0)
            return true;
    return false;
}

bool kcr__label_set_matches(const kcr__label_set *s, const kcr_object *obj)
{
    const char *v = s->key ? kcr_object_label(obj, s->key) : NULL;
    return v && has_value(s, v);
}

bool kcr__label_set_same_key(const kcr__label_set *a, const kcr__label_set *b)
{
    return a->key && b->key && strcmp(a->key, b->key) == 0 && same_text(a->base, b->base);
}

kcr_err kcr__label_set_subtract(const kcr__label_set *a, const kcr__label_set *b,
                                kcr__label_set *out)
{
    const char **keep = a->n ? malloc(a->n * sizeof *keep) : NULL;
    if (a->n && !keep)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory");
    size_t n = 0;
    for (size_t i = 0; i < a->n; i++)
        if (!has_value(b, a->values[i]))
            keep[n++] = a->values[i];
    kcr_err err = kcr__label_set_init(out, a->base, a->key, keep, n);
    free(keep);
    return err;
}
