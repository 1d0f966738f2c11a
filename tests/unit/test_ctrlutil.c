/* controllerutil.h against the fake API: guarded finalizers (a concurrent
 * add between read and patch is never dropped), status updates and
 * create-or-update retrying on conflicts, server-side apply, deletes. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "kcr/kcr.h"
#include "kcr/fake.h"

static const kcr_resource CM = {"", "v1", "configmaps"};
static const kcr_resource WIDGETS = {"kcr.dev", "v1", "widgets"};

static kcr_fake *fake;
static kcr_client *c, *other; /* `other` plays a concurrent writer */

static void setup(void)
{
    cr_assert_eq(kcr_fake_new(NULL, &fake), KCR_OK);
    /* a custom resource: the fake serves it once registered, as the
     * apiserver does once its CRD is established */
    kcr_api_resource widgets = {.group = "kcr.dev",
                                .version = "v1",
                                .resource = "widgets",
                                .kind = "Widget",
                                .namespaced = true};
    cr_assert_eq(kcr_fake_register(fake, &widgets, NULL), KCR_OK, "%s", kcr_last_error());
    cr_assert_eq(kcr_fake_client(fake, "ns", &c), KCR_OK);
    cr_assert_eq(kcr_fake_client(fake, "ns", &other), KCR_OK);
}

static void teardown(void)
{
    kcr_fake_set_hook(fake, NULL, NULL);
    kcr_client_free(other);
    kcr_client_free(c);
    kcr_fake_free(fake);
}

static kcr_object *seed(const kcr_resource *res, const char *json)
{
    kcr_object *o = NULL;
    cr_assert_eq(kcr_fake_add(fake, res, json, &o), KCR_OK, "%s", kcr_last_error());
    return o;
}

static kcr_object *get(const kcr_resource *res, const char *name)
{
    kcr_object *o = NULL;
    cr_assert_eq(kcr_client_get(c, &(kcr_request){.resource = res, .ns = "ns", .name = name}, &o),
                 KCR_OK, "%s", kcr_last_error());
    return o;
}

/* A hook that runs one JSON patch from `other` before the next request of
 * `verb` on `name`, once (its own request passes through the hook too). */
struct interloper {
    kcr_fake_verb verb;
    const char *name;
    const char *patch; /* JSON patch by `other` */
    int times;         /* how many requests to interfere with */
    int done;
    bool busy;
};

static void interfere(kcr_fake_verb verb, const kcr_resource *res, const char *ns, const char *name,
                      void *user_data)
{
    (void)ns;
    struct interloper *in = user_data;
    if (in->busy || verb != in->verb || in->done >= in->times || !name ||
        strcmp(name, in->name) != 0)
        return;
    in->busy = true;
    kcr_err err = kcr_client_patch(
        other, &(kcr_request){.resource = res, .ns = "ns", .name = name, .body = in->patch}, NULL);
    cr_assert_eq(err, KCR_OK, "the interloper's patch: %s", kcr_last_error());
    in->done++;
    in->busy = false;
}

#define CM_WITH(fin)                                                                               \
    "{\"metadata\":{\"name\":\"cm\",\"namespace\":\"ns\"" fin "},\"data\":{\"k\":\"v\"}}"

