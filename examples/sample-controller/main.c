/* sample-controller: kubernetes/sample-controller on kcr (the controller is
 * sample.c), its main() kcr_main_run with kubebuilder's flags (--help lists
 * them): --kubeconfig/--context (default $KUBECONFIG, in-cluster, then
 * ~/.kube/config), --namespace (default every namespace), --leader-elect
 * (Lease "sample-controller"), metrics and probes (:8080, :8081; 0: off),
 * --zap-log-level or -v (debug: each reconcile), --workers (default 2).
 * With --webhook-cert-dir DIR (tls.crt, tls.key) it also serves the Foo
 * webhooks of webhook.c over HTTPS on --webhook-bind-address (default
 * :9443), reloading the certificate when it changes (docs/webhooks.md).
 * With --reconcile-log FILE it appends one line per reconcile to FILE
 * (reconcile_log.h), the record the sharding e2e checks.
 * Exits 0 after SIGINT/SIGTERM (a second one exits at once), 1 when the
 * lease is lost or it cannot start, 2 for bad arguments. */
#include <stdio.h>

#include "flags.h"
#include "kcr/main.h"
#include "reconcile_log.h"
#include "sample.h"
#include "webhook.h"

/* What setup fills and the controller borrows: main's, it outlives the
 * manager. */
typedef struct sample_program {
    sample_config sc;
    sample_reconcile_log log; /* fd -1: no --reconcile-log */
} sample_program;

static kcr_err setup(kcr_manager *m, const kcr_main_flags *f, void *ud)
{
    sample_program *p = ud;
    p->sc = (sample_config){.ns = f->ns, .log = kcr_log_stderr, .level = f->log_level};
    kcr_controller_options ctl;
    sample_controller(&ctl, &p->sc);
    ctl.max_concurrent_reconciles = f->workers;
    if (p->log.fd >= 0)
        sample_reconcile_log_wrap(&p->log, &ctl);
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
    const char *log_path = NULL;
    const sample_flag own[] = {{"--reconcile-log", &log_path}};
    sample_program p = {.log = {.fd = -1}};
    kcr_webhook_server *server = NULL;
    int rc = sample_webhook_flags(&argc, argv, &wh);
    if (!rc)
        rc = sample_take_flags(&argc, argv, own, sizeof own / sizeof *own);
    if (!rc && log_path && sample_reconcile_log_open(&p.log, log_path, NULL))
        rc = 1;
    if (!rc)
        rc = start_webhooks(&wh, &server);
    if (rc) {
        sample_reconcile_log_close(&p.log);
        return rc;
    }
    kcr_main_options o = {
        .name = SAMPLE_NAME, .setup = setup, .user_data = &p, .default_workers = 2};
    rc = kcr_main_run(argc, argv, &o);
    kcr_webhook_server_free(server);
    sample_reconcile_log_close(&p.log);
    return rc;
}
