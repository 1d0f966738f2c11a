/* kcr_object_parse: a yajl parser whose events feed the streaming builder. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yajl/yajl_parse.h>

#include "core/error.h"
#include "object/object_builder.h"
#include "object/object_internal.h"
#include "object/value.h"

/* The yajl callbacks' context: the builder they feed and its error when a
 * callback stopped the parse. */
struct parse_ctx {
    kcr__object_builder *b;
    kcr_err err;
};

#define CB(call)                                                                                   \
    do {                                                                                           \
        struct parse_ctx *c = ctx;                                                                 \
        c->err = (call);                                                                           \
        return c->err == KCR_OK;                                                                   \
    } while (0)

static int cb_null(void *ctx)
{
    CB(kcr__object_builder_null(c->b));
}
static int cb_bool(void *ctx, int v)
{
    CB(kcr__object_builder_bool(c->b, v != 0));
}
static int cb_number(void *ctx, const char *s, size_t l)
{
    CB(kcr__object_builder_number(c->b, s, l));
}
static int cb_string(void *ctx, const unsigned char *s, size_t l)
{
    CB(kcr__object_builder_string(c->b, (const char *)s, l));
}
static int cb_start_map(void *ctx)
{
    CB(kcr__object_builder_start_map(c->b));
}
static int cb_map_key(void *ctx, const unsigned char *s, size_t l)
{
    CB(kcr__object_builder_map_key(c->b, (const char *)s, l));
}
static int cb_end_map(void *ctx)
{
    CB(kcr__object_builder_end_map(c->b));
}
static int cb_start_array(void *ctx)
{
    CB(kcr__object_builder_start_array(c->b));
}
static int cb_end_array(void *ctx)
{
    CB(kcr__object_builder_end_array(c->b));
}

static const yajl_callbacks callbacks = {
    cb_null,      cb_bool,    NULL,       NULL,           cb_number,    cb_string,
    cb_start_map, cb_map_key, cb_end_map, cb_start_array, cb_end_array,
};

static kcr_err parse(const char *json, size_t len, kcr_object **out, bool require_name)
{
    if (!out)
        return kcr__fail(KCR_ERR_INVALID, "kcr_object_parse: out is NULL");
    *out = NULL;
    if (!json)
        return kcr__fail(KCR_ERR_INVALID, "kcr_object_parse: json is NULL");
    if (len == 0) /* like the client calls: 0 means a NUL-terminated string */
        len = strlen(json);
    struct parse_ctx c = {kcr__object_builder_new(), KCR_OK};
    if (!c.b)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory parsing an object");
    yajl_handle h = yajl_alloc(&callbacks, NULL, &c);
    if (!h) {
        kcr__object_builder_free(c.b);
        return kcr__fail(KCR_ERR_NOMEM, "out of memory parsing an object");
    }
    yajl_config(h, yajl_dont_validate_strings, 1); /* the builder validates */
    kcr_err err = KCR_OK;
    yajl_status st = yajl_parse(h, (const unsigned char *)(json ? json : ""), len);
    size_t at = yajl_get_bytes_consumed(h);
    if (st == yajl_status_ok) {
        st = yajl_complete_parse(h);
        at = len;
    }
    if (st == yajl_status_client_canceled) {
        char detail[256];
        snprintf(detail, sizeof detail, "%s", kcr_last_error());
        err = kcr__fail(c.err, "JSON object: %s (at byte %zu)", detail, at ? at - 1 : 0);
    } else if (st != yajl_status_ok) {
        unsigned char *msg = yajl_get_error(h, 0, (const unsigned char *)json, len);
        size_t n = msg ? strlen((char *)msg) : 0;
        while (n && (msg[n - 1] == '\n' || msg[n - 1] == ' '))
            msg[--n] = '\0';
        err = kcr__fail(KCR_ERR_PARSE, "invalid JSON at byte %zu of %zu: %s", at, len,
                        msg ? (char *)msg : "parse error");
        if (msg)
            yajl_free_error(h, msg);
    } else if (!kcr__object_builder_done(c.b)) {
        err = kcr__fail(KCR_ERR_PARSE, "invalid JSON: no object in %zu bytes", len);
    } else {
        err = require_name ? kcr__object_builder_finish(c.b, out)
                           : kcr__object_builder_finish_any(c.b, out);
    }
    yajl_free(h);
    kcr__object_builder_free(c.b);
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
