/* Uses the installed kcr_webhook (kcr::webhook / pkg-config kcr-webhook):
 * writes development certificates, serves on a free loopback port, stops. */
#include <stdio.h>
#include <stdlib.h>

#include "kcr/webhook.h"

static kcr_err allow(const kcr_admission_request *req, kcr_admission_response *resp, void *ud)
{
    (void)req, (void)resp, (void)ud;
    return KCR_OK;
}

int main(void)
{
    char dir[] = "/tmp/kcr-consumer-wh-XXXXXX";
    char *bundle = NULL;
    kcr_webhook_server *s = NULL;
    kcr_webhook_server_options o = {.bind_address = "127.0.0.1:0", .cert_dir = dir};
    kcr_admission_options a = {.path = "/validate", .type = KCR_ADMISSION_VALIDATING, .fn = allow};
    if (!mkdtemp(dir) || kcr_webhook_generate_certs(dir, NULL, &bundle) != KCR_OK ||
        kcr_webhook_server_new(&o, &s) != KCR_OK ||
        kcr_webhook_server_add_admission(s, &a) != KCR_OK ||
        kcr_webhook_server_start(s) != KCR_OK || kcr_webhook_server_port(s) <= 0) {
        fprintf(stderr, "consumer_webhook: %s\n", kcr_last_error());
        return 1;
    }
    kcr_webhook_server_free(s);
    free(bundle);
    char cmd[64];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : 1;
}
