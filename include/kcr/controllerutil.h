/* Controller helpers (controller-runtime's controllerutil, for C): owner
 * references, finalizers that never drop someone else's, status updates and
 * create-or-update with conflict retries, server-side apply, and deletes
 * with a propagation policy and preconditions. docs/ctrlutil.md.
 *
 * Calls: every helper (but kcr_ctrlutil_op_result_string) takes one sized
 * options struct (docs/abi.md: the macro passes its size first) and at most
 * 5 parameters. The helpers that talk to the server have the client verbs'
 * shape,
 *     kcr_ctrlutil_<verb>(client, &(kcr_ctrlutil_<x>_options){...}, &out)
 * where the options name the target (resource, namespace and name, or an
 * object). One rule for what every helper hands back: an object is the last
 * parameter `out` (NULL: not wanted, for the helpers that talk to the
 * server); everything else a call reports (the server's Status, what was
 * done, whether it wrote) goes through pointers in the options (each may be
 * NULL).
 *
 * Thread-safety: every function is thread-safe (a kcr_client may be shared);
 * an object edit passed in is used by the calling thread only. Mutate
 * callbacks run on the calling thread, inside the call, with no kcr lock
 * held.
 *
 * Errors: `status` (zero it before first use, as for kcr_request.status)
 * gets the server's Status when a server answered with an error, and
 * kcr_last_error() says what failed, naming the verb, the kind and the
 * object: "create ResourceQuota team-a/team-quota: <server's message>" (the
 * kind comes from the object read or written; before there is one, or for
 * a metadata-only object, the resource's plural stands for it:
 * "delete configmaps ns/name: ..."). In a reconcile, KCR_TRY (kcr/controller.h)
 * turns such an error into the result. */
#ifndef KCR_CONTROLLERUTIL_H
#define KCR_CONTROLLERUTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kcr/client.h"
#include "kcr/error.h"
#include "kcr/export.h"
#include "kcr/object.h"
#include "kcr/shard.h"
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
 * kept. It also labels `obj` KCR_SHARD_BUCKET_LABEL with the bucket of the
 * owner's uid (kcr/shard.h; a label with another value is replaced), so a
 * sharded manager's owned caches can select children by their owner's
 * bucket (kcr_sharding_options.child_bucket_selector). Both objects are
 * borrowed; on success *out is a new reference (the same object as `obj`
 * when nothing changed). opts may be NULL.
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
 * controller / blockOwnerDeletion flags (a controller stays the controller,
 * and gets the bucket label as kcr_ctrlutil_set_controller_reference).
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

/* Options of kcr_ctrlutil_add_finalizer / _remove_finalizer. Zero means
 * default for the other fields; pointers are borrowed for the call. */
typedef struct kcr_ctrlutil_finalizer_options {
    const kcr_resource *resource; /* required: the object's resource */
    /* required: the caller's view of the object (e.g. from a cache); it
     * names the object (namespace and name) and the patch is built from it */
    const kcr_object *object;
    const char *finalizer; /* required, not empty */
    int max_retries;       /* 0: KCR_CTRLUTIL_DEFAULT_RETRIES, < 0: none */
    bool *changed;         /* may be NULL: true when this call wrote */
    kcr_status *status;    /* may be NULL: the server's Status on an API error */
} kcr_ctrlutil_finalizer_options;

/* Adds opts->finalizer to opts->object through a JSON Patch guarded by a
 * `test` of the whole current metadata.finalizers, so concurrent adds
 * neither duplicate nor lose one. When the object as given is stale the
 * guard fails, the object is read again and the patch rebuilt, at most
 * max_retries times. A 422 that a fresh read shows was not a lost race (e.g.
 * the object is being deleted, which forbids new finalizers) is returned at
 * once. *out (may be NULL): a new reference to the latest object (as
 * patched, or as known when the finalizer was already there). When the
 * object as given already shows the finalizer no request is sent (if that
 * view was stale, the next event brings the fresh object). KCR_ERR_INVALID
 * for NULL opts, a missing resource, object or finalizer. */
KCR_API kcr_err kcr_ctrlutil_add_finalizer(size_t opts_size, kcr_client *c,
                                           const kcr_ctrlutil_finalizer_options *opts,
                                           kcr_object **out);
