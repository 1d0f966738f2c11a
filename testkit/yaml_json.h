/* Internal: YAML documents as JSON text (testkit/yaml_json.c). */
#ifndef KCR_TESTKIT_YAML_JSON_H
#define KCR_TESTKIT_YAML_JSON_H

#include <stddef.h>

#include "kcr/error.h"

/* Receives one document as JSON (borrowed for the call); index from 0. A
 * non-KCR_OK return stops the walk and is returned. */
typedef kcr_err (*kcr__yaml_doc_fn)(size_t index, const char *json, size_t len, void *user_data);

/* Calls fn for each non-empty document of `text` (JSON is YAML too).
 * KCR_ERR_PARSE naming the document and line on bad YAML. */
kcr_err kcr__yaml_each_json(const char *text, size_t len, kcr__yaml_doc_fn fn, void *user_data);

#endif
