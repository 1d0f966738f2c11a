/* Rate limiters: the interface, and the built-ins (exponential per key,
 * token bucket, fast/slow per key, max-of, with-max-wait, default). The
 * built-ins count nanoseconds inside; the public calls take and return ms. */
#include "workqueue/ratelimit.h"

#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/abi.h"
#include "core/clock.h"
#include "core/error.h"
#include "workqueue/duration.h"
#include "core/keytab.h"

struct kcr_rate_limiter {
    /* forget, num_requeues, free: the user's or a built-in's. `when` is set
     * for a custom limiter (ms), `when_ns` for a built-in. */
    kcr_rate_limiter_ops ops;
    int64_t (*when_ns)(const char *key, int64_t now_ns, void *user_data);
    void *user_data;
};

/* Fails a constructor that owns `user_data`: frees it through `free_fn`. */
static kcr_err fail_owned(void (*free_fn)(void *), void *user_data, kcr_err code, const char *fn,
                          const char *why)
{
    if (free_fn)
        free_fn(user_data);
    return kcr__fail(code, "%s: %s", fn, why);
}

/* The one constructor behind all: `ops` copied, `when_ns` for built-ins. */
static kcr_err limiter_new(const kcr_rate_limiter_ops *ops,
                           int64_t (*when_ns)(const char *, int64_t, void *), void *user_data,
                           const char *fn, kcr_rate_limiter **out)
{
    if (!ops || (!ops->when && !when_ns))
        return fail_owned(ops ? ops->free : NULL, user_data, KCR_ERR_INVALID, fn,
                          "ops->when is required");
    if (!out)
        return fail_owned(ops->free, user_data, KCR_ERR_INVALID, fn, "out is NULL");
    kcr_rate_limiter *rl = malloc(sizeof *rl);
    if (!rl)
        return fail_owned(ops->free, user_data, KCR_ERR_NOMEM, fn, "out of memory");
    rl->ops = *ops;
    rl->when_ns = when_ns;
    rl->user_data = user_data;
    *out = rl;
    return KCR_OK;
}

kcr_err (kcr_rate_limiter_new)(size_t ops_size, const kcr_rate_limiter_ops *ops, void *user_data,
                               kcr_rate_limiter **out)
{
    if (out)
        *out = NULL;
    kcr_rate_limiter_ops known;
    kcr_err err = kcr__abi_in(&known, sizeof known, ops, ops_size, "kcr_rate_limiter_ops");
    if (err != KCR_OK) {
        if (known.free) /* user_data is ours from now on, also on failure */
            known.free(user_data);
        return err;
    }
    return limiter_new(ops ? &known : NULL, NULL, user_data, "kcr_rate_limiter_new", out);
}

int64_t kcr__rate_limiter_when_ns(kcr_rate_limiter *rl, const char *key, int64_t now_ns)
{
    if (rl->when_ns)
        return rl->when_ns(key, now_ns, rl->user_data);
    return kcr__wq_ms_to_ns(rl->ops.when(key, now_ns / KCR_NS_PER_MS, rl->user_data));
}

int64_t kcr_rate_limiter_when_at(kcr_rate_limiter *rl, const char *key, int64_t now_ms)
{
    if (!rl->when_ns)
        return rl->ops.when(key, now_ms, rl->user_data);
    return kcr__wq_ns_to_ms_up(rl->when_ns(key, kcr__wq_ms_to_ns(now_ms), rl->user_data));
}

int64_t kcr_rate_limiter_when(kcr_rate_limiter *rl, const char *key)
{
    if (!rl->when_ns) /* a custom limiter's ms go out unchanged */
        return rl->ops.when(key, kcr__now_ns() / KCR_NS_PER_MS, rl->user_data);
    return kcr__wq_ns_to_ms_up(rl->when_ns(key, kcr__now_ns(), rl->user_data));
}

void kcr_rate_limiter_forget(kcr_rate_limiter *rl, const char *key)
{
    if (rl->ops.forget)
        rl->ops.forget(key, rl->user_data);
}

int kcr_rate_limiter_num_requeues(kcr_rate_limiter *rl, const char *key)
{
    return rl->ops.num_requeues ? rl->ops.num_requeues(key, rl->user_data) : 0;
}

void kcr_rate_limiter_free(kcr_rate_limiter *rl)
{
    if (!rl)
        return;
    if (rl->ops.free)
        rl->ops.free(rl->user_data);
    free(rl);
}

/* ---- per-key failure counts (exponential, fast/slow) ------------------- */

