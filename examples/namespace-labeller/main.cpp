// namespace-labeller: a controller written in C++17 against kcr's C API.
// Every Namespace gets the label kcr.example/labelled=true, written by
// server-side apply (field manager "namespace-labeller"), so the label is
// this controller's and nothing else on the Namespace is touched.
//
//   namespace-labeller
//
// Uses $KUBECONFIG, the in-cluster config or ~/.kube/config; $KCR_LOG sets
// the log level (default: info on stderr). Runs until SIGINT/SIGTERM (exit
// 0); exit 1 when it cannot start.
//
// C++17 has no designated initializers: options are value-initialised
// (`T x{}` zeroes every field, reserved tails included) and then assigned.
#include <cstdio>
#include <cstring>
#include <string>

#include "kcr/kcr.h"

namespace {

const kcr_resource NAMESPACES{"", "v1", "namespaces"};
constexpr const char *LABEL = "kcr.example/labelled";
constexpr const char *MANAGER = "namespace-labeller";

// The applied configuration: only the fields this controller owns.
std::string applied(const char *name)
{
    return std::string(R"({"apiVersion":"v1","kind":"Namespace","metadata":{"name":")") + name +
           R"(","labels":{")" + LABEL + R"(":"true"}}})";
}

kcr_result reconcile(kcr_ctx *ctx, const kcr_reconcile_request *req, void *)
{
    kcr_object *ns = kcr_ctx_get_primary(ctx);
    if (!ns) // deleted: nothing to label
        return KCR_DONE;
    const char *value = kcr_object_label(ns, LABEL);
    bool done = value && std::strcmp(value, "true") == 0;
    kcr_object_unref(ns);
    if (done)
        return KCR_DONE;
    std::string body = applied(req->name);
    kcr_request rq{};
    rq.resource = &NAMESPACES;
    rq.name = req->name;
    rq.patch_type = KCR_PATCH_APPLY;
    rq.body = body.c_str();
    rq.field_manager = MANAGER;
    rq.force = true;
    kcr_err err = kcr_client_patch(kcr_ctx_client(ctx), &rq, nullptr);
    if (err != KCR_OK) // the worker logs this message with the error
        return KCR_RETRY(kcr_set_error(err, "labelling namespace %s: %s", req->name,
                                       kcr_last_error()));
    kcr_log(KCR_LOG_INFO, MANAGER, "labelled namespace %s", req->name);
    return KCR_DONE; // the update comes back as a change and finds the label
}

int run()
{
    kcr_config *cfg = nullptr;
    kcr_client *client = nullptr;
    kcr_manager *mgr = nullptr;
    kcr_err err = kcr_config_load(nullptr, &cfg);
    if (err == KCR_OK)
        err = kcr_client_new(cfg, nullptr, &client);

    kcr_manager_options mo{};
    mo.name = MANAGER;
    mo.handle_signals = true;
    if (err == KCR_OK)
        err = kcr_manager_new(client, &mo, &mgr);

    kcr_controller_options co{};
    co.name = MANAGER;
    co.primary.resource = NAMESPACES;
    co.primary.kind = "Namespace";
    co.primary.scope = KCR_SCOPE_CLUSTER;
    co.reconcile = reconcile;
    if (err == KCR_OK)
        err = kcr_manager_add_controller(mgr, &co, nullptr);
    if (err == KCR_OK)
        err = kcr_manager_run(mgr);
    if (err != KCR_OK)
        std::fprintf(stderr, "%s: %s: %s\n", MANAGER, kcr_strerror(err), kcr_last_error());
    kcr_manager_free(mgr);
    kcr_client_free(client);
    kcr_config_free(cfg);
    return err == KCR_OK ? 0 : 1;
}

} // namespace

int main(int argc, char **argv)
{
    if (argc > 1) {
        std::fprintf(stderr, "usage: %s\n", argv[0]);
        return 2;
    }
    if (!kcr_log_from_env())
        kcr_log_set_handler(kcr_log_stderr, nullptr);
    return run();
}
