/* Admission and conversion webhooks: an HTTPS server (TLS 1.2+, HTTP/1.1
 * keep-alive) answering the apiserver's AdmissionReview and ConversionReview
 * calls with C handlers, its serving certificate reloaded from disk when it
 * changes (controller-runtime's pkg/webhook and certwatcher).
 *
 * This is the optional library kcr_webhook (libkcr_webhook, CMake target
 * kcr::webhook, pkg-config kcr-webhook), built on libevent's HTTP server with
 * its OpenSSL bufferevents, so libkcr itself does not depend on it and the
 * process keeps one TLS stack (OpenSSL, as kcr's libcurl). docs/webhooks.md
 * walks through a complete example.
 *
 * Threads: event-loop threads (one per CPU unless `loops` says otherwise)
 * accept connections, run TLS and HTTP and answer; handlers run on a pool of
 * worker threads (a path registered run_on_loop: on the loop that read the
 * request), several at once, with no kcr lock held, so they must be
 * thread-safe. A handler that overruns its
 * deadline is answered by the loop according to its failure policy; its
 * late result is dropped.
 *
 * Thread-safety: kcr_webhook_server_add_* before kcr_webhook_server_start;
 * the other functions are thread-safe except _free. */
#ifndef KCR_WEBHOOK_H
#define KCR_WEBHOOK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kcr/error.h"
#include "kcr/export.h"
#include "kcr/metrics.h"
#include "kcr/object.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kcr_webhook_server kcr_webhook_server;

/* What the apiserver is told when a handler overruns its deadline: the
 * meaning of failurePolicy, applied by the webhook itself so the answer
 * arrives before the apiserver's timeoutSeconds (and says why). */
typedef enum kcr_webhook_failure_policy {
    KCR_WEBHOOK_FAIL = 0,  /* deny (admission) / report a failed conversion */
    KCR_WEBHOOK_IGNORE = 1 /* allow unchanged (admission only; a conversion fails) */
} kcr_webhook_failure_policy;

#define KCR_WEBHOOK_DEFAULT_MAX_BODY_BYTES ((size_t)3 << 20) /* the apiserver's limit */
#define KCR_WEBHOOK_DEFAULT_HANDLER_TIMEOUT_MS 9000          /* apiserver default 10 s */

/* Handlers run on worker threads, so a slow one holds a worker, never an
 * event loop, and its deadline answer leaves on time. A path registered with
 * run_on_loop instead runs its handler on the event-loop thread that read
 * the request, which saves the hand-off to a worker and back (two context
 * switches; about a third of the server's CPU per request for a handler that
 * only looks at the request: docs/webhooks.md). For handlers that never
 * block: no API calls, no sleeping, no lock a slow thread may hold; while one
 * runs, the other connections of its loop wait and its deadline cannot fire.
 * A call that takes longer than this budget moves the path to the workers
 * for good, with a warning in the log. */
#define KCR_WEBHOOK_LOOP_BUDGET_MS 5

/* Zero means the default for every field; strings are copied. */
typedef struct kcr_webhook_server_options {
    const char *bind_address;  /* "host:port", ":port" for every interface,
                                  port 0 picks one; NULL: ":9443" */
    const char *cert_dir;      /* required: holds the serving certificate
                                  chain and key (PEM) */
    const char *cert_name;     /* NULL: "tls.crt" */
    const char *key_name;      /* NULL: "tls.key" */
    int64_t cert_poll_ms;      /* how often the files are checked for a change;
                                  0: 1000 */
    size_t max_body_bytes;     /* larger request bodies are answered 413;
                                  0: KCR_WEBHOOK_DEFAULT_MAX_BODY_BYTES */
    int max_connections;       /* open connections, dealt evenly among the loops;
                                  a loop at its share accepts no more, and when
                                  all are, new connections wait in the listen
                                  backlog; 0: 1024 (lowered to fit RLIMIT_NOFILE) */
    int workers;               /* handler threads; 0: 8 */
    int64_t read_timeout_ms;   /* a connection must deliver its TLS handshake and
                                  a whole request (headers and body) within this
                                  from accept or from its previous answer, else it
                                  is closed (slow clients); 0: 10000 */
    int64_t idle_timeout_ms;   /* a kept-alive connection with no request for this
                                  long is closed; 0: 90000 */
    kcr_metrics *metrics;      /* borrowed until _free: controller-runtime's
                                  controller_runtime_webhook_* families; NULL: none */
    /* Sees every request body that reaches a handler's path, before it is
     * decoded (to log or record reviews); path and body are borrowed for the
     * call. Runs on the handler's thread, concurrently with itself. NULL: none. */
    void (*observe)(const char *path, const char *body, size_t len, void *user_data);
    void *observe_user_data;
    int loops;                 /* event-loop threads, each doing the TLS and
                                  HTTP of the connections it accepted from the
                                  one listening socket (the next connection goes
                                  to a loop with the fewest open);
                                  max_connections is shared among them; 0: one
                                  per CPU the process may run on */
} kcr_webhook_server_options;