Test(ctrlutil_finalizer, add_and_remove, .init = setup, .fini = teardown)
{
    kcr_object *o = seed(&CM, CM_WITH("")), *r = NULL;
    bool changed = false;
    cr_assert_eq(
        kcr_ctrlutil_add_finalizer(
            c,
            &(kcr_ctrlutil_finalizer_options){
                .resource = &CM, .object = o, .finalizer = "kcr.dev/a", .changed = &changed},
            &r),
        KCR_OK, "%s", kcr_last_error());
    cr_assert(changed);
    cr_assert_eq(kcr_object_finalizer_count(r), 1);
    cr_assert_str_eq(kcr_object_finalizer(r, 0), "kcr.dev/a");
    /* present already: no request */
    uint64_t patches = kcr_fake_count(fake, KCR_FAKE_PATCH, &CM);
    kcr_object *again = NULL;
    cr_assert_eq(
        kcr_ctrlutil_add_finalizer(
            c,
            &(kcr_ctrlutil_finalizer_options){
                .resource = &CM, .object = r, .finalizer = "kcr.dev/a", .changed = &changed},
            &again),
        KCR_OK);
    cr_assert_not(changed);
    cr_assert_eq(again, r);
    cr_assert_eq(kcr_fake_count(fake, KCR_FAKE_PATCH, &CM), patches);
    kcr_object_unref(again);
    /* a second one is appended */
    cr_assert_eq(
        kcr_ctrlutil_add_finalizer(
            c,
            &(kcr_ctrlutil_finalizer_options){
                .resource = &CM, .object = r, .finalizer = "kcr.dev/b \"q\"", .changed = &changed},
            &again),
        KCR_OK, "%s", kcr_last_error());
    cr_assert_eq(kcr_object_finalizer_count(again), 2);
    cr_assert_str_eq(kcr_object_finalizer(again, 1), "kcr.dev/b \"q\"");
    kcr_object_unref(r);
    cr_assert_eq(
        kcr_ctrlutil_remove_finalizer(
            c,
            &(kcr_ctrlutil_finalizer_options){
                .resource = &CM, .object = again, .finalizer = "kcr.dev/a", .changed = &changed},
            &r),
        KCR_OK, "%s", kcr_last_error());
    cr_assert(changed);
    cr_assert_eq(kcr_object_finalizer_count(r), 1);
    cr_assert_str_eq(kcr_object_finalizer(r, 0), "kcr.dev/b \"q\"");
    kcr_object_unref(again);
    /* absent: nothing to do */
    cr_assert_eq(
        kcr_ctrlutil_remove_finalizer(
            c,
            &(kcr_ctrlutil_finalizer_options){
                .resource = &CM, .object = r, .finalizer = "kcr.dev/a", .changed = &changed},
            NULL),
        KCR_OK);
    cr_assert_not(changed);
    /* deleting: removing the last finalizer lets the deletion finish */
    cr_assert_eq(
        kcr_client_delete(c, &(kcr_request){.resource = &CM, .ns = "ns", .name = "cm"}, NULL),
        KCR_OK);
    kcr_status st = {0};
    cr_assert_eq(kcr_ctrlutil_remove_finalizer(
                     c,
                     &(kcr_ctrlutil_finalizer_options){.resource = &CM,
                                                       .object = r,
                                                       .finalizer = "kcr.dev/b \"q\"",
                                                       .changed = &changed,
                                                       .status = &st},
                     NULL),
                 KCR_OK, "%s", kcr_last_error());
    cr_assert(changed);
    cr_assert_eq(kcr_client_get(c, &(kcr_request){.resource = &CM, .ns = "ns", .name = "cm"}, NULL),
                 KCR_ERR_NOT_FOUND);
    /* gone (r is stale and still lists it): done, nothing changed */
    cr_assert_eq(kcr_ctrlutil_remove_finalizer(
                     c,
                     &(kcr_ctrlutil_finalizer_options){.resource = &CM,
                                                       .object = r,
                                                       .finalizer = "kcr.dev/b \"q\"",
                                                       .changed = &changed,
                                                       .status = &st},
                     &again),
                 KCR_OK, "%s", kcr_last_error());
    cr_assert_not(changed);
    cr_assert_null(again);
    cr_assert_eq(st.code, 0);
    /* ... but adding to a gone object is an error */
    cr_assert_eq(
        kcr_ctrlutil_add_finalizer(c,
                                   &(kcr_ctrlutil_finalizer_options){.resource = &CM,
                                                                     .object = r,
                                                                     .finalizer = "kcr.dev/c",
                                                                     .changed = &changed,
                                                                     .status = &st},
                                   NULL),
        KCR_ERR_NOT_FOUND);
    cr_assert_eq(st.code, 404);
    kcr_status_clear(&st);
    cr_assert_eq(
        kcr_ctrlutil_add_finalizer(
            c, &(kcr_ctrlutil_finalizer_options){.resource = &CM, .object = r, .finalizer = ""},
            NULL),
        KCR_ERR_INVALID);
    kcr_object_unref(r);
    kcr_object_unref(o);
}

Test(ctrlutil_finalizer, removal_never_drops_a_finalizer_added_concurrently, .init = setup,
     .fini = teardown)
{
    kcr_object *o = seed(&CM, CM_WITH(",\"finalizers\":[\"kcr.dev/mine\"]"));
    /* between our read (o) and our patch, someone inserts theirs in front */
    struct interloper in = {.verb = KCR_FAKE_PATCH,
                            .name = "cm",
                            .times = 1,
                            .patch = "[{\"op\":\"add\",\"path\":\"/metadata/finalizers/0\","
                                     "\"value\":\"other.dev/theirs\"}]"};
    kcr_fake_set_hook(fake, interfere, &in);
    bool changed = false;
    kcr_object *r = NULL;
    cr_assert_eq(
        kcr_ctrlutil_remove_finalizer(
            c,
            &(kcr_ctrlutil_finalizer_options){
                .resource = &CM, .object = o, .finalizer = "kcr.dev/mine", .changed = &changed},
            &r),
        KCR_OK, "%s", kcr_last_error());
    cr_assert_eq(in.done, 1);
    cr_assert(changed);
    cr_assert_eq(kcr_object_finalizer_count(r), 1);
    cr_assert_str_eq(kcr_object_finalizer(r, 0), "other.dev/theirs");
    kcr_object_unref(r);
    kcr_object *now = get(&CM, "cm");
    cr_assert_eq(kcr_object_finalizer_count(now), 1);
    cr_assert_str_eq(kcr_object_finalizer(now, 0), "other.dev/theirs");
    kcr_object_unref(now);
    /* our guarded patch failed once (index shifted), then a re-read and a
     * second patch: 1 interloper + 2 ours */
    cr_assert_eq(kcr_fake_count(fake, KCR_FAKE_PATCH, &CM), 3);
    kcr_object_unref(o);
}

