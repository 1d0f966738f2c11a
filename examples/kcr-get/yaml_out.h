/* kcr-get's -o yaml: a kcr value as a YAML document (libyaml's emitter). */
#ifndef KCR_GET_YAML_OUT_H
#define KCR_GET_YAML_OUT_H

#include <kcr/kcr.h>
#include <stdio.h>

/* Writes `v` as one YAML document to `out`. Strings that a YAML reader would
 * take for another type ("true", "1", "" ...) are quoted, so the document
 * reads back equal to the JSON. KCR_ERR_IO when the emitter fails. */
kcr_err yaml_write(FILE *out, kcr_value v);

#endif
