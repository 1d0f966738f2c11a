/* The soak's end-of-run checks beyond converge_wait (which compares keys and
 * resourceVersions): content equality with a fresh LIST, and the process's
 * resident set size. */
#ifndef KCR_SOAK_CHECK_H
#define KCR_SOAK_CHECK_H

#include <stdbool.h>
#include <stddef.h>

#include "kcr/kcr.h"

/* Every object of a fresh LIST of ConfigMaps in ns is in the store with the
 * same uid, resourceVersion, labels and data, and kind ConfigMap, apiVersion
 * v1 (which List items lack: the informer must stamp them); the store holds
 * nothing else. On a difference: false, with it in why. */
bool soak_same_content(kcr_client *c, const char *ns, kcr_store *store, char *why, size_t why_len);

/* VmRSS of this process in KiB; -1 when /proc cannot tell. */
long soak_rss_kib(void);

/* Bytes malloc has handed out and not taken back (every arena), in KiB: a
 * leak grows it, allocator fragmentation and thread arenas only the RSS. */
long soak_heap_kib(void);

#endif
