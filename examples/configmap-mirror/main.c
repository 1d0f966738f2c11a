/* configmap-mirror: the ConfigMap-mirror controller (mirror.c) on a
 * kcr_manager, with kcr_main_run's kubebuilder flags (--help lists them):
 * leader election, metrics, health probes, one worker unless --workers.
 * Exits 0 after SIGINT/SIGTERM, 1 when it cannot start or the lease is
 * lost, 2 for bad arguments. */
#include "kcr/main.h"
#include "mirror.h"

static kcr_err setup(kcr_manager *m, const kcr_main_flags *f, void *ud)
{
    (void)ud;
    kcr_controller_options ctl;
    mirror_controller(&ctl, f->ns);
    ctl.max_concurrent_reconciles = f->workers;
    return kcr_manager_add_controller(m, &ctl, NULL);
}

int main(int argc, char **argv)
{
    kcr_main_options o = {.name = "configmap-mirror",
                          .description = "Copies labelled ConfigMaps to <name>-mirror.",
                          .setup = setup};
    return kcr_main_run(argc, argv, &o);
}
