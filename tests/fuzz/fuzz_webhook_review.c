/* libFuzzer target for the webhook review decoders: any bytes decode as an
 * AdmissionReview and as a ConversionReview, or fail with KCR_ERR_PARSE and
 * a message; a decoded admission request is consistent (a uid, an object for
 * CREATE and UPDATE); and when it carries both object and oldObject, the
 * JSON Patch computed between them turns the old one into the new one. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kcr/kcr.h"
#include "webhook/review.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_patch(const kcr_object *from, const kcr_object *to)
{
    char *patch = NULL;
    size_t len = 0;
    kcr_err err = kcr_object_json_patch_diff(from, to, &patch, &len);
    if (err == KCR_ERR_TOO_LARGE)
        return;
    if (err)
        abort();
    kcr_object *applied = NULL;
    kcr_object_edit *e = NULL; /* an edit: a review's objects may lack metadata.name */
    if (kcr_object_edit_new(from, &e) != KCR_OK)
        abort();
    err = kcr_object_edit_json_patch(e, patch, len);
    if (!err && kcr_object_edit_snapshot(e, &applied) != KCR_OK)
        abort();
    kcr_object_edit_free(e);
    /* applying refuses results nesting over 256 levels: nothing to compare */
    if (err == KCR_ERR_TOO_LARGE) {
        free(patch);
        return;
    }
    if (err || !kcr_value_equal(kcr_object_root(applied), kcr_object_root(to)))
        abort();
    kcr_object_unref(applied);
    free(patch);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *body = (const char *)data;
    struct kcr__wh_admission a;
    kcr_err err = kcr__wh_admission_decode(body, size, &a);
    if (err) {
        if (err != KCR_ERR_PARSE && err != KCR_ERR_NOMEM && err != KCR_ERR_TOO_LARGE)
            abort();
        if (!kcr_last_error()[0])
            abort();
    } else {
        const kcr_admission_request *q = &a.req;
        if (!q->uid || !*q->uid || q->operation < KCR_ADMISSION_CREATE ||
            q->operation > KCR_ADMISSION_CONNECT)
            abort();
        if ((q->operation == KCR_ADMISSION_CREATE || q->operation == KCR_ADMISSION_UPDATE) &&
            !q->object)
            abort();
        if (q->object && q->old_object) {
            check_patch(q->old_object, q->object);
            check_patch(q->object, q->old_object);
        }
    }
    kcr__wh_admission_free(&a);

    struct kcr__wh_conversion c;
    err = kcr__wh_conversion_decode(body, size, &c);
    if (err && !kcr_last_error()[0])
        abort();
    if (!err && (!*c.uid || !*c.desired))
        abort();
    for (size_t i = 0; !err && i < c.n_objects; i++)
        if (!c.objects[i] || !*kcr_object_api_version(c.objects[i]))
            abort();
    kcr__wh_conversion_free(&c);
    return 0;
}