struct count_node {
    int count;
    uint32_t len;
    char key[];
};

struct per_key {
    pthread_mutex_t mu;
    struct kcr__keytab tab;
    /* exponential */
    int64_t base, max;
    /* fast/slow */
    int64_t fast, slow;
    int max_fast;
};

static struct per_key *per_key_new(void)
{
    struct per_key *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    if (kcr__keytab_init(&p->tab, 16, offsetof(struct count_node, key),
                         offsetof(struct count_node, len)) != 0) {
        free(p);
        return NULL;
    }
    pthread_mutex_init(&p->mu, NULL);
    return p;
}

static void per_key_free(void *state)
{
    struct per_key *p = state;
    for (size_t i = 0; i <= p->tab.mask; i++)
        free(p->tab.slots[i].node);
    kcr__keytab_destroy(&p->tab);
    pthread_mutex_destroy(&p->mu);
    free(p);
}

/* Returns the count before this failure and adds one (lock held by caller).
 * -1 if a new key could not be stored. */
static int per_key_bump(struct per_key *p, const char *key)
{
    size_t len = strlen(key);
    uint64_t hash = kcr__keytab_hash(&p->tab, key, len);
    struct count_node *n = kcr__keytab_find(&p->tab, key, len, hash);
    if (!n) {
        n = malloc(offsetof(struct count_node, key) + len + 1);
        if (!n)
            return -1;
        n->count = 0;
        n->len = (uint32_t)len;
        memcpy(n->key, key, len + 1);
        if (kcr__keytab_insert(&p->tab, hash, n) != 0) {
            free(n);
            return -1;
        }
    }
    return n->count < INT32_MAX ? n->count++ : n->count;
}

static void per_key_forget(const char *key, void *state)
{
    struct per_key *p = state;
    size_t len = strlen(key);
    pthread_mutex_lock(&p->mu);
    uint64_t hash = kcr__keytab_hash(&p->tab, key, len);
    struct count_node *n = kcr__keytab_find(&p->tab, key, len, hash);
    if (n) {
        kcr__keytab_remove(&p->tab, hash, n);
        free(n);
    }
    pthread_mutex_unlock(&p->mu);
}

static int per_key_count(const char *key, void *state)
{
    struct per_key *p = state;
    size_t len = strlen(key);
    pthread_mutex_lock(&p->mu);
    struct count_node *n = kcr__keytab_find(&p->tab, key, len, kcr__keytab_hash(&p->tab, key, len));
    int c = n ? n->count : 0;
    pthread_mutex_unlock(&p->mu);
    return c;
}

/* ---- exponential ------------------------------------------------------- */

static int64_t exp_when(const char *key, int64_t now_ns, void *state)
{
    struct per_key *p = state;
    pthread_mutex_lock(&p->mu);
    int failures = per_key_bump(p, key);
    pthread_mutex_unlock(&p->mu);
    if (failures < 0) /* could not record it: behave as on the first failure */
        failures = 0;
    /* base * 2^failures > max  <=>  base > max >> failures (no overflow). */
    if (failures >= 63 || p->base > (p->max >> failures))
        return p->max;
    return p->base << failures;
}

kcr_err (kcr_rate_limiter_exponential_new)(size_t opts_size,
                                           const kcr_rate_limiter_exponential_options *opts,
                                           kcr_rate_limiter **out)
{
    KCR__ABI_OPTS(kcr_rate_limiter_exponential_options, opts, opts_size);
    static const char fn[] = "kcr_rate_limiter_exponential_new";
    if (out)
        *out = NULL;
    if (opts->base_delay_ms < 0 || opts->max_delay_ms < 0)
        return kcr__fail(KCR_ERR_INVALID, "%s: negative delay", fn);
    if (!out)
        return kcr__fail(KCR_ERR_INVALID, "%s: out is NULL", fn);
    struct per_key *p = per_key_new();
    if (!p)
        return kcr__fail(KCR_ERR_NOMEM, "%s: out of memory", fn);
    p->base = opts->base_delay_ms ? kcr__wq_ms_to_ns(opts->base_delay_ms) : 5 * KCR_NS_PER_MS;
    p->max = opts->max_delay_ms ? kcr__wq_ms_to_ns(opts->max_delay_ms) : 1000 * KCR_NS_PER_S;
    static const kcr_rate_limiter_ops ops = {
        .forget = per_key_forget, .num_requeues = per_key_count, .free = per_key_free};
    return limiter_new(&ops, exp_when, p, fn, out);
}

