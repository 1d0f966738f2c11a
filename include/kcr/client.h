/* kcr_client: the Kubernetes API by group/version/resource.
 *
 * One interface, two back ends: an HTTP client made from a kcr_config
 * (libcurl, TLS, HTTP/2 when offered) and the in-memory fake of kcr/fake.h.
 * Informers and reconcilers run on either unchanged.
 *
 * Thread-safety: a kcr_client is thread-safe; any number of threads may issue
 * requests on it at once. kcr_client_free() must not race with requests.
 *
 * Errors: every request returns a kcr_err. When the server answered with an
 * error, the code is mapped (400 BAD_REQUEST, 404 NOT_FOUND, 409 AlreadyExists
 * EXISTS / other 409 CONFLICT, 410 GONE, 401 UNAUTHORIZED, 403 FORBIDDEN,
 * 422 INVALID_OBJECT, 429 TOO_MANY, anything else API; kcr_err_is_permanent
 * says which of them a retry cannot fix) and, when the caller passes a kcr_status,
 * the server's whole Status is copied into it. kcr_last_error() always reads
 * "<code> <reason>: <message>" for API errors.
 *
 * Callbacks (list items, watch events) run on the CALLER's thread, inside the
 * kcr_client_list()/kcr_client_watch() call, with no kcr lock held. Objects
 * they receive are borrowed for the duration of the callback: take a
 * reference (kcr_object_ref) to keep one. */
#ifndef KCR_CLIENT_H
#define KCR_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kcr/config.h"
#include "kcr/error.h"
#include "kcr/export.h"
#include "kcr/time.h"
#include "kcr/object.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kcr_client kcr_client;

/* ---- Status ------------------------------------------------------------------------- */

/* One entry of Status.details.causes. Strings are never NULL once filled. */
typedef struct kcr_status_cause {
    char *type;    /* e.g. "FieldValueInvalid", "ResourceVersionTooLarge" */
    char *message;
    char *field;   /* e.g. "metadata.name" */
} kcr_status_cause;

/* A decoded meta.k8s.io/v1 Status (an API error). Zero-initialize it before
 * first use ({0}); each request that takes one clears it on entry, and fills
 * it when the server answered with an error. Strings are malloc'd, never NULL
 * once filled ("" when absent); release them with kcr_status_clear().
 * A non-Status error body (HTML from a proxy ...) becomes code = HTTP code,
 * reason "" and message "HTTP <code>: <the body's first bytes>". */
typedef struct kcr_status {
    int code;       /* HTTP code from the Status (or the response); 0 when empty */
    char *status;   /* "Failure" / "Success" */
    char *reason;   /* e.g. "NotFound", "AlreadyExists", "Conflict", "Expired" */
    char *message;  /* human-readable */
    struct {
        char *name;
        char *group;
        char *kind;
        char *uid;
        int retry_after_seconds;
        kcr_status_cause *causes;
        size_t n_causes;
    } details;
    char *body;     /* the raw response body (at most 64 KiB) for anything else */
} kcr_status;

/* Frees the strings of a Status and zeroes it; safe on a zeroed struct. */
KCR_API void kcr_status_clear(kcr_status *st);

/* Deep copy of src into dst (dst is cleared first). Thread-safe. */
KCR_API kcr_err kcr_status_copy(kcr_status *dst, const kcr_status *src);

/* Decodes a Status JSON document (copied from). KCR_ERR_PARSE if `json` is
 * not a Status. */
KCR_API kcr_err kcr_status_parse(const char *json, size_t len, kcr_status *out);

/* The kcr_err for a Status: its code, with reason telling 409 apart. */
KCR_API kcr_err kcr_status_to_err(const kcr_status *st);

/* ---- Cancellation ------------------------------------------------------------------- */

/* A cancellation token. Trigger it from any thread (or a signal handler: the
 * trigger is async-signal-safe) and every request using it stops within
 * milliseconds, even mid-transfer, returning KCR_ERR_CANCELED. It stays
 * triggered until reset. Thread-safe. */
typedef struct kcr_cancel kcr_cancel;

