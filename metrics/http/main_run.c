/* kcr_main_run: command line -> config -> client -> manager -> the
 * program's controllers -> metrics and probes -> run until a signal ->
 * free (kcr/main.h). */
#include <stdio.h>
#include <stdlib.h>

#include "core/abi.h"
#include "kcr/client.h"
#include "kcr/config.h"
#include "kcr/health.h"
#include "kcr/main.h"

/* Runs the manager for parsed flags; KCR_OK after a signal. */
static kcr_err run(const kcr_main_options *o, const kcr_main_flags *f)
{
    kcr_config *cfg = NULL;
    kcr_client *client = NULL;
    kcr_manager *mgr = NULL;
    kcr_health_server *http = NULL;
    kcr_config_options co = {.kubeconfig = f->kubeconfig, .context = f->context};
    kcr_manager_options mo = {.name = o->name,
                              .leader_election = f->leader_elect,
                              .leader_election_id = f->leader_election_id,
                              .leader_election_namespace = f->leader_election_namespace,
                              .handle_signals = true,
                              .sharding = o->sharding};
    kcr_health_server_options ho = {.metrics_bind_address = f->metrics_bind_address,
                                    .probe_bind_address = f->health_probe_bind_address};
    kcr_err err = kcr_config_load(&co, &cfg);
    if (err == KCR_OK)
        err = kcr_client_new(
            cfg, &(kcr_client_options){.qps = f->kube_api_qps, .burst = f->kube_api_burst},
            &client);
    if (err == KCR_OK)
        err = kcr_manager_new(client, &mo, &mgr);
    if (err == KCR_OK)
        err = o->setup(mgr, f, o->user_data);
    if (err == KCR_OK)
        err = kcr_manager_serve_http(mgr, &ho, &http);
    if (err == KCR_OK)
        err = kcr_manager_run(mgr);
    if (err != KCR_OK)
        fprintf(stderr, "%s: %s: %s\n", o->name, kcr_strerror(err), kcr_last_error());
    kcr_health_server_free(http);
    kcr_manager_free(mgr);
    kcr_client_free(client);
    kcr_config_free(cfg);
    return err;
}

int (kcr_main_run)(size_t opts_size, int argc, char **argv, const kcr_main_options *opts)
{
    const char *prog = opts && opts->name ? opts->name : "kcr_main_run";
    kcr_main_options known;
    if (kcr__abi_in(&known, sizeof known, opts, opts_size, "kcr_main_options") != KCR_OK) {
        fprintf(stderr, "%s: %s\n", prog, kcr_last_error());
        return 1;
    }
    if (!opts || !known.setup) {
        fprintf(stderr, "%s: kcr_main_run needs options with a name and a setup function\n", prog);
        return 1;
    }
    opts = &known;
    kcr_main_flags f;
    if (kcr_main_parse(opts, argc, argv, &f) != KCR_OK) {
        fprintf(stderr, "%s: %s\nRun '%s --help' for the flags.\n", prog, kcr_last_error(), prog);
        return 2;
    }
    if (f.help) {
        char *text = NULL;
        if (kcr_main_usage(opts, &text) != KCR_OK) {
            fprintf(stderr, "%s: %s\n", prog, kcr_last_error());
            return 1;
        }
        fputs(text, stdout);
        free(text);
        return 0;
    }
    kcr_log_set_handler(kcr_log_stderr, NULL);
    kcr_log_set_level(f.log_level);
    return run(opts, &f) == KCR_OK ? 0 : 1;
}
