/* Generated types from an installed kcr: a CRD's (kcr-gen at build time) and
 * a built-in's (kcr/types/apps_v1.h in libkcr). */
#include <stdio.h>

#include "gadget_types.h"
#include "kcr/types/apps_v1.h"

int main(void)
{
    kcr_object_edit *e = NULL;
    kcr_object *o = NULL;
    int64_t size = 0;
    if (gadget_Gadget_new(NULL, &e) != KCR_OK ||
        kcr_meta_v1_ObjectMetaEdit_set_name(gadget_GadgetEdit_metadata(gadget_Gadget_edit(e)),
                                            "g") != KCR_OK ||
        gadget_GadgetSpecEdit_set_size(gadget_GadgetEdit_spec(gadget_Gadget_edit(e)), 5) != KCR_OK ||
        kcr_object_edit_freeze(e, &o) != KCR_OK)
        return 1;
    kcr_object_edit_free(e);
    if (gadget_GadgetSpec_size(gadget_Gadget_spec(gadget_Gadget_of(o)), &size) != KCR_FIELD_SET ||
        size != 5 || gadget_Gadget_validate(o, NULL) != KCR_ERR_INVALID) {
        fprintf(stderr, "typed consumer: unexpected read or validation\n");
        return 1;
    }
    kcr_object_unref(o);
    if (kcr_object_parse("{\"metadata\":{\"name\":\"d\"},\"spec\":{\"replicas\":4}}", 0, &o) != KCR_OK)
        return 1;
    int32_t replicas = 0;
    kcr_apps_v1_DeploymentSpec_replicas(kcr_apps_v1_Deployment_spec(kcr_apps_v1_Deployment_of(o)),
                                        &replicas);
    kcr_object_unref(o);
    if (replicas != 4)
        return 1;
    puts("typed consumer: generated and built-in types work");
    return 0;
}
