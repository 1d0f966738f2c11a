/* libFuzzer target for the object model: any bytes either fail to parse with
 * a kcr_err, or parse into an object whose serialization re-parses to the
 * same bytes (and whose accessors, paths and self merge patch work). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kcr/kcr.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    kcr_object *o = NULL;
    if (size == 0) /* length 0 means "NUL-terminated": libFuzzer's buffer is not */
        return 0;
    kcr_err err = kcr_object_parse_any((const char *)data, size, &o);
    if (err != KCR_OK) {
        if (o || kcr_last_error()[0] == '\0')
            abort();
        return 0;
    }
    char *first = NULL, *second = NULL;
    size_t n1 = 0, n2 = 0;
    if (kcr_object_to_json(o, &first, &n1) != KCR_OK)
        abort();
    kcr_object *again = NULL;
    if (kcr_object_parse_any(first, n1, &again) != KCR_OK)
        abort();
    if (kcr_object_to_json(again, &second, &n2) != KCR_OK || n1 != n2 ||
        memcmp(first, second, n1) != 0)
        abort();
    if (!kcr_value_equal(kcr_object_root(o), kcr_object_root(again)))
        abort();

    /* Accessors never crash on odd shapes. */
    (void)kcr_object_name(o);
    (void)kcr_object_generation(o);
    (void)kcr_object_label(o, "app");
    kcr_owner_ref ref;
    (void)kcr_object_controller_ref(o, &ref);
    (void)kcr_object_finalizer_count(o);
    (void)kcr_object_is_deleting(o);
    /* The input's tail doubles as a path. */
    char path[64];
    size_t pl = size < sizeof path - 1 ? size : sizeof path - 1;
    memcpy(path, data + size - pl, pl);
    path[pl] = '\0';
    kcr_value v;
    (void)kcr_object_lookup(o, path, &v);

    char *patch = NULL;
    size_t pn = 0;
    if (kcr_object_merge_patch(o, again, &patch, &pn) != KCR_OK || strcmp(patch, "{}") != 0)
        abort();
    free(patch);
    kcr_object *stripped = NULL;
    if (kcr_object_strip_managed_fields(o, &stripped, NULL) != KCR_OK)
        abort();
    kcr_object_unref(stripped);

    free(first);
    free(second);
    kcr_object_unref(again);
    kcr_object_unref(o);
    return 0;
}
