/* The sample controller (kubernetes/sample-controller on kcr): every Foo
 * (samplecontroller.k8s.io/v1alpha1) gets a Deployment named
 * spec.deploymentName, controlled by the Foo, with spec.replicas replicas of
 * one nginx container; the Deployment's status.availableReplicas is copied
 * into the Foo's status. The same declaration runs in main.c on a
 * kcr_manager and in tests/test_sample.c on the reconciler test kit.
 *
 * What a reconcile of a Foo does, in order:
 *   - the Foo is gone from the cache: done (the garbage collector deletes
 *     its Deployment);
 *   - spec.deploymentName empty or missing: logged, dropped (no retry: only
 *     a change of the Foo can fix it);
 *   - no Deployment of that name: created (controller ownerReference to the
 *     Foo, labels app=nginx and controller=<foo>, field manager
 *     sample-controller);
 *   - the Deployment is not controlled by this Foo (uid of the controller
 *     reference): Warning event ErrResourceExists, reconcile fails (retried
 *     with the rate limiter's backoff), nothing is written;
 *   - spec.replicas set and different from the Deployment's: the Deployment
 *     is updated (its cached resourceVersion: a conflict is a retry);
 *   - status.availableReplicas differs from the Deployment's: written
 *     through the status subresource (cached resourceVersion, as above);
 *   - Normal event Synced "Foo synced successfully".
 * Deployments are watched as owned objects: a change enqueues their
 * controlling Foo. */
#ifndef SAMPLE_H
#define SAMPLE_H

#include "kcr/kcr.h"

/* The controller's name: controller name, event reporter, field manager,
 * lease name. */
#define SAMPLE_NAME "sample-controller"

/* The resources it reads and writes. */
extern const kcr_resource SAMPLE_FOOS;
extern const kcr_resource SAMPLE_DEPLOYMENTS;

/* What the reconciler needs besides the API. Borrowed by the controller
 * (it is the reconcile's user_data) until the manager or test kit is freed;
 * read-only while reconciles run, so shared by every worker. */
typedef struct sample_config {
    const char *ns; /* NULL or "": Foos and Deployments of every namespace */
    kcr_log_fn log;        /* where the reconciler's own lines go; NULL: nowhere */
    void *log_user_data;
    kcr_log_level level;   /* lines above this level are dropped (0: ERROR only) */
} sample_config;

/* Fills *opts with the controller's declaration (primary Foos, owns
 * Deployments, reconcile) for cfg. Not thread-safe: add the declaration to
 * its manager or kit before calling this again. */
void sample_controller(kcr_controller_options *opts, const sample_config *cfg);

#endif