Test(ctrlutil_finalizer, concurrent_adds_neither_duplicate_nor_lose, .init = setup,
     .fini = teardown)
{
    kcr_object *o = seed(&CM, CM_WITH(""));
    struct interloper in = {.verb = KCR_FAKE_PATCH,
                            .name = "cm",
                            .times = 1,
                            .patch = "[{\"op\":\"add\",\"path\":\"/metadata/finalizers\","
                                     "\"value\":[\"other.dev/theirs\",\"kcr.dev/mine\"]}]"};
    kcr_fake_set_hook(fake, interfere, &in);
    bool changed = true;
    kcr_object *r = NULL;
    cr_assert_eq(
        kcr_ctrlutil_add_finalizer(
            c,
            &(kcr_ctrlutil_finalizer_options){
                .resource = &CM, .object = o, .finalizer = "kcr.dev/mine", .changed = &changed},
            &r),
        KCR_OK, "%s", kcr_last_error());
    cr_assert_not(changed, "someone else added it meanwhile");
    cr_assert_eq(kcr_object_finalizer_count(r), 2);
    kcr_object_unref(r);
    kcr_object_unref(o);
    /* a stale view: the object gained a finalizer since; ours is appended */
    kcr_fake_set_hook(fake, NULL, NULL);
    o = seed(&CM, "{\"metadata\":{\"name\":\"cm2\",\"namespace\":\"ns\"}}");
    cr_assert_eq(
        kcr_client_patch(
            other,
            &(kcr_request){.resource = &CM,
                           .ns = "ns",
                           .name = "cm2",
                           .patch_type = KCR_PATCH_MERGE,
                           .body = "{\"metadata\":{\"finalizers\":[\"other.dev/theirs\"]}}"},
            NULL),
        KCR_OK);
    cr_assert_eq(
        kcr_ctrlutil_add_finalizer(
            c,
            &(kcr_ctrlutil_finalizer_options){
                .resource = &CM, .object = o, .finalizer = "kcr.dev/mine", .changed = &changed},
            &r),
        KCR_OK, "%s", kcr_last_error());
    cr_assert(changed);
    cr_assert_eq(kcr_object_finalizer_count(r), 2);
    cr_assert_str_eq(kcr_object_finalizer(r, 0), "other.dev/theirs");
    cr_assert_str_eq(kcr_object_finalizer(r, 1), "kcr.dev/mine");
    kcr_object_unref(r);
    kcr_object_unref(o);
}

Test(ctrlutil_finalizer, rejections_and_bounded_retries, .init = setup, .fini = teardown)
{
    kcr_object *o = seed(&CM, CM_WITH(",\"finalizers\":[\"x.dev/0\"]"));
    /* a 422 with nothing changed under us is the server's verdict: no retry */
    cr_assert_eq(kcr_fake_inject_error(
                     fake, &(kcr_fake_error){.verb = KCR_FAKE_PATCH,
                                             .resource = &CM,
                                             .code = 422,
                                             .reason = "Invalid",
                                             .message = "finalizer name is not a qualified name"}),
                 KCR_OK);
    kcr_status st = {0};
    cr_assert_eq(kcr_ctrlutil_add_finalizer(
                     c,
                     &(kcr_ctrlutil_finalizer_options){
                         .resource = &CM, .object = o, .finalizer = "kcr.dev/a", .status = &st},
                     NULL),
                 KCR_ERR_INVALID_OBJECT);
    cr_assert_eq(st.code, 422);
    cr_assert_str_eq(st.message, "finalizer name is not a qualified name");
    cr_assert(strstr(kcr_last_error(), "not a qualified name"), "%s", kcr_last_error());
    /* the message says what failed: verb, kind, object */
    cr_assert(strstr(kcr_last_error(), "add finalizer kcr.dev/a to ConfigMap ns/cm: "), "%s",
              kcr_last_error());
    cr_assert_eq(kcr_fake_count(fake, KCR_FAKE_PATCH, &CM), 1);
    kcr_status_clear(&st);
    /* an object that changes before every patch: 1 + max_retries attempts */
    struct interloper in = {.verb = KCR_FAKE_PATCH,
                            .name = "cm",
                            .times = 100,
                            .patch = "[{\"op\":\"add\",\"path\":\"/metadata/finalizers/-\","
                                     "\"value\":\"x.dev/more\"}]"};
    kcr_fake_set_hook(fake, interfere, &in);
    /* every interloper patch grows the list: our test of it always fails */
    cr_assert_eq(
        kcr_ctrlutil_add_finalizer(c,
                                   &(kcr_ctrlutil_finalizer_options){.resource = &CM,
                                                                     .object = o,
                                                                     .finalizer = "kcr.dev/a",
                                                                     .max_retries = 2,
                                                                     .status = &st},
                                   NULL),
        KCR_ERR_INVALID_OBJECT);
    cr_assert_eq(in.done, 3);
    kcr_status_clear(&st);
    kcr_object_unref(o);
}

