/* Uses the installed kcr_http (kcr::http / pkg-config kcr-http): serves a
 * registry on a free loopback port, then stops; and runs the shipped
 * main() (kcr/main.h) with --help. */
#include <kcr/health.h>
#include <kcr/main.h>
#include <kcr/metrics.h>
#include <stdio.h>

static kcr_err setup(kcr_manager *mgr, const kcr_main_flags *flags, void *ud)
{
    (void)mgr, (void)flags, (void)ud;
    return KCR_OK;
}

int main(void)
{
    kcr_metrics *m;
    kcr_health_server *s;
    kcr_metric_desc d = {"consumer_runs_total", "Runs of the consumer.", KCR_METRIC_COUNTER,
                         NULL, 0, NULL, 0};
    kcr_metric_family *f;
    if (kcr_metrics_new(NULL, &m) != KCR_OK || kcr_metrics_register(m, &d, &f) != KCR_OK)
        return 1;
    kcr_health_server_options o = {.metrics_bind_address = "127.0.0.1:0",
                                   .probe_bind_address = "127.0.0.1:0", .metrics = m};
    if (kcr_health_server_new(&o, &s) != KCR_OK || kcr_health_server_start(s) != KCR_OK) {
        fprintf(stderr, "consumer_http: %s\n", kcr_last_error());
        return 1;
    }
    printf("consumer_http served /metrics and probes on port %d\n",
           kcr_health_server_metrics_port(s));
    kcr_health_server_free(s);
    kcr_metrics_free(m);
    char *argv[] = {"consumer_http", "--help", NULL};
    kcr_main_options mo = {.name = "consumer_http", .setup = setup};
    return kcr_main_run(2, argv, &mo); /* prints the flags, returns 0 */
}
