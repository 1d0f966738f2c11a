/* Controller helpers (controller-runtime's controllerutil, for C): owner
 * references, finalizers that never drop someone else's, status updates and
 * create-or-update with conflict retries, server-side apply, and deletes
 * with a propagation policy and preconditions. docs/controller.md § Helpers.
 *
 * Thread-safety: every function is thread-safe (a kcr_client may be shared);
 * an object edit passed in is used by the calling thread only. Mutate
 * callbacks run on the calling thread, inside the call, with no kcr lock
 * held.
 *
 * Errors: functions that talk to the server fill *status (may be NULL; zero
 * it before first use, as for kcr_client_*) with the server's Status when a
 * server answered with an error, and kcr_last_error() says what failed. */
#ifndef KCR_CONTROLLERUTIL_H
#define KCR_CONTROLLERUTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kcr/client.h"
#include "kcr/error.h"
#include "kcr/export.h"
#include "kcr/object.h"
#include "kcr/store.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Retries after a lost race when max_retries is 0: up to 6 attempts in all
 * (client-go's retry.DefaultRetry makes 5, sleeping ~10 ms between them;
 * here the re-read before each retry is the pause). */
#define KCR_CTRLUTIL_DEFAULT_RETRIES 5

/* What a write helper did (controller-runtime's OperationResult). */
typedef enum kcr_ctrlutil_op_result {
    KCR_CTRLUTIL_UNCHANGED = 0, /* nothing to write: no request was sent */
    KCR_CTRLUTIL_CREATED = 1,
    KCR_CTRLUTIL_UPDATED = 2
} kcr_ctrlutil_op_result;

/* "unchanged", "created" or "updated" (static). */
KCR_API const char *kcr_ctrlutil_op_result_string(kcr_ctrlutil_op_result r);

/* ---- Owner references --------------------------------------------------------------- */

/* Zero means default for every field; strings are borrowed for the call. */
typedef struct kcr_ctrlutil_owner_options {
    /* The owner's apiVersion and kind; NULL: taken from the owner object.
     * Objects from the server and from caches carry them (the client stamps
     * LIST items with the List's, see kcr_list_item_fn), except that objects
     * of a metadata-only cache are "PartialObjectMetadata" (meta.k8s.io/v1):
     * for those, and for objects built by hand, pass them here. Neither
     * given nor on the object (or only PartialObjectMetadata's there):
     * KCR_ERR_INVALID. */
    const char *api_version;
    const char *kind;
    /* Controller references only: leave blockOwnerDeletion out (default:
     * blockOwnerDeletion: true, so a foreground deletion of the owner waits
     * for this object). */
    bool no_block_owner_deletion;
} kcr_ctrlutil_owner_options;

/* Makes `owner` the controller of `obj`: an ownerReferences entry
 * {apiVersion, kind, name, uid, controller: true, blockOwnerDeletion: true}.
 * A reference to the same owner (same API group, kind and name) is updated
 * in place (a recreated owner's new uid replaces the old); other entries are
 * kept. Both objects are borrowed; on success *out is a new reference (the
 * same object as `obj` when nothing changed). opts may be NULL.
 * Errors: KCR_ERR_EXISTS when another object is already the controller
 * (kcr_last_error() names it: kind/name and uid; `obj` is left alone);
 * KCR_ERR_INVALID when the owner lacks name, uid, apiVersion or kind (or is a
 * PartialObjectMetadata without them in opts), or the owner is namespaced
 * and `obj` is cluster-scoped or in another namespace (the garbage
 * collector would ignore such a reference). */
KCR_API kcr_err kcr_ctrlutil_set_controller_reference(size_t opts_size, const kcr_object *owner,
                                                      const kcr_object *obj,
                                                      const kcr_ctrlutil_owner_options *opts,
                                                      kcr_object **out);
#define kcr_ctrlutil_set_controller_reference(...) (kcr_ctrlutil_set_controller_reference)(sizeof(kcr_ctrlutil_owner_options), __VA_ARGS__)

/* The same on an edit in progress (e.g. in a create_or_update mutate
 * callback): on an error the edit is unchanged. */
KCR_API kcr_err kcr_ctrlutil_set_controller_reference_edit(size_t opts_size,
                                                           const kcr_object *owner,
                                                           kcr_object_edit *edit,
                                                           const kcr_ctrlutil_owner_options *opts);
#define kcr_ctrlutil_set_controller_reference_edit(...) (kcr_ctrlutil_set_controller_reference_edit)(sizeof(kcr_ctrlutil_owner_options), __VA_ARGS__)