/* A server into *out (not serving until kcr_webhook_server_start), freed with
 * kcr_webhook_server_free. opts is copied. KCR_ERR_INVALID without cert_dir
 * or with a malformed address. */
KCR_API kcr_err kcr_webhook_server_new(const kcr_webhook_server_options *opts,
                                       kcr_webhook_server **out);

/* Loads the certificate, binds and starts the loop and the workers. Errors:
 * KCR_ERR_TLS naming the file when the pair cannot be loaded (bad PEM, key
 * not matching, expired), KCR_ERR_IO naming the address when it cannot bind,
 * KCR_ERR_STATE when already started. */
KCR_API kcr_err kcr_webhook_server_start(kcr_webhook_server *s);

/* The bound port (useful with port 0), or 0 before start. */
KCR_API int kcr_webhook_server_port(const kcr_webhook_server *s);

/* Stops accepting, answers what is in flight 503 (the apiserver then applies
 * the webhook configuration's failurePolicy), and any request that arrives
 * while those answers are written 503 too, closes every connection, waits
 * for handlers still running to return and joins the threads. Idempotent. */
KCR_API void kcr_webhook_server_stop(kcr_webhook_server *s);

/* Stops if needed and frees. NULL is ignored. */
KCR_API void kcr_webhook_server_free(kcr_webhook_server *s);

/* A kcr_health_check_fn (kcr/health.h) for /readyz, user_data the server:
 * KCR_OK once the server is serving with a certificate that is currently
 * valid; otherwise an error with *message (malloc'd) saying why. */
KCR_API kcr_err kcr_webhook_server_ready_check(char **message, void *user_data);

/* Counters since start. */
typedef struct kcr_webhook_stats {
    uint64_t requests;          /* requests answered, any status */
    uint64_t rejected_requests; /* answered 4xx before a handler ran */
    uint64_t handler_timeouts;  /* answered by failure policy after the deadline */
    uint64_t connections;       /* connections accepted */
    uint64_t open_connections;  /* open now */
    uint64_t closed_slow;       /* closed by read_timeout_ms */
    uint64_t cert_reloads;      /* certificate pairs loaded after the first */
    uint64_t cert_reload_failures; /* changed pairs refused (the old one kept) */
} kcr_webhook_stats;

/* Fills *out. Thread-safe. */
KCR_API void kcr_webhook_server_stats(const kcr_webhook_server *s, kcr_webhook_stats *out);

/* ---- Admission -----------------------------------------------------------
 * The decoded AdmissionReview request. Everything is borrowed for the
 * duration of the handler call. */

typedef enum kcr_admission_operation {
    KCR_ADMISSION_CREATE = 1,
    KCR_ADMISSION_UPDATE = 2,
    KCR_ADMISSION_DELETE = 3,
    KCR_ADMISSION_CONNECT = 4
} kcr_admission_operation;

