/* configmap-apply: creates or updates a ConfigMap key, or deletes a
 * ConfigMap, through kcr (a tiny stand-in for kubectl in the demo).
 *
 *   configmap-apply [--kubeconfig PATH] [--context NAME] [--namespace NS] set NAME KEY VALUE
 *   configmap-apply [--kubeconfig PATH] [--context NAME] [--namespace NS] delete NAME
 *
 * KCR_LOG=error|warn|info|debug|trace logs kcr's records to stderr. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kcr/kcr.h"

/* Appends s to out as a JSON string body (quotes and backslashes escaped). */
static void json_str(char *out, size_t len, const char *s)
{
    size_t n = strlen(out);
    for (; *s && n + 3 < len; s++) {
        if (*s == '"' || *s == '\\')
            out[n++] = '\\';
        if ((unsigned char)*s >= 0x20)
            out[n++] = *s;
    }
    out[n] = '\0';
}

int main(int argc, char **argv)
{
    const char *kubeconfig = NULL, *context = NULL, *ns = NULL;
    int i = 1;
    kcr_log_from_env(); /* KCR_LOG=trace: kcr's log on stderr */
    for (; i < argc && argv[i][0] == '-'; i += 2) {
        if (i + 1 >= argc)
            break;
        if (strcmp(argv[i], "--kubeconfig") == 0)
            kubeconfig = argv[i + 1];
        else if (strcmp(argv[i], "--context") == 0)
            context = argv[i + 1];
        else if (strcmp(argv[i], "--namespace") == 0 || strcmp(argv[i], "-n") == 0)
            ns = argv[i + 1];
        else
            break;
    }
    bool set = argc - i == 4 && strcmp(argv[i], "set") == 0;
    bool del = argc - i == 2 && strcmp(argv[i], "delete") == 0;
    if (!set && !del) {
        fprintf(stderr, "usage: configmap-apply [--kubeconfig P] [--context C] [--namespace NS] "
                        "set NAME KEY VALUE | delete NAME\n");
        return 2;
    }
    kcr_config_options co = {.kubeconfig = kubeconfig, .context = context};
    kcr_config *cfg = NULL;
    kcr_client *c = NULL;
    if (kcr_config_load(&co, &cfg) != KCR_OK || kcr_client_new(cfg, NULL, &c) != KCR_OK) {
        fprintf(stderr, "configmap-apply: %s\n", kcr_last_error());
        return 1;
    }
    kcr_config_free(cfg);
    if (!ns)
        ns = kcr_client_namespace(c);
    kcr_resource cm = {"", "v1", "configmaps"};
    const char *name = argv[i + 1];
    kcr_err err;
    if (del) {
        err = kcr_client_delete(c, &(kcr_request){.resource = &cm, .ns = ns, .name = name}, NULL);
        if (err == KCR_OK)
            printf("configmap %s/%s deleted\n", ns, name);
    } else {
        char body[8192] = "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"";
        json_str(body, sizeof body, name);
        strncat(body, "\"},\"data\":{\"", sizeof body - strlen(body) - 1);
        json_str(body, sizeof body, argv[i + 2]);
        strncat(body, "\":\"", sizeof body - strlen(body) - 1);
        json_str(body, sizeof body, argv[i + 3]);
        strncat(body, "\"}}", sizeof body - strlen(body) - 1);
        err = kcr_client_patch(c,
                               &(kcr_request){.resource = &cm,
                                              .ns = ns,
                                              .name = name,
                                              .patch_type = KCR_PATCH_APPLY,
                                              .body = body,
                                              .field_manager = "configmap-apply",
                                              .force = true},
                               NULL);
        if (err == KCR_OK)
            printf("configmap %s/%s %s=%s applied\n", ns, name, argv[i + 2], argv[i + 3]);
    }
    if (err != KCR_OK)
        fprintf(stderr, "configmap-apply: %s\n", kcr_last_error());
    kcr_client_free(c);
    return err == KCR_OK ? 0 : 1;
}
