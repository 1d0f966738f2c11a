/* Unit tests of the team-namespaces reconciler (../teams.c) on the test kit,
 * with the CRD of ../manifests and the declaration main.c runs. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <kcr/fake.h>
#include <kcr/testkit.h>
#include <kcr/types/core_v1.h>
#include <kcr/types/rbac_v1.h>

#include "../teams.h"
#include "team_types.h"

static kcr_testkit *tk;
static kcr_controller *ctl;

static char *slurp(const char *path)
{
    static char buf[8192];
    FILE *f = fopen(path, "r");
    cr_assert(f, "cannot open %s", path);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return buf;
}

static void setup(void)
{
    cr_assert_eq(kcr_testkit_new(NULL, &tk), KCR_OK);
    cr_assert_eq(kcr_testkit_seed(tk, slurp(TEAMS_MANIFESTS "/crd.yaml")), KCR_OK, "%s",
                 kcr_last_error());
    kcr_controller_options opts;
    teams_controller(&opts);
    cr_assert_eq(kcr_testkit_add_controller(tk, &opts, &ctl), KCR_OK, "%s", kcr_last_error());
}

static void teardown(void)
{
    kcr_testkit_free(tk);
}

static void seed_team(const char *name, const char *cpu, const char *members)
{
    char y[512];
    snprintf(y, sizeof y,
             "apiVersion: example.kcr.dev/v1alpha1\nkind: Team\nmetadata: {name: %s}\n"
             "spec: {quota: {cpu: \"%s\", memory: 1Gi}, members: [%s]}\n",
             name, cpu, members);
    cr_assert_eq(kcr_testkit_seed(tk, y), KCR_OK, "%s", kcr_last_error());
}

static kcr_result reconcile(const char *key)
{
    kcr_result r;
    cr_assert_eq(kcr_testkit_reconcile(tk, ctl, key, &r), KCR_OK, "%s", kcr_last_error());
    return r;
}

static uint64_t writes(const kcr_resource *res)
{
    kcr_fake *f = kcr_testkit_fake(tk);
    return kcr_fake_count(f, KCR_FAKE_CREATE, res) + kcr_fake_count(f, KCR_FAKE_UPDATE, res) +
           kcr_fake_count(f, KCR_FAKE_PATCH, res);
}

/* Asserts that o is controlled by Team `team`. */
static void assert_owned(const kcr_object *o, const char *team)
{
    cr_assert(o, "object missing");
    kcr_owner_ref ref;
    cr_assert(kcr_object_controller_ref(o, &ref), "%s has no controller reference",
              kcr_object_name(o));
    cr_assert_str_eq(ref.api_version, "example.kcr.dev/v1alpha1");
    cr_assert_str_eq(ref.kind, "Team");
    cr_assert_str_eq(ref.name, team);
}

/* The subjects' names of team-a's binding, comma-separated. */
static const char *binding_members(void)
{
    static char names[256];
    names[0] = '\0';
    kcr_object *rb = kcr_testkit_get(tk, &TEAM_BINDINGS, "team-a", "team-members");
    cr_assert(rb, "no RoleBinding");
    kcr_rbac_v1_RoleBinding b = kcr_rbac_v1_RoleBinding_of(rb);
    for (size_t i = 0; i < kcr_rbac_v1_RoleBinding_subjects_len(b); i++) {
        const char *name = "?";
        kcr_rbac_v1_Subject_name(kcr_rbac_v1_RoleBinding_subjects_at(b, i), &name);
        snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? "," : "", name);
    }
    kcr_object_unref(rb);
    return names;
}

Test(teams, creates_namespace_quota_and_binding, .init = setup, .fini = teardown)
{
    seed_team("a", "2", "alice, bob");
    cr_assert_eq(kcr_testkit_run_until_idle(tk, 0, NULL), KCR_OK, "%s", kcr_last_error());
    kcr_object *ns = kcr_testkit_get(tk, &TEAM_NAMESPACES, NULL, "team-a");
    assert_owned(ns, "a");
    kcr_object *quota = kcr_testkit_get(tk, &TEAM_QUOTAS, "team-a", "team-quota");
    assert_owned(quota, "a");
    kcr_core_v1_ResourceQuotaSpec spec =
        kcr_core_v1_ResourceQuota_spec(kcr_core_v1_ResourceQuota_of(quota));
    kcr_quantity cpu, memory, want;
    cr_assert_eq(kcr_core_v1_ResourceQuotaSpec_hard_get(spec, "requests.cpu", &cpu), KCR_FIELD_SET);
    cr_assert_eq(kcr_core_v1_ResourceQuotaSpec_hard_get(spec, "requests.memory", &memory),
                 KCR_FIELD_SET);
    cr_assert_eq(kcr_quantity_parse_str("2", &want), KCR_OK);
    cr_assert_eq(kcr_quantity_cmp(&cpu, &want), 0);
    cr_assert_eq(kcr_quantity_parse_str("1Gi", &want), KCR_OK);
    cr_assert_eq(kcr_quantity_cmp(&memory, &want), 0);
    kcr_object *rb = kcr_testkit_get(tk, &TEAM_BINDINGS, "team-a", "team-members");
    assert_owned(rb, "a");
    const char *role = NULL;
    kcr_rbac_v1_RoleRef_name(kcr_rbac_v1_RoleBinding_role_ref(kcr_rbac_v1_RoleBinding_of(rb)),
                             &role);
    cr_assert_str_eq(role, "edit");
    cr_assert_str_eq(binding_members(), "alice,bob");
    kcr_object *team = kcr_testkit_get(tk, &TEAMS, NULL, "a");
    team_TeamStatus status = team_Team_status(team_Team_of(team));
    const char *ns_name = NULL;
    bool ready = false;
    cr_assert_eq(team_TeamStatus_namespace(status, &ns_name), KCR_FIELD_SET);
    cr_assert_str_eq(ns_name, "team-a");
    cr_assert_eq(team_TeamStatus_ready(status, &ready), KCR_FIELD_SET);
    cr_assert(ready);
    kcr_object_unref(team);
    kcr_object_unref(rb);
    kcr_object_unref(quota);
    kcr_object_unref(ns);
}

