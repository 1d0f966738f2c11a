// The generated headers compile as C++17 (-Wall -Wextra -Wpedantic -Werror)
// and work from C++: every built-in header, and a CRD's with fields named
// after C++ keywords (namespace, class, template, default, new).
#include <cstdio>
#include <cstring>

#include "kcr/types/apps_v1.h"
#include "kcr/types/coordination_v1.h"
#include "kcr/types/core_v1.h"
#include "kcr/types/meta_v1.h"
#include "kcr/types/networking_v1.h"
#include "kcr/types/policy_v1.h"
#include "kcr/types/rbac_v1.h"
#include "test_types.h"

static int fail(const char *what)
{
    std::fprintf(stderr, "typed_cxx: %s (%s)\n", what, kcr_last_error());
    return 1;
}

int main()
{
    kcr_object_edit *e = nullptr;
    if (test_v1_Widget_new(nullptr, &e) != KCR_OK)
        return fail("new");
    test_v1_WidgetSpecEdit spec = test_v1_WidgetEdit_spec(test_v1_Widget_edit(e));
    test_v1_WidgetSpecContainerEdit c = test_v1_WidgetSpecEdit_append_containers(spec);
    if (kcr_meta_v1_ObjectMetaEdit_set_name(test_v1_WidgetEdit_metadata(test_v1_Widget_edit(e)),
                                            "w") != KCR_OK ||
        test_v1_WidgetSpecContainerEdit_set_namespace(c, "ns") != KCR_OK ||
        test_v1_WidgetSpecContainerEdit_set_class(c, "gold") != KCR_OK ||
        test_v1_WidgetSpecContainerEdit_set_default_(c, true) != KCR_OK ||
        test_v1_WidgetSpecTemplateEdit_set_replicas(test_v1_WidgetSpecEdit_template(spec), 2) !=
            KCR_OK)
        return fail("set");
    kcr_object *o = nullptr;
    if (kcr_object_edit_freeze(e, &o) != KCR_OK)
        return fail("freeze");
    kcr_object_edit_free(e);
    const char *cls = nullptr;
    test_v1_WidgetSpec s = test_v1_Widget_spec(test_v1_Widget_of(o));
    if (test_v1_WidgetSpecContainer_class(test_v1_WidgetSpec_containers_at(s, 0), &cls) !=
            KCR_FIELD_SET ||
        std::strcmp(cls, "gold") != 0)
        return fail("read class");
    kcr_int_or_string port = {};
    kcr_core_v1_ServicePort sp = {};
    if (kcr_core_v1_ServicePort_target_port(sp, &port) != KCR_FIELD_ABSENT)
        return fail("absent view");
    kcr_object_unref(o);
    std::puts("typed_cxx: C++17 reads and writes generated types");
    return 0;
}
