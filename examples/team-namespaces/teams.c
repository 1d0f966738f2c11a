/* The team-namespaces reconciler (see teams.h). */
#include <stdio.h>

#include "kcr/types/core_v1.h"
#include "kcr/types/rbac_v1.h"
#include "team_types.h"
#include "teams.h"

const kcr_resource TEAMS = {"example.kcr.dev", "v1alpha1", "teams"};
const kcr_resource TEAM_NAMESPACES = {"", "v1", "namespaces"};
const kcr_resource TEAM_QUOTAS = {"", "v1", "resourcequotas"};
const kcr_resource TEAM_BINDINGS = {"rbac.authorization.k8s.io", "v1", "rolebindings"};

static kcr_err desired_namespace(kcr_object_edit *e, const kcr_object *current, void *team)
{
    return kcr_ctrlutil_set_controller_reference_edit(team, e, NULL);
}

static kcr_err desired_quota(kcr_object_edit *e, const kcr_object *current, void *team)
{
    team_TeamSpecQuota q = team_TeamSpec_quota(team_Team_spec(team_Team_of(team)));
    kcr_core_v1_ResourceQuotaSpecEdit spec =
        kcr_core_v1_ResourceQuotaEdit_spec(kcr_core_v1_ResourceQuota_edit(e));
    kcr_quantity cpu, memory;
    kcr_core_v1_ResourceQuotaSpecEdit_delete_hard(spec);
    if (team_TeamSpecQuota_cpu(q, &cpu) == KCR_FIELD_SET)
        kcr_core_v1_ResourceQuotaSpecEdit_set_hard(spec, "requests.cpu", cpu);
    if (team_TeamSpecQuota_memory(q, &memory) == KCR_FIELD_SET)
        kcr_core_v1_ResourceQuotaSpecEdit_set_hard(spec, "requests.memory", memory);
    return kcr_ctrlutil_set_controller_reference_edit(team, e, NULL);
}

static kcr_err desired_binding(kcr_object_edit *e, const kcr_object *current, void *team)
{
    team_TeamSpec spec = team_Team_spec(team_Team_of(team));
    kcr_rbac_v1_RoleBindingEdit b = kcr_rbac_v1_RoleBinding_edit(e);
    kcr_rbac_v1_RoleRefEdit role = kcr_rbac_v1_RoleBindingEdit_role_ref(b);
    kcr_rbac_v1_RoleRefEdit_set_api_group(role, "rbac.authorization.k8s.io");
    kcr_rbac_v1_RoleRefEdit_set_kind(role, "ClusterRole");
    kcr_rbac_v1_RoleRefEdit_set_name(role, "edit");
    kcr_rbac_v1_RoleBindingEdit_delete_subjects(b);
    for (size_t i = 0; i < team_TeamSpec_members_len(spec); i++) {
        const char *member = "";
        team_TeamSpec_members_at(spec, i, &member);
        kcr_rbac_v1_SubjectEdit s = kcr_rbac_v1_RoleBindingEdit_append_subjects(b);
        kcr_rbac_v1_SubjectEdit_set_api_group(s, "rbac.authorization.k8s.io");
        kcr_rbac_v1_SubjectEdit_set_kind(s, "User");
        kcr_rbac_v1_SubjectEdit_set_name(s, member);
    }
    return kcr_ctrlutil_set_controller_reference_edit(team, e, NULL);
}

static kcr_err desired_status(kcr_object_edit *e, const kcr_object *current, void *ns)
{
    team_TeamStatusEdit status = team_TeamEdit_status(team_Team_edit(e));
    team_TeamStatusEdit_set_namespace(status, ns);
    return team_TeamStatusEdit_set_ready(status, true);
}

/* Creates or updates res ns/name as `mutate` wants it (a Team: only its
 * status), reading the cache first. */
static kcr_err ensure(kcr_ctx *ctx, const kcr_resource *res, const char *ns, const char *name,
                      kcr_ctrlutil_mutate_fn mutate, void *user_data)
{
    kcr_ctrlutil_write_options o = {.resource = res,
                                    .ns = ns,
                                    .name = name,
                                    .mutate = mutate,
                                    .user_data = user_data,
                                    .cache = kcr_ctx_cache(ctx, res)};
    if (res == &TEAMS)
        return kcr_ctrlutil_update_status(kcr_ctx_client(ctx), &o, NULL);
    return kcr_ctrlutil_create_or_update(kcr_ctx_client(ctx), &o, NULL);
}

static kcr_result sync_team(kcr_ctx *ctx, kcr_object *team)
{
    char ns[300];
    snprintf(ns, sizeof ns, "team-%s", kcr_object_name(team));
    KCR_TRY(ensure(ctx, &TEAM_NAMESPACES, NULL, ns, desired_namespace, team));
    KCR_TRY(ensure(ctx, &TEAM_QUOTAS, ns, "team-quota", desired_quota, team));
    KCR_TRY(ensure(ctx, &TEAM_BINDINGS, ns, "team-members", desired_binding, team));
    KCR_TRY(ensure(ctx, &TEAMS, NULL, kcr_object_name(team), desired_status, ns));
    return KCR_DONE;
}

static kcr_result reconcile(kcr_ctx *ctx, const kcr_reconcile_request *req, void *user_data)
{
    kcr_object *team = kcr_ctx_get_primary(ctx);
    if (!team)
        return KCR_DONE; /* deleted: the garbage collector removes what it owned */
    kcr_result r = sync_team(ctx, team);
    kcr_object_unref(team);
    return r;
}

void teams_controller(kcr_controller_options *opts)
{
    static const kcr_source owns[] = {
        {.resource = {"", "v1", "namespaces"}},
        {.resource = {"", "v1", "resourcequotas"}},
        {.resource = {"rbac.authorization.k8s.io", "v1", "rolebindings"}},
    };
    *opts = (kcr_controller_options){.name = "team-namespaces",
                                     .primary = {.resource = TEAMS},
                                     .owns = owns,
                                     .n_owns = 3,
                                     .reconcile = reconcile};
}
