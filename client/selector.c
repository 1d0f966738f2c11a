/* Label and field selector parsing and matching. */
#include "client/selector.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

typedef enum { OP_EQ, OP_NEQ, OP_IN, OP_NOTIN, OP_EXISTS, OP_NOT_EXISTS } sel_op;

typedef struct requirement {
    char *key;
    sel_op op;
    char **values;
    size_t n_values;
} requirement;

struct kcr__selector {
    requirement *req;
    size_t n;
};

void kcr__selector_free(kcr__selector *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n; i++) {
        free(s->req[i].key);
        for (size_t j = 0; j < s->req[i].n_values; j++)
            free(s->req[i].values[j]);
        free(s->req[i].values);
    }
    free(s->req);
    free(s);
}

static void skip_ws(const char **p)
{
    while (**p == ' ' || **p == '\t')
        (*p)++;
}

/* Keys and values: letters, digits, '-', '_', '.', '/'. */
static char *token(const char **p)
{
    skip_ws(p);
    const char *start = *p;
    while (isalnum((unsigned char)**p) || **p == '-' || **p == '_' || **p == '.' || **p == '/')
        (*p)++;
    return strndup(start, (size_t)(*p - start));
}

static kcr_err add_value(requirement *r, char *v)
{
    if (!v)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory");
    char **nv = realloc(r->values, (r->n_values + 1) * sizeof *nv);
    if (!nv) {
        free(v);
        return kcr__fail(KCR_ERR_NOMEM, "out of memory");
    }
    r->values = nv;
    r->values[r->n_values++] = v;
    return KCR_OK;
}

static kcr_err parse(const char *text, bool field, kcr__selector **out)
{
    *out = calloc(1, sizeof **out);
    if (!*out)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory");
    kcr__selector *s = *out;
    const char *what = field ? "field selector" : "label selector";
    const char *p = text ? text : "";
    skip_ws(&p);
    if (!*p)
        return KCR_OK;
    kcr_err err = KCR_OK;
    for (;;) {
        requirement r = {0};
        skip_ws(&p);
        bool negated = false;
        if (*p == '!') {
            if (field) {
                err = kcr__fail(KCR_ERR_INVALID, "%s \"%s\": '!' is not allowed", what, text);
                break;
            }
            negated = true;
            p++;
        }
        r.key = token(&p);
        if (!r.key) {
            err = kcr__fail(KCR_ERR_NOMEM, "out of memory");
            break;
        }
        if (!*r.key) {
            free(r.key);
            err = kcr__fail(KCR_ERR_INVALID, "%s \"%s\": expected a key at offset %zu", what,
                            text, (size_t)(p - text));
            break;
        }
        skip_ws(&p);
        if (negated) {
            r.op = OP_NOT_EXISTS;
        } else if (p[0] == '=' && p[1] == '=') {
            r.op = OP_EQ;
            p += 2;
        } else if (p[0] == '=') {
            r.op = OP_EQ;
            p++;
        } else if (p[0] == '!' && p[1] == '=') {
            r.op = OP_NEQ;
            p += 2;
        } else if (!field && strncmp(p, "notin", 5) == 0 && !isalnum((unsigned char)p[5])) {
            r.op = OP_NOTIN;
            p += 5;
        } else if (!field && strncmp(p, "in", 2) == 0 && !isalnum((unsigned char)p[2])) {
            r.op = OP_IN;
            p += 2;
        } else if (!field && (*p == ',' || *p == '\0')) {
            r.op = OP_EXISTS;
        } else {
            free(r.key);
            err = kcr__fail(KCR_ERR_INVALID, "%s \"%s\": unexpected '%c' at offset %zu", what,
                            text, *p ? *p : ' ', (size_t)(p - text));
            break;
        }
        if (r.op == OP_EQ || r.op == OP_NEQ) {
            err = add_value(&r, token(&p)); /* an empty value is allowed */
        } else if (r.op == OP_IN || r.op == OP_NOTIN) {
            skip_ws(&p);
            if (*p != '(') {
                err = kcr__fail(KCR_ERR_INVALID, "%s \"%s\": expected '(' at offset %zu", what,
                                text, (size_t)(p - text));
            } else {
                p++;
                for (;;) {
                    err = add_value(&r, token(&p));
                    skip_ws(&p);
                    if (err != KCR_OK || *p != ',')
                        break;
                    p++;
                }
                if (err == KCR_OK && *p != ')')
                    err = kcr__fail(KCR_ERR_INVALID, "%s \"%s\": expected ')' at offset %zu",
                                    what, text, (size_t)(p - text));
                else if (err == KCR_OK)
                    p++;
            }
        }
        requirement *nr = err == KCR_OK ? realloc(s->req, (s->n + 1) * sizeof *nr) : NULL;
        if (!nr) {
            free(r.key);
            for (size_t j = 0; j < r.n_values; j++)
                free(r.values[j]);
            free(r.values);
            if (err == KCR_OK)
                err = kcr__fail(KCR_ERR_NOMEM, "out of memory");
            break;
        }
        s->req = nr;
        s->req[s->n++] = r;
        skip_ws(&p);
        if (*p == '\0')
            break;
        if (*p != ',') {
            err = kcr__fail(KCR_ERR_INVALID, "%s \"%s\": expected ',' at offset %zu", what, text,
                            (size_t)(p - text));
            break;
        }
        p++;
    }
    if (err != KCR_OK) {
        kcr__selector_free(s);
        *out = NULL;
    }
    return err;
}

kcr_err kcr__selector_parse(const char *text, kcr__selector **out)
{
    return parse(text, false, out);
}

kcr_err kcr__field_selector_parse(const char *text, kcr__selector **out)
{
    return parse(text, true, out);
}

bool kcr__selector_matches(const kcr__selector *s, kcr__label_fn get, void *ud)
{
    for (size_t i = 0; s && i < s->n; i++) {
        const requirement *r = &s->req[i];
        const char *v = get(r->key, ud);
        bool in = false;
        for (size_t j = 0; v && j < r->n_values; j++)
            in = in || strcmp(v, r->values[j]) == 0;
        switch (r->op) {
        case OP_EQ:
        case OP_IN:
            if (!in)
                return false;
            break;
        case OP_NEQ:
        case OP_NOTIN:
            if (in)
                return false; /* absent labels match != and notin */
            break;
        case OP_EXISTS:
            if (!v)
                return false;
            break;
        case OP_NOT_EXISTS:
            if (v)
                return false;
            break;
        }
    }
    return true;
}
