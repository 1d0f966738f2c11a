/* configmap-mirror: the ConfigMap-mirror controller (mirror.c) on a
 * kcr_manager, with leader election, metrics and health probes.
 *
 *   configmap-mirror [--kubeconfig PATH] [--context NAME] [--namespace NS | -A]
 *       [--workers N] [--leader-elect [--leader-election-namespace NS]]
 *       [--metrics-bind-address ADDR] [--health-probe-bind-address ADDR] [-v]
 *
 * One worker unless --workers; the Lease is in --leader-election-namespace,
 * default --namespace, then the client's namespace. Addresses default to
 * :8080 and :8081 (0: off). Flags also take --flag=value
 * (common/manager_cli.c). Exits 0 after SIGINT/SIGTERM (a second one exits
 * at once), 1 when the lease is lost or it cannot start, 2 for bad
 * arguments. */
#include "../common/manager_cli.h"
#include "mirror.h"

int main(int argc, char **argv)
{
    manager_cli cli = {
        .metrics_address = ":8080", .probe_address = ":8081", .workers = 1, .level = KCR_LOG_INFO};
    int bad = manager_cli_parse("configmap-mirror", argc, argv, &cli);
    if (bad)
        return bad;
    if (!cli.lease_namespace)
        cli.lease_namespace = cli.ns;
    kcr_controller_options ctl;
    mirror_controller(&ctl, cli.ns);
    return manager_cli_run("configmap-mirror", &cli, &ctl);
}