/* Adds `owner` as a plain (non-controller) owner: {apiVersion, kind, name,
 * uid}. A reference to the same owner is updated in place and keeps its
 * controller / blockOwnerDeletion flags (a controller stays the controller).
 * Ownership and errors as kcr_ctrlutil_set_controller_reference, without
 * KCR_ERR_EXISTS. */
KCR_API kcr_err kcr_ctrlutil_set_owner_reference(size_t opts_size, const kcr_object *owner,
                                                 const kcr_object *obj,
                                                 const kcr_ctrlutil_owner_options *opts,
                                                 kcr_object **out);
#define kcr_ctrlutil_set_owner_reference(...) (kcr_ctrlutil_set_owner_reference)(sizeof(kcr_ctrlutil_owner_options), __VA_ARGS__)

/* kcr_ctrlutil_set_owner_reference on an edit in progress (`edit`, changed in
 * place) instead of an immutable object. Not thread-safe on one edit. */
KCR_API kcr_err kcr_ctrlutil_set_owner_reference_edit(size_t opts_size, const kcr_object *owner,
                                                      kcr_object_edit *edit,
                                                      const kcr_ctrlutil_owner_options *opts);
#define kcr_ctrlutil_set_owner_reference_edit(...) (kcr_ctrlutil_set_owner_reference_edit)(sizeof(kcr_ctrlutil_owner_options), __VA_ARGS__)

/* ---- Finalizers ----------------------------------------------------------------------- */

/* Adds `finalizer` to the object `obj` names (res, its namespace and name)
 * through a JSON Patch guarded by a `test` of the whole current
 * metadata.finalizers, so concurrent adds neither duplicate nor lose one.
 * `obj` (borrowed) is the caller's view, e.g. from a cache: when it is stale
 * the guard fails, the object is read again and the patch rebuilt, at most
 * max_retries times (0: KCR_CTRLUTIL_DEFAULT_RETRIES, < 0: none). A 422 that
 * a fresh read shows was not a lost race (e.g. the object is being deleted,
 * which forbids new finalizers) is returned at once.
 * *changed (may be NULL): true when this call wrote. *out (may be NULL): a
 * new reference to the latest object (as patched, or as read when already
 * present). When `obj` already shows the finalizer no request is sent (if
 * that view was stale, the next event brings the fresh object).
 * KCR_ERR_INVALID for an empty finalizer. */
KCR_API kcr_err kcr_ctrlutil_add_finalizer(kcr_client *c, const kcr_resource *res,
                                           const kcr_object *obj, const char *finalizer,
                                           int max_retries, bool *changed, kcr_object **out,
                                           kcr_status *status);

/* Removes every occurrence of `finalizer` with `test` + `remove` operations
 * on exactly the indexes where it is, so a finalizer someone else added or
 * removed meanwhile can never be dropped by mistake: a shifted index fails
 * the test, and the call re-reads and retries as add_finalizer does. An
 * object that is gone (404) counts as done: KCR_OK, *changed false, *out
 * NULL. Other arguments as kcr_ctrlutil_add_finalizer. */
KCR_API kcr_err kcr_ctrlutil_remove_finalizer(kcr_client *c, const kcr_resource *res,
                                              const kcr_object *obj, const char *finalizer,
                                              int max_retries, bool *changed, kcr_object **out,
                                              kcr_status *status);

/* ---- Mutate-and-write with conflict retries --------------------------------------- */

/* Changes the desired state in `edit`. `current` is the object as read from
 * the server (borrowed for the call), or NULL when create_or_update is about
 * to create it (the edit then holds only apiVersion, metadata.name and
 * metadata.namespace). Return KCR_OK to go on, anything else to stop: the
 * helper returns that error without writing. It may run several times (once
 * per attempt), so it must compute from `current`, not accumulate. Runs on
 * the caller's thread with no kcr lock held. */
typedef kcr_err (*kcr_ctrlutil_mutate_fn)(kcr_object_edit *edit, const kcr_object *current,
                                          void *user_data);

/* What the write helpers compare before writing: the object as read and as
 * mutated are "equal" when the apiserver would store the same thing, and
 * then nothing is sent (UNCHANGED). Maps compare regardless of member
 * order, arrays in order, other values as JSON, and resource quantities by value
 * ("0.5" equals the "500m" the server stored; kcr/quantity.h), rounded up
 * to milli-units in a ResourceList as the apiserver does, where the
 * built-in types hold them: *.resources.requests/limits, ResourceQuota
 * spec.hard and status.hard/used, capacity/allocatable/allocatedResources
 * of Node, PV and PVC, a PodSpec's overhead, LimitRange spec.limits[]
 * max/min/default/defaultRequest/maxLimitRequestRatio, emptyDir.sizeLimit,
 * resourceFieldRef.divisor, CSIStorageCapacity capacity and
 * maximumVolumeSize. Without a schema any other string compares as text (a
 * CRD's own quantity written in a form the server changes writes again on
 * every call, but a real change is never skipped). Fields the callback does
 * not touch keep the server's values: it edits a copy of the current
 * object. A write the server did not apply (it answered with the
 * resourceVersion it had) is reported UNCHANGED, not UPDATED. */