struct racer {
    const kcr_object *seen; /* the same stale view for every thread */
    char finalizer[32];
    bool add;
    kcr_err err;
    bool changed;
};

static void *race(void *arg)
{
    struct racer *r = arg;
    r->err = r->add ? kcr_ctrlutil_add_finalizer(
                          c,
                          &(kcr_ctrlutil_finalizer_options){.resource = &CM,
                                                            .object = r->seen,
                                                            .finalizer = r->finalizer,
                                                            .max_retries = 50,
                                                            .changed = &r->changed},
                          NULL)
                    : kcr_ctrlutil_remove_finalizer(
                          c,
                          &(kcr_ctrlutil_finalizer_options){.resource = &CM,
                                                            .object = r->seen,
                                                            .finalizer = r->finalizer,
                                                            .max_retries = 50,
                                                            .changed = &r->changed},
                          NULL);
    return NULL;
}

static void run_racers(struct racer *rs, int n)
{
    pthread_t th[8];
    for (int i = 0; i < n; i++)
        cr_assert_eq(pthread_create(&th[i], NULL, race, &rs[i]), 0);
    for (int i = 0; i < n; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < n; i++) {
        cr_assert_eq(rs[i].err, KCR_OK, "%s: %s", rs[i].finalizer, kcr_strerror(rs[i].err));
        cr_assert(rs[i].changed, "%s", rs[i].finalizer);
    }
}

Test(ctrlutil_finalizer, threads_racing_on_one_object_lose_nothing, .init = setup, .fini = teardown)
{
    enum { N = 6 };
    kcr_object *o = seed(&CM, CM_WITH(",\"finalizers\":[\"keep.dev/x\"]"));
    struct racer rs[N];
    for (int i = 0; i < N; i++) {
        rs[i] = (struct racer){.seen = o, .add = true};
        snprintf(rs[i].finalizer, sizeof rs[i].finalizer, "kcr.dev/f%d", i);
    }
    run_racers(rs, N);
    kcr_object *now = get(&CM, "cm");
    cr_assert_eq(kcr_object_finalizer_count(now), N + 1);
    for (int i = 0; i < N; i++)
        cr_assert(kcr_object_has_finalizer(now, rs[i].finalizer), "%s lost", rs[i].finalizer);
    /* all remove theirs at once, each from the full (now stale) view */
    for (int i = 0; i < N; i++) {
        rs[i].seen = now;
        rs[i].add = false;
    }
    run_racers(rs, N);
    kcr_object_unref(now);
    now = get(&CM, "cm");
    cr_assert_eq(kcr_object_finalizer_count(now), 1);
    cr_assert_str_eq(kcr_object_finalizer(now, 0), "keep.dev/x", "never someone else's");
    kcr_object_unref(now);
    kcr_object_unref(o);
}

/* ---- update_status / create_or_update ---------------------------------------- */

struct ready {
    int calls;
    int64_t replicas;
};

static kcr_err set_ready(kcr_object_edit *e, const kcr_object *cur, void *user_data)
{
    struct ready *r = user_data;
    r->calls++;
    cr_assert_not_null(cur);
    /* computed from the current object: spec.size mirrored into status */
    r->replicas = kcr_value_int(kcr_object_get(cur, "spec.size"));
    kcr_err err = kcr_object_edit_set_int(e, "status.ready", r->replicas);
    return err ? err : kcr_object_edit_set_string(e, "status.phase", "Ready");
}

#define WIDGET                                                                                     \
    "{\"apiVersion\":\"kcr.dev/"                                                                   \
    "v1\",\"kind\":\"Widget\",\"metadata\":{\"name\":\"w\",\"namespace\":\"ns\"},\"spec\":{"       \
    "\"size\":3}}"

static kcr_err set_label(kcr_object_edit *e, const kcr_object *cur, void *user_data)
{
    (void)cur;
    (void)user_data;
    return kcr_object_edit_set_label(e, "touched", "yes");
}

