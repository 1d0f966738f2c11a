/* Equality as the apiserver stores it, for the write helpers' "is there
 * anything to write?" test: maps regardless of member order, arrays in
 * order, numbers by value, and resource quantities by value at the paths
 * where the built-in types hold them ("0.5" equals the "500m" the server
 * wrote back). Without schemas, a string elsewhere is compared as text: a
 * CRD's own quantity fields are not recognised (their text is written as
 * given, so a normalised one writes once more per reconcile, never wrongly
 * skips). */
#include <stdio.h>
#include <string.h>

#include "controller/ctrlutil_internal.h"
#include "kcr/quantity.h"

/* Keys of the path from the compared root down to the value; an array
 * element's entry is "[]". Objects nest at most 256 deep. */
typedef struct path {
    const char *k[260];
    size_t n;
} path;

/* The i-th key from the end of keys[0..n) ("" past the start). */
static const char *from_end(const char *const *keys, size_t n, size_t i)
{
    return i < n ? keys[n - 1 - i] : "";
}

static bool is_any(const char *s, const char *const *set)
{
    for (; *set; set++)
        if (strcmp(s, *set) == 0)
            return true;
    return false;
}

bool kcr__ctrlutil_quantity_path(const char *const *keys, size_t n)
{
    const char *parent = from_end(keys, n, 1), *grand = from_end(keys, n, 2);
    static const char *const resource_lists[] = {"requests", "limits", NULL};
    static const char *const quota_lists[] = {"hard", "used", NULL};
    static const char *const node_lists[] = {"capacity", "allocatable", "allocatedResources",
                                             NULL};
    static const char *const limit_range[] = {"max", "min", "default", "defaultRequest",
                                              "maxLimitRequestRatio", NULL};
    static const char *const spec_status[] = {"spec", "status", NULL};
    /* containers[].resources, pod-level resources, PVC spec.resources */
    if (is_any(parent, resource_lists) && strcmp(grand, "resources") == 0)
        return true;
    /* ResourceQuota spec.hard / status.hard / status.used */
    if (is_any(parent, quota_lists) && is_any(grand, spec_status) && n == 3)
        return true;
    /* Node status.capacity/allocatable, PV spec.capacity, PVC status.capacity */
    if (is_any(parent, node_lists) && is_any(grand, spec_status) && n == 3)
        return true;
    /* a PodSpec's overhead, at any depth (Pods, templates) */
    if (strcmp(parent, "overhead") == 0 && n >= 3)
        return true;
    /* LimitRange spec.limits[].max/min/default/defaultRequest/maxLimitRequestRatio */
    if (is_any(parent, limit_range) && strcmp(grand, "[]") == 0 &&
        strcmp(from_end(keys, n, 3), "limits") == 0 && strcmp(from_end(keys, n, 4), "spec") == 0 &&
        n == 5)
        return true;
    const char *key = from_end(keys, n, 0);
    if ((strcmp(key, "sizeLimit") == 0 && strcmp(parent, "emptyDir") == 0) ||
        (strcmp(key, "divisor") == 0 && strcmp(parent, "resourceFieldRef") == 0))
        return true;
    /* CSIStorageCapacity's top-level capacity and maximumVolumeSize */
    return n == 1 && (strcmp(key, "capacity") == 0 || strcmp(key, "maximumVolumeSize") == 0);
}

/* A string or number read as the apiserver reads a quantity from JSON. */
static bool as_quantity(kcr_value v, kcr_quantity *q)
{
    kcr_value_type t = kcr_value_get_type(v);
    if (t == KCR_VALUE_INT) {
        char num[32];
        int n = snprintf(num, sizeof num, "%lld", (long long)kcr_value_int(v));
        return kcr_quantity_parse(num, (size_t)n, q) == KCR_OK;
    }
    if (t != KCR_VALUE_STRING && t != KCR_VALUE_FLOAT)
        return false;
    size_t len = 0;
    const char *s = kcr_value_string(v, &len);
    return s && kcr_quantity_parse_json(s, len, q) == KCR_OK;
}

static bool equal_at(kcr_value a, kcr_value b, path *p);

static bool maps_equal(kcr_value a, kcr_value b, path *p)
{
    size_t n = kcr_value_len(a);
    if (n != kcr_value_len(b))
        return false;
    for (size_t i = 0; i < n; i++) {
        const char *key = NULL;
        kcr_value va = kcr_value_entry(a, i, &key, NULL);
        kcr_value vb = kcr_value_member(b, key);
        if (kcr_value_get_type(vb) == KCR_VALUE_ABSENT)
            return false;
        p->k[p->n++] = key;
        bool same = equal_at(va, vb, p);
        p->n--;
        if (!same)
            return false;
    }
    return true;
}

static bool arrays_equal(kcr_value a, kcr_value b, path *p)
{
    size_t n = kcr_value_len(a);
    if (n != kcr_value_len(b))
        return false;
    p->k[p->n++] = "[]";
    bool same = true;
    for (size_t i = 0; same && i < n; i++)
        same = equal_at(kcr_value_at(a, i), kcr_value_at(b, i), p);
    p->n--;
    return same;
}

static bool equal_at(kcr_value a, kcr_value b, path *p)
{
    kcr_value_type ta = kcr_value_get_type(a), tb = kcr_value_get_type(b);
    if (ta == KCR_VALUE_OBJECT && tb == KCR_VALUE_OBJECT)
        return maps_equal(a, b, p);
    if (ta == KCR_VALUE_ARRAY && tb == KCR_VALUE_ARRAY)
        return arrays_equal(a, b, p);
    if (kcr_value_equal(a, b))
        return true;
    kcr_quantity qa, qb;
    return kcr__ctrlutil_quantity_path(p->k, p->n) && as_quantity(a, &qa) &&
           as_quantity(b, &qb) && kcr_quantity_cmp(&qa, &qb) == 0;
}

bool kcr__ctrlutil_equal(kcr_value a, kcr_value b, const char *root_key)
{
    path p;
    p.n = 0;
    if (root_key)
        p.k[p.n++] = root_key;
    return equal_at(a, b, &p);
}
