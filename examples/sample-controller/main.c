/* sample-controller: kubernetes/sample-controller on kcr (the controller is
 * sample.c), its main() kcr_main_run with kubebuilder's flags (--help lists
 * them): --kubeconfig/--context (default $KUBECONFIG, in-cluster, then
 * ~/.kube/config), --namespace (default every namespace), --leader-elect
 * (Lease "sample-controller"), metrics and probes (:8080, :8081; 0: off),
 * --zap-log-level or -v (debug: each reconcile), --workers (default 2).
 * Exits 0 after SIGINT/SIGTERM (a second one exits at once), 1 when the
 * lease is lost or it cannot start, 2 for bad arguments. */
#include "kcr/main.h"
#include "sample.h"

static kcr_err setup(kcr_manager *m, const kcr_main_flags *f, void *ud)
{
    sample_config *sc = ud; /* main's: lives until the manager is freed */
    *sc = (sample_config){.ns = f->ns, .log = kcr_log_stderr, .level = f->log_level};
    kcr_controller_options ctl;
    sample_controller(&ctl, sc);
    ctl.max_concurrent_reconciles = f->workers;
    return kcr_manager_add_controller(m, &ctl, NULL);
}

int main(int argc, char **argv)
{
    sample_config sc;
    kcr_main_options o = {
        .name = SAMPLE_NAME, .setup = setup, .user_data = &sc, .default_workers = 2};
    return kcr_main_run(argc, argv, &o);
}
