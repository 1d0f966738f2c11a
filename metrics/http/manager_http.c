/* kcr_manager_serve_http: the metrics/health endpoint of a kcr_manager. */
#include "core/abi.h"
#include "core/error.h"
#include "kcr/controller.h"
#include "kcr/health.h"

kcr_err (kcr_manager_serve_http)(size_t opts_size, kcr_manager *m,
                                 const kcr_health_server_options *opts, kcr_health_server **out)
{
    KCR__ABI_OPTS(kcr_health_server_options, opts, opts_size);
    if (!m || !out)
        return kcr__fail(KCR_ERR_INVALID, "kcr_manager_serve_http: NULL manager or out");
    *out = NULL;
    kcr_health_server_options o = opts ? *opts : (kcr_health_server_options){0};
    if (!o.metrics)
        o.metrics = kcr_manager_metrics(m);
    kcr_health_server *s = NULL;
    kcr_err err = kcr_health_server_new(&o, &s);
    if (err == KCR_OK)
        err = kcr_health_server_add_check(s, KCR_PROBE_READYZ, "informers",
                                          kcr_manager_readyz_check, m);
    if (err == KCR_OK && kcr_manager_shard_info(m, NULL))
        err = kcr_health_server_add_check(s, KCR_PROBE_READYZ, "shard",
                                          kcr_manager_shard_readyz_check, m);
    if (err == KCR_OK)
        err = kcr_health_server_add_check(s, KCR_PROBE_HEALTHZ, "manager",
                                          kcr_manager_healthz_check, m);
    if (err == KCR_OK)
        err = kcr_health_server_start(s);
    if (err != KCR_OK) {
        kcr_health_server_free(s);
        return err;
    }
    *out = s;
    return KCR_OK;
}