#define kcr_ctrlutil_add_finalizer(...) (kcr_ctrlutil_add_finalizer)(sizeof(kcr_ctrlutil_finalizer_options), __VA_ARGS__)

/* Removes every occurrence of opts->finalizer with `test` + `remove`
 * operations on exactly the indexes where it is, so a finalizer someone
 * else added or removed meanwhile can never be dropped by mistake: a shifted
 * index fails the test, and the call re-reads and retries as add_finalizer
 * does. An object that is gone (404) counts as done: KCR_OK, *changed
 * false, *out NULL. Otherwise as kcr_ctrlutil_add_finalizer. */
KCR_API kcr_err kcr_ctrlutil_remove_finalizer(size_t opts_size, kcr_client *c,
                                              const kcr_ctrlutil_finalizer_options *opts,
                                              kcr_object **out);
#define kcr_ctrlutil_remove_finalizer(...) (kcr_ctrlutil_remove_finalizer)(sizeof(kcr_ctrlutil_finalizer_options), __VA_ARGS__)

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

/* Options of kcr_ctrlutil_update_status / _create_or_update. Zero means
 * default for the fields not marked required. Pointers are borrowed for the
 * call. */
typedef struct kcr_ctrlutil_write_options {
    const kcr_resource *resource;  /* required */
    const char *ns;                /* NULL or "": cluster-scoped */
    const char *name;              /* required, not empty */
    kcr_ctrlutil_mutate_fn mutate; /* required: sets the desired state */
    void *user_data;               /* passed to mutate */
    /* A cache of the resource (kcr_ctx_cache(ctx, res) in a reconcile): the
     * current object is taken from it when it has it (with apiVersion and
     * kind), so an unchanged object costs no request. NULL, or a cache
     * without the object: read from the server (a GET); after a conflict
     * the server is read again. */
    kcr_store *cache;
    int max_retries;                /* 0: KCR_CTRLUTIL_DEFAULT_RETRIES, < 0: none */
    kcr_ctrlutil_op_result *result; /* may be NULL: what was done */
    kcr_status *status;             /* may be NULL: the server's Status on an API error */
} kcr_ctrlutil_write_options;

/* Reads opts->resource ns/name (from opts->cache when it has it), lets
 * `mutate` change its status, and writes the status subresource with the
 * read resourceVersion (PUT .../status); on 409 Conflict it reads the
 * server again and re-applies `mutate`, at most max_retries times. Only the
 * status is written (the server ignores other changes). When the mutated
 * status equals the one read (compared as described above) nothing is sent:
 * *result UNCHANGED, else UPDATED (UNCHANGED again when the server kept the
 * resourceVersion). *out (may be NULL): a new reference to the object
 * written, or as read when nothing was written. Errors: the server's
 * (KCR_ERR_NOT_FOUND, KCR_ERR_CONFLICT when retries ran out ...), the
 * callback's, KCR_ERR_INVALID for NULL opts, a missing resource, name or
 * mutate, or when mutate changed metadata.name or metadata.namespace. */
KCR_API kcr_err kcr_ctrlutil_update_status(size_t opts_size, kcr_client *c,
                                           const kcr_ctrlutil_write_options *opts,
                                           kcr_object **out);
#define kcr_ctrlutil_update_status(...) (kcr_ctrlutil_update_status)(sizeof(kcr_ctrlutil_write_options), __VA_ARGS__)

/* controller-runtime's CreateOrUpdate, with retries: reads opts->resource
 * ns/name (from opts->cache when it has it, so a reconcile whose object is
 * already as desired sends no request at all; a cache miss reads the
 * server before creating); when missing, runs `mutate` on a new object
 * (current NULL) and creates it (CREATED); else runs `mutate` on a copy and
 * updates it with the read resourceVersion unless nothing changed as the
 * server compares (UNCHANGED; see above), UPDATED when the server applied
 * the update. A 409 (a conflict, or a create that lost a race) reads the
 * server again and retries, at most max_retries times. The status is not
 * written by a main-resource update (use kcr_ctrlutil_update_status).
 * `mutate` sets the desired fields (kind may be left out: the apiserver
 * takes it from the resource). Output and errors as
 * kcr_ctrlutil_update_status. In a reconcile:
 *     KCR_TRY(kcr_ctrlutil_create_or_update(
 *         kcr_ctx_client(ctx),
 *         &(kcr_ctrlutil_write_options){.resource = &QUOTAS, .ns = ns, .name = "quota",
 *                                       .mutate = desired_quota, .user_data = team,
 *                                       .cache = kcr_ctx_cache(ctx, &QUOTAS)},
 *         NULL)); */
