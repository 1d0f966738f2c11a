/* Stopping the manager: in-flight reconciles drain, then are cancelled at
 * the graceful-shutdown deadline; a first signal stops gracefully and a
 * second exits at once; stop cancels discovery on a hung server. */
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "helpers/hung_server.h"
#include "tests/unit/manager_fixture.h"
#include "helpers/bounded.h"

Test(manager, shutdown_drains_in_flight_reconciles, .init = setup, .fini = teardown)
{
    create_cm("a");
    new_manager(&(kcr_manager_options){.graceful_shutdown_timeout_ms = 10000});
    kcr_controller *c = slow_controller(0);
    start();
    WAIT_FOR(atomic_load(&started) == 1);
    kcr_manager_stop(mgr);
    /* the reconcile is still running: run has not returned; let it finish */
    create_cm("b"); /* new work after the stop is not started */
    atomic_store(&release_gate, true);
    test_join(runner, 30000, "kcr_manager_run after kcr_manager_stop");
    running = false;
    cr_assert_eq(run_result, KCR_OK);
    cr_assert_eq(atomic_load(&saw_cancel), 0, "drained, not cancelled");
    kcr_controller_stats st;
    kcr_controller_get_stats(c, &st);
    cr_assert_eq(st.successes, 1);
    cr_assert_eq(atomic_load(&started), 1);
    cr_assert_eq(kcr_manager_healthz_check(NULL, mgr), KCR_OK);
}

Test(manager, shutdown_cancels_at_the_deadline, .init = setup, .fini = teardown)
{
    create_cm("a");
    new_manager(&(kcr_manager_options){.graceful_shutdown_timeout_ms = 30});
    slow_controller(0);
    start();
    WAIT_FOR(atomic_load(&started) == 1);
    cr_assert_eq(stop(), KCR_OK);
    cr_assert_eq(atomic_load(&saw_cancel), 1);
    char *msg = NULL;
    cr_assert_neq(kcr_manager_healthz_check(&msg, mgr), KCR_OK);
    cr_assert(msg && strstr(msg, "cancelled"), "%s", msg ? msg : "(null)");
    free(msg);
}

/* ---- signals: the first stops gracefully, a second exits at once ---- */

static int sig_pipe[2];

static void to_pipe(kcr_log_level level, const char *module, const char *message, void *ud)
{
    (void)level, (void)ud;
    if (strcmp(module, "manager") == 0 && strstr(message, ": stopping")) {
        ssize_t r = write(sig_pipe[1], "S", 1);
        (void)r;
    }
}

static kcr_result stubborn_reconcile(kcr_ctx *ctx, const kcr_reconcile_request *req, void *ud)
{
    (void)ctx, (void)req, (void)ud;
    ssize_t r = write(sig_pipe[1], "R", 1); /* started; now ignore cancellation for 20 s */
    (void)r;
    int64_t until = kcr__now_ns() + 20 * KCR_NS_PER_S;
    while (kcr__now_ns() < until) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return KCR_DONE;
}

static char read_byte(int fd)
{
    char c = 0;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, 10000) == 1 && read(fd, &c, 1) != 1)
        c = 0;
    return c;
}

Test(manager, second_signal_exits_at_once, .init = setup, .fini = teardown)
{
    create_cm("a");
    cr_assert_eq(pipe(sig_pipe), 0);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        kcr_log_set_handler(to_pipe, NULL);
        kcr_manager *m = NULL;
        kcr_controller_options o = {
            .name = "stubborn", .primary = {.resource = CM}, .reconcile = stubborn_reconcile};
        if (kcr_manager_new(client, &(kcr_manager_options){.handle_signals = true}, &m) ||
            kcr_manager_add_controller(m, &o, NULL))
            _exit(3);
        _exit(kcr_manager_run(m) == KCR_OK ? 0 : 4);
    }
    cr_assert_eq(read_byte(sig_pipe[0]), 'R', "the reconcile started");
    kill(pid, SIGTERM);
    cr_assert_eq(read_byte(sig_pipe[0]), 'S', "the first signal started a graceful stop");
    kill(pid, SIGTERM);
    int st = 0;
    int64_t until = kcr__now_ns() + 5 * KCR_NS_PER_S;
    pid_t r = 0;
    while ((r = waitpid(pid, &st, WNOHANG)) == 0 && kcr__now_ns() < until) {
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    if (r != pid) {
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
    }
    cr_assert_eq(r, pid, "the second signal did not end the process at once");
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 1, "status %d", st);
    close(sig_pipe[0]);
    close(sig_pipe[1]);
}

/* ---- stop cancels discovery in add_controller ---- */

typedef struct adder {
    kcr_manager *m;
    kcr_err err;
    char msg[512];
} adder;

static void *add_thing_controller(void *arg)
{
    adder *a = arg;
    /* no kind given: add_controller asks discovery */
    kcr_controller_options o = {.name = "things",
                                .primary = {.resource = {"nope.example.com", "v1", "things"}},
                                .reconcile = copy_reconcile};
    a->err = kcr_manager_add_controller(a->m, &o, NULL);
    snprintf(a->msg, sizeof a->msg, "%s", kcr_last_error());
    return NULL;
}

Test(manager, stop_cancels_discovery_on_a_hung_server, .timeout = 60)
{
    hung_server *srv = hung_server_start();
    kcr_client *hc = hung_server_client(srv, &(kcr_client_options){.request_timeout_ms = 30000});
    adder a = {.err = KCR_OK};
    cr_assert_eq(kcr_manager_new(hc, &(kcr_manager_options){.no_events = true}, &a.m), KCR_OK, "%s",
                 kcr_last_error());
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, add_thing_controller, &a), 0);
    cr_assert(hung_server_wait_requests(srv, 1), "discovery never reached the server");
    int64_t t0 = kcr__now_ns();
    kcr_manager_stop(a.m);
    test_join(t, 30000, "thread t");
    int64_t took_ms = (kcr__now_ns() - t0) / KCR_NS_PER_MS;
    cr_assert_eq(a.err, KCR_ERR_CANCELED, "%s: %s", kcr_strerror(a.err), a.msg);
    cr_assert(strstr(a.msg, "things"), "%s", a.msg);
    cr_assert_lt(took_ms, test_ms(1000), "add_controller returned %lld ms after stop",
                 (long long)took_ms);
    kcr_manager_free(a.m);
    kcr_client_free(hc);
    hung_server_stop(srv);
}
