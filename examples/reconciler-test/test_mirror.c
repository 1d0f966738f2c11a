/* Unit tests of the ConfigMap-mirror controller (examples/configmap-mirror)
 * with the reconciler test kit: no cluster, no threads, no sleeps. The
 * controller declaration is the one main.c runs on a real manager. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <kcr/testkit.h>

#include "../configmap-mirror/mirror.h"

static const kcr_resource CM = {"", "v1", "configmaps"};
static kcr_testkit *tk;
static kcr_controller *ctl;

static void setup(void)
{
    cr_assert_eq(kcr_testkit_new(NULL, &tk), KCR_OK);
    cr_assert_eq(kcr_testkit_seed(tk, "apiVersion: v1\n"
                                      "kind: ConfigMap\n"
                                      "metadata: {name: app, labels: {mirror: \"true\"}}\n"
                                      "data: {color: blue}\n"
                                      "---\n"
                                      "apiVersion: v1\n"
                                      "kind: ConfigMap\n"
                                      "metadata: {name: plain}\n"),
                 KCR_OK, "%s", kcr_last_error());
    kcr_controller_options opts;
    mirror_controller(&opts, NULL);
    cr_assert_eq(kcr_testkit_add_controller(tk, &opts, &ctl), KCR_OK, "%s", kcr_last_error());
}

static void teardown(void)
{
    kcr_testkit_free(tk);
}

static const char *color(const char *name)
{
    static char buf[32];
    kcr_object *o = kcr_testkit_get(tk, &CM, "default", name);
    const char *c = o ? kcr_value_string(kcr_object_get(o, "data.color"), NULL) : NULL;
    snprintf(buf, sizeof buf, "%s", c ? c : "(none)");
    kcr_object_unref(o);
    return buf;
}

Test(mirror, copies_labelled_configmaps_only, .init = setup, .fini = teardown)
{
    cr_assert_eq(kcr_testkit_run_until_idle(tk, 0, NULL), KCR_OK);
    cr_assert_str_eq(color("app-mirror"), "blue");
    cr_assert_str_eq(color("plain-mirror"), "(none)");
    cr_assert_eq(kcr_testkit_count_events(tk, "app", "Mirrored"), 1);
}

Test(mirror, follows_changes_and_settles, .init = setup, .fini = teardown)
{
    cr_assert_eq(kcr_testkit_run_until_idle(tk, 0, NULL), KCR_OK);
    cr_assert_eq(kcr_client_patch(kcr_testkit_client(tk),
                                  &(kcr_request){.resource = &CM,
                                                 .ns = "default",
                                                 .name = "app",
                                                 .patch_type = KCR_PATCH_MERGE,
                                                 .body = "{\"data\":{\"color\":\"green\"}}"},
                                  NULL),
                 KCR_OK);
    kcr_testkit_clear_history(tk);
    size_t n;
    cr_assert_eq(kcr_testkit_run_until_idle(tk, 0, &n), KCR_OK);
    cr_assert_str_eq(color("app-mirror"), "green");
    size_t len;
    const kcr_testkit_record *h = kcr_testkit_history(tk, &len);
    cr_assert_eq(h[0].reason, KCR_REASON_PRIMARY_UPDATED);
    cr_assert_eq(h[len - 1].reason, KCR_REASON_OWNED, "the copy's update came back to its owner");
    cr_assert_eq(kcr_testkit_queue_len(tk, ctl), 0);
}

Test(mirror, retries_when_the_write_fails, .init = setup, .fini = teardown)
{
    cr_assert_eq(kcr_testkit_inject_error(tk, &(kcr_fake_error){.verb = KCR_FAKE_PATCH,
                                                                .resource = &CM,
                                                                .ns = "default",
                                                                .name = "app-mirror",
                                                                .code = 409,
                                                                .reason = "Conflict",
                                                                .message = "try again"}),
                 KCR_OK);
    cr_assert_eq(kcr_testkit_run_until_idle(tk, 0, NULL), KCR_OK);
    cr_assert_str_eq(color("app-mirror"), "(none)");
    int64_t delay;
    cr_assert(kcr_testkit_queued(tk, ctl, "default/app", &delay, NULL));
    kcr_testkit_advance(tk, delay);
    cr_assert_eq(kcr_testkit_run_until_idle(tk, 0, NULL), KCR_OK);
    cr_assert_str_eq(color("app-mirror"), "blue");
}