/* *out is a new untriggered token the caller frees with kcr_cancel_free.
 * Thread-safe. */
KCR_API kcr_err kcr_cancel_new(kcr_cancel **out);
/* Must not race with requests still using it. NULL is ignored. */
KCR_API void kcr_cancel_free(kcr_cancel *c);
KCR_API void kcr_cancel_trigger(kcr_cancel *c);
KCR_API bool kcr_cancel_triggered(const kcr_cancel *c);
/* Back to untriggered, for reuse after every user has returned. */
KCR_API void kcr_cancel_reset(kcr_cancel *c);

/* ---- Client ------------------------------------------------------------------------- */

/* Options for an HTTP client. Zero means default for every field. A timeout
 * above 2^40 ms (about 35 years) is refused with KCR_ERR_INVALID. */
typedef struct kcr_client_options {
    double qps;                 /* client-side rate limit, requests/s; 0: 50; <0: unlimited */
    int burst;                  /* token bucket size; 0: 100 */
    int64_t connect_timeout_ms; /* TCP+TLS connect; 0: 10000 */
    int64_t request_timeout_ms; /* each attempt of a non-streaming request (every verb, raw,
                                   discovery): no complete answer within it is
                                   KCR_ERR_TIMEOUT; 0: 60000 */
    int max_retries;            /* on 429 / connection errors of idempotent verbs; 0: 5; <0: none */
    size_t max_item_bytes;      /* largest list item / watch event / response; 0: 64 MiB */
    const char *user_agent;     /* copied; NULL: "<program>/<kcr version> kcr", so the
                                   apiserver's default field manager (the User-Agent up to
                                   its first '/') is the program's name */
    const char *field_manager;  /* copied; the fieldManager of writes whose options name
                                   none (apply patches need one). NULL: the program's name
                                   (program_invocation_short_name, else /proc/self/comm,
                                   else "kcr") */
    bool allow_insecure_http;   /* permit an http:// server (no TLS: tokens and data travel
                                   in clear text). false: kcr_client_new refuses one with
                                   KCR_ERR_CONFIG */
    bool disable_compression;   /* never ask for gzipped answers, as client-go's
                                   rest.Config.DisableCompression; the kubeconfig cluster's
                                   disable-compression: true does the same. Trades the
                                   apiserver's compressing and kcr's inflating of large lists
                                   for more bytes to send, encrypt and read (docs/client.md
                                   has figures). false: reads and lists accept gzip, as
                                   client-go's default */
} kcr_client_options;

/* A client for the server of `cfg` (the config is copied; free it whenever).
 * opts may be NULL. *out is freed with kcr_client_free(). Thread-safe. */
KCR_API kcr_err kcr_client_new(size_t opts_size, const kcr_config *cfg,
                               const kcr_client_options *opts, kcr_client **out);
#define kcr_client_new(...) (kcr_client_new)(sizeof(kcr_client_options), __VA_ARGS__)

/* Sees every HTTP request a client completes: method ("GET", "LIST" is
 * reported as "GET"), host ("127.0.0.1:6443"), HTTP code (0 when no response
 * came: connection or TLS failure, cancel) and duration. Strings are borrowed
 * for the call. Runs on the requesting thread with no kcr lock held; must be
 * thread-safe and quick. */
typedef void (*kcr_request_observer_fn)(const char *method, const char *host, int code,
                                        double seconds, void *user_data);

/* Installs (fn NULL: removes) the request observer. Call it before the client
 * is shared with other threads (not synchronised with running requests).
 * The fake's clients accept it and report with host "fake". */
KCR_API void kcr_client_set_request_observer(kcr_client *c, kcr_request_observer_fn fn,
                                             void *user_data);

/* Frees the client; in-flight requests must have returned. NULL is ignored. */
KCR_API void kcr_client_free(kcr_client *c);

/* The default namespace (from the kubeconfig context / service account, or
 * "default"). Borrowed for the client's lifetime. */
KCR_API const char *kcr_client_namespace(const kcr_client *c);

