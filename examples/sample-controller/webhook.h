/* The sample controller's webhooks (kcr/webhook.h): Foo defaulting
 * (spec.replicas defaults to 1), validation (spec.replicas 0..10,
 * spec.deploymentName a DNS-1123 subdomain, as Deployment names are) and
 * conversion between v1alpha1 (spec.deploymentName, the stored hub) and
 * v1beta1 (the same field renamed spec.deploymentRef). Kept apart from
 * main.c: a controller without webhooks needs none of it. */
#ifndef SAMPLE_WEBHOOK_H
#define SAMPLE_WEBHOOK_H

#include "kcr/webhook.h"

/* The webhook flags, taken out of argv by sample_webhook_flags. */
typedef struct sample_webhook_cli {
    const char *bind_address; /* --webhook-bind-address; default ":9443" */
    const char *cert_dir;     /* --webhook-cert-dir; NULL: no webhook server */
} sample_webhook_cli;

/* Removes --webhook-bind-address and --webhook-cert-dir (and their values,
 * also as --flag=value) from argv, shifting the rest down and lowering *argc,
 * so the remaining flags go to the manager's parser. Returns 0, or 2 after
 * printing what is wrong (a flag without its value). */
int sample_webhook_flags(int *argc, char **argv, sample_webhook_cli *cli);

/* Registers the Foo defaulter/validator (kubebuilder's paths
 * /mutate-samplecontroller-k8s-io-v1alpha1-foo and
 * /validate-samplecontroller-k8s-io-v1alpha1-foo) and the conversion
 * handler (/convert) on s. */
kcr_err sample_webhooks_register(kcr_webhook_server *s);

/* True when name is a DNS-1123 subdomain: at most 253 characters of [a-z0-9-.],
 * starting and ending with [a-z0-9]. */
bool sample_dns1123_subdomain(const char *name);

#endif
