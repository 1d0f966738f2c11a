/* The controller examples' command line and manager setup (manager_cli.h). */
#include "manager_cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kcr/health.h"

static int usage(const char *prog, const char *why, const char *arg)
{
    fprintf(stderr,
            "%s: %s%s\n"
            "usage: %s [--kubeconfig PATH] [--context NAME] [--namespace NS | -A]\n"
            "       [--workers N] [--leader-elect [--leader-election-namespace NS]]\n"
            "       [--metrics-bind-address ADDR] [--health-probe-bind-address ADDR] [-v]\n"
            "       (ADDR: host:port, :port, or 0 for off)\n",
            prog, why, arg, prog);
    return 2;
}

static bool takes_value(const char *a)
{
    static const char *const flags[] = {"--kubeconfig",
                                        "--context",
                                        "--namespace",
                                        "-n",
                                        "--workers",
                                        "--leader-election-namespace",
                                        "--metrics-bind-address",
                                        "--health-probe-bind-address"};
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
        if (strcmp(a, flags[i]) == 0)
            return true;
    return false;
}

int manager_cli_parse(const char *prog, int argc, char **argv, manager_cli *cli)
{
    for (int i = 1; i < argc; i++) {
        char flag[64];
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        const char *eq = strncmp(a, "--", 2) == 0 ? strchr(a, '=') : NULL;
        if (eq) { /* --flag=value */
            if ((size_t)(eq - a) >= sizeof flag)
                return usage(prog, "unknown argument ", a);
            snprintf(flag, sizeof flag, "%.*s", (int)(eq - a), a);
            a = flag;
            v = eq + 1;
        }
        bool valued = takes_value(a);
        if (valued && !v)
            return usage(prog, "missing value after ", a);
        if (eq && !valued)
            return usage(prog,
                         strcmp(a, "--leader-elect") == 0 || strcmp(a, "--all-namespaces") == 0
                             ? "takes no value: "
                             : "unknown argument ",
                         argv[i]);
        if (valued && !eq)
            i++;
        if (strcmp(a, "-v") == 0)
            cli->level = KCR_LOG_DEBUG;
        else if (strcmp(a, "--leader-elect") == 0)
            cli->leader_elect = true;
        else if (strcmp(a, "-A") == 0 || strcmp(a, "--all-namespaces") == 0)
            cli->ns = NULL;
        else if (strcmp(a, "--kubeconfig") == 0)
            cli->kubeconfig = v;
        else if (strcmp(a, "--context") == 0)
            cli->context = v;
        else if (strcmp(a, "--namespace") == 0 || strcmp(a, "-n") == 0)
            cli->ns = v;
        else if (strcmp(a, "--leader-election-namespace") == 0)
            cli->lease_namespace = v;
        else if (strcmp(a, "--metrics-bind-address") == 0)
            cli->metrics_address = v;
        else if (strcmp(a, "--health-probe-bind-address") == 0)
            cli->probe_address = v;
        else if (strcmp(a, "--workers") == 0) {
            char *end;
            cli->workers = strtol(v, &end, 10);
            if (!*v || *end || cli->workers < 1 || cli->workers > 1000)
                return usage(prog, "--workers wants a number from 1 to 1000, not ", v);
        } else
            return usage(prog, "unknown argument ", a);
    }
    return 0;
}

int manager_cli_run(const char *name, const manager_cli *cli, kcr_controller_options *ctl)
{
    kcr_log_set_handler(kcr_log_stderr, NULL);
    kcr_log_set_level(cli->level);
    ctl->max_concurrent_reconciles = (int)cli->workers;

    kcr_config *cfg = NULL;
    kcr_client *client = NULL;
    kcr_manager *mgr = NULL;
    kcr_health_server *http = NULL;
    kcr_config_options co = {.kubeconfig = cli->kubeconfig, .context = cli->context};
    kcr_manager_options mo = {.name = name,
                              .leader_election = cli->leader_elect,
                              .leader_election_id = name,
                              .leader_election_namespace = cli->lease_namespace,
                              .handle_signals = true};
    kcr_health_server_options ho = {.metrics_bind_address = cli->metrics_address,
                                    .probe_bind_address = cli->probe_address};
    kcr_err err = kcr_config_load(&co, &cfg);
    if (err == KCR_OK)
        err = kcr_client_new(cfg, NULL, &client);
    if (err == KCR_OK)
        err = kcr_manager_new(client, &mo, &mgr);
    if (err == KCR_OK)
        err = kcr_manager_add_controller(mgr, ctl, NULL);
    if (err == KCR_OK)
        err = kcr_manager_serve_http(mgr, &ho, &http);
    if (err == KCR_OK)
        err = kcr_manager_run(mgr);
    if (err != KCR_OK)
        fprintf(stderr, "%s: %s: %s\n", name, kcr_strerror(err), kcr_last_error());
    kcr_health_server_free(http);
    kcr_manager_free(mgr);
    kcr_client_free(client);
    kcr_config_free(cfg);
    return err == KCR_OK ? 0 : 1;
}
