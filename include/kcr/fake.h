/* kcr_fake: an in-memory Kubernetes API behind the kcr_client interface, for
 * unit-testing reconcilers and informers without a cluster.
 *
 * What it does like the apiserver: one global resourceVersion counter bumped
 * by every write; metadata.uid, creationTimestamp and generation (bumped
 * only when something outside metadata and status changes, and when a
 * delete marks an object with finalizers); one conflict rule for update and
 * patch: the written object's metadata.resourceVersion must be the stored
 * one (else 409 Conflict "the object has been modified; please apply your
 * changes to the latest version and try again"), an empty one is an
 * unconditional update except for custom resources, those of a
 * CustomResourceDefinition created in the fake (422 "must be specified for
 * an update"); an update's metadata.uid and a delete's preconditions
 * must match (409 "Precondition failed"); a write may not change the name
 * or the namespace (400); no-op writes write nothing; namespaces;
 * label selectors (=, ==, !=, in, notin, exists, !key) and metadata.name /
 * metadata.namespace field selectors; the status subresource (a main update
 * keeps the stored status, a status update changes only the status);
 * finalizers (delete sets deletionTimestamp, removing the last finalizer
 * deletes); delete preconditions; merge, JSON and (approximated as merge)
 * strategic merge and apply patches; paging with limit/continue and
 * remainingItemCount; watches with resume from a resourceVersion out of a
 * bounded event history (older: an ERROR event with Status 410 Expired "too
 * old resource version"), label-selector transitions (ADDED/DELETED when an
 * object starts/stops matching), bookmarks, sendInitialEvents with the
 * initial-events-end bookmark; metadata-only requests; discovery over
 * every built-in resource of testenv's Kubernetes version (captured from
 * its kube-apiserver into fake/builtins.inc: kind, scope, short names,
 * verbs, subresources) plus those registered or defined by CRDs created in
 * the fake; any other resource (or version, or subresource) is answered
 * like the apiserver answers a path it has no handler for: 404 NotFound
 * "the server could not find the requested resource", for every verb
 * (kcr_last_error() adds which resource and how to register it); a verb
 * discovery does not list for a resource is 405 MethodNotAllowed. Of the
 * subresources only status is implemented: others the server has (scale,
 * log, ...) are a 400 saying so.
 *
 * What it does not: validation beyond object names, admission, defaulting,
 * garbage collection / propagationPolicy, namespace lifecycle, RBAC.
 *
 * Thread-safety: every function is thread-safe. Hooks run on the thread
 * making the request, with no fake lock held. */
#ifndef KCR_FAKE_H
#define KCR_FAKE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kcr/client.h"
#include "kcr/error.h"
#include "kcr/export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kcr_fake kcr_fake;

/* Zero means default for every field. A bookmark interval above 2^40 ms
 * (about 35 years) is refused with KCR_ERR_INVALID. */
typedef struct kcr_fake_options {
    size_t history_size;          /* watch events kept for resuming; 0: 1000 */
    int64_t bookmark_interval_ms; /* periodic BOOKMARK to watches that allow them; 0: none */
    size_t max_watch_queue;       /* events queued per slow watcher before it is
                                     closed (like the apiserver does); 0: 100000 */
    bool ignore_shard_selector;   /* false: list and watch apply kcr_request.shard_selector
                                     and a list answers with shardInfo, as an apiserver
                                     with the ShardedListAndWatch gate on (a malformed
                                     selector: 500, as there); true: the selector is
                                     ignored and no shardInfo comes back, as with the
                                     gate off */
} kcr_fake_options;

typedef enum kcr_fake_verb {
    KCR_FAKE_ANY = 0,
    KCR_FAKE_GET,
    KCR_FAKE_LIST,
    KCR_FAKE_WATCH,
    KCR_FAKE_CREATE,
    KCR_FAKE_UPDATE, /* includes status updates */
    KCR_FAKE_PATCH,
    KCR_FAKE_DELETE
} kcr_fake_verb;

/* Creates an empty fake. opts may be NULL. Free with kcr_fake_free(). */
KCR_API kcr_err kcr_fake_new(size_t opts_size, const kcr_fake_options *opts, kcr_fake **out);
#define kcr_fake_new(...) (kcr_fake_new)(sizeof(kcr_fake_options), __VA_ARGS__)

