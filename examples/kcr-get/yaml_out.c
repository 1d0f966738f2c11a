/* -o yaml for kcr-get: walks a kcr_value and feeds libyaml's emitter. */
#include "yaml_out.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>

/* True when a plain (unquoted) scalar with this text would not read back
 * as this string: YAML 1.1 booleans and nulls, numbers, timestamps. */
static bool needs_quotes(const char *s, size_t len)
{
    static const char *const words[] = {"null", "~",   "true", "false", "yes",  "no",
                                        "on",   "off", "y",    "n",     ".nan", ".inf"};
    if (len == 0)
        return true;
    for (size_t i = 0; i < sizeof words / sizeof *words; i++)
        if (strlen(words[i]) == len && strncasecmp(s, words[i], len) == 0)
            return true;
    return strchr("0123456789+-.", s[0]) != NULL || memchr(s, '\0', len) != NULL;
}

static int scalar(yaml_emitter_t *em, const char *text, size_t len, bool is_string)
{
    yaml_event_t ev;
    bool plain = !is_string || !needs_quotes(text, len);
    yaml_scalar_style_t style = plain ? YAML_ANY_SCALAR_STYLE : YAML_DOUBLE_QUOTED_SCALAR_STYLE;
    if (!yaml_scalar_event_initialize(&ev, NULL, NULL, (yaml_char_t *)text, (int)len, plain, 1,
                                      style))
        return 0;
    return yaml_emitter_emit(em, &ev);
}

static int emit(yaml_emitter_t *em, kcr_value v)
{
    yaml_event_t ev;
    char num[32];
    size_t len = 0;
    const char *s;
    switch (kcr_value_get_type(v)) {
    case KCR_VALUE_OBJECT:
        if (!yaml_mapping_start_event_initialize(&ev, NULL, NULL, 1, YAML_BLOCK_MAPPING_STYLE) ||
            !yaml_emitter_emit(em, &ev))
            return 0;
        for (size_t i = 0; i < kcr_value_len(v); i++) {
            const char *key;
            size_t key_len;
            kcr_value member = kcr_value_entry(v, i, &key, &key_len);
            if (!scalar(em, key, key_len, true) || !emit(em, member))
                return 0;
        }
        return yaml_mapping_end_event_initialize(&ev) && yaml_emitter_emit(em, &ev);
    case KCR_VALUE_ARRAY:
        if (!yaml_sequence_start_event_initialize(&ev, NULL, NULL, 1, YAML_BLOCK_SEQUENCE_STYLE) ||
            !yaml_emitter_emit(em, &ev))
            return 0;
        for (size_t i = 0; i < kcr_value_len(v); i++)
            if (!emit(em, kcr_value_at(v, i)))
                return 0;
        return yaml_sequence_end_event_initialize(&ev) && yaml_emitter_emit(em, &ev);
    case KCR_VALUE_STRING:
        s = kcr_value_string(v, &len);
        return scalar(em, s, len, true);
    case KCR_VALUE_FLOAT:
        s = kcr_value_string(v, &len);
        return scalar(em, s, len, false);
    case KCR_VALUE_INT:
        snprintf(num, sizeof num, "%lld", (long long)kcr_value_int(v));
        return scalar(em, num, strlen(num), false);
    case KCR_VALUE_BOOL:
        return scalar(em, kcr_value_bool(v) ? "true" : "false", kcr_value_bool(v) ? 4 : 5, false);
    default:
        return scalar(em, "null", 4, false);
    }
}

kcr_err yaml_write(FILE *out, kcr_value v)
{
    yaml_emitter_t em;
    yaml_event_t ev;
    if (!yaml_emitter_initialize(&em))
        return KCR_ERR_NOMEM;
    yaml_emitter_set_output_file(&em, out);
    yaml_emitter_set_unicode(&em, 1);
    yaml_emitter_set_width(&em, -1); /* no folding of long strings */
    int ok = yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING) &&
             yaml_emitter_emit(&em, &ev) &&
             yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, 1) &&
             yaml_emitter_emit(&em, &ev) && emit(&em, v) &&
             yaml_document_end_event_initialize(&ev, 1) && yaml_emitter_emit(&em, &ev) &&
             yaml_stream_end_event_initialize(&ev) && yaml_emitter_emit(&em, &ev) &&
             yaml_emitter_flush(&em);
    yaml_emitter_delete(&em);
    return ok ? KCR_OK : KCR_ERR_IO;
}