/* ---- fast/slow --------------------------------------------------------- */

static int64_t fast_slow_when(const char *key, int64_t now_ns, void *state)
{
    struct per_key *p = state;
    pthread_mutex_lock(&p->mu);
    int before = per_key_bump(p, key);
    pthread_mutex_unlock(&p->mu);
    return before + 1 <= p->max_fast ? p->fast : p->slow;
}

kcr_err kcr_rate_limiter_fast_slow_new(int64_t fast_delay_ms, int64_t slow_delay_ms,
                                       int max_fast_attempts, kcr_rate_limiter **out)
{
    static const char fn[] = "kcr_rate_limiter_fast_slow_new";
    if (out)
        *out = NULL;
    if (fast_delay_ms < 0 || slow_delay_ms < 0 || max_fast_attempts < 0)
        return kcr__fail(KCR_ERR_INVALID, "%s: negative argument", fn);
    if (!out)
        return kcr__fail(KCR_ERR_INVALID, "%s: out is NULL", fn);
    struct per_key *p = per_key_new();
    if (!p)
        return kcr__fail(KCR_ERR_NOMEM, "%s: out of memory", fn);
    p->fast = kcr__wq_ms_to_ns(fast_delay_ms);
    p->slow = kcr__wq_ms_to_ns(slow_delay_ms);
    p->max_fast = max_fast_attempts;
    static const kcr_rate_limiter_ops ops = {
        .forget = per_key_forget, .num_requeues = per_key_count, .free = per_key_free};
    return limiter_new(&ops, fast_slow_when, p, fn, out);
}

/* ---- token bucket ------------------------------------------------------ */

struct bucket {
    pthread_mutex_t mu;
    double qps;
    double burst;
    double tokens; /* may go negative: reservations queue up */
    int64_t last;
    bool started;
};

static int64_t bucket_when(const char *key, int64_t now_ns, void *state)
{
    struct bucket *b = state;
    pthread_mutex_lock(&b->mu);
    if (!b->started || now_ns < b->last) {
        b->started = true;
        b->last = now_ns;
    }
    double tokens = b->tokens + (double)(now_ns - b->last) * b->qps / 1e9;
    if (tokens > b->burst)
        tokens = b->burst;
    tokens -= 1;
    b->tokens = tokens;
    b->last = now_ns;
    pthread_mutex_unlock(&b->mu);
    if (tokens >= 0)
        return 0;
    return (int64_t)(-tokens * 1e9 / b->qps + 0.5); /* nearest ns */
}

static void bucket_free(void *state)
{
    struct bucket *b = state;
    pthread_mutex_destroy(&b->mu);
    free(b);
}

kcr_err (kcr_rate_limiter_bucket_new)(size_t opts_size, const kcr_rate_limiter_bucket_options *opts,
                                      kcr_rate_limiter **out)
{
    KCR__ABI_OPTS(kcr_rate_limiter_bucket_options, opts, opts_size);
    static const char fn[] = "kcr_rate_limiter_bucket_new";
    if (out)
        *out = NULL;
    if (opts->qps < 0 || opts->burst < 0 || isnan(opts->qps))
        return kcr__fail(KCR_ERR_INVALID, "%s: negative rate or burst", fn);
    if (!out)
        return kcr__fail(KCR_ERR_INVALID, "%s: out is NULL", fn);
    struct bucket *b = calloc(1, sizeof *b);
    if (!b)
        return kcr__fail(KCR_ERR_NOMEM, "%s: out of memory", fn);
    pthread_mutex_init(&b->mu, NULL);
    b->qps = opts->qps > 0 ? opts->qps : 10;
    b->burst = opts->burst > 0 ? opts->burst : 100;
    b->tokens = b->burst;
    static const kcr_rate_limiter_ops ops = {.free = bucket_free};
    return limiter_new(&ops, bucket_when, b, fn, out);
}

/* ---- max-of ------------------------------------------------------------ */

struct max_of {
    size_t n;
    kcr_rate_limiter *children[];
};

static int64_t max_of_when(const char *key, int64_t now_ns, void *state)
{
    struct max_of *m = state;
    int64_t best = 0;
    for (size_t i = 0; i < m->n; i++) {
        int64_t d = kcr__rate_limiter_when_ns(m->children[i], key, now_ns);
        if (d > best)
            best = d;
    }
    return best;
}

static void max_of_forget(const char *key, void *state)
{
    struct max_of *m = state;
    for (size_t i = 0; i < m->n; i++)
        kcr_rate_limiter_forget(m->children[i], key);
}

