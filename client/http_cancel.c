/* kcr_cancel: a flag plus a pipe, so a token wakes the transport's poll()
 * as well as being checked between steps. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/client_impl.h"
#include "core/error.h"

kcr_err kcr_cancel_new(kcr_cancel **out)
{
    if (!out)
        return kcr__fail(KCR_ERR_INVALID, "kcr_cancel_new: NULL out");
    *out = NULL;
    kcr_cancel *c = calloc(1, sizeof *c);
    if (!c)
        return kcr__fail(KCR_ERR_NOMEM, "out of memory making a cancel token");
    if (pipe(c->fds) != 0) {
        free(c);
        return kcr__fail(KCR_ERR_IO, "cancel token: pipe: %s", strerror(errno));
    }
    for (int i = 0; i < 2; i++) {
        fcntl(c->fds[i], F_SETFL, fcntl(c->fds[i], F_GETFL) | O_NONBLOCK);
        fcntl(c->fds[i], F_SETFD, fcntl(c->fds[i], F_GETFD) | FD_CLOEXEC);
    }
    atomic_init(&c->triggered, false);
    *out = c;
    return KCR_OK;
}

void kcr_cancel_free(kcr_cancel *c)
{
    if (!c)
        return;
    close(c->fds[0]);
    close(c->fds[1]);
    free(c);
}

void kcr_cancel_trigger(kcr_cancel *c)
{
    if (!c || atomic_exchange(&c->triggered, true))
        return;
    ssize_t r = write(c->fds[1], "x", 1);
    (void)r; /* a full pipe is readable already */
}

bool kcr_cancel_triggered(const kcr_cancel *c)
{
    return c && atomic_load(&((kcr_cancel *)c)->triggered);
}

void kcr_cancel_reset(kcr_cancel *c)
{
    /* Untriggered: nothing was written to the pipe, and the read that would
     * find it empty is a system call per reuse (per reconcile, for a
     * controller's workers). */
    if (!c || !atomic_load(&c->triggered))
        return;
    char buf[64];
    while (read(c->fds[0], buf, sizeof buf) > 0)
        ;
    atomic_store(&c->triggered, false);
}
