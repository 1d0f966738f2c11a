/* sample-controller: kubernetes/sample-controller on kcr (the controller is
 * sample.c) with a kcr_manager, leader election, metrics and health probes.
 *
 *   sample-controller [--kubeconfig PATH] [--context NAME]
 *       [--namespace NS | -A] [--workers N]
 *       [--leader-elect [--leader-election-namespace NS]]
 *       [--metrics-bind-address ADDR] [--health-probe-bind-address ADDR] [-v]
 *       [--webhook-cert-dir DIR [--webhook-bind-address ADDR]]
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
 * lease is lost or it cannot start, 2 for bad arguments.
 * With --webhook-cert-dir (tls.crt, tls.key) it also serves the Foo
 * webhooks of webhook.c over HTTPS on --webhook-bind-address (default
 * :9443), reloading the certificate when it changes (docs/webhooks.md). */
#include "../common/manager_cli.h"
#include "sample.h"
#include "webhook.h"

#include <stdio.h>

int main(int argc, char **argv)
{
    manager_cli cli = {
        .metrics_address = ":8080", .probe_address = ":8081", .workers = 2, .level = KCR_LOG_INFO};
    sample_webhook_cli wh = {.bind_address = ":9443"};
    int bad = sample_webhook_flags(&argc, argv, &wh);
    if (!bad)
        bad = manager_cli_parse(SAMPLE_NAME, argc, argv, &cli);
    if (bad)
        return bad;
    sample_config sc = {.ns = cli.ns, .log = kcr_log_stderr, .level = cli.level};
    kcr_controller_options ctl;
    sample_controller(&ctl, &sc);
    kcr_webhook_server *server = NULL;
    if (wh.cert_dir) {
        kcr_webhook_server_options wo = {.bind_address = wh.bind_address, .cert_dir = wh.cert_dir};
        kcr_err err = kcr_webhook_server_new(&wo, &server);
        if (!err)
            err = sample_webhooks_register(server);
        if (!err)
            err = kcr_webhook_server_start(server);
        if (err) {
            fprintf(stderr, "%s: webhooks: %s\n", SAMPLE_NAME, kcr_last_error());
            kcr_webhook_server_free(server);
            return 1;
        }
    }
    int rc = manager_cli_run(SAMPLE_NAME, &cli, &ctl);
    kcr_webhook_server_free(server);
    return rc;
}
