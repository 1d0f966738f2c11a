/* kcr_main_run: a controller program's whole main(), with the command line
 * a kubebuilder-generated manager takes. Part of libkcr_http (kcr::http,
 * pkg-config kcr-http), because it serves the metrics and health endpoint:
 * a program that does not call it does not load libmicrohttpd.
 *
 *     static kcr_err setup(kcr_manager *m, const kcr_main_flags *f, void *ud)
 *     {
 *         kcr_controller_options ctl;
 *         my_controller(&ctl, f->ns);
 *         ctl.max_concurrent_reconciles = f->workers;
 *         return kcr_manager_add_controller(m, &ctl, NULL);
 *     }
 *     int main(int argc, char **argv)
 *     {
 *         kcr_main_options o = {.name = "my-controller", .setup = setup};
 *         return kcr_main_run(argc, argv, &o);
 *     }
 *
 * Flags (value flags take "--flag value" or "--flag=value"):
 *   --kubeconfig PATH              default: $KUBECONFIG, in-cluster, ~/.kube/config
 *   --context NAME                 default: the kubeconfig's current context
 *   --namespace NS, -n NS          watch only NS (default: every namespace);
 *   --all-namespaces, -A           every namespace (clears --namespace)
 *   --leader-elect[=true|false]    run controllers only while holding the Lease
 *   --leader-election-id NAME      the Lease's name; default: options.name
 *   --leader-election-namespace NS default: the client's namespace
 *   --metrics-bind-address ADDR    host:port or :port, "0" off; default :8080
 *   --health-probe-bind-address ADDR  /healthz and /readyz; default :8081
 *   --zap-log-level LEVEL          error, warn, info (default), debug, trace; -v: debug
 *   --workers N                    concurrent reconciles per controller, 1..1000; default 1
 *   --kube-api-qps N               the client's requests/s (kcr_client_options.qps); default
 *                                  50, a negative number: no limit
 *   --kube-api-burst N             the client's burst, 1..1000000; default 100
 *   --help, -h                     the flags with their defaults, on stdout
 * An unknown flag, a missing or bad value is refused, naming the flag.
 *
 * kcr itself never prints; this helper is the program's main, so it does:
 * --help to stdout, errors to stderr, logs to stderr (kcr_log_stderr). */
#ifndef KCR_MAIN_H
#define KCR_MAIN_H

#include <stdbool.h>
#include <stdint.h>

#include "kcr/controller.h"
#include "kcr/export.h"
#include "kcr/log.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What the command line set. Strings point into argv or the defaults
 * (borrowed for the program's lifetime). */
typedef struct kcr_main_flags {
    const char *kubeconfig; /* NULL: the usual search */
    const char *context;    /* NULL: the current context */
    const char *ns;         /* NULL: every namespace */
    bool leader_elect;
    const char *leader_election_id;        /* never NULL after parsing */
    const char *leader_election_namespace; /* NULL: the client's namespace */
    const char *metrics_bind_address;      /* "0": no metrics endpoint */
    const char *health_probe_bind_address; /* "0": no probes */
    kcr_log_level log_level;
    int workers; /* 1..1000 */
    bool help;   /* --help was given */
    double kube_api_qps;    /* 0: the client's default (50); < 0: no limit */
    int32_t kube_api_burst; /* 0: the client's default (100) */
    uint32_t reserved_u32;  /* zero (the rest of the reserved slot kube_api_burst took) */
    /* Zeroed by kcr_main_parse. Fields added after 1.0 take these bytes:
     * the caller allocates the struct, so its size never changes
     * (docs/abi.md). */
    uint64_t reserved[2];
} kcr_main_flags;

/* Adds the program's controllers (and anything else) to the manager, before
 * it runs. Runs once, on main's thread. A non-KCR_OK return stops the
 * program (exit status 1) with kcr_last_error() printed. */
typedef kcr_err (*kcr_main_setup_fn)(kcr_manager *m, const kcr_main_flags *flags, void *user_data);

/* Options of kcr_main_run(). Zero: defaults. */
typedef struct kcr_main_options {
    const char *name;        /* required: the program's and manager's name, the default
                                Lease name */
    const char *description; /* one line under the usage in --help; NULL: none */
    kcr_main_setup_fn setup; /* required */
    void *user_data;         /* passed to setup */
    /* Defaults the command line overrides; 0/NULL: kubebuilder's (":8080",
     * ":8081", 1 worker). Log level: KCR_LOG_INFO unless default_log_level
     * is set. */
    const char *default_metrics_bind_address;
    const char *default_health_probe_bind_address;
    int default_workers;
    bool set_default_log_level;
    kcr_log_level default_log_level;
    /* NULL: unsharded. Else the manager runs as one replica of a shard ring
     * (kcr_manager_options.sharding, docs/sharding.md); borrowed until
     * kcr_main_run returns. With --leader-elect the manager refuses both. */
    const kcr_sharding_options *sharding;
} kcr_main_options;

/* Parses argv[1..argc-1] into *out (defaults first). KCR_ERR_INVALID with
 * kcr_last_error() naming the flag for an unknown flag or a missing or bad
 * value; out->help is set for --help. Prints nothing. Thread-safe. */
KCR_API kcr_err kcr_main_parse(size_t opts_size, const kcr_main_options *opts, int argc,
                               char **argv, kcr_main_flags *out);
#define kcr_main_parse(...) (kcr_main_parse)(sizeof(kcr_main_options), __VA_ARGS__)

/* The --help text (usage line, description, every flag with its default):
 * *out is malloc'd, the caller frees it. Thread-safe. */
KCR_API kcr_err kcr_main_usage(size_t opts_size, const kcr_main_options *opts, char **out);
#define kcr_main_usage(...) (kcr_main_usage)(sizeof(kcr_main_options), __VA_ARGS__)

/* The whole program: parses the command line (--help: prints the usage and
 * returns 0; a bad flag: prints it and returns 2), logs to stderr at the
 * chosen level, loads the configuration, makes the client and a manager
 * (leader election as asked, SIGINT/SIGTERM handled), calls setup, serves
 * metrics and probes, runs until a signal (returns 0) or a failure or a lost
 * Lease (prints it, returns 1), and frees everything. Call once, from main. */
KCR_API int kcr_main_run(size_t opts_size, int argc, char **argv, const kcr_main_options *opts);
#define kcr_main_run(...) (kcr_main_run)(sizeof(kcr_main_options), __VA_ARGS__)

#ifdef __cplusplus
}
#endif

#endif