typedef struct kcr_admission_request {
    const char *uid;                    /* request.uid */
    kcr_admission_operation operation;  /* request.operation */
    const char *group, *version, *kind; /* request.kind ("" group: core) */
    const char *resource;               /* request.resource.resource */
    const char *sub_resource;           /* request.subResource, "" when none */
    const char *name;                   /* request.name ("" on CREATE with generateName) */
    const char *ns;                     /* request.namespace, "" when cluster-scoped */
    bool dry_run;                       /* request.dryRun: do no side effects */
    const kcr_object *object;           /* request.object; NULL on DELETE */
    const kcr_object *old_object;       /* request.oldObject; NULL on CREATE/CONNECT */
    const char *username;               /* request.userInfo.username */
    kcr_value user_info;                /* request.userInfo (uid, groups, extra) */
    const kcr_object *review;           /* the whole AdmissionReview */
} kcr_admission_request;

/* The answer being built; starts as allowed with no patch. Used only by the
 * handler's thread during the call. */
typedef struct kcr_admission_response kcr_admission_response;

/* Denies the request with an HTTP-like `code` (0: 403) and a message the
 * apiserver shows to the user (copied). */
KCR_API kcr_err kcr_admission_deny(kcr_admission_response *resp, int32_t code,
                                   const char *message);

/* Adds a warning the apiserver returns to the client (copied). */
KCR_API kcr_err kcr_admission_warn(kcr_admission_response *resp, const char *warning);

/* For mutating handlers: an editor on a copy of request.object (the same one
 * on every call), owned by the response. After the handler returns, kcr
 * computes the JSON Patch from request.object to the edited state and sends
 * it (patchType JSONPatch). KCR_ERR_STATE when the request has no object or
 * the handler is not mutating. */
KCR_API kcr_err kcr_admission_edit(kcr_admission_response *resp, kcr_object_edit **out);

/* An admission handler, run on a worker thread (run_on_loop: on an event
 * loop). Return KCR_OK after deciding (allowed unless kcr_admission_deny was
 * called); any other return denies with
 * code 500 and kcr_last_error() as the message (controller-runtime's Errored). */
typedef kcr_err (*kcr_admission_fn)(const kcr_admission_request *req,
                                    kcr_admission_response *resp, void *user_data);

typedef enum kcr_admission_type {
    KCR_ADMISSION_VALIDATING = 1,
    KCR_ADMISSION_MUTATING = 2
} kcr_admission_type;

/* One handler at one path. Strings copied. */
typedef struct kcr_admission_options {
    const char *path;              /* e.g. "/validate-foo"; required, unique */
    kcr_admission_type type;       /* required */
    kcr_admission_fn fn;           /* required */
    void *user_data;
    int64_t timeout_ms;            /* 0: KCR_WEBHOOK_DEFAULT_HANDLER_TIMEOUT_MS */
    kcr_webhook_failure_policy failure_policy; /* the answer when timeout_ms passes */
    bool run_on_loop;              /* the handler never blocks: see KCR_WEBHOOK_LOOP_BUDGET_MS */
} kcr_admission_options;

/* Registers an admission handler. Before start only (KCR_ERR_STATE after);
 * KCR_ERR_EXISTS for a path already taken. */
KCR_API kcr_err kcr_webhook_server_add_admission(kcr_webhook_server *s,
                                                 const kcr_admission_options *opts);

/* A validator's function (controller-runtime's CustomValidator): KCR_OK
 * allows; any other return denies with code 403 and kcr_last_error() as the
 * message. Warnings with kcr_admission_warn. */
typedef kcr_err (*kcr_validate_fn)(const kcr_admission_request *req,
                                   kcr_admission_response *resp, void *user_data);

/* A defaulter (controller-runtime's CustomDefaulter): sets defaults on `obj`,
 * an editor on request.object. A return other than KCR_OK denies with 403. */
typedef kcr_err (*kcr_default_fn)(const kcr_admission_request *req, kcr_object_edit *obj,
                                  void *user_data);

/* A defaulter and a validator for one kind, registered in one call at
 * kubebuilder's paths: /mutate-<group with '.' as '-'>-<version>-<kind lower>
 * and /validate-<same> (e.g. /validate-samplecontroller-k8s-io-v1alpha1-foo),
 * or at the paths given. Any function may be NULL (that path or operation is
 * then allowed as is; with no defaulter no /mutate path is registered). */
