/* The sandbox ("pause") container's process: it holds a Pod's namespaces
 * and does nothing else. As PID 1 of the sandbox it reaps the zombies of
 * containers sharing its PID namespace and exits at SIGINT/SIGTERM, which
 * is how the runtime stops a sandbox. */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile sig_atomic_t stop_signal;

static void on_stop(int sig) { stop_signal = sig; }

static void on_child(int sig)
{
    (void)sig;
    while (waitpid(-1, NULL, WNOHANG) > 0)
        ;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "-v") == 0) {
        puts("pause (kcr)");
        return 0;
    }
    if (getpid() != 1)
        fputs("pause: warning: not running as PID 1\n", stderr);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = on_stop;
    if (sigaction(SIGINT, &sa, NULL) != 0 || sigaction(SIGTERM, &sa, NULL) != 0)
        return 1;
    sa.sa_handler = on_child;
    sa.sa_flags = SA_NOCLDSTOP | SA_RESTART;
    if (sigaction(SIGCHLD, &sa, NULL) != 0)
        return 2;
    while (!stop_signal)
        pause();
    fprintf(stderr, "pause: shutting down, got signal %d\n", (int)stop_signal);
    return 0;
}
