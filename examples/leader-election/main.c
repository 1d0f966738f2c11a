/* leader-election: one candidate for a Lease, printing what happens, one
 * line each, with the wall-clock time in ms, until SIGINT/SIGTERM:
 *
 *   <ms> IDENTITY <id>
 *   <ms> NEW_LEADER <holder>     (the observed holder changed; "" when none)
 *   <ms> STARTED_LEADING
 *   <ms> STOPPED_LEADING
 *
 *   leader-election --namespace NS --lease NAME [--identity ID]
 *                   [--lease-ms N] [--renew-ms N] [--retry-ms N]
 *                   [--kubeconfig PATH] [--context NAME]
 *
 * A signal stops it cleanly: if leading, STOPPED_LEADING, then the Lease is
 * released (a standby takes over about one retry period later), exit 0.
 * Losing the lease (renewals failed for the renew deadline) exits 3, as a
 * controller should: its leader-only work has stopped and a fresh process
 * campaigns again. Run two or three of these against one Lease to watch a
 * hand-over; kill -9 the leader to watch a takeover after the lease lapses.
 *
 * KCR_LOG=error|warn|info|debug|trace logs kcr's records to stderr. */
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kcr/kcr.h"

static int wake[2] = {-1, -1}; /* a byte: 's' signal, 'l' leadership lost */

static void on_signal(int sig)
{
    (void)sig;
    int saved = errno;
    ssize_t n = write(wake[1], "s", 1);
    (void)n;
    errno = saved;
}

static void say(const char *what, const char *arg)
{
    printf("%lld %s%s%s\n", (long long)kcr_clock_now_ms(NULL), what, arg ? " " : "",
           arg ? arg : "");
    fflush(stdout);
}

typedef struct state {
    kcr_leader_elector *e;
    atomic_bool stopping; /* set by main before a clean stop */
} state;

static void on_started(void *ud)
{
    (void)ud;
    say("STARTED_LEADING", NULL);
}

static void on_stopped(void *ud)
{
    state *s = ud;
    say("STOPPED_LEADING", NULL);
    if (!atomic_load(&s->stopping)) {
        ssize_t n = write(wake[1], "l", 1);
        (void)n;
    }
}

static void on_new_leader(const char *id, void *ud)
{
    (void)ud;
    printf("%lld NEW_LEADER \"%s\"\n", (long long)kcr_clock_now_ms(NULL), id);
    fflush(stdout);
}

static int usage(void)
{
    fprintf(stderr, "usage: leader-election --namespace NS --lease NAME [--identity ID] "
                    "[--lease-ms N] [--renew-ms N] [--retry-ms N] [--kubeconfig PATH] "
                    "[--context NAME]\n");
    return 2;
}

int main(int argc, char **argv)
{
    const char *kubeconfig = NULL, *context = NULL;
    state s = {0};
    kcr_log_from_env(); /* KCR_LOG=trace: kcr's log on stderr */
    kcr_leader_elector_options o = {.on_started_leading = on_started,
                                    .on_stopped_leading = on_stopped,
                                    .on_new_leader = on_new_leader,
                                    .user_data = &s};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v)
            return usage();
        i++;
        if (strcmp(a, "--namespace") == 0 || strcmp(a, "-n") == 0)
            o.lease_namespace = v;
        else if (strcmp(a, "--lease") == 0)
            o.lease_name = v;
        else if (strcmp(a, "--identity") == 0)
            o.identity = v;
        else if (strcmp(a, "--lease-ms") == 0)
            o.lease_duration_ms = strtoll(v, NULL, 10);
        else if (strcmp(a, "--renew-ms") == 0)
            o.renew_deadline_ms = strtoll(v, NULL, 10);
        else if (strcmp(a, "--retry-ms") == 0)
            o.retry_period_ms = strtoll(v, NULL, 10);
        else if (strcmp(a, "--kubeconfig") == 0)
            kubeconfig = v;
        else if (strcmp(a, "--context") == 0)
            context = v;
        else
            return usage();
    }
    if (pipe(wake) != 0) {
        perror("leader-election: pipe");
        return 1;
    }
    kcr_config_options co = {.kubeconfig = kubeconfig, .context = context};
    kcr_config *cfg = NULL;
    kcr_client *c = NULL;
    if (kcr_config_load(&co, &cfg) != KCR_OK || kcr_client_new(cfg, NULL, &c) != KCR_OK) {
        fprintf(stderr, "leader-election: %s\n", kcr_last_error());
        kcr_config_free(cfg);
        return 1;
    }
    kcr_config_free(cfg);
    if (kcr_leader_elector_new(c, &o, &s.e) != KCR_OK) {
        fprintf(stderr, "leader-election: %s\n", kcr_last_error());
        kcr_client_free(c);
        return 2;
    }
    say("IDENTITY", kcr_leader_elector_identity(s.e));
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    if (kcr_leader_elector_start(s.e) != KCR_OK) {
        fprintf(stderr, "leader-election: %s\n", kcr_last_error());
        return 1;
    }
    char why = 0;
    while (read(wake[0], &why, 1) < 0 && errno == EINTR)
        ;
    atomic_store(&s.stopping, why != 'l');
    kcr_leader_elector_stop(s.e); /* releases the Lease if still leading */
    kcr_leader_elector_free(s.e);
    kcr_client_free(c);
    return why == 'l' ? 3 : 0;
}
