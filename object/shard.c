/* Shard hashing and selectors (kcr/shard.h): 64-bit FNV-1a over a shard
 * key's bytes, as the apiserver's shardRange() hashes object.metadata.uid and
 * .namespace (and kcr's controller-reference uid), and the shardSelector
 * text (format, parse, match). */
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/error.h"
#include "kcr/shard.h"

#define FNV64_OFFSET_BASIS UINT64_C(0xcbf29ce484222325)
#define FNV64_PRIME UINT64_C(0x100000001b3)

uint64_t kcr_shard_hash(const char *bytes, size_t len)
{
    uint64_t h = FNV64_OFFSET_BASIS;
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)bytes[i];
        h *= FNV64_PRIME;
    }
    return h;
}

uint64_t kcr_object_shard_hash(const kcr_object *obj, kcr_shard_field field)
{
    const char *key = "";
    kcr_owner_ref ref;
    if (obj && field == KCR_SHARD_BY_NAMESPACE)
        key = kcr_object_namespace(obj);
    else if (obj && field == KCR_SHARD_BY_CONTROLLER)
        key = kcr_object_controller_ref(obj, &ref) && ref.uid ? ref.uid : "";
    else if (obj)
        key = kcr_object_uid(obj);
    return kcr_shard_hash(key, strlen(key));
}

bool kcr_shard_range_contains(kcr_shard_range r, uint64_t hash)
{
    return hash >= r.start && (r.end == 0 || hash < r.end);
}

unsigned kcr_shard_bucket(uint64_t hash)
{
    return (unsigned)(hash >> 56);
}

/* ---- Selector text ---------------------------------------------------------------------- */

#define SHARD_TOP_TEXT "0x10000000000000000"
/* Parentheses nest at most this deep: a bound on the recursion (and the
 * stack) whatever the input. */
#define MAX_PAREN_DEPTH 32

const char *kcr_shard_field_path(kcr_shard_field field)
{
    switch (field) {
    case KCR_SHARD_BY_UID:
        return "object.metadata.uid";
    case KCR_SHARD_BY_NAMESPACE:
        return "object.metadata.namespace";
    case KCR_SHARD_BY_CONTROLLER:
        return "kcr.controllerReference.uid";
    }
    return NULL;
}

static bool range_empty(kcr_shard_range r)
{
    return r.end != 0 && r.start >= r.end;
}

kcr_err kcr_shard_selector_format(kcr_shard_field field, const kcr_shard_range *ranges, size_t n,
                                  char **out)
{
    if (!out)
        return kcr__fail(KCR_ERR_INVALID, "shard selector: NULL out");
    *out = NULL;
    const char *path = kcr_shard_field_path(field);
    if (!path)
        return kcr__fail(KCR_ERR_INVALID, "shard selector: unknown field %d", (int)field);
    if (n == 0 || !ranges)
        return kcr__fail(KCR_ERR_INVALID, "shard selector: no ranges");
    kcr__buf b = {0};
    for (size_t i = 0; i < n; i++) {
        if (range_empty(ranges[i])) {
            kcr__buf_free(&b);
            return kcr__fail(
                KCR_ERR_INVALID, "shard selector: range %zu [0x%016llx, 0x%016llx) is empty", i,
                (unsigned long long)ranges[i].start, (unsigned long long)ranges[i].end);
        }
        if (i)
            kcr__buf_str(&b, " || ");
        kcr__buf_printf(&b, "shardRange(%s, '0x%016llx', ", path,
                        (unsigned long long)ranges[i].start);
        if (ranges[i].end == 0)
            kcr__buf_str(&b, "'" SHARD_TOP_TEXT "')");
        else
            kcr__buf_printf(&b, "'0x%016llx')", (unsigned long long)ranges[i].end);
    }
    if (b.oom) {
        kcr__buf_free(&b);
        return kcr__fail(KCR_ERR_NOMEM, "out of memory formatting a shard selector");
    }
    *out = b.s;
    return KCR_OK;
}

/* A recursive-descent reader of the part of CEL the apiserver accepts:
 * term ('||' term)*, a term being shardRange(path, 'hex', 'hex') or a
 * parenthesised expression. */
typedef struct sel_parser {
    const char *text;
    size_t pos;
    bool have_field;
    kcr_shard_field field;
    kcr_shard_range *ranges;
    size_t n, cap;
} sel_parser;

static kcr_err parse_fail(const sel_parser *p, const char *what)
{
    return kcr__fail(KCR_ERR_INVALID, "shard selector: %s at offset %zu", what, p->pos);
}

static void skip_space(sel_parser *p)
{
    while (p->text[p->pos] == ' ' || p->text[p->pos] == '\t' || p->text[p->pos] == '\n' ||
           p->text[p->pos] == '\r')
        p->pos++;
}

