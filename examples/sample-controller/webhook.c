/* The sample controller's webhooks: see webhook.h. */
#include "webhook.h"

#include "flags.h"

#include <string.h>

#define ALPHA "samplecontroller.k8s.io/v1alpha1"
#define BETA "samplecontroller.k8s.io/v1beta1"

bool sample_dns1123_subdomain(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > 253)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
        if (!alnum && ((c != '-' && c != '.') || i == 0 || i == n - 1))
            return false;
    }
    return true;
}

/* Defaulting: the Deployment gets one replica unless the Foo says. */
static kcr_err default_foo(const kcr_admission_request *req, kcr_object_edit *obj, void *ud)
{
    (void)ud;
    if (kcr_value_get_type(kcr_object_get(req->object, "spec.replicas")) != KCR_VALUE_ABSENT)
        return KCR_OK;
    return kcr_object_edit_set_int(obj, "spec.replicas", 1);
}

/* Validation of create and update: an error denies with its message. */
static kcr_err validate_foo(const kcr_admission_request *req, kcr_admission_response *resp,
                            void *ud)
{
    (void)resp, (void)ud;
    kcr_value r = kcr_object_get(req->object, "spec.replicas");
    if (kcr_value_get_type(r) != KCR_VALUE_ABSENT &&
        (kcr_value_get_type(r) != KCR_VALUE_INT || kcr_value_int(r) < 0 ||
         kcr_value_int(r) > 10))
        return kcr_set_error(KCR_ERR_INVALID, "spec.replicas must be an integer from 0 to 10");
    const char *d = kcr_value_string(kcr_object_get(req->object, "spec.deploymentName"), NULL);
    if (!d || !sample_dns1123_subdomain(d))
        return kcr_set_error(KCR_ERR_INVALID,
                             "spec.deploymentName \"%s\" is not a DNS-1123 subdomain (lower-case "
                             "letters, digits, '-' and '.', starting and ending alphanumeric)",
                             d ? d : "");
    return KCR_OK;
}

/* Moves the value at `from` to `to` (when there is one). */
static kcr_err rename_field(const kcr_object *in, kcr_object_edit *out, const char *from,
                            const char *to)
{
    kcr_value v = kcr_object_get(in, from);
    if (kcr_value_get_type(v) == KCR_VALUE_ABSENT)
        return KCR_OK;
    kcr_err err = kcr_object_edit_delete(out, from);
    return err ? err : kcr_object_edit_set_value(out, to, v);
}

static kcr_err beta_to_alpha(const kcr_object *in, kcr_object_edit *out, void *ud)
{
    (void)ud;
    return rename_field(in, out, "spec.deploymentRef", "spec.deploymentName");
}

static kcr_err alpha_to_beta(const kcr_object *in, kcr_object_edit *out, void *ud)
{
    (void)ud;
    return rename_field(in, out, "spec.deploymentName", "spec.deploymentRef");
}

/* Every function here only reads the request: they run on the event loops
 * (run_on_loop), which saves each request the hand-off to a worker thread. */
kcr_err sample_webhooks_register(kcr_webhook_server *s)
{
    kcr_webhook_for_options foo = {.group = "samplecontroller.k8s.io", .version = "v1alpha1",
                                   .kind = "Foo", .default_fn = default_foo,
                                   .validate_create = validate_foo,
                                   .validate_update = validate_foo, .run_on_loop = true};
    kcr_err err = kcr_webhook_server_add_for(s, &foo);
    if (err)
        return err;
    static const kcr_converter conv[] = {{BETA, ALPHA, beta_to_alpha},
                                         {ALPHA, BETA, alpha_to_beta}};
    kcr_conversion_options c = {.path = "/convert", .converters = conv, .n_converters = 2,
                                .hub = ALPHA, .run_on_loop = true};
    return kcr_webhook_server_add_conversion(s, &c);
}

int sample_webhook_flags(int *argc, char **argv, sample_webhook_cli *cli)
{
    const sample_flag flags[] = {{"--webhook-bind-address", &cli->bind_address},
                                 {"--webhook-cert-dir", &cli->cert_dir}};
    return sample_take_flags(argc, argv, flags, sizeof flags / sizeof *flags);
}