Test(ctrlutil_status, retries_injected_conflicts, .init = setup, .fini = teardown)
{
    kcr_object_unref(seed(&WIDGETS, WIDGET));
    cr_assert_eq(
        kcr_fake_inject_error(fake, &(kcr_fake_error){.verb = KCR_FAKE_UPDATE,
                                                      .resource = &WIDGETS,
                                                      .times = 2,
                                                      .code = 409,
                                                      .reason = "Conflict",
                                                      .message = "the object has been modified"}),
        KCR_OK);
    struct ready r = {0};
    kcr_ctrlutil_op_result res = KCR_CTRLUTIL_UNCHANGED;
    kcr_object *o = NULL;
    cr_assert_eq(kcr_ctrlutil_update_status(c,
                                            &(kcr_ctrlutil_write_options){.resource = &WIDGETS,
                                                                          .ns = "ns",
                                                                          .name = "w",
                                                                          .mutate = set_ready,
                                                                          .user_data = &r,
                                                                          .result = &res},
                                            &o),
                 KCR_OK, "%s", kcr_last_error());
    cr_assert_eq(r.calls, 3, "mutate runs once per attempt");
    cr_assert_eq(res, KCR_CTRLUTIL_UPDATED);
    cr_assert_eq(kcr_value_int(kcr_object_get(o, "status.ready")), 3);
    cr_assert_eq(kcr_fake_count(fake, KCR_FAKE_GET, &WIDGETS), 3);
    kcr_object_unref(o);
    /* nothing left to change: no write */
    uint64_t updates = kcr_fake_count(fake, KCR_FAKE_UPDATE, &WIDGETS);
    cr_assert_eq(kcr_ctrlutil_update_status(c,
                                            &(kcr_ctrlutil_write_options){.resource = &WIDGETS,
                                                                          .ns = "ns",
                                                                          .name = "w",
                                                                          .mutate = set_ready,
                                                                          .user_data = &r,
                                                                          .result = &res},
                                            NULL),
                 KCR_OK);
    cr_assert_eq(res, KCR_CTRLUTIL_UNCHANGED);
    cr_assert_str_eq(kcr_ctrlutil_op_result_string(res), "unchanged");
    cr_assert_eq(kcr_fake_count(fake, KCR_FAKE_UPDATE, &WIDGETS), updates);
    /* a change outside the status cannot be written there: nothing is sent */
    cr_assert_eq(
        kcr_ctrlutil_update_status(
            c,
            &(kcr_ctrlutil_write_options){
                .resource = &WIDGETS, .ns = "ns", .name = "w", .mutate = set_label, .result = &res},
            NULL),
        KCR_OK);
    cr_assert_eq(res, KCR_CTRLUTIL_UNCHANGED);
    cr_assert_eq(kcr_fake_count(fake, KCR_FAKE_UPDATE, &WIDGETS), updates);
}

Test(ctrlutil_status, a_real_conflict_reapplies_mutate_on_the_new_object, .init = setup,
     .fini = teardown)
{
    kcr_object_unref(seed(&WIDGETS, WIDGET));
    /* someone scales the widget between our read and our write */
    struct interloper in = {.verb = KCR_FAKE_UPDATE,
                            .name = "w",
                            .times = 1,
                            .patch = "[{\"op\":\"replace\",\"path\":\"/spec/size\",\"value\":5}]"};
    kcr_fake_set_hook(fake, interfere, &in);
    struct ready r = {0};
    kcr_ctrlutil_op_result res;
    kcr_object *o = NULL;
    cr_assert_eq(kcr_ctrlutil_update_status(c,
                                            &(kcr_ctrlutil_write_options){.resource = &WIDGETS,
                                                                          .ns = "ns",
                                                                          .name = "w",
                                                                          .mutate = set_ready,
                                                                          .user_data = &r,
                                                                          .result = &res},
                                            &o),
                 KCR_OK, "%s", kcr_last_error());
    cr_assert_eq(r.calls, 2);
    cr_assert_eq(kcr_value_int(kcr_object_get(o, "status.ready")), 5, "computed from the re-read");
    cr_assert_eq(kcr_value_int(kcr_object_get(o, "spec.size")), 5, "their change survives");
    kcr_object_unref(o);
}

static kcr_err fail_mutate(kcr_object_edit *e, const kcr_object *cur, void *user_data)
{
    (void)cur;
    (void)user_data;
    return kcr_object_edit_set_string(e, "status.bad", "\xff"); /* invalid UTF-8 */
}

static kcr_err rename_mutate(kcr_object_edit *e, const kcr_object *cur, void *user_data)
{
    (void)cur;
    (void)user_data;
    return kcr_object_edit_set_string(e, "metadata.name", "other");
}

Test(ctrlutil_status, errors, .init = setup, .fini = teardown)
{
    kcr_object_unref(seed(&WIDGETS, WIDGET));
    struct ready r = {0};
    kcr_status st = {0};
    cr_assert_eq(kcr_fake_inject_error(fake, &(kcr_fake_error){.verb = KCR_FAKE_UPDATE,
                                                               .resource = &WIDGETS,
                                                               .code = 409,
                                                               .reason = "Conflict",
                                                               .message = "stale"}),
                 KCR_OK);
    cr_assert_eq(kcr_ctrlutil_update_status(c,
                                            &(kcr_ctrlutil_write_options){.resource = &WIDGETS,
                                                                          .ns = "ns",
                                                                          .name = "w",
                                                                          .mutate = set_ready,
                                                                          .user_data = &r,
                                                                          .max_retries = -1,
                                                                          .status = &st},
                                            NULL),
                 KCR_ERR_CONFLICT, "no retries");
    cr_assert_eq(st.code, 409);
    cr_assert(strstr(kcr_last_error(), "update status of Widget ns/w: "), "%s", kcr_last_error());
    cr_assert_str_eq(st.message, "stale");
    cr_assert_eq(kcr_ctrlutil_update_status(c,
                                            &(kcr_ctrlutil_write_options){.resource = &WIDGETS,
                                                                          .ns = "ns",
                                                                          .name = "nope",
                                                                          .mutate = set_ready,
                                                                          .user_data = &r,
                                                                          .status = &st},
                                            NULL),
                 KCR_ERR_NOT_FOUND);
    cr_assert_eq(st.code, 404);
    /* no object read: the resource stands for the kind */
    cr_assert(strstr(kcr_last_error(), "get widgets ns/nope: "), "%s", kcr_last_error());
    kcr_status_clear(&st);
    cr_assert_eq(kcr_ctrlutil_update_status(
                     c,
                     &(kcr_ctrlutil_write_options){
                         .resource = &WIDGETS, .ns = "ns", .name = "w", .mutate = fail_mutate},
                     NULL),
                 KCR_ERR_INVALID);
    cr_assert(strstr(kcr_last_error(), "mutate callback failed") &&
                  strstr(kcr_last_error(), "UTF-8"),
              "%s", kcr_last_error());
    cr_assert_eq(kcr_ctrlutil_update_status(
                     c,
                     &(kcr_ctrlutil_write_options){
                         .resource = &WIDGETS, .ns = "ns", .name = "w", .mutate = rename_mutate},
                     NULL),
                 KCR_ERR_INVALID);
    cr_assert(strstr(kcr_last_error(), "must not change metadata.name"), "%s", kcr_last_error());
    cr_assert_eq(
        kcr_ctrlutil_update_status(
            c, &(kcr_ctrlutil_write_options){.resource = &WIDGETS, .ns = "ns", .name = "w"}, NULL),
        KCR_ERR_INVALID);
}

