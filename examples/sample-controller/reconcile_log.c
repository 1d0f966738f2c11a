/* The reconcile log of --reconcile-log (reconcile_log.h). */
#include "reconcile_log.h"

#include "sample.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* CLOCK_REALTIME in nanoseconds: the clock every replica on a machine (and,
 * with NTP, in a cluster) shares, so intervals of different processes compare. */
static int64_t realtime_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int sample_reconcile_log_open(sample_reconcile_log *l, const char *path, const char *identity)
{
    *l = (sample_reconcile_log){.fd = -1};
    if (!identity || !*identity)
        identity = getenv("POD_NAME");
    if (identity && *identity)
        snprintf(l->identity, sizeof l->identity, "%s", identity);
    else if (gethostname(l->identity, sizeof l->identity - 1) != 0)
        l->identity[0] = '\0';
    if (!l->identity[0] || strpbrk(l->identity, " \t\n")) {
        fprintf(stderr, "--reconcile-log: the replica's identity '%s' is empty or has a space\n",
                l->identity);
        return 1;
    }
    l->fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (l->fd < 0) {
        fprintf(stderr, "--reconcile-log: %s: %s\n", path, strerror(errno));
        return 1;
    }
    return 0;
}

/* The controller's reconcile between two clock readings, then one line. */
static kcr_result logged_reconcile(kcr_ctx *ctx, const kcr_reconcile_request *req, void *ud)
{
    const sample_reconcile_log *l = ud;
    int64_t start = realtime_ns();
    kcr_result res = l->inner(ctx, req, l->inner_user_data);
    int64_t end = realtime_ns();
    /* sharded: the identity of the replica's Lease, which is what matters */
    const kcr_shard_member_info *shard = kcr_ctx_shard(ctx);
    char line[1024];
    int n = snprintf(line, sizeof line, "%s %s/%s %lld %lld\n",
                     shard ? shard->identity : l->identity, req->ns, req->name,
                     (long long)start, (long long)end);
    /* A short or failed write loses this line only; the checker then sees
     * fewer intervals, never a false one. Names are bounded (253 + 63). */
    if (n > 0 && (size_t)n < sizeof line && write(l->fd, line, (size_t)n) < 0)
        kcr_log(KCR_LOG_ERROR, SAMPLE_NAME, "--reconcile-log: write: %s", strerror(errno));
    return res;
}

void sample_reconcile_log_wrap(sample_reconcile_log *l, kcr_controller_options *ctl)
{
    l->inner = ctl->reconcile;
    l->inner_user_data = ctl->user_data;
    ctl->reconcile = logged_reconcile;
    ctl->user_data = l;
}

void sample_reconcile_log_close(sample_reconcile_log *l)
{
    if (l->fd >= 0)
        close(l->fd);
    l->fd = -1;
}
