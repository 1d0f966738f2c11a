/* sample-controller: kubernetes/sample-controller on kcr (the controller is
 * sample.c) with a kcr_manager, leader election, metrics and health probes.
 *
 *   sample-controller [--kubeconfig PATH] [--context NAME]
 *       [--namespace NS | -A] [--workers N]
 *       [--leader-elect [--leader-election-namespace NS]]
 *       [--metrics-bind-address ADDR] [--health-probe-bind-address ADDR] [-v]
 *
 * Without --kubeconfig: $KUBECONFIG, the in-cluster service account when
 * $KUBERNETES_SERVICE_HOST is set, then ~/.kube/config. Foos and
 * Deployments of every namespace unless --namespace. The Lease
 * (--leader-elect) is "sample-controller" in --leader-election-namespace,
 * default the client's namespace (the kubeconfig context's, or the pod's).
 * Addresses are host:port, :port or 0 (off); defaults :8080 and :8081.
 * Flags also take --flag=value (common/manager_cli.c parses them and runs
 * the manager). Logs go to stderr; -v adds debug lines (each reconcile).
 * Exits 0 after SIGINT/SIGTERM (a second one exits at once), 1 when the
 * lease is lost or it cannot start, 2 for bad arguments. */
#include "../common/manager_cli.h"
#include "sample.h"

int main(int argc, char **argv)
{
    manager_cli cli = {
        .metrics_address = ":8080", .probe_address = ":8081", .workers = 2, .level = KCR_LOG_INFO};
    int bad = manager_cli_parse(SAMPLE_NAME, argc, argv, &cli);
    if (bad)
        return bad;
    sample_config sc = {.ns = cli.ns, .log = kcr_log_stderr, .level = cli.level};
    kcr_controller_options ctl;
    sample_controller(&ctl, &sc);
    return manager_cli_run(SAMPLE_NAME, &cli, &ctl);
}
