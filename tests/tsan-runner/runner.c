/* main() for the TSan stand-in of Criterion (see criterion/criterion.h):
 * runs every registered test (or those matching Criterion's
 * --filter=SUITE/NAME glob) in a forked child, enforces .timeout, .signal
 * and .exit_code, and prints Criterion's summary line. Other Criterion
 * options (--jobs=N) are accepted and ignored: tests run one at a time. */
#include "criterion/criterion.h"

#include <fnmatch.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { EXIT_ASSERTION = 77, EXIT_EXPECTATION = 78 };

static struct kcr_shim_test *tests;
static bool expectation_failed;

void kcr_shim_register(struct kcr_shim_test *test)
{
    test->next = tests;
    tests = test;
}

void kcr_shim_fail(bool fatal, const char *file, int line, const char *what, const char *fmt, ...)
{
    fprintf(stderr, "[----] %s:%d: Assertion Failed: %s", file, line, what);
    if (fmt[0]) {
        va_list ap;
        va_start(ap, fmt);
        fputs(": ", stderr);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
    }
    fputc('\n', stderr);
    if (fatal)
        _exit(EXIT_ASSERTION);
    expectation_failed = true;
}

static void run_child(const struct kcr_shim_test *t)
{
    if (t->init)
        t->init();
    t->fn();
    if (t->fini)
        t->fini();
    fflush(NULL);
    _exit(expectation_failed ? EXIT_EXPECTATION : 0);
}

/* Waits for the child, killing it after `timeout` seconds (0: no limit). */
static int wait_child(pid_t pid, double timeout, bool *timed_out)
{
    int status = 0;
    struct timespec start, now, nap = {0, 5 * 1000 * 1000};
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid)
            return status;
        clock_gettime(CLOCK_MONOTONIC, &now);
        double elapsed = (double)(now.tv_sec - start.tv_sec) + (now.tv_nsec - start.tv_nsec) / 1e9;
        if (timeout > 0 && elapsed > timeout && !*timed_out) {
            *timed_out = true;
            kill(pid, SIGKILL);
        }
        nanosleep(&nap, NULL);
    }
}

/* Returns 0 pass, 1 fail, 2 crash. */
static int run_one(const struct kcr_shim_test *t)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        return 2;
    }
    if (pid == 0)
        run_child(t);
    bool timed_out = false;
    int status = wait_child(pid, t->timeout, &timed_out);
    if (timed_out) {
        fprintf(stderr, "[FAIL] %s::%s: timed out after %.1f s\n", t->suite, t->name, t->timeout);
        return 1;
    }
    if (WIFSIGNALED(status)) {
        if (t->signal && WTERMSIG(status) == t->signal)
            return 0;
        fprintf(stderr, "[FAIL] %s::%s: CRASH (signal %d)\n", t->suite, t->name, WTERMSIG(status));
        return 2;
    }
    int code = WEXITSTATUS(status);
    if (t->signal) {
        fprintf(stderr, "[FAIL] %s::%s: expected signal %d, exited %d\n", t->suite, t->name,
                t->signal, code);
        return 1;
    }
    if (code == t->exit_code)
        return 0;
    fprintf(stderr, "[FAIL] %s::%s: exit code %d\n", t->suite, t->name, code);
    return code == EXIT_ASSERTION || code == EXIT_EXPECTATION ? 1 : 2;
}

/* Whether t is selected by `filter` ("SUITE/NAME", a glob; NULL: all). */
static bool selected(const struct kcr_shim_test *t, const char *filter)
{
    if (!filter)
        return true;
    char full[512];
    snprintf(full, sizeof full, "%s/%s", t->suite, t->name);
    return fnmatch(filter, full, 0) == 0;
}

int main(int argc, char **argv)
{
    const char *filter = NULL;
    for (int i = 1; i < argc; i++)
        if (strncmp(argv[i], "--filter=", 9) == 0)
            filter = argv[i] + 9;
    int tested = 0, passing = 0, failing = 0, crashing = 0;
    for (const struct kcr_shim_test *t = tests; t; t = t->next) {
        if (t->disabled || !selected(t, filter))
            continue;
        tested++;
        switch (run_one(t)) {
        case 0: passing++; break;
        case 1: failing++; break;
        default: failing++; crashing++; break;
        }
    }
    printf("[====] Synthesis: Tested: %d | Passing: %d | Failing: %d | Crashing: %d\n", tested,
           passing, failing, crashing);
    return failing ? EXIT_FAILURE : EXIT_SUCCESS;
}
