/* Predicates: which changes of a watched object reach a controller. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/log.h"
#include "kcr/controller.h"
#include "object/selector.h"

typedef enum pred_kind {
    P_GENERATION,
    P_RESOURCE_VERSION,
    P_LABELS,
    P_ANNOTATIONS,
    P_FINALIZERS,
    P_SELECTOR,
    P_CUSTOM,
    P_AND,
    P_OR,
    P_NOT
} pred_kind;

struct kcr_predicate {
    pred_kind kind;
    kcr__selector *selector;
    kcr_predicate_fn fn;
    void *user_data;
    kcr_predicate *a, *b;
};

static kcr_predicate *make(pred_kind kind)
{
    kcr_predicate *p = calloc(1, sizeof *p);
    if (!p)
        kcr__fail(KCR_ERR_NOMEM, "out of memory making a predicate");
    else
        p->kind = kind;
    return p;
}

kcr_predicate *kcr_predicate_generation_changed(void)
{
    return make(P_GENERATION);
}
kcr_predicate *kcr_predicate_resource_version_changed(void)
{
    return make(P_RESOURCE_VERSION);
}
kcr_predicate *kcr_predicate_labels_changed(void)
{
    return make(P_LABELS);
}
kcr_predicate *kcr_predicate_annotations_changed(void)
{
    return make(P_ANNOTATIONS);
}
kcr_predicate *kcr_predicate_finalizers_changed(void)
{
    return make(P_FINALIZERS);
}

kcr_predicate *kcr_predicate_label_selector(const char *selector)
{
    kcr__selector *sel = NULL;
    if (kcr__selector_parse(selector, &sel) != KCR_OK)
        return NULL;
    kcr_predicate *p = make(P_SELECTOR);
    if (!p)
        kcr__selector_free(sel);
    else
        p->selector = sel;
    return p;
}

kcr_predicate *kcr_predicate_custom(kcr_predicate_fn fn, void *user_data)
{
    if (!fn) {
        kcr__fail(KCR_ERR_INVALID, "kcr_predicate_custom: NULL function");
        return NULL;
    }
    kcr_predicate *p = make(P_CUSTOM);
    if (p) {
        p->fn = fn;
        p->user_data = user_data;
    }
    return p;
}

static kcr_predicate *combine(pred_kind kind, kcr_predicate *a, kcr_predicate *b)
{
    if (!a || (kind != P_NOT && !b)) {
        kcr_predicate_free(a);
        kcr_predicate_free(b);
        kcr__fail(KCR_ERR_INVALID, "predicate combinator: NULL operand (did a constructor fail?)");
        return NULL;
    }
    kcr_predicate *p = make(kind);
    if (!p) {
        kcr_predicate_free(a);
        kcr_predicate_free(b);
        return NULL;
    }
    p->a = a;
    p->b = b;
    return p;
}

kcr_predicate *kcr_predicate_and(kcr_predicate *a, kcr_predicate *b)
{
    return combine(P_AND, a, b);
}
kcr_predicate *kcr_predicate_or(kcr_predicate *a, kcr_predicate *b)
{
    return combine(P_OR, a, b);
}
kcr_predicate *kcr_predicate_not(kcr_predicate *p)
{
    return combine(P_NOT, p, NULL);
}

void kcr_predicate_free(kcr_predicate *p)
{
    if (!p)
        return;
    kcr_predicate_free(p->a);
    kcr_predicate_free(p->b);
    kcr__selector_free(p->selector);
    free(p);
}

static bool values_differ(kcr_value a, kcr_value b)
{
    bool absent_a = kcr_value_get_type(a) == KCR_VALUE_ABSENT;
    bool absent_b = kcr_value_get_type(b) == KCR_VALUE_ABSENT;
    /* an absent map and an empty one are the same metadata */
    if (absent_a || absent_b)
        return (absent_a ? 0 : kcr_value_len(a)) != (absent_b ? 0 : kcr_value_len(b));
    return !kcr_value_equal(a, b);
}

static const char *label_of(const char *key, void *ud)
{
    return kcr_object_label(ud, key);
}

static bool eval(const kcr_predicate *p, kcr_source_ctx *ctx, const kcr_object_change *c,
                 bool *failed)
{
    const kcr_object *o = c->old_obj, *n = c->obj;
    bool update = c->change == KCR_CHANGE_UPDATED && o && n;
    switch (p->kind) {
    case P_GENERATION:
        return !update || kcr_object_generation(o) != kcr_object_generation(n);
    case P_RESOURCE_VERSION:
        return !update ||
               strcmp(kcr_object_resource_version(o), kcr_object_resource_version(n)) != 0;
    case P_LABELS:
        return !update || values_differ(kcr_object_labels(o), kcr_object_labels(n));
    case P_ANNOTATIONS:
        return !update || values_differ(kcr_object_annotations(o), kcr_object_annotations(n));
    case P_FINALIZERS:
        return !update || values_differ(kcr_object_get(o, "metadata.finalizers"),
                                        kcr_object_get(n, "metadata.finalizers"));
    case P_SELECTOR: {
        const kcr_object *obj = n ? n : o;
        return obj && kcr__selector_matches(p->selector, label_of, (void *)obj);
    }
    case P_CUSTOM: {
        bool pass = true;
        if (p->fn(ctx, c, &pass, p->user_data) != KCR_OK) {
            *failed = true;
            return true;
        }
        return pass;
    }
    case P_AND:
        return eval(p->a, ctx, c, failed) && eval(p->b, ctx, c, failed);
    case P_OR:
        return eval(p->a, ctx, c, failed) || eval(p->b, ctx, c, failed);
    case P_NOT:
        return !eval(p->a, ctx, c, failed);
    }
    return true;
}

bool kcr_predicate_eval(const kcr_predicate *p, kcr_source_ctx *ctx,
                        const kcr_object_change *change, bool *failed)
{
    bool f = false;
    /* a NULL change is an empty one; the old object belongs to updates only */
    kcr_object_change fixed = change ? *change : (kcr_object_change){0};
    if (fixed.change != KCR_CHANGE_UPDATED)
        fixed.old_obj = NULL;
    bool pass = p ? eval(p, ctx, &fixed, &f) : true;
    if (failed)
        *failed = f;
    return f ? true : pass;
}
