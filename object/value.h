/* Internal: kcr_value helpers for reading small documents (Status bodies,
 * discovery documents, ExecCredential output) in other layers. Like the
 * public kcr_value functions they only read an immutable object: any thread. */
#ifndef KCR_OBJECT_VALUE_H
#define KCR_OBJECT_VALUE_H

#include <stdint.h>

#include "kcr/object.h"

/* The text of a STRING value (borrowed from its object), or NULL for any
 * other type: unlike kcr_value_string, a number is not a string here. */
const char *kcr__value_str(kcr_value v);

/* The integer of an INT value, or `dflt` for any other type. */
int64_t kcr__value_int_or(kcr_value v, int64_t dflt);

/* Parses a JSON document whose top level must be an object (len 0:
 * strlen) for reading; `what` names it in the error ("Status body",
 * "discovery document"): KCR_ERR_PARSE "<what>: <parser's detail>". */
kcr_err kcr__document_parse(const char *json, size_t len, const char *what, kcr_object **out);

/* kcr_object_unref that zeroes the object's memory when it is freed, for
 * documents holding credentials (ExecCredential output). */
void kcr__object_unref_wipe(const kcr_object *obj);

#endif