/* Options of the *_with write helpers. Zero means default for every field
 * but `mutate`. Pointers are borrowed for the call. */
typedef struct kcr_ctrlutil_write_options {
    kcr_ctrlutil_mutate_fn mutate; /* required: sets the desired state */
    void *user_data;               /* passed to mutate */
    /* A cache of the resource (kcr_ctx_cache(ctx, res) in a reconcile): the
     * current object is taken from it when it has it, so an unchanged
     * object costs no request. NULL, or a cache without the object: read
     * from the server (a GET); after a conflict the server is read again. */
    kcr_store *cache;
    int max_retries;                /* 0: KCR_CTRLUTIL_DEFAULT_RETRIES, < 0: none */
    kcr_ctrlutil_op_result *result; /* may be NULL: what was done */
    kcr_object **out;               /* may be NULL: a new reference to the object written,
                                       or as read when nothing was written */
    kcr_status *status;             /* may be NULL: the server's Status on an API error */
} kcr_ctrlutil_write_options;

/* Reads res ns/name, lets `mutate` change its status, and writes the status
 * subresource with the read resourceVersion (PUT .../status); on 409
 * Conflict it reads again and re-applies `mutate`, at most max_retries times
 * (0: KCR_CTRLUTIL_DEFAULT_RETRIES, < 0: none). Only the status is written
 * (the server ignores other changes). When the mutated status equals the
 * one read (compared as described above) nothing is sent: *result
 * UNCHANGED, else UPDATED (UNCHANGED again when the server kept the
 * resourceVersion). Always reads the server (use
 * kcr_ctrlutil_update_status_with to read a cache). *result and *out (a new
 * reference to the object written or read) may be NULL. Errors: the
 * server's (KCR_ERR_NOT_FOUND, KCR_ERR_CONFLICT when retries ran out ...),
 * the callback's, KCR_ERR_INVALID when mutate changed metadata.name or
 * metadata.namespace. */
KCR_API kcr_err kcr_ctrlutil_update_status(kcr_client *c, const kcr_resource *res, const char *ns,
                                           const char *name, kcr_ctrlutil_mutate_fn mutate,
                                           void *user_data, int max_retries,
                                           kcr_ctrlutil_op_result *result, kcr_object **out,
                                           kcr_status *status);

/* controller-runtime's CreateOrUpdate, with retries: reads res ns/name
 * from the server (a GET on every call; kcr_ctrlutil_create_or_update_with
 * reads a cache); when missing, runs `mutate` on a new object (current
 * NULL) and creates it (CREATED); else runs `mutate` on a copy and updates
 * it with the read resourceVersion unless nothing changed as the server
 * compares (UNCHANGED; see above), UPDATED when the server applied the
 * update. A 409 (a conflict, or a create that lost a race) reads again and
 * retries, at most max_retries times. The status is not written by a
 * main-resource update (use kcr_ctrlutil_update_status). `mutate` sets the
 * desired fields (kind may be left out: the apiserver takes it from the
 * resource). Other arguments and errors as kcr_ctrlutil_update_status. */
KCR_API kcr_err kcr_ctrlutil_create_or_update(kcr_client *c, const kcr_resource *res,
                                              const char *ns, const char *name,
                                              kcr_ctrlutil_mutate_fn mutate, void *user_data,
                                              int max_retries, kcr_ctrlutil_op_result *result,
                                              kcr_object **out, kcr_status *status);

/* kcr_ctrlutil_update_status with options (mutate, cache, retries, outputs
 * in opts; required). With opts->cache the current object comes from the
 * cache when it has it. Errors as kcr_ctrlutil_update_status, and
 * KCR_ERR_INVALID for NULL opts or mutate. */
KCR_API kcr_err kcr_ctrlutil_update_status_with(kcr_client *c, const kcr_resource *res,
                                                const char *ns, const char *name,
                                                const kcr_ctrlutil_write_options *opts);

