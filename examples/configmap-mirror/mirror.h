/* The ConfigMap-mirror controller: every ConfigMap labelled mirror=true gets
 * a copy named <name>-mirror in its namespace, owned by it (so the garbage
 * collector deletes the copy with the original) and kept in sync. The same
 * declaration runs in main.c on a kcr_manager and in examples/reconciler-test
 * on the test kit. */
#ifndef MIRROR_H
#define MIRROR_H

#include "kcr/kcr.h"

/* Fills *opts with the controller's declaration; ns NULL: all namespaces. */
void mirror_controller(kcr_controller_options *opts, const char *ns);

#endif
