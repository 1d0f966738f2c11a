/* kcr_object_parse: the JSON reader's events feed the streaming builder. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "object/json_reader.h"
#include "object/object_builder.h"
#include "object/object_internal.h"
#include "object/value.h"

/* The reader callback's context: the builder it feeds and its error when a
 * builder call stopped the parse. */
struct parse_ctx {
    kcr__object_builder *b;
    kcr_err err;
};

static bool on_event(void *ctx, const kcr__jev *ev)
{
    struct parse_ctx *c = ctx;
    kcr__object_builder *b = c->b;
    switch (ev->type) {
    case KCR__JEV_NULL: c->err = kcr__object_builder_null(b); break;
    case KCR__JEV_BOOL: c->err = kcr__object_builder_bool(b, ev->b); break;
    case KCR__JEV_NUMBER: c->err = kcr__object_builder_number(b, ev->s, ev->len); break;
    case KCR__JEV_STRING:
        c->err = ev->ascii ? kcr__object_builder_string_ascii(b, ev->s, ev->len)
                           : kcr__object_builder_string(b, ev->s, ev->len);
        break;
    case KCR__JEV_KEY:
        c->err = ev->ascii ? kcr__object_builder_map_key_ascii(b, ev->s, ev->len)
                           : kcr__object_builder_map_key(b, ev->s, ev->len);
        break;
    case KCR__JEV_START_MAP: c->err = kcr__object_builder_start_map(b); break;
    case KCR__JEV_END_MAP: c->err = kcr__object_builder_end_map(b); break;
    case KCR__JEV_START_ARRAY: c->err = kcr__object_builder_start_array(b); break;
    case KCR__JEV_END_ARRAY: c->err = kcr__object_builder_end_array(b); break;
    case KCR__JEV_CAPTURED: break;
    }
    return c->err == KCR_OK;
}

static kcr_err parse(const char *json, size_t len, kcr_object **out, bool require_name)
{
    if (!out)
        return kcr__fail(KCR_ERR_INVALID, "kcr_object_parse: out is NULL");
    *out = NULL;
    if (!json)
        return kcr__fail(KCR_ERR_INVALID, "kcr_object_parse: json is NULL");
    if (len == 0) /* like the client calls: 0 means a NUL-terminated string */
        len = strlen(json);
    struct parse_ctx c = {kcr__object_builder_take(), KCR_OK};
    kcr__jreader *r = c.b ? kcr__jreader_new(false, on_event, &c) : NULL;
    if (!r) {
        kcr__object_builder_give(c.b);
        return kcr__fail(KCR_ERR_NOMEM, "out of memory parsing an object");
    }
    kcr_err err = KCR_OK;
    kcr__jreader_status st = kcr__jreader_feed(r, json, len);
    size_t at = kcr__jreader_consumed(r);
    if (st == KCR__JR_OK)
        st = kcr__jreader_complete(r);
    if (st == KCR__JR_STOPPED) {
        char detail[256];
        snprintf(detail, sizeof detail, "%s", kcr_last_error());
        err = kcr__fail(c.err, "JSON object: %s (at byte %zu)", detail, at ? at - 1 : 0);
    } else if (st == KCR__JR_ERROR) {
        size_t where;
        bool oom;
        const char *msg = kcr__jreader_error(r, &where, &oom);
        err = oom ? kcr__fail(KCR_ERR_NOMEM, "out of memory parsing an object")
                  : kcr__fail(KCR_ERR_PARSE, "invalid JSON at byte %zu of %zu: %s", where, len,
                              msg);
    } else if (!kcr__object_builder_done(c.b)) {
        err = kcr__fail(KCR_ERR_PARSE, "invalid JSON: no object in %zu bytes", len);
    } else {
        err = require_name ? kcr__object_builder_finish(c.b, out)
                           : kcr__object_builder_finish_any(c.b, out);
    }
    kcr__jreader_free(r);
    kcr__object_builder_give(c.b);
    return err;
}

kcr_err kcr_object_parse(const char *json, size_t len, kcr_object **out)
{
    return parse(json, len, out, true);
}

kcr_err kcr_object_parse_any(const char *json, size_t len, kcr_object **out)
{
    return parse(json, len, out, false);
}

kcr_err kcr__document_parse(const char *json, size_t len, const char *what, kcr_object **out)
{
    *out = NULL;
    if (!json || (len == 0 && !*json))
        return kcr__fail(KCR_ERR_PARSE, "%s: empty", what);
    kcr_err err = kcr_object_parse_any(json, len, out);
    return err == KCR_OK ? KCR_OK : kcr__refail(err, "%s: ", what);
}
