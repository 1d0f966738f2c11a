/* kcr-webhook-certs DIR [NAME...]: writes DIR/ca.crt, ca.key (kept and
 * reused on later runs), tls.crt and tls.key for a webhook server, the
 * serving certificate naming each NAME (an IP address or a DNS name;
 * default 127.0.0.1), and prints the caBundle to put in the webhook
 * configuration. Run it again to rotate the serving pair under the same CA. */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>

#include "kcr/webhook.h"

int main(int argc, char **argv)
{
    if (argc < 2 || argv[1][0] == '-') {
        fprintf(stderr, "usage: %s DIR [IP-or-DNS-name...]\n", argv[0]);
        return 2;
    }
    const char **dns = calloc((size_t)argc, sizeof *dns), **ips = calloc((size_t)argc, sizeof *ips);
    kcr_webhook_certs_options o = {.dns_names = dns, .ip_addresses = ips};
    for (int i = 2; i < argc; i++) {
        unsigned char buf[16];
        if (inet_pton(AF_INET, argv[i], buf) == 1 || inet_pton(AF_INET6, argv[i], buf) == 1)
            ips[o.n_ip_addresses++] = argv[i];
        else
            dns[o.n_dns_names++] = argv[i];
    }
    char *bundle = NULL;
    kcr_err err = kcr_webhook_generate_certs(argv[1], &o, &bundle);
    if (err) {
        fprintf(stderr, "kcr-webhook-certs: %s\n", kcr_last_error());
        return 1;
    }
    printf("%s\n", bundle);
    free(bundle);
    free(dns);
    free(ips);
    return 0;
}