struct desired {
    const char *value;
    const kcr_object *owner;
    int creates; /* calls with current == NULL */
};

static kcr_err desired_cm(kcr_object_edit *e, const kcr_object *cur, void *user_data)
{
    struct desired *d = user_data;
    if (!cur) {
        d->creates++;
        kcr_object *s = NULL;
        cr_assert_eq(kcr_object_edit_snapshot(e, &s), KCR_OK);
        cr_assert_str_eq(kcr_object_name(s), "cm");
        cr_assert_str_eq(kcr_object_namespace(s), "ns");
        cr_assert_str_eq(kcr_object_api_version(s), "v1");
        kcr_object_unref(s);
    }
    kcr_err err = kcr_object_edit_set_string(e, "kind", "ConfigMap");
    if (!err)
        err = kcr_object_edit_set_string(e, "data.v", d->value);
    if (!err && d->owner)
        err = kcr_ctrlutil_set_controller_reference_edit(d->owner, e, NULL);
    return err;
}

Test(ctrlutil_create_or_update, created_updated_unchanged, .init = setup, .fini = teardown)
{
    kcr_object *owner = seed(&WIDGETS, WIDGET);
    struct desired d = {.value = "1", .owner = owner};
    kcr_ctrlutil_op_result res;
    kcr_object *o = NULL;
    cr_assert_eq(kcr_ctrlutil_create_or_update(c,
                                               &(kcr_ctrlutil_write_options){.resource = &CM,
                                                                             .ns = "ns",
                                                                             .name = "cm",
                                                                             .mutate = desired_cm,
                                                                             .user_data = &d,
                                                                             .result = &res},
                                               &o),
                 KCR_OK, "%s", kcr_last_error());
    cr_assert_eq(res, KCR_CTRLUTIL_CREATED);
    cr_assert_eq(d.creates, 1);
    kcr_owner_ref ref;
    cr_assert(kcr_object_controller_ref(o, &ref));
    cr_assert_str_eq(ref.uid, kcr_object_uid(owner));
    kcr_object_unref(o);
    cr_assert_eq(kcr_ctrlutil_create_or_update(c,
                                               &(kcr_ctrlutil_write_options){.resource = &CM,
                                                                             .ns = "ns",
                                                                             .name = "cm",
                                                                             .mutate = desired_cm,
                                                                             .user_data = &d,
                                                                             .result = &res},
                                               NULL),
                 KCR_OK);
    cr_assert_eq(res, KCR_CTRLUTIL_UNCHANGED);
    d.value = "2";
    cr_assert_eq(kcr_ctrlutil_create_or_update(c,
                                               &(kcr_ctrlutil_write_options){.resource = &CM,
                                                                             .ns = "ns",
                                                                             .name = "cm",
                                                                             .mutate = desired_cm,
                                                                             .user_data = &d,
                                                                             .result = &res},
                                               &o),
                 KCR_OK);
    cr_assert_eq(res, KCR_CTRLUTIL_UPDATED);
    cr_assert_str_eq(kcr_value_string(kcr_object_get(o, "data.v"), NULL), "2");
    cr_assert_eq(kcr_object_owner_ref_count(o), 1);
    kcr_object_unref(o);
    cr_assert_eq(kcr_fake_count(fake, KCR_FAKE_CREATE, &CM), 1);
    cr_assert_eq(kcr_fake_count(fake, KCR_FAKE_UPDATE, &CM), 1);
    kcr_object_unref(owner);
}

