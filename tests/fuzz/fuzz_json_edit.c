/* libFuzzer target for the one object model's JSON paths taken together:
 * parse -> edit (merge patch, JSON Patch) -> serialize -> reparse. The
 * input's first line is the document (a fixed one when it does not parse),
 * the second a JSON merge patch (RFC 7386), the rest a JSON Patch (RFC 6902).
 * Invariants, any input:
 *  - both serializers (kcr_object_to_json, the edit tree's kcr__node_to_json)
 *    write text that reparses to the same value;
 *  - a failed patch sets a detail and leaves the edit as it was;
 *  - a merge patch applied twice changes nothing the second time;
 *  - the document read as a Status, if it is one, writes JSON that reads back
 *    as the same Status (client/status.c on object/).
 * And no crash, leak or hang (ASan/UBSan). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "client/client_impl.h"
#include "kcr/kcr.h"
#include "object/edit_tree.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char FALLBACK[] =
    "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"cm\",\"labels\":"
    "{\"a\":\"1\"},\"annotations\":{\"x/y\":\"\xc3\xa9\"}},\"data\":{\"k\":\"v\",\"n\":"
    "[1,-2.5e3,null,true,{\"deep\":[[]]}]}}";

/* The object reparsed from its own serialization equals it. */
static void check_round_trip(const kcr_object *o)
{
    char *json = NULL;
    size_t n = 0;
    kcr_object *again = NULL;
    if (kcr_object_to_json(o, &json, &n) != KCR_OK || kcr_object_parse_any(json, n, &again) != KCR_OK ||
        !kcr_value_equal(kcr_object_root(o), kcr_object_root(again)))
        abort();
    free(json);
    kcr_object_unref(again);
    /* the edit tree's serializer agrees */
    struct kcr__node *tree = kcr__node_from_value(kcr_object_root(o));
    if (!tree || kcr__node_to_json(tree, &json, &n) != KCR_OK ||
        kcr_object_parse_any(json, n, &again) != KCR_OK ||
        !kcr_value_equal(kcr_object_root(o), kcr_object_root(again)))
        abort();
    free(json);
    kcr_object_unref(again);
    kcr__node_free(tree);
}

/* The edit's tree as an object, also under a kept first error (which the
 * public snapshot would return instead). */
static kcr_object *snapshot(kcr_object_edit *e)
{
    kcr_object *s = NULL;
    if (kcr__edit_freeze(e, false, &s) != KCR_OK)
        abort();
    return s;
}

static void check_status(const kcr_object *doc)
{
    kcr_status st = {0}, back = {0};
    if (kcr__status_from_value(kcr_object_root(doc), &st) != KCR_OK)
        return;
    char *json = kcr__status_to_json(&st);
    if (!json || kcr_status_parse(json, strlen(json), &back) != KCR_OK || back.code != st.code ||
        strcmp(back.message, st.message) != 0 || strcmp(back.reason, st.reason) != 0 ||
        back.details.n_causes != st.details.n_causes)
        abort();
    free(json);
    kcr_status_clear(&st);
    kcr_status_clear(&back);
}

/* Applies a patch to the edit; on failure the tree must be unchanged and
 * the editor must keep the error (snapshot returns it). */
static kcr_err apply(kcr_object_edit *e, bool merge, const char *p, size_t len)
{
    kcr_object *before = snapshot(e);
    kcr_err err = merge ? kcr_object_edit_merge_patch(e, p, len) : kcr_object_edit_json_patch(e, p, len);
    kcr_object *after = snapshot(e), *kept = NULL;
    if (err != KCR_OK &&
        (kcr_last_error()[0] == '\0' ||
         !kcr_value_equal(kcr_object_root(before), kcr_object_root(after)) ||
         kcr_object_edit_snapshot(e, &kept) != err || kept))
        abort();
    if (err == KCR_OK)
        check_round_trip(after);
    kcr_object_unref(before);
    kcr_object_unref(after);
    return err;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* A NUL-terminated copy: a length of 0 means "up to the NUL" in kcr's
     * API, so an empty part must be an empty string, not unterminated. */
    char *text = malloc(size + 1);
    if (!text)
        abort();
    memcpy(text, data, size);
    text[size] = '\0';
    const char *parts[3] = {text, "", ""};
    size_t lens[3] = {size, 0, 0};
    for (int i = 0; i < 2; i++) {
        const char *nl = memchr(parts[i], '\n', lens[i]);
        if (!nl)
            break;
        parts[i + 1] = nl + 1;
        lens[i + 1] = lens[i] - (size_t)(nl + 1 - parts[i]);
        lens[i] = (size_t)(nl - parts[i]);
    }

    kcr_object *doc = NULL;
    if (lens[0] == 0 || kcr_object_parse_any(parts[0], lens[0], &doc) != KCR_OK)
        if (kcr_object_parse(FALLBACK, sizeof FALLBACK - 1, &doc) != KCR_OK)
            abort();
    check_round_trip(doc);
    check_status(doc);

    kcr_object_edit *e = NULL;
    if (kcr_object_edit_new(doc, &e) != KCR_OK)
        abort();
    kcr_object *same = snapshot(e); /* object -> edit tree -> object is lossless */
    if (!kcr_value_equal(kcr_object_root(doc), kcr_object_root(same)))
        abort();
    kcr_object_unref(same);

    if (lens[1] && apply(e, true, parts[1], lens[1]) == KCR_OK) {
        kcr_object *once = snapshot(e);
        if (kcr_object_edit_merge_patch(e, parts[1], lens[1]) != KCR_OK)
            abort(); /* it applied once, it applies again */
        kcr_object *twice = snapshot(e);
        if (!kcr_value_equal(kcr_object_root(once), kcr_object_root(twice)))
            abort(); /* RFC 7386 patches are idempotent */
        kcr_object_unref(once);
        kcr_object_unref(twice);
    }
    if (lens[2])
        apply(e, false, parts[2], lens[2]);

    kcr_object_edit_free(e);
    kcr_object_unref(doc);
    free(text);
    return 0;
}
