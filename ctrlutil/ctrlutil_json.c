/* JSON values in the controller helpers' request bodies; retry counts. */
#include <stdlib.h>

#include "ctrlutil/ctrlutil_internal.h"

void kcr__ctrlutil_json_value(kcr__buf *b, kcr_value v)
{
    if (kcr_value_get_type(v) == KCR_VALUE_ABSENT) {
        kcr__buf_str(b, "null");
        return;
    }
    char *json = NULL;
    size_t n = 0;
    if (kcr_value_to_json(v, &json, &n) != KCR_OK) {
        b->oom = true; /* the buffer's sticky failure: the body is unusable */
        return;
    }
    kcr__buf_add(b, json, n);
    free(json);
}

int kcr__ctrlutil_retries(int max_retries)
{
    return max_retries == 0 ? KCR_CTRLUTIL_DEFAULT_RETRIES : max_retries < 0 ? 0 : max_retries;
}

const char *kcr_ctrlutil_op_result_string(kcr_ctrlutil_op_result r)
{
    switch (r) {
    case KCR_CTRLUTIL_UNCHANGED:
        return "unchanged";
    case KCR_CTRLUTIL_CREATED:
        return "created";
    case KCR_CTRLUTIL_UPDATED:
        return "updated";
    }
    return "unknown";
}
