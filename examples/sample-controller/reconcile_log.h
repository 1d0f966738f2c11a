/* --reconcile-log FILE: one line per reconcile callback,
 *     <identity> <namespace>/<name> <start_realtime_ns> <end_realtime_ns>\n
 * appended with a single write(2) on an O_APPEND descriptor, so several
 * replicas may share one file and a line is never torn. The e2e checker
 * (tests/shard-check) reads these lines to prove that no key's reconcile
 * intervals overlap across replicas. A line is written when the callback
 * returns: a replica killed mid-reconcile leaves that interval out. */
#ifndef SAMPLE_RECONCILE_LOG_H
#define SAMPLE_RECONCILE_LOG_H

#include "kcr/kcr.h"

/* The log and the reconcile it wraps. Filled by sample_reconcile_log_open
 * and _wrap; lives (at a fixed address: it is the wrapped controller's
 * user_data) until the manager is freed, then sample_reconcile_log_close.
 * Shared read-only by every worker; each line is one write(2). */
typedef struct sample_reconcile_log {
    int fd;                   /* -1: closed */
    char identity[254];       /* the replica's name in each line */
    kcr_reconcile_fn inner;   /* the wrapped controller's reconcile */
    void *inner_user_data;
} sample_reconcile_log;

/* Opens path for appending (created 0644 when missing) and sets the
 * identity: `identity` if not NULL or empty, else $POD_NAME, else the host
 * name (the rule sharding uses for a replica's identity; a sharded
 * reconcile logs kcr_ctx_shard's identity instead). Returns 0, or 1
 * after printing to stderr why the file cannot be opened or the identity
 * is unusable (empty, or with a space or newline). Not thread-safe. */
int sample_reconcile_log_open(sample_reconcile_log *l, const char *path, const char *identity);

/* Makes ctl's reconcile go through the log: the callback and its
 * user_data move into *l, and ctl calls the logging wrapper with l as its
 * user_data. Call after the controller's declaration is filled, before it
 * is added. Not thread-safe. */
void sample_reconcile_log_wrap(sample_reconcile_log *l, kcr_controller_options *ctl);

/* Closes the file (after the manager is freed: no reconcile runs). A
 * closed or never-opened log (fd -1) is fine. */
void sample_reconcile_log_close(sample_reconcile_log *l);

#endif
