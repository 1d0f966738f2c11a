/* Uses the installed kcr-testing (the fake API server) through the public
 * headers only: an object added to the fake is read back through its client. */
#include <kcr/fake.h>
#include <kcr/kcr.h>
#include <stdio.h>
#include <string.h>

int main(void)
{
    static const kcr_resource cm = {"", "v1", "configmaps"};
    kcr_fake *fake = NULL;
    kcr_client *client = NULL;
    kcr_object *got = NULL;
    int rc = 1;
    if (kcr_fake_new(NULL, &fake) != KCR_OK ||
        kcr_fake_client(fake, "default", &client) != KCR_OK ||
        kcr_fake_add(fake, &cm,
                     "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\","
                     "\"metadata\":{\"name\":\"a\",\"namespace\":\"default\"}}",
                     NULL) != KCR_OK ||
        kcr_client_get(client, &(kcr_request){.resource = &cm, .ns = "default", .name = "a"},
                       &got) != KCR_OK) {
        fprintf(stderr, "consumer_testing: %s\n", kcr_last_error());
        goto out;
    }
    if (strcmp(kcr_object_name(got), "a") != 0) {
        fprintf(stderr, "consumer_testing: read back %s\n", kcr_object_name(got));
        goto out;
    }
    printf("consumer linked kcr-testing: the fake served ConfigMap default/a\n");
    rc = 0;
out:
    kcr_object_unref(got);
    kcr_client_free(client);
    kcr_fake_free(fake);
    return rc;
}
