/* One map function and one predicate written once for the manager and the
 * test kit alike (test_controller_routing.c, test_testkit_sources.c): they
 * read the controller's ConfigMap cache through their kcr_source_ctx. A
 * Secret maps to every ConfigMap of its namespace labelled secret=<its
 * name>; the predicate passes only Secrets some cached ConfigMap names.
 * Includers define CM (v1 configmaps) first. */
#ifndef KCR_TEST_USERS_MAP_H
#define KCR_TEST_USERS_MAP_H

#include <criterion/criterion.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "kcr/kcr.h"

static const kcr_resource USERS_SECRET = {"", "v1", "secrets"};
#define USERS_CONTROLLER "users"

static atomic_int users_map_calls;
static _Atomic int64_t users_map_now_ms;

static kcr_err secret_to_users(kcr_source_ctx *ctx, const kcr_object *obj, kcr_map_out *out,
                               void *ud)
{
    (void)ud;
    atomic_fetch_add(&users_map_calls, 1);
    atomic_store(&users_map_now_ms, kcr_source_ctx_now_ms(ctx));
    cr_assert_not_null(kcr_source_ctx_client(ctx));
    cr_assert_str_eq(kcr_controller_name(kcr_source_ctx_controller(ctx)), USERS_CONTROLLER);
    static const kcr_resource NS = {"", "v1", "namespaces"};
    cr_assert_null(kcr_source_ctx_cache(ctx, &NS), "no source of the controller reads namespaces");
    kcr_store *cms = kcr_source_ctx_cache(ctx, &CM);
    cr_assert_not_null(cms);
    char selector[300];
    snprintf(selector, sizeof selector, "secret=%s", kcr_object_name(obj));
    kcr_object_list users = {0};
    kcr_err err = kcr_lister_list(cms, kcr_object_namespace(obj), selector, &users);
    for (size_t i = 0; err == KCR_OK && i < users.len; i++)
        kcr_map_emit(out, kcr_object_namespace(users.items[i]), kcr_object_name(users.items[i]));
    kcr_object_list_free(&users);
    return err;
}

static kcr_err used_secret(kcr_source_ctx *ctx, const kcr_object_change *ch, bool *pass, void *ud)
{
    (void)ud;
    *pass = false;
    kcr_object_list cms = {0};
    kcr_err err = kcr_lister_list(kcr_source_ctx_cache(ctx, &CM), NULL, NULL, &cms);
    for (size_t i = 0; err == KCR_OK && i < cms.len && !*pass; i++) {
        const char *want = kcr_object_label(cms.items[i], "secret");
        *pass = want && ch->obj && strcmp(want, kcr_object_name(ch->obj)) == 0;
    }
    kcr_object_list_free(&cms);
    return err;
}

/* The "users" controller: primary ConfigMaps, watching Secrets through the
 * map and the predicate above; *w holds the watch (it must outlive the
 * add-controller call). */
static inline kcr_controller_options users_options(kcr_source *w, kcr_reconcile_fn reconcile)
{
    *w = (kcr_source){.resource = USERS_SECRET,
                      .map = secret_to_users,
                      .predicate = kcr_predicate_custom(used_secret, NULL)};
    return (kcr_controller_options){.name = USERS_CONTROLLER,
                                    .primary = {.resource = CM},
                                    .watches = w,
                                    .n_watches = 1,
                                    .reconcile = reconcile};
}

#endif
