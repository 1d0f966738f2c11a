/* configmap-mirror: the ConfigMap-mirror controller (mirror.c) on a
 * kcr_manager, with leader election, metrics and health probes.
 *
 *   configmap-mirror [--kubeconfig PATH] [--context NAME] [--namespace NS]
 *       [--workers N] [--leader-elect] [--metrics-bind-address ADDR]
 *       [--health-probe-bind-address ADDR] [-v]
 *
 * Exits 0 after SIGINT/SIGTERM (a second one exits at once), 1 when the
 * lease is lost or it cannot start. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kcr/health.h"
#include "mirror.h"

int main(int argc, char **argv)
{
    const char *kubeconfig = NULL, *context = NULL, *ns = NULL, *metrics = ":8080",
               *probes = ":8081";
    int workers = 1;
    bool leader_elect = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "-v") == 0)
            kcr_log_set_level(KCR_LOG_DEBUG);
        else if (strcmp(a, "--leader-elect") == 0)
            leader_elect = true;
        else if (v && strcmp(a, "--kubeconfig") == 0 && ++i)
            kubeconfig = v;
        else if (v && strcmp(a, "--context") == 0 && ++i)
            context = v;
        else if (v && strcmp(a, "--namespace") == 0 && ++i)
            ns = v;
        else if (v && strcmp(a, "--workers") == 0 && ++i)
            workers = atoi(v);
        else if (v && strcmp(a, "--metrics-bind-address") == 0 && ++i)
            metrics = v;
        else if (v && strcmp(a, "--health-probe-bind-address") == 0 && ++i)
            probes = v;
        else
            return fprintf(stderr, "usage: configmap-mirror [--kubeconfig PATH] [--context NAME] "
                                   "[--namespace NS] [--workers N] [--leader-elect]\n"
                                   "  [--metrics-bind-address ADDR (:8080; 0: off)] "
                                   "[--health-probe-bind-address ADDR (:8081; 0: off)] [-v]\n"),
                   2;
    }
    kcr_log_set_handler(kcr_log_stderr, NULL);
    kcr_config *cfg = NULL;
    kcr_client *client = NULL;
    kcr_manager *mgr = NULL;
    kcr_health_server *http = NULL;
    kcr_config_options co = {.kubeconfig = kubeconfig, .context = context};
    kcr_manager_options mo = {.name = "configmap-mirror",
                              .leader_election = leader_elect,
                              .leader_election_id = "configmap-mirror",
                              .leader_election_namespace = ns,
                              .handle_signals = true};
    kcr_controller_options ctl;
    mirror_controller(&ctl, ns);
    ctl.max_concurrent_reconciles = workers;
    kcr_health_server_options ho = {.metrics_bind_address = metrics, .probe_bind_address = probes};
    kcr_err err = kcr_config_load(&co, &cfg);
    if (err == KCR_OK)
        err = kcr_client_new(cfg, NULL, &client);
    if (err == KCR_OK)
        err = kcr_manager_new(client, &mo, &mgr);
    if (err == KCR_OK)
        err = kcr_manager_add_controller(mgr, &ctl, NULL);
    if (err == KCR_OK)
        err = kcr_manager_serve_http(mgr, &ho, &http);
    if (err == KCR_OK)
        err = kcr_manager_run(mgr);
    if (err != KCR_OK)
        fprintf(stderr, "configmap-mirror: %s: %s\n", kcr_strerror(err), kcr_last_error());
    kcr_health_server_free(http);
    kcr_manager_free(mgr);
    kcr_client_free(client);
    kcr_config_free(cfg);
    return err == KCR_OK ? 0 : 1;
}