KCR_API kcr_err kcr_ctrlutil_create_or_update(size_t opts_size, kcr_client *c,
                                              const kcr_ctrlutil_write_options *opts,
                                              kcr_object **out);
#define kcr_ctrlutil_create_or_update(...) (kcr_ctrlutil_create_or_update)(sizeof(kcr_ctrlutil_write_options), __VA_ARGS__)

/* ---- Server-side apply ------------------------------------------------------------- */

/* Options of kcr_ctrlutil_apply. Pointers are borrowed for the call. */
typedef struct kcr_ctrlutil_apply_options {
    const kcr_resource *resource; /* required */
    /* NULL: the configuration's namespace; a different non-NULL one is
     * KCR_ERR_INVALID */
    const char *ns;
    /* The applied configuration (only the fields this manager owns), as an
     * object or as JSON text (json_len 0: strlen): exactly one of them. It
     * needs apiVersion, kind and metadata.name, and no
     * metadata.managedFields. */
    const kcr_object *object;
    const char *json;
    size_t json_len;
    const char *field_manager; /* required, not empty */
    bool force;                /* take over fields other managers own instead of a 409 */
    kcr_status *status;        /* may be NULL: the server's Status on an API error */
} kcr_ctrlutil_apply_options;

/* Applies the configuration with server-side apply as opts->field_manager;
 * creates the object when missing. *out (may be NULL) gets the object as
 * stored. KCR_ERR_INVALID for NULL opts, a missing resource or field
 * manager, both or neither of object and json, a configuration without
 * apiVersion or kind or with managedFields, a namespace mismatch;
 * KCR_ERR_PARSE for bad JSON or a missing metadata.name. */
KCR_API kcr_err kcr_ctrlutil_apply(size_t opts_size, kcr_client *c,
                                   const kcr_ctrlutil_apply_options *opts, kcr_object **out);
#define kcr_ctrlutil_apply(...) (kcr_ctrlutil_apply)(sizeof(kcr_ctrlutil_apply_options), __VA_ARGS__)

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

/* Options of kcr_ctrlutil_delete. Zero means default for the fields not
 * marked required; pointers are borrowed for the call. */
typedef struct kcr_ctrlutil_delete_options {
    const kcr_resource *resource; /* required */
    /* What to delete: ns and name, or `object`: exactly that incarnation
     * (its namespace and name, with its metadata.uid as the uid
     * precondition, so a newer object of the same name is never deleted by
     * mistake). With object, ns, name and precondition_uid must be NULL or
     * equal to the object's. */
    const char *ns;
    const char *name;
    const kcr_object *object;
    kcr_ctrlutil_propagation propagation;
    const char *precondition_uid;              /* delete only this incarnation; NULL: any */
    const char *precondition_resource_version; /* delete only this version; NULL: any */
    bool ignore_not_found;                     /* an object already gone is KCR_OK (*out NULL) */
    kcr_status *status; /* may be NULL: the server's Status on an API error */
} kcr_ctrlutil_delete_options;

/* DELETE with DeleteOptions built from opts. A failed precondition is the
 * server's 409: KCR_ERR_CONFLICT. *out (may be NULL) gets the object when
 * the server returned it (deletion pending on finalizers or foreground
 * propagation), else NULL. KCR_ERR_INVALID for NULL opts, a missing
 * resource, neither name nor object, an object without metadata.uid, a
 * name, namespace or uid precondition the object contradicts. */
KCR_API kcr_err kcr_ctrlutil_delete(size_t opts_size, kcr_client *c,
                                    const kcr_ctrlutil_delete_options *opts, kcr_object **out);
#define kcr_ctrlutil_delete(...) (kcr_ctrlutil_delete)(sizeof(kcr_ctrlutil_delete_options), __VA_ARGS__)

#ifdef __cplusplus
}
#endif

#endif
