/* sample-controller: kubernetes/sample-controller on kcr (the controller is
 * sample.c), its main() kcr_main_run with kubebuilder's flags (--help lists
 * them): --kubeconfig/--context (default $KUBECONFIG, in-cluster, then
 * ~/.kube/config), --namespace (default every namespace), --leader-elect
 * (Lease "sample-controller"), metrics and probes (:8080, :8081; 0: off),
 * --zap-log-level or -v (debug: each reconcile), --workers (default 2).
 * With --webhook-cert-dir DIR (tls.crt, tls.key) it also serves the Foo
 * webhooks of webhook.c over HTTPS on --webhook-bind-address (default
 * :9443), reloading the certificate when it changes (docs/webhooks.md).
 * With --reconcile-log FILE it appends one line per reconcile to FILE
 * (reconcile_log.h), the record the sharding e2e checks. With
 * --shard-mode filter|server|label it runs as one replica of a shard ring
 * (--shard-ring, default "sample-controller") under the identity
 * --shard-identity (default $POD_NAME, else the host name): it reconciles
 * only its share of the Foos (docs/sample-controller.md, "Running sharded");
 * --shard-child-buckets true makes its Deployment cache ask the apiserver
 * for its Foos' Deployments only, by their bucket label
 * (kcr_sharding_options.child_bucket_selector: every Deployment must carry
 * it, as those this controller writes do); --shard-restart-grace 30s keeps
 * a replica's Foos waiting that long after it stops for its identity's
 * next process (kcr_sharding_options.restart_grace_ms: a rolling restart
 * moves no Foo).
 * Exits 0 after SIGINT/SIGTERM (a second one exits at once), 1 when the
 * lease is lost or it cannot start, 2 for bad arguments. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flags.h"
#include "kcr/main.h"
#include "reconcile_log.h"
#include "sample.h"
#include "webhook.h"

/* What setup fills and the controller borrows: main's, it outlives the
 * manager. */
typedef struct sample_program {
    sample_config sc;
    sample_reconcile_log log; /* fd -1: no --reconcile-log */
} sample_program;

static kcr_err setup(kcr_manager *m, const kcr_main_flags *f, void *ud)
{
    sample_program *p = ud;
    p->sc = (sample_config){.ns = f->ns, .log = kcr_log_stderr, .level = f->log_level};
    kcr_controller_options ctl;
    sample_controller(&ctl, &p->sc);
    ctl.max_concurrent_reconciles = f->workers;
    if (p->log.fd >= 0)
        sample_reconcile_log_wrap(&p->log, &ctl);
    return kcr_manager_add_controller(m, &ctl, NULL);
}

/* The --shard-* flags' values; NULL when not given. */
typedef struct shard_cli {
    const char *mode, *identity, *ring, *child_buckets, *restart_grace;
} shard_cli;

/* --shard-restart-grace: whole seconds, "30s" or "30"; -1 when not that. */
static int64_t grace_ms(const char *text)
{
    char *end;
    errno = 0;
    long long s = strtoll(text, &end, 10);
    if (errno || end == text || s < 0 || s > 86400 || (*end && strcmp(end, "s") != 0))
        return -1;
    return s * 1000;
}

/* The --shard-* flags into *out; 0, or 2 after printing what is wrong.
 * *sharded is false without --shard-mode. */
static int shard_flags(const shard_cli *c, kcr_sharding_options *out, bool *sharded)
{
    *out = (kcr_sharding_options){.identity = c->identity, .ring = c->ring};
    *sharded = c->mode != NULL;
    if (!c->mode && (c->identity || c->ring || c->child_buckets || c->restart_grace)) {
        fprintf(stderr,
                "%s: --shard-identity, --shard-ring, --shard-child-buckets and "
                "--shard-restart-grace need --shard-mode\n",
                SAMPLE_NAME);
        return 2;
    }
    if (c->child_buckets && strcmp(c->child_buckets, "true") && strcmp(c->child_buckets, "false")) {
        fprintf(stderr, "%s: --shard-child-buckets is true or false, not '%s'\n", SAMPLE_NAME,
                c->child_buckets);
        return 2;
    }
    out->child_bucket_selector = c->child_buckets && !strcmp(c->child_buckets, "true");
    out->restart_grace_ms = c->restart_grace ? grace_ms(c->restart_grace) : 0;
    if (out->restart_grace_ms < 0) {
        fprintf(stderr,
                "%s: --shard-restart-grace is whole seconds up to a day (30s, 0: off), not '%s'\n",
                SAMPLE_NAME, c->restart_grace);
        return 2;
    }
    if (!c->mode || !strcmp(c->mode, "filter"))
        out->mode = KCR_SHARD_FILTER;
    else if (!strcmp(c->mode, "server"))
        out->mode = KCR_SHARD_SERVER;
    else if (!strcmp(c->mode, "label"))
        out->mode = KCR_SHARD_LABEL;
    else {
        fprintf(stderr, "%s: --shard-mode is filter, server or label, not '%s'\n", SAMPLE_NAME,
                c->mode);
        return 2;
    }
    return 0;
}

/* The webhook server of --webhook-cert-dir, started before the manager. */
static int start_webhooks(const sample_webhook_cli *wh, kcr_webhook_server **out)
{
    *out = NULL;
    if (!wh->cert_dir)
        return 0;
    kcr_webhook_server_options wo = {.bind_address = wh->bind_address, .cert_dir = wh->cert_dir};
    kcr_err err = kcr_webhook_server_new(&wo, out);
    if (!err)
        err = sample_webhooks_register(*out);
    if (!err)
        err = kcr_webhook_server_start(*out);
    if (err) {
        fprintf(stderr, "%s: webhooks: %s\n", SAMPLE_NAME, kcr_last_error());
        kcr_webhook_server_free(*out);
        *out = NULL;
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    sample_webhook_cli wh = {.bind_address = ":9443"};
    const char *log_path = NULL;
    shard_cli sc = {0};
    const sample_flag own[] = {{"--reconcile-log", &log_path},
                               {"--shard-mode", &sc.mode},
                               {"--shard-identity", &sc.identity},
                               {"--shard-ring", &sc.ring},
                               {"--shard-child-buckets", &sc.child_buckets},
                               {"--shard-restart-grace", &sc.restart_grace}};
    sample_program p = {.log = {.fd = -1}};
    kcr_sharding_options sharding;
    bool sharded = false;
    kcr_webhook_server *server = NULL;
    int rc = sample_webhook_flags(&argc, argv, &wh);
    if (!rc)
        rc = sample_take_flags(&argc, argv, own, sizeof own / sizeof *own);
    if (!rc)
        rc = shard_flags(&sc, &sharding, &sharded);
    if (!rc && log_path && sample_reconcile_log_open(&p.log, log_path, sc.identity))
        rc = 1;
    if (!rc)
        rc = start_webhooks(&wh, &server);
    if (rc) {
        sample_reconcile_log_close(&p.log);
        return rc;
    }
    kcr_main_options o = {
        .name = SAMPLE_NAME, .setup = setup, .user_data = &p, .default_workers = 2,
        .sharding = sharded ? &sharding : NULL};
    rc = kcr_main_run(argc, argv, &o);
    kcr_webhook_server_free(server);
    sample_reconcile_log_close(&p.log);
    return rc;
}