/* A resource by group/version/resource; strings are borrowed by the call.
 * Requests with a non-empty namespace go to .../namespaces/NS/RESOURCE, those
 * with NULL or "" to the cluster-wide path (all namespaces for list/watch). */
typedef struct kcr_resource {
    const char *group;    /* "" or NULL: the core group */
    const char *version;  /* e.g. "v1" */
    const char *resource; /* lower-case plural, e.g. "configmaps" */
} kcr_resource;

typedef enum kcr_patch_type {
    KCR_PATCH_JSON = 0,      /* application/json-patch+json (RFC 6902) */
    KCR_PATCH_MERGE = 1,     /* application/merge-patch+json (RFC 7386) */
    KCR_PATCH_STRATEGIC = 2, /* application/strategic-merge-patch+json (built-in types) */
    KCR_PATCH_APPLY = 3      /* server-side apply as the write's field manager */
} kcr_patch_type;

/* What a sharded LIST answered in metadata.shardInfo. Zero-initialize;
 * kcr_shard_info_clear() frees. Not thread-safe on one struct. */
typedef struct kcr_shard_info {
    bool present;   /* the List carried shardInfo: the server filtered it */
    char *selector; /* malloc'd: the selector as the server echoed it (its normal
                       form, kcr_shard_selector_format's); NULL when absent */
} kcr_shard_info;

/* Frees the selector and zeroes `info`; safe on a zeroed struct and NULL. */
KCR_API void kcr_shard_info_clear(kcr_shard_info *info);

/* One request of a verb: what it names, its body, its options and where the
 * server's Status goes. Zero means the default for every field; each verb
 * reads the fields of its own group (the comments below name them) and
 * ignores the others, but refuses (KCR_ERR_INVALID) a body where it takes
 * none, a missing body, both object and body, and a name on list/watch.
 * Every pointer is borrowed for the call. Usually a compound literal:
 *
 *     kcr_client_get(c, &(kcr_request){.resource = &CM, .ns = ns, .name = n}, &obj);
 *
 * Thread-safety: the struct is read only during the call. */
typedef struct kcr_request {
    /* ---- what: every verb */
    const kcr_resource *resource; /* required */
    const char *ns;               /* namespace; NULL or "": cluster-scoped (list/watch: all
                                     namespaces); writes of a body take the body's */
    const char *name;             /* get/patch/delete: required unless the body names it;
                                     create/update: the body's metadata.name is used */
    const char *subresource;      /* NULL: the object; e.g. "status", "scale" (get, update,
                                     patch) */
    /* ---- body: create, update, patch; one of object or body */
    const kcr_object *object;  /* serialized once; its namespace and name name it */
    const char *body;          /* JSON text (for KCR_PATCH_APPLY: the applied
                                  configuration; JSON is valid YAML) */
    size_t body_len;           /* 0: strlen(body) */
    kcr_patch_type patch_type; /* patch: KCR_PATCH_JSON (0), MERGE, STRATEGIC or APPLY */
    /* ---- write options: create, update, patch (dry_run also delete) */
    const char *field_manager; /* fieldManager; NULL: kcr_client_options.field_manager */
    bool force;                /* KCR_PATCH_APPLY: take over conflicting fields */
    bool dry_run;              /* dryRun=All */
    /* ---- delete options, sent as DeleteOptions */
    const char *propagation_policy; /* "Foreground", "Background", "Orphan"; NULL: server's */
    const char *precondition_uid;   /* delete only that incarnation */
    const char *precondition_resource_version;
    /* Used when has_grace_period: sent as gracePeriodSeconds rounded up to
     * whole seconds (0: delete at once); < 0 or above 2^40 (about 35
     * years): KCR_ERR_INVALID. */
    int64_t grace_period_ms;
    bool has_grace_period;
    /* ---- read options: get, list, watch */
    const char *resource_version; /* NULL/"": most recent (list: quorum); "0": any (cache) */
    bool metadata_only;           /* PartialObjectMetadata(List) */
    /* ---- list and watch options. A duration above 2^40 ms (about 35 years)
     * is refused with KCR_ERR_INVALID. */
    const char *label_selector;         /* e.g. "app=web,tier in (a,b)" */
    const char *field_selector;         /* e.g. "metadata.name=x" */
    const char *resource_version_match; /* "NotOlderThan" / "Exact"; NULL: unset */
    int64_t limit;                      /* list: page size; 0: no paging */
    const char *continue_token;         /* list: from the previous page's meta */
    int64_t timeout_ms;                 /* server-side timeout, sent as timeoutSeconds rounded
                                           up to whole seconds; 0: unset */
    bool drop_managed_fields;           /* list, watch: items are built without
                                           metadata.managedFields (skipped while
                                           decoding; the fake, which decodes
                                           nothing, keeps them) */
    bool allow_bookmarks;               /* watch: allowWatchBookmarks=true */
    bool send_initial_events;           /* watch: sendInitialEvents=true (set
                                           resource_version_match "NotOlderThan") */
    int64_t idle_timeout_ms;            /* watch: no byte for this long is KCR_ERR_TIMEOUT;
                                           0: none */
    /* ---- every verb */
    kcr_cancel *cancel; /* NULL: not cancellable (the request timeout still bounds it) */
    kcr_status *status; /* NULL, or where the server's Status goes on an API error
                           (cleared on entry; see kcr_status) */
    /* ---- list and watch: server-side sharding (KEP-5866, alpha feature
     * gate ShardedListAndWatch; docs/informer.md) */
    const char *shard_selector; /* shardSelector, e.g. from kcr_shard_selector_format();
                                   NULL or "": none. Sent as it is: an apiserver with the
                                   gate off ignores it (no shard_info comes back), one
                                   with it on answers malformed text with a 500 Status
                                   carrying the parser's words */
    kcr_shard_info *shard_info; /* list: NULL, or where the List's metadata.shardInfo
                                   goes (cleared on entry; present only when the server
                                   applied the selector) */
} kcr_request;

