/* Internal: base64 (RFC 4648 standard alphabet), for kubeconfig *-data
 * fields, certificates and continue tokens. No shared state: thread-safe. */
#ifndef KCR_CORE_BASE64_H
#define KCR_CORE_BASE64_H

#include <stddef.h>

#include "kcr/error.h"

/* Base64 (standard alphabet, padding optional on input, whitespace skipped).
 * decode: KCR_ERR_PARSE on a bad character. Outputs are malloc'd and
 * NUL-terminated (not counted in *out_len); encode returns NULL when out of
 * memory. */
kcr_err kcr__base64_decode(const char *in, size_t len, char **out, size_t *out_len);
char *kcr__base64_encode(const char *in, size_t len);

#endif
