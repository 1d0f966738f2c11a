/* Readiness: /readyz names the resource and the server's reason while an
 * informer cannot list (403, or a resource the server does not serve). */
#include "tests/unit/manager_fixture.h"
#include "kcr/fake.h"

Test(manager, readiness_reports_the_servers_reason, .init = setup, .fini = teardown)
{
    cr_assert_eq(
        kcr_fake_inject_error(
            fake, &(kcr_fake_error){.verb = KCR_FAKE_LIST,
                                    .resource = &CM,
                                    .times = -1,
                                    .code = 403,
                                    .reason = "Forbidden",
                                    .message = "configmaps is forbidden: User \"x\" cannot list"}),
        KCR_OK);
    kcr_informer_options fast = {.reflector = {.backoff_initial_ms = 5, .backoff_max_ms = 20}};
    new_manager(&(kcr_manager_options){.cache_defaults = &fast});
    slow_controller(0);
    char *msg = NULL;
    cr_assert_neq(kcr_manager_readyz_check(&msg, mgr), KCR_OK, "not running yet");
    free(msg);
    msg = NULL;
    start();
    WAIT_FOR((free(msg), msg = NULL,
              kcr_manager_readyz_check(&msg, mgr) != KCR_OK && msg && strstr(msg, "cannot list")));
    cr_assert(strstr(msg, "configmaps"), "%s", msg);
    cr_assert(strstr(msg, "forbidden") || strstr(msg, "Forbidden"), "%s", msg);
    free(msg);
    kcr_fake_clear_errors(fake);
    WAIT_FOR(kcr_manager_readyz_check(NULL, mgr) == KCR_OK);
}

Test(manager, readiness_names_a_resource_the_server_does_not_have, .init = setup, .fini = teardown)
{
    /* the fake answers 404 for a resource it does not serve, as the apiserver does;
     * declaring kind and scope lets the controller start before it is served */
    kcr_informer_options fast = {.reflector = {.backoff_initial_ms = 5, .backoff_max_ms = 20}};
    new_manager(&(kcr_manager_options){.cache_defaults = &fast});
    kcr_controller_options o = {
        .name = "things",
        .primary = {.resource = {"nope.example.com", "v1", "things"},
                    .kind = "Thing",
                    .scope = KCR_SCOPE_NAMESPACED},
        .reconcile = copy_reconcile};
    cr_assert_eq(kcr_manager_add_controller(mgr, &o, NULL), KCR_OK, "%s", kcr_last_error());
    start();
    char *msg = NULL;
    WAIT_FOR((free(msg), msg = NULL,
              kcr_manager_readyz_check(&msg, mgr) != KCR_OK && msg && strstr(msg, "404")));
    cr_assert(strstr(msg, "things.nope.example.com"), "%s", msg);
    free(msg);
    cr_assert_eq(stop(), KCR_OK, "a failing watch does not keep the manager from stopping");
}
