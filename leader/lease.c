/* The leader-election record of a Lease: read it, write it. */
#include "leader/lease.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"

static char *dup_or_empty(const char *s)
{
    return strdup(s ? s : "");
}

void kcr__lease_record_clear(kcr__lease_record *r)
{
    free(r->holder);
    free(r->acquire_time);
    free(r->spec_json);
    memset(r, 0, sizeof *r);
}

/* A MicroTime ("2006-01-02T15:04:05.000000Z") in microseconds since the
 * epoch; 0 when absent or unreadable. */
static int64_t micro_time(const char *text)
{
    int64_t s;
    if (!text || kcr_time_parse(text, &s) != KCR_OK)
        return 0;
    int64_t us = 0, scale = 100000;
    const char *frac = strchr(text, '.');
    for (const char *p = frac ? frac + 1 : ""; *p >= '0' && *p <= '9' && scale > 0; p++) {
        us += (*p - '0') * scale;
        scale /= 10;
    }
    return s * 1000000 + us;
}

kcr_err kcr__lease_read(const kcr_object *lease, kcr__lease_record *out)
{
    kcr__lease_record_clear(out);
    kcr_value spec = kcr_object_get(lease, "spec");
    out->holder = dup_or_empty(kcr_value_string(kcr_value_member(spec, "holderIdentity"), NULL));
    out->acquire_time =
        dup_or_empty(kcr_value_string(kcr_value_member(spec, "acquireTime"), NULL));
    out->duration_s = kcr_value_int(kcr_value_member(spec, "leaseDurationSeconds"));
    out->transitions = kcr_value_int(kcr_value_member(spec, "leaseTransitions"));
    out->renew_us = micro_time(kcr_value_string(kcr_value_member(spec, "renewTime"), NULL));
    kcr_err err = KCR_OK;
    if (kcr_value_get_type(spec) == KCR_VALUE_ABSENT)
        out->spec_json = strdup("");
    else
        err = kcr_value_to_json(spec, &out->spec_json, NULL);
    if (err == KCR_OK && (!out->holder || !out->acquire_time || !out->spec_json))
        err = kcr__fail(KCR_ERR_NOMEM, "out of memory reading a Lease");
    if (err != KCR_OK)
        kcr__lease_record_clear(out);
    return err;
}

kcr_err kcr__lease_edit_spec(kcr_object_edit *e, const kcr__lease_spec *spec)
{
    char renew[32];
    kcr_time_format_micro(spec->renew_us, renew, sizeof renew);
    kcr_err err = kcr_object_edit_set_string(e, "spec.holderIdentity", spec->holder);
    if (err == KCR_OK)
        err = kcr_object_edit_set_int(e, "spec.leaseDurationSeconds", spec->duration_s);
    if (err == KCR_OK)
        err = kcr_object_edit_set_string(e, "spec.acquireTime", spec->acquire_time);
    if (err == KCR_OK)
        err = kcr_object_edit_set_string(e, "spec.renewTime", renew);
    if (err == KCR_OK)
        err = kcr_object_edit_set_int(e, "spec.leaseTransitions", spec->transitions);
    return err;
}

kcr_err kcr__lease_json(const kcr_object *base, const char *ns, const char *name,
                        const kcr__lease_spec *spec, char **json)
{
    *json = NULL;
    kcr_object_edit *e;
    kcr_err err = kcr_object_edit_new(base, &e);
    if (err != KCR_OK)
        return err;
    if (!base) {
        err = kcr_object_edit_set_string(e, "apiVersion", "coordination.k8s.io/v1");
        if (err == KCR_OK)
            err = kcr_object_edit_set_string(e, "kind", "Lease");
        if (err == KCR_OK)
            err = kcr_object_edit_set_string(e, "metadata.name", name);
        if (err == KCR_OK)
            err = kcr_object_edit_set_string(e, "metadata.namespace", ns);
    }
    if (err == KCR_OK)
        err = kcr__lease_edit_spec(e, spec);
    kcr_object *obj = NULL;
    if (err == KCR_OK)
        err = kcr_object_edit_freeze(e, &obj);
    kcr_object_edit_free(e);
    if (err == KCR_OK)
        err = kcr_object_to_json(obj, json, NULL);
    kcr_object_unref(obj);
    return err;
}
