/* Listers: reads of a cache by name, namespace, label selector and index. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "kcr/informer.h"
#include "object/selector.h"

kcr_object *kcr_lister_get(kcr_store *s, const char *ns, const char *name)
{
    if (!s || !name)
        return NULL;
    size_t nl = ns ? strlen(ns) : 0, len = nl + strlen(name) + 2;
    char stack[256];
    char *key = len <= sizeof stack ? stack : malloc(len);
    if (!key)
        return NULL;
    if (nl)
        snprintf(key, len, "%s/%s", ns, name);
    else
        snprintf(key, len, "%s", name);
    kcr_object *obj = kcr_store_get_by_key(s, key);
    if (key != stack)
        free(key);
    return obj;
}

static const char *label_of(const char *key, void *ud)
{
    return kcr_object_label(ud, key);
}

kcr_err kcr_lister_list(kcr_store *s, const char *ns, const char *label_selector,
                        kcr_object_list *out)
{
    if (!s || !out)
        return kcr__fail(KCR_ERR_INVALID, "kcr_lister_list: NULL argument");
    out->items = NULL;
    out->len = 0;
    kcr__selector *sel = NULL;
    kcr_err err = kcr__selector_parse(label_selector, &sel);
    if (err != KCR_OK)
        return err;
    bool all_ns = !ns || !*ns;
    err = all_ns ? kcr_store_list(s, out) : kcr_store_by_index(s, KCR_INDEX_NAMESPACE, ns, out);
    if (err == KCR_ERR_NOT_FOUND && !all_ns) /* a store without the namespace index */
        err = kcr_store_list(s, out);
    size_t k = 0;
    for (size_t i = 0; err == KCR_OK && i < out->len; i++) {
        kcr_object *o = out->items[i];
        bool keep = (all_ns || strcmp(kcr_object_namespace(o), ns) == 0) &&
                    (!sel || kcr__selector_matches(sel, label_of, o));
        if (keep)
            out->items[k++] = o;
        else
            kcr_object_unref(o);
    }
    if (err == KCR_OK)
        out->len = k;
    kcr__selector_free(sel);
    return err;
}

kcr_err kcr_lister_by_index(kcr_store *s, const char *index, const char *value,
                            kcr_object_list *out)
{
    return kcr_store_by_index(s, index, value, out);
}
