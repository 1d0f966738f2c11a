/* YAML (one or more documents) to JSON text, for seeding the test kit.
 * Plain scalars follow YAML 1.2's core schema (null, true/false, integers,
 * floats); quoted and block scalars are strings. */
#include <stdbool.h>
#include <string.h>
#include <yaml.h>

#include "testkit/yaml_json.h"
#include "core/buf.h"
#include "core/error.h"

static bool is_number(const char *s, size_t n)
{
    if (!n)
        return false;
    char tmp[64];
    if (n >= sizeof tmp)
        return false;
    memcpy(tmp, s, n);
    tmp[n] = '\0';
    /* JSON's number grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
    const char *p = tmp;
    if (*p == '-')
        p++;
    if (*p == '0')
        p++;
    else if (*p >= '1' && *p <= '9')
        while (*p >= '0' && *p <= '9')
            p++;
    else
        return false;
    if (*p == '.') {
        p++;
        if (!(*p >= '0' && *p <= '9'))
            return false;
        while (*p >= '0' && *p <= '9')
            p++;
    }
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-')
            p++;
        if (!(*p >= '0' && *p <= '9'))
            return false;
        while (*p >= '0' && *p <= '9')
            p++;
    }
    return *p == '\0';
}

static bool is_word(const char *s, size_t n, const char *w)
{
    return strlen(w) == n && memcmp(s, w, n) == 0;
}

static kcr_err node_json(yaml_document_t *d, yaml_node_t *n, kcr__buf *b, int depth)
{
    if (!n)
        return kcr__fail(KCR_ERR_PARSE, "YAML: dangling node");
    if (depth > 100)
        return kcr__fail(KCR_ERR_PARSE, "YAML: nested too deep");
    switch (n->type) {
    case YAML_SCALAR_NODE: {
        const char *s = (const char *)n->data.scalar.value;
        size_t len = n->data.scalar.length;
        if (n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE) {
            kcr__buf_json_string(b, s, len);
        } else if (len == 0 || is_word(s, len, "~") || is_word(s, len, "null") ||
                   is_word(s, len, "Null") || is_word(s, len, "NULL")) {
            kcr__buf_add(b, "null", 4);
        } else if (is_word(s, len, "true") || is_word(s, len, "True") || is_word(s, len, "TRUE")) {
            kcr__buf_add(b, "true", 4);
        } else if (is_word(s, len, "false") || is_word(s, len, "False") ||
                   is_word(s, len, "FALSE")) {
            kcr__buf_add(b, "false", 5);
        } else if (is_number(s, len)) {
            kcr__buf_add(b, s, len);
        } else {
            kcr__buf_json_string(b, s, len);
        }
        return KCR_OK;
    }
    case YAML_SEQUENCE_NODE: {
        kcr__buf_add(b, "[", 1);
        for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top;
             it++) {
            if (it != n->data.sequence.items.start)
                kcr__buf_add(b, ",", 1);
            kcr_err err = node_json(d, yaml_document_get_node(d, *it), b, depth + 1);
            if (err != KCR_OK)
                return err;
        }
        kcr__buf_add(b, "]", 1);
        return KCR_OK;
    }
    case YAML_MAPPING_NODE: {
        kcr__buf_add(b, "{", 1);
        for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top;
             p++) {
            yaml_node_t *k = yaml_document_get_node(d, p->key);
            if (!k || k->type != YAML_SCALAR_NODE)
                return kcr__fail(KCR_ERR_PARSE, "YAML: line %zu: a mapping key must be a scalar",
                                 k ? k->start_mark.line + 1 : 0);
            if (p != n->data.mapping.pairs.start)
                kcr__buf_add(b, ",", 1);
            kcr__buf_json_string(b, (const char *)k->data.scalar.value, k->data.scalar.length);
            kcr__buf_add(b, ":", 1);
            kcr_err err = node_json(d, yaml_document_get_node(d, p->value), b, depth + 1);
            if (err != KCR_OK)
                return err;
        }
        kcr__buf_add(b, "}", 1);
        return KCR_OK;
    }
    default:
        return kcr__fail(KCR_ERR_PARSE, "YAML: unexpected node");
    }
}

kcr_err kcr__yaml_each_json(const char *text, size_t len, kcr__yaml_doc_fn fn, void *user_data)
{
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser))
        return kcr__fail(KCR_ERR_NOMEM, "out of memory starting the YAML parser");
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    kcr_err err = KCR_OK;
    for (size_t index = 0; err == KCR_OK; index++) {
        yaml_document_t doc;
        if (!yaml_parser_load(&parser, &doc)) {
            err = kcr__fail(KCR_ERR_PARSE, "YAML document %zu: %s at line %zu", index + 1,
                            parser.problem ? parser.problem : "syntax error",
                            parser.problem_mark.line + 1);
            break;
        }
        yaml_node_t *root = yaml_document_get_root_node(&doc);
        if (!root) { /* end of the stream */
            yaml_document_delete(&doc);
            break;
        }
        kcr__buf b = {0};
        err = node_json(&doc, root, &b, 0);
        if (err == KCR_OK && b.oom)
            err = kcr__fail(KCR_ERR_NOMEM, "out of memory converting YAML");
        if (err == KCR_OK &&
            !(root->type == YAML_SCALAR_NODE && b.len == 4 && !memcmp(b.s, "null", 4)))
            err = fn(index, b.s, b.len, user_data);
        kcr__buf_free(&b);
        yaml_document_delete(&doc);
    }
    yaml_parser_delete(&parser);
    return err;
}
