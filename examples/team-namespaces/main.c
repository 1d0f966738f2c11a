/* team-namespaces: the controller of teams.c with kubebuilder's flags
 * (kcr_main_run; --help lists them). */
#include "kcr/main.h"
#include "teams.h"

static kcr_err setup(kcr_manager *m, const kcr_main_flags *f, void *user_data)
{
    kcr_controller_options ctl;
    teams_controller(&ctl);
    ctl.max_concurrent_reconciles = f->workers;
    return kcr_manager_add_controller(m, &ctl, NULL);
}

int main(int argc, char **argv)
{
    return kcr_main_run(argc, argv, &(kcr_main_options){.name = "team-namespaces", .setup = setup});
}