/* Drops the creator's reference; the fake lives on while clients made from
 * it exist. NULL is ignored. */
KCR_API void kcr_fake_free(kcr_fake *f);

/* A kcr_client served by the fake (free with kcr_client_free). Its default
 * namespace is `ns` (NULL: "default"). */
KCR_API kcr_err kcr_fake_client(kcr_fake *f, const char *ns, kcr_client **out);

/* Makes a resource known to discovery (copied), with every verb and the
 * status and scale subresources. short_names: comma-separated or NULL.
 * Creating a CustomResourceDefinition in the fake does this too (with the
 * subresources its versions declare). */
KCR_API kcr_err kcr_fake_register(kcr_fake *f, const kcr_api_resource *r,
                                  const char *short_names);

/* Stores an object as is (JSON, copied) under `res`, as a create would, but
 * keeping its status; for seeding tests. *out may be NULL. A resource the
 * fake does not serve is KCR_ERR_NOT_FOUND (register it first). */
KCR_API kcr_err kcr_fake_add(kcr_fake *f, const kcr_resource *res, const char *json,
                             kcr_object **out);

/* A failure to inject: which requests fail, how often, with what Status.
 * Zero means the default for every field; strings are copied. */
typedef struct kcr_fake_error {
    kcr_fake_verb verb;           /* KCR_FAKE_ANY (0): any verb */
    const kcr_resource *resource; /* NULL: any resource */
    const char *ns;               /* NULL: any namespace; "": the cluster scope */
    const char *name;             /* NULL: any name. Creates and collection requests
                                     (list, watch) have no name: a rule with a name
                                     never matches them */
    int times;                    /* the next `times` matching requests; 0: once;
                                     < 0: until kcr_fake_clear_errors() */
    int code;                     /* the Status's HTTP code, e.g. 409; required */
    const char *reason;           /* e.g. "Conflict"; NULL: "" */
    const char *message;          /* NULL: "" */
} kcr_fake_error;

/* Makes matching requests fail with the Status {code, reason, message}.
 * Rules are checked in the order added. Thread-safe. */
KCR_API kcr_err kcr_fake_inject_error(size_t e_size, kcr_fake *f, const kcr_fake_error *e);
#define kcr_fake_inject_error(...) (kcr_fake_inject_error)(sizeof(kcr_fake_error), __VA_ARGS__)
KCR_API void kcr_fake_clear_errors(kcr_fake *f);

/* Called before each request is served (after counting, before error
 * injection). `name` is NULL for list/watch/create; ns may be "". */
typedef void (*kcr_fake_hook_fn)(kcr_fake_verb verb, const kcr_resource *res, const char *ns,
                                 const char *name, void *user_data);
/* Installs (or with NULL removes) the request hook. */
KCR_API void kcr_fake_set_hook(kcr_fake *f, kcr_fake_hook_fn fn, void *user_data);

/* Requests of `verb` (KCR_FAKE_ANY: all) on `res` (NULL: all) so far. */
KCR_API uint64_t kcr_fake_count(kcr_fake *f, kcr_fake_verb verb, const kcr_resource *res);

/* The current (last written) resourceVersion. */
KCR_API uint64_t kcr_fake_resource_version(kcr_fake *f);

/* Active watches on `res` (NULL: all). Handy to wait until a watch is set up. */
KCR_API size_t kcr_fake_watch_count(kcr_fake *f, const kcr_resource *res);

/* Ends the active watches on `res` (NULL: all) cleanly, as a server timeout does. */
KCR_API void kcr_fake_end_watches(kcr_fake *f, const kcr_resource *res);

/* Sends an ERROR event with this Status to the active watches on `res`
 * (NULL: all), which then end. */
KCR_API void kcr_fake_watch_error(kcr_fake *f, const kcr_resource *res, int code,
                                  const char *reason, const char *message);

/* Sends a BOOKMARK at the current resourceVersion to watches on `res` (NULL:
 * all) that allow bookmarks. */
KCR_API void kcr_fake_bookmark(kcr_fake *f, const kcr_resource *res);

/* Forgets the event history: watches from any older resourceVersion then get
 * 410 Expired, as after an etcd compaction. */
KCR_API void kcr_fake_compact(kcr_fake *f);

#ifdef __cplusplus
}
#endif

#endif