/* kcr_ctrlutil_create_or_update with options. With opts->cache the current
 * object comes from the cache when it has it (apiVersion and kind set), so
 * a reconcile whose object is already as desired sends no request at all;
 * a cache miss reads the server before creating. Errors as
 * kcr_ctrlutil_create_or_update, and KCR_ERR_INVALID for NULL opts or
 * mutate. In a reconcile:
 *     kcr_ctrlutil_write_options o = {.mutate = desired_quota, .user_data = team,
 *                                     .cache = kcr_ctx_cache(ctx, &QUOTAS), .result = &r};
 *     err = kcr_ctrlutil_create_or_update_with(kcr_ctx_client(ctx), &QUOTAS, ns, "quota", &o); */
KCR_API kcr_err kcr_ctrlutil_create_or_update_with(kcr_client *c, const kcr_resource *res,
                                                   const char *ns, const char *name,
                                                   const kcr_ctrlutil_write_options *opts);

/* ---- Server-side apply ------------------------------------------------------------- */

/* Applies `obj` (borrowed; the applied configuration: only the fields this
 * manager owns) with server-side apply as `field_manager` (required);
 * `force` takes over fields other managers own instead of failing with a
 * 409 conflict. The name comes from obj; ns NULL: obj's namespace (a
 * different non-NULL ns is KCR_ERR_INVALID). obj needs apiVersion and kind,
 * and no metadata.managedFields (KCR_ERR_INVALID otherwise). Creates the
 * object when missing. *out (may be NULL) gets the object as stored. */
KCR_API kcr_err kcr_ctrlutil_apply(kcr_client *c, const kcr_resource *res, const char *ns,
                                   const kcr_object *obj, const char *field_manager, bool force,
                                   kcr_object **out, kcr_status *status);

/* kcr_ctrlutil_apply of a configuration given as JSON text (copied; len 0:
 * strlen). KCR_ERR_PARSE for bad JSON or a missing metadata.name. */
KCR_API kcr_err kcr_ctrlutil_apply_json(kcr_client *c, const kcr_resource *res, const char *ns,
                                        const char *json, size_t len, const char *field_manager,
                                        bool force, kcr_object **out, kcr_status *status);

/* ---- Delete ---------------------------------------------------------------------------- */

/* What happens to an object's dependents (ownerReferences pointing at it). */
typedef enum kcr_ctrlutil_propagation {
    KCR_CTRLUTIL_PROPAGATION_DEFAULT = 0,    /* the resource's default (usually Background) */
    KCR_CTRLUTIL_PROPAGATION_BACKGROUND = 1, /* delete now, the GC deletes dependents later */
    KCR_CTRLUTIL_PROPAGATION_FOREGROUND = 2, /* dependents with blockOwnerDeletion go first:
                                                the object stays, with deletionTimestamp and
                                                the foregroundDeletion finalizer, until then */
    KCR_CTRLUTIL_PROPAGATION_ORPHAN = 3      /* dependents are kept, their references removed */
} kcr_ctrlutil_propagation;

/* Zero means default for every field; strings are borrowed for the call. */
typedef struct kcr_ctrlutil_delete_options {
    kcr_ctrlutil_propagation propagation;
    const char *precondition_uid;              /* delete only this incarnation; NULL: any */
    const char *precondition_resource_version; /* delete only this version; NULL: any */
    bool ignore_not_found;                     /* an object already gone is KCR_OK (*out NULL) */
} kcr_ctrlutil_delete_options;

/* DELETE res ns/name with DeleteOptions built from opts (may be NULL). A
 * failed precondition is the server's 409: KCR_ERR_CONFLICT. *out (may be
 * NULL) gets the object when the server returned it (deletion pending on
 * finalizers or foreground propagation), else NULL. */
KCR_API kcr_err kcr_ctrlutil_delete(size_t opts_size, kcr_client *c, const kcr_resource *res,
                                    const char *ns, const char *name,
                                    const kcr_ctrlutil_delete_options *opts, kcr_object **out,
                                    kcr_status *status);
#define kcr_ctrlutil_delete(...) (kcr_ctrlutil_delete)(sizeof(kcr_ctrlutil_delete_options), __VA_ARGS__)

/* Deletes exactly the incarnation `obj` (borrowed) is: its namespace and
 * name, with its uid as a precondition, so a newer object of the same name
 * is never deleted by mistake. A gone object is KCR_OK. */
KCR_API kcr_err kcr_ctrlutil_delete_object(kcr_client *c, const kcr_resource *res,
                                           const kcr_object *obj,
                                           kcr_ctrlutil_propagation propagation, kcr_object **out,
                                           kcr_status *status);

#ifdef __cplusplus
}
#endif

#endif
