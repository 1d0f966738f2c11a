/* Kubernetes timestamps (RFC 3339, as in metadata.creationTimestamp or a
 * condition's lastTransitionTime) to and from Unix seconds. Thread-safe:
 * no shared state. */
#ifndef KCR_TIME_H
#define KCR_TIME_H

#include <stddef.h>
#include <stdint.h>

#include "kcr/error.h"
#include "kcr/export.h"

/* Parses an RFC 3339 timestamp ("2024-02-29T12:34:56Z", fractions and
 * "+01:00"-style offsets allowed) into Unix seconds, fractions dropped.
 * KCR_ERR_PARSE (kcr_last_error() says why) for anything else,
 * KCR_ERR_INVALID for a NULL `unix_seconds`. */
KCR_API kcr_err kcr_time_parse(const char *rfc3339, int64_t *unix_seconds);

/* Writes `unix_seconds` as "YYYY-MM-DDTHH:MM:SSZ" (20 characters and a NUL)
 * into `buf`; truncated (still NUL-terminated) if `size` is smaller, and
 * nothing written if `buf` is NULL or `size` 0. */
KCR_API void kcr_time_format(int64_t unix_seconds, char *buf, size_t size);

#endif