static void create_first(kcr_fake_verb verb, const kcr_resource *res, const char *ns,
                         const char *name, void *user_data)
{
    (void)ns;
    (void)name;
    int *n = user_data;
    if (verb != KCR_FAKE_CREATE || (*n)++ > 0)
        return;
    cr_assert_eq(
        kcr_client_create(
            other,
            &(kcr_request){.resource = res,
                           .ns = "ns",
                           .body = "{\"metadata\":{\"name\":\"cm\"},\"data\":{\"v\":\"theirs\"}}"},
            NULL),
        KCR_OK);
}

Test(ctrlutil_create_or_update, a_lost_create_race_becomes_an_update, .init = setup,
     .fini = teardown)
{
    int n = 0;
    kcr_fake_set_hook(fake, create_first, &n);
    struct desired d = {.value = "mine"};
    kcr_ctrlutil_op_result res;
    kcr_object *o = NULL;
    cr_assert_eq(kcr_ctrlutil_create_or_update(c,
                                               &(kcr_ctrlutil_write_options){.resource = &CM,
                                                                             .ns = "ns",
                                                                             .name = "cm",
                                                                             .mutate = desired_cm,
                                                                             .user_data = &d,
                                                                             .result = &res},
                                               &o),
                 KCR_OK, "%s", kcr_last_error());
    cr_assert_eq(res, KCR_CTRLUTIL_UPDATED);
    cr_assert_str_eq(kcr_value_string(kcr_object_get(o, "data.v"), NULL), "mine");
    kcr_object_unref(o);
}

/* ---- apply / delete ------------------------------------------------------------------- */

Test(ctrlutil_apply, object_and_json, .init = setup, .fini = teardown)
{
    kcr_object *o = NULL;
    const char *cfg = "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"a\"},"
                      "\"data\":{\"x\":\"1\"}}";
    cr_assert_eq(kcr_ctrlutil_apply(
                     c,
                     &(kcr_ctrlutil_apply_options){
                         .resource = &CM, .ns = "ns", .json = cfg, .field_manager = "kcr-test"},
                     &o),
                 KCR_OK, "%s", kcr_last_error());
    cr_assert_str_eq(kcr_object_namespace(o), "ns");
    cr_assert_str_eq(kcr_value_string(kcr_object_get(o, "data.x"), NULL), "1");
    /* applying what was read back is refused before any request */
    uint64_t patches = kcr_fake_count(fake, KCR_FAKE_PATCH, NULL);
    kcr_object_edit *e = NULL;
    cr_assert_eq(kcr_object_edit_new(o, &e), KCR_OK);
    cr_assert_eq(kcr_object_edit_set_json(e, "metadata.managedFields", "[{\"manager\":\"x\"}]", 17),
                 KCR_OK);
    kcr_object *with_mf = NULL;
    cr_assert_eq(kcr_object_edit_freeze(e, &with_mf), KCR_OK);
    kcr_object_edit_free(e);
    cr_assert_eq(kcr_ctrlutil_apply(c,
                                    &(kcr_ctrlutil_apply_options){.resource = &CM,
                                                                  .object = with_mf,
                                                                  .field_manager = "kcr-test"},
                                    NULL),
                 KCR_ERR_INVALID);
    cr_assert(strstr(kcr_last_error(), "managedFields"), "%s", kcr_last_error());
    kcr_object_unref(with_mf);
    cr_assert_eq(
        kcr_ctrlutil_apply(
            c, &(kcr_ctrlutil_apply_options){.resource = &CM, .object = o, .field_manager = ""},
            NULL),
        KCR_ERR_INVALID);
    cr_assert_eq(kcr_ctrlutil_apply(
                     c,
                     &(kcr_ctrlutil_apply_options){
                         .resource = &CM, .ns = "elsewhere", .object = o, .field_manager = "m"},
                     NULL),
                 KCR_ERR_INVALID);
    cr_assert_eq(
        kcr_ctrlutil_apply(c,
                           &(kcr_ctrlutil_apply_options){.resource = &CM,
                                                         .ns = "ns",
                                                         .json = "{\"metadata\":{\"name\":\"b\"}}",
                                                         .field_manager = "m"},
                           NULL),
        KCR_ERR_INVALID, "no apiVersion/kind");
    cr_assert_eq(
        kcr_ctrlutil_apply(c,
                           &(kcr_ctrlutil_apply_options){
                               .resource = &CM, .ns = "ns", .json = "{", .field_manager = "m"},
                           NULL),
        KCR_ERR_PARSE);
    cr_assert_eq(kcr_fake_count(fake, KCR_FAKE_PATCH, NULL), patches);
    kcr_object_unref(o);
    /* an object built in code, namespace from the object */
    const char *json = "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":"
                       "{\"name\":\"a\",\"namespace\":\"ns\"},\"data\":{\"y\":\"2\"}}";
    kcr_object *built = NULL;
    cr_assert_eq(kcr_object_parse(json, strlen(json), &built), KCR_OK, "%s", kcr_last_error());
    cr_assert_eq(kcr_ctrlutil_apply(c,
                                    &(kcr_ctrlutil_apply_options){.resource = &CM,
                                                                  .object = built,
                                                                  .field_manager = "kcr-test",
                                                                  .force = true},
                                    &o),
                 KCR_OK, "%s", kcr_last_error());
    cr_assert_str_eq(kcr_value_string(kcr_object_get(o, "data.y"), NULL), "2");
    kcr_object_unref(o);
    kcr_object_unref(built);
}

