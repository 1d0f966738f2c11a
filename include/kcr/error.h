/* Error codes shared by every kcr module.
 * Values are part of the ABI: they are never renumbered, only appended. */
#ifndef KCR_ERROR_H
#define KCR_ERROR_H

#include <stdbool.h>

#include "kcr/export.h"

typedef enum kcr_err {
    KCR_OK = 0,
    KCR_ERR_NOMEM = 1,        /* allocation failed */
    KCR_ERR_INVALID = 2,      /* invalid argument */
    KCR_ERR_SHUTDOWN = 3,     /* the queue/store/informer is shutting down or closed */
    KCR_ERR_TIMEOUT = 4,      /* a wait ran out of time */
    KCR_ERR_NOT_FOUND = 5,    /* no such key/object (HTTP 404) */
    KCR_ERR_EXISTS = 6,       /* already exists (HTTP 409 AlreadyExists) */
    KCR_ERR_STATE = 7,        /* call out of order, e.g. done() of a key never handed out */
    KCR_ERR_PARSE = 8,        /* malformed JSON/YAML or an object without required fields */
    KCR_ERR_CONFIG = 9,       /* bad kubeconfig / in-cluster config */
    KCR_ERR_IO = 10,          /* file or pipe I/O failed */
    KCR_ERR_TRANSPORT = 11,   /* connection, TLS or protocol failure (no HTTP status; see
                                 KCR_ERR_TLS for verification failures) */
    KCR_ERR_API = 12,         /* the server answered with an error Status not mapped below */
    KCR_ERR_CONFLICT = 13,    /* HTTP 409 Conflict (stale resourceVersion) */
    KCR_ERR_GONE = 14,        /* HTTP 410 / Expired resourceVersion or continue token */
    KCR_ERR_UNAUTHORIZED = 15,/* HTTP 401 */
    KCR_ERR_FORBIDDEN = 16,   /* HTTP 403 */
    KCR_ERR_TOO_MANY = 17,    /* HTTP 429 after retries were exhausted */
    KCR_ERR_TOO_LARGE = 18,   /* input over a configured size limit */
    KCR_ERR_UNSUPPORTED = 19, /* the server or build does not support the request */
    KCR_ERR_EXEC = 20,        /* an exec credential plugin failed */
    KCR_ERR_CANCELED = 21,    /* the operation was stopped by its owner */
    KCR_ERR_INVALID_OBJECT = 22, /* HTTP 422 Invalid: the server rejected the object */
    KCR_ERR_LEADERSHIP_LOST = 23, /* this process stopped being the leader (leader election) */
    KCR_ERR_TLS = 24,         /* the server failed TLS verification (unknown CA, wrong host
                                 name, expired certificate, no TLS at all): permanent until
                                 the configuration or the server changes */
    KCR_ERR_BAD_REQUEST = 25  /* HTTP 400 BadRequest: the server could not decode or accept
                                 the request (a field of the wrong type, a quantity or
                                 selector that does not parse, a malformed patch) */
} kcr_err;

/* Short static description of an error code; never NULL, never free it.
 * Thread-safe. */
KCR_API const char *kcr_strerror(kcr_err err);

/* Whether `err` means the request itself was refused, so sending it again
 * unchanged cannot succeed: a reconcile returns KCR_TERMINAL for these and
 * KCR_RETRY for the rest, without reading HTTP codes.
 *   permanent: KCR_ERR_BAD_REQUEST (400), KCR_ERR_INVALID_OBJECT (422: the
 *     object fails validation, or a JSON Patch test failed), KCR_ERR_INVALID
 *     (a bad argument), KCR_ERR_PARSE (a malformed document the caller
 *     built), KCR_ERR_TOO_LARGE, KCR_ERR_UNSUPPORTED;
 *   transient, everything else, notably: KCR_ERR_CONFLICT and KCR_ERR_EXISTS
 *     (409: read again and redo), KCR_ERR_FORBIDDEN (403: RBAC not granted
 *     yet, a quota exceeded, a namespace terminating or an admission
 *     webhook's denial can all clear without the object changing),
 *     KCR_ERR_NOT_FOUND (404: on a create, the namespace may appear; on a
 *     read or delete, callers usually treat it as done), KCR_ERR_UNAUTHORIZED
 *     (credentials rotate), KCR_ERR_GONE, KCR_ERR_TOO_MANY (429), KCR_ERR_API
 *     (5xx and other codes), KCR_ERR_TRANSPORT, KCR_ERR_TLS, KCR_ERR_TIMEOUT,
 *     KCR_ERR_NOMEM, KCR_ERR_IO, KCR_ERR_EXEC;
 *   neither (false): KCR_OK, KCR_ERR_SHUTDOWN, KCR_ERR_CANCELED,
 *     KCR_ERR_LEADERSHIP_LOST (the caller is stopping).
 * The client maps the server's Status the same way on every back end (HTTP
 * and the fake): 400 BAD_REQUEST, 401 UNAUTHORIZED, 403 FORBIDDEN,
 * 404 NOT_FOUND, 409 AlreadyExists EXISTS, other 409 CONFLICT, 410 GONE,
 * 422 INVALID_OBJECT, 429 TOO_MANY, anything else API. Thread-safe. */
KCR_API bool kcr_err_is_permanent(kcr_err err);

/* Detailed message of the last failure on the calling thread (for example the
 * line and column of a JSON error, or the server's Status message), or "" if
 * none. Valid until the next kcr call on this thread; do not free.
 * Thread-safe: each thread has its own. */
KCR_API const char *kcr_last_error(void);

/* Sets the calling thread's detail message (what kcr_last_error() returns)
 * to the printf-style message and returns `err`, so that code built on kcr
 * (a reconcile, a map function, a mutate callback) reports its own failures
 * the way kcr does:
 *     return KCR_RETRY(kcr_set_error(KCR_ERR_INVALID, "spec.replicas is %d", n));
 * The manager's worker logs a failed reconcile's kcr_last_error(), so the
 * log line shows this message. The arguments may include kcr_last_error()
 * itself, to add context to a kcr failure:
 *     kcr_set_error(err, "applying %s: %s", name, kcr_last_error());
 * A NULL fmt clears the message. Messages are truncated at 1023 bytes.
 * Thread-safe: each thread has its own message. */
KCR_API kcr_err kcr_set_error(kcr_err err, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

#endif
