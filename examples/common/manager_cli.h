/* The command line and manager setup shared by the controller examples
 * (configmap-mirror, sample-controller): the flags a kubebuilder-style
 * controller takes, and a kcr_manager running one controller with leader
 * election, metrics and health probes.
 *
 * Flags (each value flag also takes --flag=value):
 *   --kubeconfig PATH, --context NAME, --namespace/-n NS, -A/--all-namespaces,
 *   --workers N (1..1000), --leader-elect, --leader-election-namespace NS,
 *   --metrics-bind-address ADDR, --health-probe-bind-address ADDR
 *   (host:port, :port, or 0: off), -v (debug log lines).
 *
 * Example support, not library API: how a program spells its flags and
 * reports a bad one on stderr is the program's choice, and kcr never prints
 * (docs/architecture.md); the library part of this (kcr_config_load,
 * kcr_manager_*) is already one call each. */
#ifndef EXAMPLES_MANAGER_CLI_H
#define EXAMPLES_MANAGER_CLI_H

#include <stdbool.h>

#include "kcr/kcr.h"

/* What the command line sets. Fill in the defaults before
 * manager_cli_parse; strings point into argv (borrowed for the program's
 * lifetime). Not shared between threads. */
typedef struct manager_cli {
    const char *kubeconfig;      /* NULL: $KUBECONFIG, in-cluster, ~/.kube/config */
    const char *context;         /* NULL: the kubeconfig's current context */
    const char *ns;       /* NULL: every namespace */
    const char *lease_namespace; /* NULL: the client's namespace */
    const char *metrics_address; /* "0": no metrics endpoint */
    const char *probe_address;   /* "0": no /healthz, /readyz */
    long workers;                /* concurrent reconciles */
    bool leader_elect;
    kcr_log_level level; /* KCR_LOG_INFO, or KCR_LOG_DEBUG with -v */
} manager_cli;

/* Parses argv[1..argc-1] into *cli (keeping the defaults it holds for flags
 * not given). Returns 0, or 2 after printing what is wrong and the usage
 * line of program `prog` to stderr (main returns it: exit status 2 is a bad
 * command line). */
int manager_cli_parse(const char *prog, int argc, char **argv, manager_cli *cli);

/* Sets up logging to stderr at cli->level, loads the client configuration,
 * and runs a kcr_manager named `name` (also the Lease name) with the
 * controller `ctl` (its max_concurrent_reconciles set to cli->workers),
 * leader election when asked, metrics and probes on the given addresses,
 * SIGINT/SIGTERM handling, until it stops. Returns the exit status: 0 after
 * a signal, 1 when it cannot start or the lease is lost (the error on
 * stderr, prefixed with `name`). Call once, from main. */
int manager_cli_run(const char *name, const manager_cli *cli, kcr_controller_options *ctl);

#endif
