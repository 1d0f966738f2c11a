/* Unit tests of the controller examples' command line (manager_cli.c):
 * defaults kept, both value spellings, -A, and every bad argument refused
 * with exit status 2. */
#include <criterion/criterion.h>
#include <string.h>

#include "manager_cli.h"

static manager_cli defaults(void)
{
    return (manager_cli){
        .metrics_address = ":8080", .probe_address = ":8081", .workers = 2, .level = KCR_LOG_INFO};
}

static int parse(manager_cli *cli, int argc, const char **argv)
{
    return manager_cli_parse("test", argc, (char **)argv, cli);
}

Test(manager_cli, no_flags_keep_the_defaults)
{
    manager_cli cli = defaults();
    const char *argv[] = {"prog"};
    cr_assert_eq(parse(&cli, 1, argv), 0);
    cr_assert_str_eq(cli.metrics_address, ":8080");
    cr_assert_str_eq(cli.probe_address, ":8081");
    cr_assert_eq(cli.workers, 2);
    cr_assert_eq(cli.level, KCR_LOG_INFO);
    cr_assert(!cli.leader_elect);
    cr_assert_null(cli.kubeconfig);
    cr_assert_null(cli.ns);
}

Test(manager_cli, every_flag_in_both_spellings)
{
    manager_cli cli = defaults();
    const char *argv[] = {"prog",
                          "--kubeconfig",
                          "/k",
                          "--context=c",
                          "-n",
                          "ns",
                          "--workers=7",
                          "--leader-elect",
                          "--leader-election-namespace",
                          "lns",
                          "--metrics-bind-address=0",
                          "--health-probe-bind-address",
                          "127.0.0.1:9",
                          "-v"};
    cr_assert_eq(parse(&cli, sizeof argv / sizeof argv[0], argv), 0);
    cr_assert_str_eq(cli.kubeconfig, "/k");
    cr_assert_str_eq(cli.context, "c");
    cr_assert_str_eq(cli.ns, "ns");
    cr_assert_eq(cli.workers, 7);
    cr_assert(cli.leader_elect);
    cr_assert_str_eq(cli.lease_namespace, "lns");
    cr_assert_str_eq(cli.metrics_address, "0");
    cr_assert_str_eq(cli.probe_address, "127.0.0.1:9");
    cr_assert_eq(cli.level, KCR_LOG_DEBUG);
}

Test(manager_cli, all_namespaces_clears_a_namespace_given_before)
{
    manager_cli cli = defaults();
    const char *argv[] = {"prog", "--namespace=a", "-A"};
    cr_assert_eq(parse(&cli, 3, argv), 0);
    cr_assert_null(cli.ns);
}

Test(manager_cli, bad_arguments_are_exit_status_2)
{
    const char *bad[][3] = {
        {"prog", "--workers", "0"},
        {"prog", "--workers", "1001"},
        {"prog", "--workers", "2x"},
        {"prog", "--workers", ""},
        {"prog", "--bogus", NULL},
        {"prog", "--leader-elect=true", NULL},
        {"prog", "--kubeconfig", NULL},
        {"prog", "--all-namespaces=1", NULL},
        {"prog", "--this-flag-name-is-longer-than-sixty-four-characters-and-so-is-refused=1", NULL},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        manager_cli cli = defaults();
        int argc = bad[i][2] ? 3 : 2;
        cr_assert_eq(parse(&cli, argc, bad[i]), 2, "accepted: %s %s", bad[i][1],
                     bad[i][2] ? bad[i][2] : "");
    }
}
