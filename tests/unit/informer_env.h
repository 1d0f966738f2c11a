/* The informer tests' environment (test_informer.c, _dispatch, _sync,
 * _lister, _lifecycle, _inline): a fake seeded with ConfigMaps, a client and an
 * informer with fast backoff, and CONVERGE, which waits until the
 * informer's cache matches the fake. */
#ifndef KCR_TEST_INFORMER_ENV_H
#define KCR_TEST_INFORMER_ENV_H

#include <criterion/criterion.h>

#include "informer/informer_internal.h"
#include "tests/unit/informer_fixtures.h"

static inline kcr_informer_options fast(void)
{
    kcr_informer_options o = {0};
    o.reflector.backoff_initial_ms = 5;
    o.reflector.backoff_max_ms = 40;
    return o;
}

typedef struct env {
    kcr_fake *fake;
    kcr_client *c;
    kcr_informer *inf;
} env;

static inline void env_up(env *e, int seed, const kcr_informer_options *o)
{
    cr_assert_eq(kcr_fake_new(NULL, &e->fake), KCR_OK);
    seed_many(e->fake, "default", seed);
    cr_assert_eq(kcr_fake_client(e->fake, NULL, &e->c), KCR_OK);
    kcr_informer_options d = fast();
    cr_assert_eq(kcr_informer_new(e->c, &CM, o ? o : &d, &e->inf), KCR_OK);
}

static inline void env_down(env *e)
{
    kcr_informer_free(e->inf);
    kcr_client_free(e->c);
    kcr_fake_free(e->fake);
}

#define CONVERGE(e, t)                                                                           \
    do {                                                                                         \
        char why_[512] = "";                                                                     \
        cr_assert(converge_wait((e)->c, &CM, NULL, NULL, (e)->inf, (t), 5000, why_, sizeof why_), \
                  "not converged: %s", why_);                                                    \
    } while (0)

#endif
