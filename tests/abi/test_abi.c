/* Sized structs across library versions (docs/abi.md): a caller built
 * against an older header with shorter structs (tests/abi/old_caller.c)
 * still works, and the library reads and writes nothing past the caller's
 * size; a newer caller's longer struct is accepted only when the fields this
 * library does not know are zero; reserved tails must be zero. */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "abi/old_caller.h"
#include "kcr/kcr.h"
#include "kcr/testkit.h"

/* `size` bytes that end where an inaccessible page starts: touching a byte
 * past them faults. */
struct fenced {
    unsigned char *map;
    size_t page;
    void *at;
};

static struct fenced fence(size_t size)
{
    struct fenced f = {.page = (size_t)sysconf(_SC_PAGESIZE)};
    f.map = mmap(NULL, 2 * f.page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    cr_assert(f.map != MAP_FAILED);
    cr_assert(mprotect(f.map + f.page, f.page, PROT_NONE) == 0);
    f.at = f.map + f.page - size;
    return f;
}

static void unfence(struct fenced *f)
{
    munmap(f->map, 2 * f->page);
}

Test(abi, old_caller_layout_is_a_prefix_of_the_current_one)
{
    /* the copy is faithful: the same fields at the same offsets, fewer of them */
    cr_assert(old_options_size() < sizeof(kcr_workqueue_options));
    cr_assert(old_options_size() >= offsetof(kcr_workqueue_options, limiter) + sizeof(void *));
    cr_assert(old_options_size() <= offsetof(kcr_workqueue_options, capacity_hint));
    cr_assert_eq(old_stats_size(), offsetof(kcr_workqueue_stats, unfinished_work_ms));
}

Test(abi, old_options_are_read_and_nothing_past_them)
{
    struct fenced f = fence(old_options_size());
    kcr_workqueue *q = NULL;
    /* the old caller's limiter delays retries by a minute: it was read */
    cr_assert_eq(old_new_queue(f.at, 60000, &q), KCR_OK, "%s", kcr_last_error());
    cr_assert_eq(kcr_workqueue_add_rate_limited(q, "k"), KCR_OK);
    const char *key = NULL;
    cr_assert_eq(kcr_workqueue_get_timeout(q, 50, &key), KCR_ERR_TIMEOUT,
                 "the retry came at once: the old caller's limiter was not used");
    /* the fields the old caller does not have took their defaults */
    cr_assert_eq(kcr_workqueue_add(q, "now", NULL), KCR_OK);
    cr_assert_eq(kcr_workqueue_get_timeout(q, 5000, &key), KCR_OK);
    cr_assert_str_eq(key, "now");
    cr_assert_eq(kcr_workqueue_done(q, key), KCR_OK);
    kcr_workqueue_free(q);
    unfence(&f);
}

Test(abi, old_stats_are_written_only_up_to_their_size)
{
    kcr_workqueue *q = NULL;
    cr_assert_eq(kcr_workqueue_new(&(kcr_workqueue_options){.track_time = true}, &q), KCR_OK);
    cr_assert_eq(kcr_workqueue_add(q, "a", NULL), KCR_OK);
    cr_assert_eq(kcr_workqueue_add(q, "b", NULL), KCR_OK);
    cr_assert_eq(kcr_workqueue_add_rate_limited(q, "c"), KCR_OK);

    /* at a page's end: a write past the old size faults */
    struct fenced f = fence(old_stats_size());
    struct old_stats st;
    old_stats(q, f.at, &st);
    cr_assert_eq(st.depth, 2);
    cr_assert_eq(st.waiting, 1);
    cr_assert_eq(st.adds_total, 2);
    cr_assert_eq(st.retries_total, 1);
    unfence(&f);

    /* in a buffer: the guard bytes after the old size keep their pattern */
    unsigned char buf[sizeof(kcr_workqueue_stats) + 64];
    memset(buf, 0xa5, sizeof buf);
    old_stats(q, buf, &st);
    cr_assert_eq(st.depth, 2);
    for (size_t i = old_stats_size(); i < sizeof buf; i++)
        cr_assert_eq(buf[i], 0xa5, "byte %zu past the caller's %zu was written", i,
                     old_stats_size());
    kcr_workqueue_free(q);
}

Test(abi, newer_caller_with_unknown_field_set_is_refused)
{
    /* a struct from a newer header: this library's fields, then one more */
    struct {
        kcr_workqueue_options known;
        int64_t newer_field;
    } newer = {.known = {.name = "newer"}, .newer_field = 0};
    kcr_workqueue *q = NULL;
    cr_assert_eq((kcr_workqueue_new)(sizeof newer, &newer.known, &q), KCR_OK, "%s",
                 kcr_last_error());
    kcr_workqueue_free(q);
    q = NULL;
    newer.newer_field = 7;
    cr_assert_eq((kcr_workqueue_new)(sizeof newer, &newer.known, &q), KCR_ERR_INVALID);
    cr_assert_null(q);
    cr_assert(strstr(kcr_last_error(), "kcr_workqueue_options"), "%s", kcr_last_error());
}

static kcr_result reconcile(kcr_ctx *ctx, const kcr_reconcile_request *req, void *user_data)
{
    (void)ctx, (void)req, (void)user_data;
    return KCR_DONE;
}

Test(abi, reserved_tail_must_be_zero)
{
    kcr_testkit *tk = NULL;
    cr_assert_eq(kcr_testkit_new(NULL, &tk), KCR_OK, "%s", kcr_last_error());
    kcr_controller_options o = {
        .name = "reserved",
        .primary = {.resource = {"", "v1", "configmaps"}, .kind = "ConfigMap"},
        .reconcile = reconcile,
    };
    o.primary.reserved[3] = 1;
    kcr_controller *c = NULL;
    cr_assert_eq(kcr_testkit_add_controller(tk, &o, &c), KCR_ERR_INVALID);
    cr_assert(strstr(kcr_last_error(), "primary[0]") && strstr(kcr_last_error(), "reserved"), "%s",
              kcr_last_error());
    o.primary.reserved[3] = 0;
    cr_assert_eq(kcr_testkit_add_controller(tk, &o, &c), KCR_OK, "%s", kcr_last_error());
    kcr_testkit_free(tk);
}
