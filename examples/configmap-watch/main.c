/* configmap-watch: an informer on ConfigMaps that prints adds, updates and
 * deletes until SIGINT/SIGTERM.
 *
 *   configmap-watch [--kubeconfig PATH] [--context NAME] [--namespace NS | -A]
 *
 * Without --namespace it watches the kubeconfig context's namespace; -A
 * watches all namespaces.
 *
 * KCR_LOG=error|warn|info|debug|trace logs kcr's records to stderr. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kcr/kcr.h"

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

static const char *value_of(const kcr_object *o)
{
    /* a short view of the data: the first key=value */
    static _Thread_local char buf[96];
    kcr_value data = kcr_object_get(o, "data");
    const char *key = NULL;
    kcr_value v = kcr_value_entry(data, 0, &key, NULL);
    const char *s = kcr_value_string(v, NULL);
    if (!key)
        return "";
    snprintf(buf, sizeof buf, " %s=%.40s%s", key, s ? s : "", s && strlen(s) > 40 ? "..." : "");
    return buf;
}

static void on_add(const char *key, const kcr_object *o, bool initial, void *ud)
{
    (void)ud;
    printf("ADDED    %s rv=%s%s%s\n", key, kcr_object_resource_version(o), value_of(o),
           initial ? " (initial list)" : "");
    fflush(stdout);
}

static void on_update(const char *key, const kcr_object *old, const kcr_object *cur, void *ud)
{
    (void)ud;
    if (strcmp(kcr_object_resource_version(old), kcr_object_resource_version(cur)) == 0)
        return; /* a resync */
    printf("UPDATED  %s rv=%s->%s%s\n", key, kcr_object_resource_version(old),
           kcr_object_resource_version(cur), value_of(cur));
    fflush(stdout);
}

static void on_delete(const char *key, const kcr_object *o, const kcr_tombstone *t, void *ud)
{
    (void)ud;
    if (o)
        printf("DELETED  %s rv=%s%s\n", key, kcr_object_resource_version(o),
               t ? " (missed while disconnected)" : "");
    else
        printf("DELETED  %s (missed while disconnected)\n", key);
    fflush(stdout);
}

static void on_error(kcr_err err, const kcr_status *st, const char *msg, void *ud)
{
    (void)st, (void)ud;
    fprintf(stderr, "configmap-watch: list/watch: %s: %s (retrying)\n", kcr_strerror(err), msg);
}

static int usage(void)
{
    fprintf(stderr, "usage: configmap-watch [--kubeconfig PATH] [--context NAME] "
                    "[--namespace NS | -A]\n");
    return 2;
}

int main(int argc, char **argv)
{
    const char *kubeconfig = NULL, *context = NULL, *ns = NULL;
    bool all = false;
    kcr_log_from_env(); /* KCR_LOG=trace: kcr's log on stderr */
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--kubeconfig") == 0 && i + 1 < argc)
            kubeconfig = argv[++i];
        else if (strcmp(argv[i], "--context") == 0 && i + 1 < argc)
            context = argv[++i];
        else if ((strcmp(argv[i], "--namespace") == 0 || strcmp(argv[i], "-n") == 0) && i + 1 < argc)
            ns = argv[++i];
        else if (strcmp(argv[i], "-A") == 0 || strcmp(argv[i], "--all-namespaces") == 0)
            all = true;
        else
            return usage();
    }
    kcr_config_options co = {.kubeconfig = kubeconfig, .context = context};
    kcr_config *cfg = NULL;
    kcr_client *c = NULL;
    if (kcr_config_load(&co, &cfg) != KCR_OK || kcr_client_new(cfg, NULL, &c) != KCR_OK) {
        fprintf(stderr, "configmap-watch: %s\n", kcr_last_error());
        kcr_config_free(cfg);
        return 1;
    }
    kcr_config_free(cfg);
    if (!ns && !all)
        ns = kcr_client_namespace(c);
    kcr_informer_options o = {0};
    o.reflector.ns = all ? NULL : ns;
    o.reflector.on_error = on_error;
    kcr_resource cm = {"", "v1", "configmaps"};
    kcr_informer *inf = NULL;
    kcr_event_handler h = {.on_add = on_add, .on_update = on_update, .on_delete = on_delete};
    if (kcr_informer_new(c, &cm, &o, &inf) != KCR_OK ||
        kcr_informer_add_handler(inf, &h, NULL) != KCR_OK || kcr_informer_start(inf) != KCR_OK) {
        fprintf(stderr, "configmap-watch: %s\n", kcr_last_error());
        return 1;
    }
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    fprintf(stderr, "configmap-watch: watching ConfigMaps in %s\n",
            all ? "all namespaces" : ns);
    kcr_status st = {0};
    kcr_err err = kcr_informer_wait_for_sync(inf, 30000, &st);
    if (err != KCR_OK) {
        fprintf(stderr, "configmap-watch: not synced: %s\n", kcr_last_error());
        kcr_status_clear(&st);
    } else {
        fprintf(stderr, "configmap-watch: synced, %zu ConfigMaps\n",
                kcr_store_len(kcr_informer_store(inf)));
    }
    while (!stop)
        pause();
    fprintf(stderr, "configmap-watch: stopping\n");
    kcr_informer_free(inf);
    kcr_client_free(c);
    return 0;
}