static int max_of_requeues(const char *key, void *state)
{
    struct max_of *m = state;
    int best = 0;
    for (size_t i = 0; i < m->n; i++) {
        int c = kcr_rate_limiter_num_requeues(m->children[i], key);
        if (c > best)
            best = c;
    }
    return best;
}

static void max_of_free(void *state)
{
    struct max_of *m = state;
    for (size_t i = 0; i < m->n; i++)
        kcr_rate_limiter_free(m->children[i]);
    free(m);
}

kcr_err kcr_rate_limiter_max_of_new(kcr_rate_limiter *const *limiters, size_t n,
                                    kcr_rate_limiter **out)
{
    static const char fn[] = "kcr_rate_limiter_max_of_new";
    if (out)
        *out = NULL;
    bool ok = (n == 0 || limiters) && out;
    for (size_t i = 0; ok && i < n; i++)
        ok = limiters[i] != NULL;
    struct max_of *m = ok ? malloc(sizeof *m + n * sizeof m->children[0]) : NULL;
    if (!m) {
        for (size_t i = 0; limiters && i < n; i++)
            kcr_rate_limiter_free(limiters[i]);
        return kcr__fail(ok ? KCR_ERR_NOMEM : KCR_ERR_INVALID, "%s: %s", fn,
                         ok    ? "out of memory"
                         : out ? "NULL limiter"
                               : "out is NULL");
    }
    m->n = n;
    if (n)
        memcpy(m->children, limiters, n * sizeof m->children[0]);
    static const kcr_rate_limiter_ops ops = {
        .forget = max_of_forget, .num_requeues = max_of_requeues, .free = max_of_free};
    return limiter_new(&ops, max_of_when, m, fn, out);
}

/* ---- with-max-wait ----------------------------------------------------- */

struct max_wait {
    kcr_rate_limiter *inner;
    int64_t max;
};

static int64_t max_wait_when(const char *key, int64_t now_ns, void *state)
{
    struct max_wait *w = state;
    int64_t d = kcr__rate_limiter_when_ns(w->inner, key, now_ns);
    return d > w->max ? w->max : d;
}

static void max_wait_forget(const char *key, void *state)
{
    kcr_rate_limiter_forget(((struct max_wait *)state)->inner, key);
}

static int max_wait_requeues(const char *key, void *state)
{
    return kcr_rate_limiter_num_requeues(((struct max_wait *)state)->inner, key);
}

static void max_wait_free(void *state)
{
    struct max_wait *w = state;
    kcr_rate_limiter_free(w->inner);
    free(w);
}

kcr_err kcr_rate_limiter_with_max_wait_new(kcr_rate_limiter *inner, int64_t max_wait_ms,
                                           kcr_rate_limiter **out)
{
    static const char fn[] = "kcr_rate_limiter_with_max_wait_new";
    if (out)
        *out = NULL;
    bool ok = inner && max_wait_ms >= 0 && out;
    struct max_wait *w = ok ? malloc(sizeof *w) : NULL;
    if (!w) {
        kcr_rate_limiter_free(inner);
        return kcr__fail(ok ? KCR_ERR_NOMEM : KCR_ERR_INVALID, "%s: %s", fn,
                         ok     ? "out of memory"
                         : !out ? "out is NULL"
                                : "NULL inner or negative wait");
    }
    w->inner = inner;
    w->max = kcr__wq_ms_to_ns(max_wait_ms);
    static const kcr_rate_limiter_ops ops = {
        .forget = max_wait_forget, .num_requeues = max_wait_requeues, .free = max_wait_free};
    return limiter_new(&ops, max_wait_when, w, fn, out);
}

kcr_err kcr_rate_limiter_default_new(kcr_rate_limiter **out)
{
    static const char fn[] = "kcr_rate_limiter_default_new";
    if (!out)
        return kcr__fail(KCR_ERR_INVALID, "%s: out is NULL", fn);
    *out = NULL;
    kcr_rate_limiter *parts[2] = {NULL, NULL};
    kcr_err err = kcr_rate_limiter_exponential_new(NULL, &parts[0]);
    if (err == KCR_OK)
        err = kcr_rate_limiter_bucket_new(NULL, &parts[1]);
    if (err != KCR_OK) { /* the part's constructor set the detail */
        kcr_rate_limiter_free(parts[0]);
        return err;
    }
    return kcr_rate_limiter_max_of_new(parts, 2, out);
}
