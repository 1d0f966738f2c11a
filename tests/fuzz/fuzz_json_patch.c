/* libFuzzer target for JSON Patch (RFC 6902). The input's first line is the
 * document (a fixed one when it does not parse), the rest the patch. Any
 * patch either fails with a kcr_err and a message, leaving the edit exactly
 * as it was (all or nothing), or succeeds with a document that serializes
 * and re-parses to the same value; the immutable-object entry point agrees
 * with the edit one. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kcr/kcr.h"
#include "object/edit_tree.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char FALLBACK[] =
    "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"cm\",\"finalizers\":"
    "[\"a/b\",\"c~d\"],\"labels\":{\"x/y\":\"1\"}},\"data\":{\"k\":\"v\",\"l\":[1,2.5,null,true]}}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* A NUL-terminated copy: a length of 0 means "up to the NUL" in kcr's
     * API, so an empty part must be an empty string, not unterminated. */
    char *text = malloc(size + 1);
    if (!text)
        abort();
    memcpy(text, data, size);
    text[size] = '\0';
    const char *nl = memchr(text, '\n', size);
    size_t doc_len = nl ? (size_t)(nl - text) : 0;
    const char *patch = nl ? nl + 1 : text;
    size_t patch_len = size - (nl ? doc_len + 1 : 0);

    kcr_object *doc = NULL;
    if (doc_len == 0 || kcr_object_parse_any(text, doc_len, &doc) != KCR_OK)
        if (kcr_object_parse(FALLBACK, sizeof FALLBACK - 1, &doc) != KCR_OK)
            abort();

    kcr_object_edit *e = NULL;
    if (kcr_object_edit_new(doc, &e) != KCR_OK)
        abort();
    kcr_err err = kcr_object_edit_json_patch(e, patch, patch_len);
    if (err != KCR_OK && kcr_last_error()[0] == '\0')
        abort();
    kcr_object *snap = NULL;
    if (kcr_object_edit_snapshot(e, &snap) != err)
        abort(); /* a failed patch is the editor's kept error */
    if (err != KCR_OK && kcr__edit_freeze(e, false, &snap) != KCR_OK)
        abort();
    if (err != KCR_OK && !kcr_value_equal(kcr_object_root(doc), kcr_object_root(snap)))
        abort(); /* a failed patch changed the edit's tree */

    if (err == KCR_OK) {
        char *json = NULL;
        size_t n = 0;
        kcr_object *again = NULL;
        if (kcr_object_to_json(snap, &json, &n) != KCR_OK ||
            kcr_object_parse_any(json, n, &again) != KCR_OK ||
            !kcr_value_equal(kcr_object_root(snap), kcr_object_root(again)))
            abort();
        free(json);
        kcr_object_unref(again);
    }

    /* the immutable entry point: same verdict whenever the result has a name */
    kcr_object *out = NULL;
    kcr_err err2 = kcr_object_apply_json_patch(doc, patch, patch_len, &out);
    if (err2 == KCR_OK &&
        (err != KCR_OK || !out || !kcr_value_equal(kcr_object_root(out), kcr_object_root(snap))))
        abort();
    if (err2 != KCR_OK && (out || (err == KCR_OK && *kcr_object_name(snap))))
        abort();
    kcr_object_unref(out);
    kcr_object_unref(snap);
    kcr_object_edit_free(e);
    kcr_object_unref(doc);
    free(text);
    return 0;
}
