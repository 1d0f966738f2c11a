/* The soak's controller: examples/configmap-mirror's controller (every
 * ConfigMap labelled mirror=true gets an owned copy <name>-mirror with the
 * same data) on a kcr_manager in this process, through the fault proxy, so
 * the faults hit its caches and its writes too; and the check that its work
 * converged. */
#ifndef KCR_SOAK_CONTROLLER_H
#define KCR_SOAK_CONTROLLER_H

#include <stdbool.h>
#include <stddef.h>

#include "kcr/kcr.h"

typedef struct soak_controller soak_controller;

/* Starts the manager (on its own thread) for the ConfigMaps of ns with
 * client (borrowed) and these informer options for its caches (copied).
 * NULL on failure, with kcr_last_error() set. */
soak_controller *soak_controller_start(kcr_client *client, const char *ns,
                                       const kcr_informer_options *cache_defaults);

/* Stops the manager, joins its thread and frees it; *stats (may be NULL)
 * gets the controller's counters. Returns what kcr_manager_run returned. */
kcr_err soak_controller_stop(soak_controller *sc, kcr_controller_stats *stats);

/* Every ConfigMap of ns labelled mirror=true has a copy <name>-mirror with
 * the same data, controlled by it (same uid). false with the first
 * difference in why; *sources (may be NULL) gets the number checked. */
bool soak_mirrors_match(kcr_client *c, const char *ns, size_t *sources, char *why, size_t why_len);

#endif