/* Skips spaces, then consumes `tok` if it comes next. */
static bool accept(sel_parser *p, const char *tok)
{
    skip_space(p);
    size_t n = strlen(tok);
    if (strncmp(p->text + p->pos, tok, n) != 0)
        return false;
    p->pos += n;
    return true;
}

static bool ident_char(char c, bool first)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
           (!first && c >= '0' && c <= '9');
}

/* An identifier; its bytes are text[*start .. *start + *len). */
static kcr_err parse_ident(sel_parser *p, size_t *start, size_t *len)
{
    skip_space(p);
    *start = p->pos;
    while (ident_char(p->text[p->pos], p->pos == *start))
        p->pos++;
    *len = p->pos - *start;
    return *len ? KCR_OK : parse_fail(p, "expected a name");
}

/* object.metadata.uid or object.metadata.namespace, dots with optional
 * spaces around them as CEL allows. */
static kcr_err parse_field(sel_parser *p, kcr_shard_field *out)
{
    char path[64];
    size_t plen = 0, at = p->pos;
    for (;;) {
        size_t s, n;
        kcr_err err = parse_ident(p, &s, &n);
        if (err != KCR_OK)
            return err;
        if (plen + n + 1 >= sizeof path)
            return p->pos = at, parse_fail(p, "field path too long (expected "
                                              "object.metadata.uid or object.metadata.namespace)");
        memcpy(path + plen, p->text + s, n);
        plen += n;
        path[plen] = '\0';
        if (!accept(p, "."))
            break;
        path[plen++] = '.';
    }
    for (int f = KCR_SHARD_BY_UID; f <= KCR_SHARD_BY_CONTROLLER; f++) {
        if (strcmp(path, kcr_shard_field_path((kcr_shard_field)f)) == 0) {
            *out = (kcr_shard_field)f;
            return KCR_OK;
        }
    }
    p->pos = at;
    return kcr__fail(KCR_ERR_INVALID,
                     "shard selector: unsupported field path \"%s\" at offset %zu; supported: "
                     "object.metadata.uid, object.metadata.namespace, kcr.controllerReference.uid",
                     path, at);
}

/* A quoted hex bound: '0x' and 16 lower-case hex digits, or the top.
 * *is_top says which; the top is only valid as an end. */
static kcr_err parse_bound(sel_parser *p, const char *name, uint64_t *value, bool *is_top)
{
    skip_space(p);
    char quote = p->text[p->pos];
    if (quote != '\'' && quote != '"')
        return kcr__fail(KCR_ERR_INVALID,
                         "shard selector: %s must be a string literal (e.g. '0x0000000000000000') "
                         "at offset %zu",
                         name, p->pos);
    size_t at = p->pos++;
    const char *s = p->text + p->pos;
    const char *close = strchr(s, quote);
    if (!close)
        return p->pos = at, parse_fail(p, "unterminated string");
    size_t len = (size_t)(close - s);
    p->pos += len + 1;
    if (memchr(s, '\\', len))
        return kcr__fail(KCR_ERR_INVALID,
                         "shard selector: %s: escapes are not allowed at offset %zu", name, at);
    if (len < 2 || s[0] != '0' || s[1] != 'x')
        return kcr__fail(KCR_ERR_INVALID,
                         "shard selector: %s must have a '0x' prefix at offset %zu", name, at);
    if (len == sizeof SHARD_TOP_TEXT - 1 && memcmp(s, SHARD_TOP_TEXT, len) == 0) {
        *is_top = true;
        *value = 0;
        return KCR_OK;
    }
    *is_top = false;
    if (len != 18)
        return kcr__fail(KCR_ERR_INVALID,
                         "shard selector: %s must be '0x' and exactly 16 hex digits (or "
                         "'" SHARD_TOP_TEXT "'), got %zu digits at offset %zu",
                         name, len - 2, at);
    uint64_t v = 0;
    for (size_t i = 2; i < len; i++) {
        char c = s[i];
        unsigned d;
        if (c >= '0' && c <= '9')
            d = (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            d = (unsigned)(c - 'a' + 10);
        else
            return kcr__fail(KCR_ERR_INVALID,
                             "shard selector: %s: invalid hex character '%c' (lower-case only) at "
                             "offset %zu",
                             name, c, at + 1 + i);
        v = v << 4 | d;
    }
    *value = v;
    return KCR_OK;
}

static kcr_err add_range(sel_parser *p, kcr_shard_range r)
{
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 4;
        kcr_shard_range *grown = realloc(p->ranges, cap * sizeof *grown);
        if (!grown)
            return kcr__fail(KCR_ERR_NOMEM, "out of memory parsing a shard selector");
        p->ranges = grown;
        p->cap = cap;
    }
    p->ranges[p->n++] = r;
    return KCR_OK;
}

