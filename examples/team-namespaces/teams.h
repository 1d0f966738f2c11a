/* team-namespaces: every Team (example.kcr.dev/v1alpha1, cluster-scoped,
 * manifests/crd.yaml) gets a Namespace team-<name> it controls and, in it,
 * a ResourceQuota team-quota (hard requests.cpu/requests.memory from
 * spec.quota) and a RoleBinding team-members binding ClusterRole edit to
 * spec.members; then status.namespace and status.ready are written. The
 * same declaration runs in main.c on a manager and in tests/ on the kit. */
#ifndef TEAMS_H
#define TEAMS_H

#include "kcr/kcr.h"

extern const kcr_resource TEAMS, TEAM_NAMESPACES, TEAM_QUOTAS, TEAM_BINDINGS;

/* Fills *opts with the controller's declaration (For Teams, Owns the three
 * built-ins). Not thread-safe: add it to its manager or kit first. */
void teams_controller(kcr_controller_options *opts);

#endif
