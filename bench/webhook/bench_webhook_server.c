/* bench_webhook_server CERT_DIR PORT [on-loop] [loops=N] [warm-paths]: kcr's
 * side of bench/webhook, a webhook server with the twin's two handlers:
 * /mutate defaults spec.replicas to 1 (kcr computes the patch), /validate
 * denies replicas > 10; with "on-loop", both registered run_on_loop (they
 * never block); loops=N sets the server's event loops (default: one per
 * CPU); "warm-paths" also serves the two handlers at /warm/mutate and
 * /warm/validate on the worker threads, so that a request there runs their
 * code once before the on-loop paths see one (./instructions: under
 * valgrind a first call, its code being translated, takes far longer than
 * KCR_WEBHOOK_LOOP_BUDGET_MS and moves an on-loop path to the workers).
 * Logs to stderr as KCR_LOG says. Prints "ready" once serving; stops on
 * SIGTERM or SIGINT. */
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kcr/log.h"
#include "kcr/webhook.h"

static kcr_err mutate(const kcr_admission_request *req, kcr_admission_response *resp, void *ud)
{
    (void)ud;
    if (kcr_value_get_type(kcr_object_get(req->object, "spec.replicas")) != KCR_VALUE_ABSENT)
        return KCR_OK;
    kcr_object_edit *e;
    kcr_err err = kcr_admission_edit(resp, &e);
    return err ? err : kcr_object_edit_set_int(e, "spec.replicas", 1);
}

static kcr_err validate(const kcr_admission_request *req, kcr_admission_response *resp, void *ud)
{
    (void)ud;
    if (kcr_value_int(kcr_object_get(req->object, "spec.replicas")) > 10)
        return kcr_admission_deny(resp, 0, "spec.replicas must be at most 10");
    return KCR_OK;
}

int main(int argc, char **argv)
{
    bool on_loop = false, warm = false, usage = argc < 3;
    int loops = 0;
    for (int i = 3; i < argc; i++) {
        if (strcmp(argv[i], "on-loop") == 0)
            on_loop = true;
        else if (strcmp(argv[i], "warm-paths") == 0)
            warm = true;
        else if (sscanf(argv[i], "loops=%d", &loops) != 1 || loops < 1)
            usage = true;
    }
    if (usage) {
        fprintf(stderr, "usage: %s CERT_DIR PORT [on-loop] [loops=N] [warm-paths]\n", argv[0]);
        return 2;
    }
    kcr_log_from_env();
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL); /* before any thread starts */
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%s", argv[2]);
    kcr_webhook_server_options o = {.bind_address = addr, .cert_dir = argv[1], .loops = loops};
    kcr_admission_options m = {.path = "/mutate", .type = KCR_ADMISSION_MUTATING, .fn = mutate,
                               .run_on_loop = on_loop};
    kcr_admission_options v = {.path = "/validate", .type = KCR_ADMISSION_VALIDATING,
                               .fn = validate, .run_on_loop = on_loop};
    kcr_admission_options wm = {.path = "/warm/mutate", .type = KCR_ADMISSION_MUTATING,
                                .fn = mutate};
    kcr_admission_options wv = {.path = "/warm/validate", .type = KCR_ADMISSION_VALIDATING,
                                .fn = validate};
    kcr_webhook_server *s = NULL;
    /* the warm paths first: the lookup tries the paths last registered first */
    if (kcr_webhook_server_new(&o, &s) ||
        (warm && (kcr_webhook_server_add_admission(s, &wm) ||
                  kcr_webhook_server_add_admission(s, &wv))) ||
        kcr_webhook_server_add_admission(s, &m) ||
        kcr_webhook_server_add_admission(s, &v) || kcr_webhook_server_start(s)) {
        fprintf(stderr, "bench_webhook_server: %s\n", kcr_last_error());
        kcr_webhook_server_free(s);
        return 1;
    }
    printf("ready\n");
    fflush(stdout);
    int sig;
    sigwait(&sigs, &sig);
    kcr_webhook_server_free(s);
    return 0;
}