typedef struct kcr_webhook_for_options {
    const char *group, *version, *kind; /* required (group "" for core) */
    kcr_default_fn default_fn;
    kcr_validate_fn validate_create;
    kcr_validate_fn validate_update;
    kcr_validate_fn validate_delete;
    void *user_data;
    const char *mutate_path;   /* NULL: kubebuilder's */
    const char *validate_path; /* NULL: kubebuilder's */
    int64_t timeout_ms;        /* 0: KCR_WEBHOOK_DEFAULT_HANDLER_TIMEOUT_MS */
    kcr_webhook_failure_policy failure_policy;
    bool run_on_loop;          /* the functions never block: see KCR_WEBHOOK_LOOP_BUDGET_MS */
} kcr_webhook_for_options;

KCR_API kcr_err kcr_webhook_server_add_for(kcr_webhook_server *s,
                                           const kcr_webhook_for_options *opts);

/* ---- Conversion ----------------------------------------------------------
 * A converter edits `out`, a copy of `in` whose apiVersion is already the
 * target's, into the target version's shape. Run on a worker thread (or an
 * event loop: run_on_loop). A return other than KCR_OK fails the whole
 * review with kcr_last_error(). */
typedef kcr_err (*kcr_convert_fn)(const kcr_object *in, kcr_object_edit *out, void *user_data);

/* One direction between two apiVersions ("group/version"). */
typedef struct kcr_converter {
    const char *from_api_version;
    const char *to_api_version;
    kcr_convert_fn fn;
} kcr_converter;

/* A ConversionReview handler at `path` for one kind. Each object is
 * converted by the converter from its apiVersion to the desired one; when no
 * direct converter exists and `hub` is set, through the hub (spoke -> hub ->
 * spoke, controller-runtime's Hub/Convertible). Same version: copied as is.
 * Arrays copied. */
typedef struct kcr_conversion_options {
    const char *path;              /* required, e.g. "/convert" */
    const kcr_converter *converters;
    size_t n_converters;
    const char *hub;               /* the hub apiVersion, or NULL */
    void *user_data;
    int64_t timeout_ms;            /* 0: KCR_WEBHOOK_DEFAULT_HANDLER_TIMEOUT_MS */
    bool run_on_loop;              /* the converters never block: see KCR_WEBHOOK_LOOP_BUDGET_MS */
} kcr_conversion_options;

KCR_API kcr_err kcr_webhook_server_add_conversion(kcr_webhook_server *s,
                                                  const kcr_conversion_options *opts);

/* ---- Certificates for development and tests ------------------------------ */

/* Options of kcr_webhook_generate_certs; strings copied. */
typedef struct kcr_webhook_certs_options {
    const char *const *dns_names; /* subjectAltName DNS entries (e.g.
                                     "webhook.ns.svc"); may be NULL */
    size_t n_dns_names;
    const char *const *ip_addresses; /* subjectAltName IPs; NULL and no DNS
                                        names: "127.0.0.1" */
    size_t n_ip_addresses;
    int64_t valid_ms;             /* 0: one year */
} kcr_webhook_certs_options;

/* Writes a serving pair (tls.crt, tls.key with mode 0600) signed by the CA
 * in `dir` (ca.crt, ca.key), creating that self-signed CA first when `dir`
 * has none (and `dir` itself when missing). Running it again issues a new
 * serving pair under the same CA, so the caBundle stays valid: a rotation.
 * Each file is replaced atomically (written aside, then renamed) so a
 * running server never reads half a file. *ca_bundle (may be NULL) gets the CA certificate's PEM
 * base64-encoded, the value of a webhook configuration's caBundle
 * (malloc'd, caller frees). KCR_ERR_IO naming the file on a write error. */
KCR_API kcr_err kcr_webhook_generate_certs(const char *dir, const kcr_webhook_certs_options *opts,
                                           char **ca_bundle);

#ifdef __cplusplus
}
#endif

#endif