Test(teams, normalised_quantity_writes_once, .init = setup, .fini = teardown)
{
    seed_team("a", "0.5", "alice");
    cr_assert_eq(kcr_testkit_run_until_idle(tk, 0, NULL), KCR_OK, "%s", kcr_last_error());
    cr_assert_eq(writes(&TEAM_QUOTAS), 1, "the quota was written %llu times",
                 (unsigned long long)writes(&TEAM_QUOTAS));
    /* the quota as an apiserver might keep it: "0.5", not the "500m" written */
    kcr_object *quota = kcr_testkit_get(tk, &TEAM_QUOTAS, "team-a", "team-quota"), *stored = NULL;
    kcr_object_edit *e;
    static const char hard[] = "{\"requests.cpu\":\"0.5\",\"requests.memory\":\"1Gi\"}";
    cr_assert_eq(kcr_object_edit_new(quota, &e), KCR_OK);
    kcr_object_edit_set_json(e, "spec.hard", hard, sizeof hard - 1);
    cr_assert_eq(kcr_object_edit_freeze(e, &stored), KCR_OK, "%s", kcr_last_error());
    kcr_object_edit_free(e);
    cr_assert_eq(kcr_client_update(kcr_testkit_client(tk),
                                   &(kcr_request){.resource = &TEAM_QUOTAS, .object = stored},
                                   NULL),
                 KCR_OK, "%s", kcr_last_error());
    kcr_object_unref(stored);
    kcr_object_unref(quota);
    uint64_t before =
        writes(&TEAM_QUOTAS) + writes(&TEAM_NAMESPACES) + writes(&TEAM_BINDINGS) + writes(&TEAMS);
    kcr_result r = reconcile("a");
    cr_assert_eq(r.kind, KCR_RESULT_DONE);
    cr_assert_eq(writes(&TEAM_QUOTAS) + writes(&TEAM_NAMESPACES) + writes(&TEAM_BINDINGS) +
                     writes(&TEAMS),
                 before, "a reconcile with nothing to change wrote");
}

static kcr_err add_carol(kcr_object_edit *e, const kcr_object *current, void *user_data)
{
    (void)current, (void)user_data;
    return team_TeamSpecEdit_append_members(team_TeamEdit_spec(team_Team_edit(e)), "carol");
}

Test(teams, member_change_updates_binding, .init = setup, .fini = teardown)
{
    seed_team("a", "1", "alice");
    cr_assert_eq(kcr_testkit_run_until_idle(tk, 0, NULL), KCR_OK, "%s", kcr_last_error());
    cr_assert_str_eq(binding_members(), "alice");
    uint64_t quota_writes = writes(&TEAM_QUOTAS);
    cr_assert_eq(
        kcr_ctrlutil_create_or_update(
            kcr_testkit_client(tk),
            &(kcr_ctrlutil_write_options){.resource = &TEAMS, .name = "a", .mutate = add_carol},
            NULL),
        KCR_OK, "%s", kcr_last_error());
    cr_assert_eq(kcr_testkit_run_until_idle(tk, 0, NULL), KCR_OK, "%s", kcr_last_error());
    cr_assert_str_eq(binding_members(), "alice,carol");
    cr_assert_eq(writes(&TEAM_QUOTAS), quota_writes, "the unchanged quota was written again");
}

static char logged[4096];

static void capture(kcr_log_level level, const char *module, const char *message, void *ud)
{
    (void)ud;
    size_t n = strlen(logged);
    snprintf(logged + n, sizeof logged - n, "%s %s: %s\n", kcr_log_level_name(level), module,
             message);
}

Test(teams, refused_write_is_terminal_and_named, .init = setup, .fini = teardown)
{
    seed_team("bad", "1", "alice");
    cr_assert_eq(kcr_testkit_sync(tk), KCR_OK, "%s", kcr_last_error());
    cr_assert_eq(kcr_testkit_inject_error(tk, &(kcr_fake_error){.verb = KCR_FAKE_CREATE,
                                                                .resource = &TEAM_QUOTAS,
                                                                .times = -1,
                                                                .code = 422,
                                                                .reason = "Invalid",
                                                                .message = "quota is invalid"}),
                 KCR_OK);
    logged[0] = '\0';
    kcr_log_set_handler(capture, NULL);
    kcr_result r = reconcile("bad");
    kcr_log_set_handler(NULL, NULL);
    cr_assert_eq(r.kind, KCR_RESULT_TERMINAL, "result kind %d", (int)r.kind);
    cr_assert_eq(r.err, KCR_ERR_INVALID_OBJECT);
    cr_assert(strstr(logged, "reconcile bad: terminal error") &&
                  strstr(logged, "create resourcequotas team-bad/team-quota: 422 Invalid"),
              "logged: %s", logged);
    kcr_controller_stats st;
    kcr_controller_get_stats(ctl, &st);
    cr_assert_eq(st.terminal_errors, 1);
    cr_assert_eq(st.errors, 0, "a refused write was counted as a retry");
}