/* GET one object (req->name). On success *out is a new reference the caller
 * owns. Thread-safe. */
KCR_API kcr_err kcr_client_get(size_t req_size, kcr_client *c, const kcr_request *req,
                               kcr_object **out);
#define kcr_client_get(...) (kcr_client_get)(sizeof(kcr_request), __VA_ARGS__)

/* POST a new object (req->object or req->body; name optional: generateName).
 * *out (may be NULL) receives the created object as the server returned it.
 * Thread-safe. */
KCR_API kcr_err kcr_client_create(size_t req_size, kcr_client *c, const kcr_request *req,
                                  kcr_object **out);
#define kcr_client_create(...) (kcr_client_create)(sizeof(kcr_request), __VA_ARGS__)

/* PUT a whole object (req->object or req->body; its metadata.name names it;
 * metadata.resourceVersion makes it conditional: KCR_ERR_CONFLICT when
 * stale). With req->subresource "status" only the status is written.
 * *out may be NULL. Thread-safe. */
KCR_API kcr_err kcr_client_update(size_t req_size, kcr_client *c, const kcr_request *req,
                                  kcr_object **out);
#define kcr_client_update(...) (kcr_client_update)(sizeof(kcr_request), __VA_ARGS__)

/* PATCH an object with req->patch_type: the patch is req->body, or
 * req->object serialized (the applied configuration for KCR_PATCH_APPLY,
 * applied as req->field_manager, NULL: the client's; req->force takes over
 * conflicting fields). The object is req->name, else the body object's name.
 * *out may be NULL. Thread-safe. */
KCR_API kcr_err kcr_client_patch(size_t req_size, kcr_client *c, const kcr_request *req,
                                 kcr_object **out);
#define kcr_client_patch(...) (kcr_client_patch)(sizeof(kcr_request), __VA_ARGS__)

/* DELETE req->name. *out (may be NULL) receives the object when the server
 * returned it (deletion pending on finalizers, or the final state), else
 * NULL. Thread-safe. */
KCR_API kcr_err kcr_client_delete(size_t req_size, kcr_client *c, const kcr_request *req,
                                  kcr_object **out);
#define kcr_client_delete(...) (kcr_client_delete)(sizeof(kcr_request), __VA_ARGS__)