static kcr_err parse_call(sel_parser *p)
{
    size_t s, n, at;
    skip_space(p);
    at = p->pos;
    kcr_err err = parse_ident(p, &s, &n);
    if (err != KCR_OK)
        return parse_fail(p, "expected shardRange(...) or '('");
    if (n != 10 || memcmp(p->text + s, "shardRange", 10) != 0)
        return kcr__fail(KCR_ERR_INVALID,
                         "shard selector: unsupported function \"%.*s\" at offset %zu; only "
                         "shardRange() and || are allowed",
                         (int)(n > 64 ? 64 : n), p->text + s, at);
    if (!accept(p, "("))
        return parse_fail(p, "expected '(' after shardRange");
    kcr_shard_field field = KCR_SHARD_BY_UID;
    size_t field_at = (skip_space(p), p->pos);
    err = parse_field(p, &field);
    if (err != KCR_OK)
        return err;
    if (p->have_field && field != p->field)
        return kcr__fail(KCR_ERR_INVALID,
                         "shard selector: all shard ranges must use the same field, got %s and %s "
                         "(offset %zu)",
                         kcr_shard_field_path(p->field), kcr_shard_field_path(field), field_at);
    p->have_field = true;
    p->field = field;
    if (!accept(p, ","))
        return parse_fail(p, "expected ',' after the field path");
    uint64_t start, end;
    bool start_top, end_top;
    size_t start_at = (skip_space(p), p->pos);
    if ((err = parse_bound(p, "hexStart", &start, &start_top)) != KCR_OK)
        return err;
    if (!accept(p, ","))
        return parse_fail(p, "expected ',' after the range start");
    if ((err = parse_bound(p, "hexEnd", &end, &end_top)) != KCR_OK)
        return err;
    if (!accept(p, ")"))
        return parse_fail(p, "expected ')': shardRange() takes exactly 3 arguments");
    if (start_top || (!end_top && start >= end))
        return kcr__fail(KCR_ERR_INVALID,
                         "shard selector: range start must be less than its end (offset %zu)",
                         start_at);
    return add_range(p, (kcr_shard_range){.start = start, .end = end_top ? 0 : end});
}

static kcr_err parse_or(sel_parser *p, int depth);

static kcr_err parse_term(sel_parser *p, int depth)
{
    if (!accept(p, "("))
        return parse_call(p);
    if (depth >= MAX_PAREN_DEPTH)
        return parse_fail(p, "parentheses nest too deep");
    kcr_err err = parse_or(p, depth + 1);
    if (err == KCR_OK && !accept(p, ")"))
        err = parse_fail(p, "expected ')' or '||'");
    return err;
}

static kcr_err parse_or(sel_parser *p, int depth)
{
    kcr_err err = parse_term(p, depth);
    while (err == KCR_OK && accept(p, "||"))
        err = parse_term(p, depth);
    return err;
}

kcr_err kcr_shard_selector_parse(const char *text, kcr_shard_field *field, kcr_shard_range **ranges,
                                 size_t *n)
{
    if (ranges)
        *ranges = NULL;
    if (n)
        *n = 0;
    if (!text || !field || !ranges || !n)
        return kcr__fail(KCR_ERR_INVALID, "kcr_shard_selector_parse: NULL argument");
    sel_parser p = {.text = text};
    skip_space(&p);
    if (!text[p.pos])
        return kcr__fail(KCR_ERR_INVALID,
                         "shard selector: empty (omit the parameter for an unfiltered list)");
    kcr_err err = parse_or(&p, 0);
    if (err == KCR_OK) {
        skip_space(&p);
        if (text[p.pos])
            err = parse_fail(&p, "unexpected text after the selector (terms join with ||)");
    }
    if (err != KCR_OK) {
        free(p.ranges);
        return err;
    }
    *field = p.field;
    *ranges = p.ranges;
    *n = p.n;
    return KCR_OK;
}

bool kcr_shard_match(const kcr_object *obj, kcr_shard_field field, const kcr_shard_range *ranges,
                     size_t n)
{
    if (!ranges || n == 0)
        return false;
    kcr_owner_ref ref;
    if (field == KCR_SHARD_BY_CONTROLLER && !(obj && kcr_object_controller_ref(obj, &ref)))
        return true;
    uint64_t h = kcr_object_shard_hash(obj, field);
    for (size_t i = 0; i < n; i++)
        if (kcr_shard_range_contains(ranges[i], h))
            return true;
    return false;
}
