/* kcr_main_parse / kcr_main_usage (libkcr_http): defaults, every flag in
 * both spellings, bad values refused naming the flag, --help generated from
 * the flag table with the program's defaults. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "kcr/main.h"

static kcr_err no_setup(kcr_manager *m, const kcr_main_flags *f, void *ud)
{
    (void)m, (void)f, (void)ud;
    return KCR_OK;
}

static const kcr_main_options opts = {.name = "demo", .setup = no_setup};

static kcr_err parse(const kcr_main_options *o, int argc, const char **argv, kcr_main_flags *f)
{
    return kcr_main_parse(o, argc, (char **)argv, f);
}

Test(main_flags, no_flags_give_kubebuilders_defaults)
{
    kcr_main_flags f;
    const char *argv[] = {"demo"};
    cr_assert_eq(parse(&opts, 1, argv, &f), KCR_OK, "%s", kcr_last_error());
    cr_assert_str_eq(f.metrics_bind_address, ":8080");
    cr_assert_str_eq(f.health_probe_bind_address, ":8081");
    cr_assert_str_eq(f.leader_election_id, "demo");
    cr_assert_eq(f.workers, 1);
    cr_assert(f.kube_api_qps == 0 && f.kube_api_burst == 0, "the client's own defaults");
    cr_assert_eq(f.log_level, KCR_LOG_INFO);
    cr_assert(!f.leader_elect && !f.help);
    cr_assert_null(f.kubeconfig);
    cr_assert_null(f.context);
    cr_assert_null(f.ns);
    cr_assert_null(f.leader_election_namespace);

    kcr_main_options o = {.name = "x",
                          .setup = no_setup,
                          .default_metrics_bind_address = "0",
                          .default_health_probe_bind_address = ":9",
                          .default_workers = 4,
                          .set_default_log_level = true,
                          .default_log_level = KCR_LOG_WARN};
    cr_assert_eq(parse(&o, 1, argv, &f), KCR_OK);
    cr_assert_str_eq(f.metrics_bind_address, "0");
    cr_assert_str_eq(f.health_probe_bind_address, ":9");
    cr_assert_eq(f.workers, 4);
    cr_assert_eq(f.log_level, KCR_LOG_WARN);
}

Test(main_flags, every_flag_in_both_spellings)
{
    const char *spaced[] = {"demo",
                            "--kubeconfig",
                            "/k",
                            "--context",
                            "c",
                            "--namespace",
                            "ns",
                            "--leader-elect",
                            "--leader-election-id",
                            "lease",
                            "--leader-election-namespace",
                            "lns",
                            "--metrics-bind-address",
                            "0",
                            "--health-probe-bind-address",
                            "127.0.0.1:9",
                            "--zap-log-level",
                            "trace",
                            "--workers",
                            "7",
                            "--kube-api-qps",
                            "250.5",
                            "--kube-api-burst",
                            "400"};
    const char *joined[] = {"demo",
                            "--kubeconfig=/k",
                            "--context=c",
                            "-n",
                            "ns",
                            "--leader-elect=true",
                            "--leader-election-id=lease",
                            "--leader-election-namespace=lns",
                            "--metrics-bind-address=0",
                            "--health-probe-bind-address=127.0.0.1:9",
                            "--zap-log-level=trace",
                            "--workers=7",
                            "--kube-api-qps=250.5",
                            "--kube-api-burst=400"};
    for (int k = 0; k < 2; k++) {
        kcr_main_flags f;
        const char **argv = k ? joined : spaced;
        int argc =
            k ? (int)(sizeof joined / sizeof *joined) : (int)(sizeof spaced / sizeof *spaced);
        cr_assert_eq(parse(&opts, argc, argv, &f), KCR_OK, "%s", kcr_last_error());
        cr_assert_str_eq(f.kubeconfig, "/k");
        cr_assert_str_eq(f.context, "c");
        cr_assert_str_eq(f.ns, "ns");
        cr_assert(f.leader_elect);
        cr_assert_str_eq(f.leader_election_id, "lease");
        cr_assert_str_eq(f.leader_election_namespace, "lns");
        cr_assert_str_eq(f.metrics_bind_address, "0");
        cr_assert_str_eq(f.health_probe_bind_address, "127.0.0.1:9");
        cr_assert_eq(f.log_level, KCR_LOG_TRACE);
        cr_assert_eq(f.workers, 7);
        cr_assert(f.kube_api_qps == 250.5, "%g", f.kube_api_qps);
        cr_assert_eq(f.kube_api_burst, 400);
    }
    kcr_main_flags f;
    const char *unlimited[] = {"demo", "--kube-api-qps", "-1"};
    cr_assert_eq(parse(&opts, 3, unlimited, &f), KCR_OK, "%s", kcr_last_error());
    cr_assert(f.kube_api_qps < 0, "a negative rate: no limit");
}

Test(main_flags, short_forms_and_later_flags_win)
{
    kcr_main_flags f;
    const char *argv[] = {"demo",           "--namespace=a",        "-A", "-v",
                          "--leader-elect", "--leader-elect=false", "-h"};
    cr_assert_eq(parse(&opts, 7, argv, &f), KCR_OK, "%s", kcr_last_error());
    cr_assert_null(f.ns, "-A clears a namespace given before");
    cr_assert_eq(f.log_level, KCR_LOG_DEBUG);
    cr_assert(!f.leader_elect);
    cr_assert(f.help);
    const char *all[] = {"demo", "--all-namespaces", "--help"};
    cr_assert_eq(parse(&opts, 3, all, &f), KCR_OK);
    cr_assert(f.help);
}

Test(main_flags, bad_arguments_are_refused_naming_the_flag)
{
    static const struct {
        const char *argv[3];
        const char *says;
    } bad[] = {
        {{"demo", "--workers", "0"}, "--workers wants a number from 1 to 1000, not \"0\""},
        {{"demo", "--workers", "1001"}, "--workers"},
        {{"demo", "--workers=2x"}, "not \"2x\""},
        {{"demo", "--workers", ""}, "--workers"},
        {{"demo", "--kube-api-qps", "fast"}, "--kube-api-qps wants a number, not \"fast\""},
        {{"demo", "--kube-api-qps", "inf"}, "--kube-api-qps wants a number"},
        {{"demo", "--kube-api-qps="}, "--kube-api-qps wants a number"},
        {{"demo", "--kube-api-burst", "0"}, "--kube-api-burst wants a number from 1 to 1000000"},
        {{"demo", "--kube-api-burst=1e3"}, "not \"1e3\""},
        {{"demo", "--bogus"}, "unknown flag --bogus"},
        {{"demo", "--bogus=1"}, "unknown flag --bogus=1"},
        {{"demo", "-x"}, "unknown flag -x"},
        {{"demo", "positional"}, "unknown flag positional"},
        {{"demo", "--leader-elect=yes"}, "takes true or false"},
        {{"demo", "--kubeconfig"}, "flag --kubeconfig needs a value (PATH)"},
        {{"demo", "--context="}, "--context needs a non-empty value"},
        {{"demo", "--all-namespaces=1"}, "flag --all-namespaces takes no value"},
        {{"demo", "--help=yes"}, "takes no value"},
        {{"demo", "--zap-log-level", "loud"}, "error, warn, info, debug or trace, not \"loud\""},
        {{"demo", "--zap-log-level"}, "needs a value (LEVEL)"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        kcr_main_flags f;
        int argc = bad[i].argv[2] ? 3 : 2;
        cr_assert_eq(parse(&opts, argc, (const char **)bad[i].argv, &f), KCR_ERR_INVALID,
                     "accepted: %s %s", bad[i].argv[1], bad[i].argv[2] ? bad[i].argv[2] : "");
        cr_assert(strstr(kcr_last_error(), bad[i].says), "%s: %s", bad[i].argv[1],
                  kcr_last_error());
    }
    kcr_main_flags f;
    const char *argv[] = {"demo"};
    cr_assert_eq(parse(NULL, 1, argv, &f), KCR_ERR_INVALID);
    kcr_main_options nameless = {.setup = no_setup};
    cr_assert_eq(parse(&nameless, 1, argv, &f), KCR_ERR_INVALID);
}

Test(main_flags, help_lists_every_flag_with_the_programs_defaults)
{
    kcr_main_options o = {.name = "mirror",
                          .description = "Mirrors ConfigMaps.",
                          .setup = no_setup,
                          .default_workers = 3,
                          .default_health_probe_bind_address = ":9440"};
    char *text = NULL;
    cr_assert_eq(kcr_main_usage(&o, &text), KCR_OK, "%s", kcr_last_error());
    cr_assert(strncmp(text, "usage: mirror [flags]\nMirrors ConfigMaps.\n", 41) == 0, "%s", text);
    static const char *const want[] = {"--kubeconfig PATH",
                                       "--context NAME",
                                       "-n, --namespace NS",
                                       "-A, --all-namespaces",
                                       "--leader-elect ",
                                       "--leader-election-id NAME",
                                       "(default mirror)",
                                       "--leader-election-namespace NS",
                                       "--metrics-bind-address ADDR",
                                       "(default :8080)",
                                       "--health-probe-bind-address ADDR",
                                       "(default :9440)",
                                       "--zap-log-level LEVEL",
                                       "(default info)",
                                       "-v ",
                                       "--workers N",
                                       "(default 3)",
                                       "--kube-api-qps N",
                                       "--kube-api-burst N",
                                       "-h, --help"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        cr_assert(strstr(text, want[i]), "--help lacks \"%s\":\n%s", want[i], text);
    free(text);
    cr_assert_eq(kcr_main_usage(NULL, &text), KCR_ERR_INVALID);
}
