/* sample-controller: kubernetes/sample-controller on kcr (the controller is
 * sample.c), its main() kcr_main_run with kubebuilder's flags (--help lists
 * them): --kubeconfig/--context (default $KUBECONFIG, in-cluster, then
 * ~/.kube/config), --namespace (default every namespace), --leader-elect
 * (Lease "sample-controller"), metrics and probes (:8080, :8081; 0: off),
 * --zap-log-level or -v (debug: each reconcile), --workers (default 2).
 * With --webhook-cert-dir DIR (tls.crt, tls.key) it also serves the Foo
 * webhooks of webhook.c over HTTPS on --webhook-bind-address (default
 * :9443), reloading the certificate when it changes (docs/webhooks.md).
 * Exits 0 after SIGINT/SIGTERM (a second one exits at once), 1 when the
 * lease is lost or it cannot start, 2 for bad arguments. */
#include <stdio.h>

#include "kcr/main.h"
#include "sample.h"
#include "webhook.h"

static kcr_err setup(kcr_manager *m, const kcr_main_flags *f, void *ud)
{
    sample_config *sc = ud; /* main's: lives until the manager is freed */
    *sc = (sample_config){.ns = f->ns, .log = kcr_log_stderr, .level = f->log_level};
    kcr_controller_options ctl;
    sample_controller(&ctl, sc);
    ctl.max_concurrent_reconciles = f->workers;
    return kcr_manager_add_controller(m, &ctl, NULL);
}

/* The webhook server of --webhook-cert-dir, started before the manager. */
static int start_webhooks(const sample_webhook_cli *wh, kcr_webhook_server **out)
{
    *out = NULL;
    if (!wh->cert_dir)
        return 0;
    kcr_webhook_server_options wo = {.bind_address = wh->bind_address, .cert_dir = wh->cert_dir};
    kcr_err err = kcr_webhook_server_new(&wo, out);
    if (!err)
        err = sample_webhooks_register(*out);
    if (!err)
        err = kcr_webhook_server_start(*out);
    if (err) {
        fprintf(stderr, "%s: webhooks: %s\n", SAMPLE_NAME, kcr_last_error());
        kcr_webhook_server_free(*out);
        *out = NULL;
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    sample_webhook_cli wh = {.bind_address = ":9443"};
    kcr_webhook_server *server = NULL;
    int rc = sample_webhook_flags(&argc, argv, &wh);
    if (!rc)
        rc = start_webhooks(&wh, &server);
    if (rc)
        return rc;
    sample_config sc;
    kcr_main_options o = {
        .name = SAMPLE_NAME, .setup = setup, .user_data = &sc, .default_workers = 2};
    rc = kcr_main_run(argc, argv, &o);
    kcr_webhook_server_free(server);
    return rc;
}