/* ---- Streaming list and watch -------------------------------------------------------- */
/* The list's own metadata. Zero-initialize; strings are malloc'd ("" when
 * absent), released by kcr_list_meta_clear(). */
typedef struct kcr_list_meta {
    char *resource_version;
    char *continue_token;         /* "" on the last page */
    int64_t remaining_item_count; /* valid when has_remaining_item_count */
    bool has_remaining_item_count;
} kcr_list_meta;

/* Frees the strings and zeroes `meta`; safe on a zeroed struct. Not thread-safe
 * on one struct. */
KCR_API void kcr_list_meta_clear(kcr_list_meta *meta);

/* Receives each list item as it is decoded. `obj` is borrowed for the call.
 * The server sends items without kind/apiVersion; an item with neither gets
 * the List's (kind without its "List" suffix: "ConfigMap", "v1"; for
 * metadata-only lists "PartialObjectMetadata", "meta.k8s.io/v1"), so cached
 * objects can build owner references as watched ones can.
 * Return KCR_OK to continue; anything else stops the list, which then
 * returns that error. */
typedef kcr_err (*kcr_list_item_fn)(kcr_object *obj, void *user_data);

/* LIST, streamed: `fn` runs for each item while the body arrives (memory is
 * bounded by the largest item, never the whole list). One page when
 * req->limit is set; *meta (may be NULL) gets resourceVersion, continue and
 * remainingItemCount. On error, items already delivered are an incomplete
 * list: discard them. A 410 for an expired continue token is KCR_ERR_GONE.
 * Thread-safe. */
KCR_API kcr_err kcr_client_list(size_t req_size, kcr_client *c, const kcr_request *req,
                                kcr_list_item_fn fn, void *user_data, kcr_list_meta *meta);
#define kcr_client_list(...) (kcr_client_list)(sizeof(kcr_request), __VA_ARGS__)

typedef enum kcr_watch_event_type {
    KCR_WATCH_ADDED = 0,
    KCR_WATCH_MODIFIED = 1,
    KCR_WATCH_DELETED = 2,
    KCR_WATCH_BOOKMARK = 3,
    KCR_WATCH_ERROR = 4
} kcr_watch_event_type;

/* One watch event; everything in it is borrowed for the callback's duration. */
typedef struct kcr_watch_event {
    kcr_watch_event_type type;
    kcr_object *object;           /* ADDED/MODIFIED/DELETED; NULL for BOOKMARK/ERROR */
    const char *resource_version; /* the object's or the bookmark's RV; "" for ERROR */
    bool initial_events_end;      /* BOOKMARK annotated k8s.io/initial-events-end=true */
    const kcr_status *status;     /* ERROR: the decoded Status; NULL otherwise */
} kcr_watch_event;

/* Receives each event. Return KCR_OK to continue; anything else stops the
 * watch, which then returns that error. */
typedef kcr_err (*kcr_watch_event_fn)(const kcr_watch_event *ev, void *user_data);

/* WATCH: blocks, calling `fn` per event, until the stream ends.
 * Returns KCR_OK when the server ended the stream cleanly (timeoutSeconds ran
 * out; the caller re-watches from the last RV it saw). An ERROR event is
 * delivered to `fn` and ends the watch: the call returns the Status's mapped
 * error (e.g. KCR_ERR_GONE for 410 Expired; inspect st->details.causes for
 * ResourceVersionTooLarge) with *req->status filled. Also returns
 * KCR_ERR_CANCELED (req->cancel), KCR_ERR_TIMEOUT (idle limit),
 * KCR_ERR_TRANSPORT (connection lost or truncated stream), KCR_ERR_PARSE,
 * KCR_ERR_TOO_LARGE (event over max_item_bytes), or an HTTP error Status. */
KCR_API kcr_err kcr_client_watch(size_t req_size, kcr_client *c, const kcr_request *req,
                                 kcr_watch_event_fn fn, void *user_data);
#define kcr_client_watch(...) (kcr_client_watch)(sizeof(kcr_request), __VA_ARGS__)

/* ---- Discovery ------------------------------------------------------------------------ */

