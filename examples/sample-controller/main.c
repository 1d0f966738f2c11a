/* sample-controller: kubernetes/sample-controller on kcr (the controller is
 * sample.c) with a kcr_manager, leader election, metrics and health probes.
 *
 *   sample-controller [--kubeconfig PATH] [--context NAME]
 *       [--namespace NS | -A] [--workers N]
 *       [--leader-elect [--leader-election-namespace NS]]
 *       [--metrics-bind-address ADDR] [--health-probe-bind-address ADDR] [-v]
 *
 * Without --kubeconfig: $KUBECONFIG, the in-cluster service account when
 * $KUBERNETES_SERVICE_HOST is set, then ~/.kube/config. Foos and
 * Deployments of every namespace unless --namespace. The Lease
 * (--leader-elect) is "sample-controller" in --leader-election-namespace,
 * default the client's namespace (the kubeconfig context's, or the pod's).
 * Addresses are host:port, :port or 0 (off); defaults :8080 and :8081.
 * Flags also take --flag=value. Logs go to stderr; -v adds debug lines (each reconcile).
 * Exits 0 after SIGINT/SIGTERM (a second one exits at once), 1 when the
 * lease is lost or it cannot start, 2 for bad arguments. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kcr/health.h"
#include "sample.h"

static int usage(const char *why, const char *arg)
{
    fprintf(stderr,
            "sample-controller: %s%s\n"
            "usage: sample-controller [--kubeconfig PATH] [--context NAME] [--namespace NS | -A]\n"
            "       [--workers N] [--leader-elect [--leader-election-namespace NS]]\n"
            "       [--metrics-bind-address ADDR] [--health-probe-bind-address ADDR] [-v]\n",
            why, arg);
    return 2;
}

int main(int argc, char **argv)
{
    const char *kubeconfig = NULL, *context = NULL, *ns = NULL, *metrics = ":8080",
               *probes = ":8081", *lease_ns = NULL;
    long workers = 2;
    bool leader_elect = false;
    kcr_log_level level = KCR_LOG_INFO;
    for (int i = 1; i < argc; i++) {
        char flag[64];
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        const char *eq = strncmp(a, "--", 2) == 0 ? strchr(a, '=') : NULL;
        if (eq) { /* --flag=value */
            if ((size_t)(eq - a) >= sizeof flag)
                return usage("unknown argument ", a);
            snprintf(flag, sizeof flag, "%.*s", (int)(eq - a), a);
            a = flag;
            v = eq + 1;
        }
        bool takes_value = strcmp(a, "--kubeconfig") == 0 || strcmp(a, "--context") == 0 ||
                           strcmp(a, "--namespace") == 0 || strcmp(a, "-n") == 0 ||
                           strcmp(a, "--workers") == 0 ||
                           strcmp(a, "--leader-election-namespace") == 0 ||
                           strcmp(a, "--metrics-bind-address") == 0 ||
                           strcmp(a, "--health-probe-bind-address") == 0;
        if (takes_value && !v)
            return usage("missing value after ", a);
        if (eq && !takes_value)
            return usage(strcmp(a, "--leader-elect") == 0 || strcmp(a, "--all-namespaces") == 0
                             ? "takes no value: "
                             : "unknown argument ",
                         argv[i]);
        if (takes_value && !eq)
            i++;
        if (strcmp(a, "-v") == 0)
            level = KCR_LOG_DEBUG;
        else if (strcmp(a, "--leader-elect") == 0)
            leader_elect = true;
        else if (strcmp(a, "-A") == 0 || strcmp(a, "--all-namespaces") == 0)
            ns = NULL;
        else if (strcmp(a, "--kubeconfig") == 0)
            kubeconfig = v;
        else if (strcmp(a, "--context") == 0)
            context = v;
        else if (strcmp(a, "--namespace") == 0 || strcmp(a, "-n") == 0)
            ns = v;
        else if (strcmp(a, "--leader-election-namespace") == 0)
            lease_ns = v;
        else if (strcmp(a, "--metrics-bind-address") == 0)
            metrics = v;
        else if (strcmp(a, "--health-probe-bind-address") == 0)
            probes = v;
        else if (strcmp(a, "--workers") == 0) {
            char *end;
            workers = strtol(v, &end, 10);
            if (*end || workers < 1 || workers > 1000)
                return usage("--workers wants a number from 1 to 1000, not ", v);
        } else
            return usage("unknown argument ", a);
    }
    kcr_log_set_handler(kcr_log_stderr, NULL);
    kcr_log_set_level(level);

    kcr_config *cfg = NULL;
    kcr_client *client = NULL;
    kcr_manager *mgr = NULL;
    kcr_health_server *http = NULL;
    sample_config sc = {.namespace = ns, .log = kcr_log_stderr, .level = level};
    kcr_controller_options ctl;
    sample_controller(&ctl, &sc);
    ctl.max_concurrent_reconciles = (int)workers;
    kcr_config_options co = {.kubeconfig = kubeconfig, .context = context};
    kcr_manager_options mo = {.name = SAMPLE_NAME, .leader_election = leader_elect,
                              .leader_election_id = SAMPLE_NAME,
                              .leader_election_namespace = lease_ns, .handle_signals = true};
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
        fprintf(stderr, "sample-controller: %s: %s\n", kcr_strerror(err), kcr_last_error());
    kcr_health_server_free(http);
    kcr_manager_free(mgr);
    kcr_client_free(client);
    kcr_config_free(cfg);
    return err == KCR_OK ? 0 : 1;
}
