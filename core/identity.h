/* Internal: identifiers for the layers above (leader identities, Event
 * names, object-name checks). Thread-safe: no shared state. */
#ifndef KCR_CORE_IDENTITY_H
#define KCR_CORE_IDENTITY_H

#include <stdbool.h>
#include <stddef.h>

#include "kcr/error.h"

/* Writes a random (version 4, RFC 9562) UUID read from /dev/urandom,
 * "xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx", into out (37 bytes with the NUL).
 * KCR_ERR_IO when /dev/urandom cannot be read. */
kcr_err kcr__uuid_v4(char out[37]);

/* This machine's host name into out ("localhost" when it has none);
 * truncated to fit. */
void kcr__hostname(char *out, size_t size);

/* True when s is a DNS subdomain name (RFC 1123: lower-case alphanumerics,
 * '-' and '.', alphanumeric at both ends, at most 253 bytes), the rule for
 * most object names. */
bool kcr__is_dns_subdomain(const char *s);

#endif