/* A served resource as discovery describes it. */
typedef struct kcr_api_resource {
    char group[254];
    char version[64];
    char resource[254]; /* plural */
    char singular[254];
    char kind[254];
    bool namespaced;
} kcr_api_resource;

/* The group/version/resource view of `r`, pointing into it. */
KCR_API kcr_resource kcr_api_resource_gvr(const kcr_api_resource *r);

/* Options of kcr_client_resolve() and kcr_client_resolve_kind(). Zero:
 * defaults; pointers borrowed for the call. */
typedef struct kcr_resolve_options {
    kcr_cancel *cancel; /* NULL: not cancellable (each discovery request's timeout still
                           bounds it); KCR_ERR_CANCELED. A resolve waiting for another
                           thread's discovery fetch of the same client is not
                           interrupted by it. */
    kcr_status *status; /* NULL, or where a discovery request's error Status goes */
} kcr_resolve_options;

/* Resolves what a user typed, like kubectl: a plural ("configmaps"), a
 * singular, a short name ("cm", "deploy"), a kind ("ConfigMap"), each
 * optionally qualified as NAME.GROUP or NAME.VERSION.GROUP. Prefers the core
 * group, then groups in server priority order, and each group's preferred
 * version. Discovery documents are cached (aggregated discovery when the
 * server offers it, else the legacy per-group documents) and refreshed once
 * on a miss. KCR_ERR_NOT_FOUND when nothing matches. opts may be NULL.
 * Thread-safe. */
KCR_API kcr_err kcr_client_resolve(size_t opts_size, kcr_client *c, const char *name,
                                   const kcr_resolve_options *opts, kcr_api_resource *out);
#define kcr_client_resolve(...) (kcr_client_resolve)(sizeof(kcr_resolve_options), __VA_ARGS__)

/* A kind in a group: what kcr_client_resolve_kind() looks up. Borrowed. */
typedef struct kcr_gvk {
    const char *group;   /* "" or NULL: the core group */
    const char *version; /* NULL or "": the group's preferred version */
    const char *kind;    /* required, e.g. "Deployment" */
} kcr_gvk;

/* Resolves a group/version/kind, as kcr_client_resolve() does a name.
 * opts may be NULL. Thread-safe. */
KCR_API kcr_err kcr_client_resolve_kind(size_t opts_size, kcr_client *c, const kcr_gvk *gvk,
                                        const kcr_resolve_options *opts, kcr_api_resource *out);
#define kcr_client_resolve_kind(...) (kcr_client_resolve_kind)(sizeof(kcr_resolve_options), __VA_ARGS__)

/* Drops the discovery cache (e.g. after creating a CRD). Thread-safe. */
KCR_API void kcr_client_invalidate_discovery(kcr_client *c);

/* ---- Raw requests --------------------------------------------------------------------- */

/* Options of kcr_client_request(). Zero: defaults; pointers borrowed for
 * the call. */
typedef struct kcr_raw_options {
    const char *method;       /* NULL: "GET" */
    const char *accept;       /* NULL: "application/json" */
    const char *content_type; /* NULL: "application/json" */
    const char *body;         /* NULL: no body */
    size_t body_len;          /* bytes of body (0 with a body: strlen) */
    kcr_cancel *cancel;       /* NULL: not cancellable */
    kcr_status *status;       /* NULL, or where the error Status goes */
} kcr_raw_options;

/* A raw request to `path` (e.g. "/api/v1/namespaces?limit=1", starting with
 * '/'; query values must already be URL-encoded). On a 2xx answer *out
 * (malloc'd, NUL-terminated, caller frees) and *out_len (may be NULL) hold
 * the response; otherwise the mapped error and opts->status. opts may be
 * NULL. KCR_ERR_UNSUPPORTED on the fake. Thread-safe. */
KCR_API kcr_err kcr_client_request(size_t opts_size, kcr_client *c, const char *path,
                                   const kcr_raw_options *opts, char **out, size_t *out_len);
#define kcr_client_request(...) (kcr_client_request)(sizeof(kcr_raw_options), __VA_ARGS__)

#ifdef __cplusplus
}
#endif

#endif