Test(ctrlutil_delete, preconditions_and_not_found, .init = setup, .fini = teardown)
{
    kcr_object *old = seed(&CM, CM_WITH(""));
    /* recreated under the same name: deleting the old incarnation must fail */
    cr_assert_eq(
        kcr_client_delete(c, &(kcr_request){.resource = &CM, .ns = "ns", .name = "cm"}, NULL),
        KCR_OK);
    kcr_object_unref(seed(&CM, CM_WITH("")));
    kcr_status st = {0};
    cr_assert_eq(kcr_ctrlutil_delete(c,
                                     &(kcr_ctrlutil_delete_options){
                                         .resource = &CM,
                                         .object = old,
                                         .propagation = KCR_CTRLUTIL_PROPAGATION_FOREGROUND,
                                         .ignore_not_found = true,
                                         .status = &st},
                                     NULL),
                 KCR_ERR_CONFLICT);
    cr_assert_eq(st.code, 409);
    cr_assert(strstr(kcr_last_error(), "delete ConfigMap ns/cm: "), "%s", kcr_last_error());
    kcr_status_clear(&st);
    kcr_object *now = get(&CM, "cm");
    cr_assert_eq(kcr_ctrlutil_delete(c,
                                     &(kcr_ctrlutil_delete_options){
                                         .resource = &CM,
                                         .object = now,
                                         .propagation = KCR_CTRLUTIL_PROPAGATION_BACKGROUND,
                                         .ignore_not_found = true,
                                         .status = &st},
                                     NULL),
                 KCR_OK, "%s", kcr_last_error());
    /* gone: delete_object is done; plain delete says so unless asked not to */
    cr_assert_eq(kcr_ctrlutil_delete(
                     c,
                     &(kcr_ctrlutil_delete_options){
                         .resource = &CM, .object = now, .ignore_not_found = true, .status = &st},
                     NULL),
                 KCR_OK);
    cr_assert_eq(kcr_ctrlutil_delete(c,
                                     &(kcr_ctrlutil_delete_options){
                                         .resource = &CM, .ns = "ns", .name = "cm", .status = &st},
                                     NULL),
                 KCR_ERR_NOT_FOUND);
    cr_assert_eq(st.code, 404);
    cr_assert(strstr(kcr_last_error(), "delete configmaps ns/cm: "), "%s", kcr_last_error());
    kcr_ctrlutil_delete_options o = {.resource = &CM,
                                     .ns = "ns",
                                     .name = "cm",
                                     .ignore_not_found = true,
                                     .propagation = KCR_CTRLUTIL_PROPAGATION_ORPHAN,
                                     .status = &st};
    cr_assert_eq(kcr_ctrlutil_delete(c, &o, NULL), KCR_OK);
    cr_assert_eq(st.code, 0);
    o.propagation = (kcr_ctrlutil_propagation)7;
    cr_assert_eq(kcr_ctrlutil_delete(c, &o, NULL), KCR_ERR_INVALID);
    /* a stale resourceVersion precondition */
    kcr_object *fresh = seed(&CM, CM_WITH(""));
    o = (kcr_ctrlutil_delete_options){.resource = &CM,
                                      .ns = "ns",
                                      .name = "cm",
                                      .precondition_resource_version = "1",
                                      .status = &st};
    cr_assert_eq(kcr_ctrlutil_delete(c, &o, NULL), KCR_ERR_CONFLICT);
    /* the options must not name another object than the one given */
    o = (kcr_ctrlutil_delete_options){.resource = &CM, .name = "other", .object = fresh};
    cr_assert_eq(kcr_ctrlutil_delete(c, &o, NULL), KCR_ERR_INVALID);
    cr_assert(strstr(kcr_last_error(), "another object"), "%s", kcr_last_error());
    o = (kcr_ctrlutil_delete_options){.resource = &CM, .object = fresh, .precondition_uid = "u"};
    cr_assert_eq(kcr_ctrlutil_delete(c, &o, NULL), KCR_ERR_INVALID);
    cr_assert_eq(kcr_ctrlutil_delete(c, &(kcr_ctrlutil_delete_options){.resource = &CM}, NULL),
                 KCR_ERR_INVALID, "neither name nor object");
    o = (kcr_ctrlutil_delete_options){.resource = &CM,
                                      .ns = "ns",
                                      .name = "cm",
                                      .precondition_resource_version =
                                          kcr_object_resource_version(fresh),
                                      .status = &st};
    cr_assert_eq(kcr_ctrlutil_delete(c, &o, NULL), KCR_OK, "%s", kcr_last_error());
    kcr_status_clear(&st);
    kcr_object_unref(fresh);
    kcr_object_unref(now);
    kcr_object_unref(old);
}
