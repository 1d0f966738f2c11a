/* Internal: the in-memory fake API server (kcr/fake.h), shared between its
 * files:
 *   fake.c       lifetime, the client back end table, error rules, hooks, counters
 *   discovery.c  the resources it serves (the built-ins of builtins.inc, captured
 *                from testenv's apiserver by gen-builtins; kcr_fake_register; CRDs)
 *   preamble.c   request accounting and the ONE write preamble: injected errors,
 *                body checks, name/namespace rules, preconditions and the
 *                apiserver's optimistic-concurrency (conflict) rule
 *   status.c     the Status answers, worded as the apiserver words them
 *   objects.c    the object table and what the server sets on a write
 *                (resourceVersion, uid, creationTimestamp, generation)
 *   tree.c       kcr__node helpers shared by the writes
 *   read.c       get and list
 *   write.c      create, update, patch, delete
 *   watch.c      watchers, event history, fan-out, bookmarks, 410 Expired
 *
 * One mutex (kcr_fake.lock) guards everything below; hooks and the caller's
 * callbacks run without it. Objects are stored as immutable kcr_objects; a
 * write edits a kcr__node tree (object/edit_tree.h) and freezes it. */
#ifndef KCR_FAKE_FAKE_INTERNAL_H
#define KCR_FAKE_FAKE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "client/client_impl.h"
#include "kcr/fake.h"
#include "kcr/shard.h"
#include "object/edit_tree.h"
#include "object/selector.h"

/* One stored object. */
typedef struct kcr__fobj {
    char *rkey; /* "group/resource" */
    char *ns;   /* "" when cluster-scoped */
    char *name;
    kcr_object *obj;
} kcr__fobj;

/* One write, as watches see it. */
typedef struct kcr__fevent {
    uint64_t rv;
    kcr_watch_event_type type;
    char *rkey, *ns;
    kcr_object *obj; /* new (or final) state */
    kcr_object *old; /* previous state for MODIFIED */
} kcr__fevent;

/* An event queued for one watcher. */
typedef struct kcr__fqitem {
    kcr_watch_event_type type;
    kcr_object *obj;
    char rv[24];
    bool initial_end;
    kcr_status *st;
    struct kcr__fqitem *next;
} kcr__fqitem;

/* A list's or watch's shard selector, parsed (kcr/shard.h). n 0: none, or
 * the fake ignores it (kcr_fake_options.ignore_shard_selector). */
typedef struct kcr__fshard {
    kcr_shard_field field;
    kcr_shard_range *ranges;
    size_t n;
} kcr__fshard;

typedef struct kcr__fwatcher {
    char *rkey, *ns;
    kcr__selector *labels, *fields;
    kcr__fshard shard;
    bool bookmarks, metadata_only;
    kcr__fqitem *head, *tail;
    size_t len;
    bool ended;
    pthread_cond_t cond;
    struct kcr__fwatcher *next;
} kcr__fwatcher;

/* An injected-error rule (kcr_fake_inject_error). */
typedef struct kcr__frule {
    kcr_fake_verb verb;
    char *rkey;      /* NULL: any */
    char *ns, *name; /* NULL: any */
    int times;       /* < 0: forever */
    int code;
    char *reason, *message;
} kcr__frule;

typedef struct kcr__fcounter {
    kcr_fake_verb verb;
    char *rkey;
    uint64_t n;
} kcr__fcounter;

struct kcr_fake {
    atomic_int refs;
    pthread_mutex_t lock;
    kcr_fake_options opts;
    uint64_t rv;      /* the last resourceVersion written */
    kcr__fobj **objs; /* sorted by (rkey, ns, name) */
    size_t n, cap;
    kcr__fevent *hist; /* ring of opts.history_size */
    size_t hist_start, hist_len;
    uint64_t compacted_rv;
    kcr__fwatcher *watchers;
    kcr__frule *rules;
    size_t n_rules;
    kcr__fcounter *counters;
    size_t n_counters;
    kcr_fake_hook_fn hook;
    void *hook_ud;
    kcr__disc_table disc;
    uint64_t rand_state;
};

typedef struct kcr__fake_client {
    struct kcr_client base;
    kcr_fake *f;
    char *ns;
} kcr__fake_client;

#define KCR__FAKE(c) (((kcr__fake_client *)(c))->f)

/* ---- fake.c ----------------------------------------------------------------------------- */

/* A pseudo-random number (uids, generated names); lock held. */
uint64_t kcr__fake_rand(kcr_fake *f);

/* ---- discovery.c ------------------------------------------------------------------------ */

/* Registers the built-in resources a new fake serves. */
kcr_err kcr__fake_register_builtins(kcr_fake *f);
/* The discovery entry of res (any version), or NULL; lock held. */
const kcr__disc_entry *kcr__fake_find_resource(kcr_fake *f, const kcr_resource *res);
/* The discovery entry of res at its version, or NULL when the fake does
 * not serve it; lock held. */
const kcr__disc_entry *kcr__fake_served(kcr_fake *f, const kcr_resource *res);
/* The Kubernetes version the built-in table was captured from ("v1.37.2"). */
const char *kcr__fake_builtins_version(void);
/* Whether res is defined by a CustomResourceDefinition stored in the fake;
 * lock held. */
bool kcr__fake_is_custom(kcr_fake *f, const kcr_resource *res);
/* Registers the resources a stored CustomResourceDefinition defines; lock held. */
void kcr__fake_register_crd(kcr_fake *f, const kcr_object *crd);
kcr_err kcr__fake_resolve(kcr_client *c, const kcr__disc_query *q, bool refresh,
                          kcr_api_resource *out, kcr_status *st);

/* ---- status.c --------------------------------------------------------------------------- */

/* "configmaps" or "deployments.apps", as the apiserver names resources in messages. */
void kcr__fake_qualified(const kcr_resource *res, char *buf, size_t size);
/* Fills st with {code, reason, message} (details naming res and name when
 * given) and returns the mapped error, with kcr_last_error() set. */
kcr_err kcr__fake_status(kcr_status *st, int code, const char *reason, const kcr_resource *res,
                         const char *name, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
kcr_err kcr__fake_bad_request(kcr_status *st, const char *msg);
kcr_err kcr__fake_not_found(kcr_status *st, const kcr_resource *res, const char *name);
/* 422 Invalid "<res> \"<name>\" is invalid: <field>: <detail>" with one cause. */
kcr_err kcr__fake_invalid(kcr_status *st, const kcr_resource *res, const char *name,
                          const char *cause_type, const char *field, const char *detail);
/* What the apiserver answers for a path it has no handler for (404); the
 * error message (kcr_last_error) also names res (and the subresource, NULL:
 * none) and says how to register a resource. */
kcr_err kcr__fake_not_served(kcr_status *st, const kcr_resource *res, const char *subresource);
/* 405 MethodNotAllowed: discovery does not list the verb for res. */
kcr_err kcr__fake_not_allowed(kcr_status *st, const kcr_resource *res, const char *subresource,
                              kcr_fake_verb verb);
/* 400 for a subresource the server has and the fake does not implement. */
kcr_err kcr__fake_unsupported_sub(kcr_status *st, const kcr_resource *res, const char *subresource);

/* ---- preamble.c ------------------------------------------------------------------------- */

/* Every request: counts it, runs the hook, applies the first matching
 * injected error, then answers 404 for a resource (or subresource, NULL:
 * none) the fake does not serve and 405 for a verb discovery does not list
 * for it. *has_status (may be NULL) tells whether the resource has the
 * status subresource. Takes and releases the lock. */
kcr_err kcr__fake_begin(kcr_fake *f, kcr_fake_verb verb, const kcr_resource *res, const char *ns,
                        const char *name, const char *subresource, bool *has_status,
                        kcr_status *st);

/* A write in progress: what the preamble established for the verb. */
typedef struct kcr__fake_write {
    kcr_fake *f;
    const kcr_resource *res;
    char *rkey;
    const char *ns;         /* the request's namespace (may be NULL or "") */
    const char *name;       /* the URL's name; NULL for create */
    bool status_only;       /* the status subresource */
    bool has_status;        /* the resource has one (else a main write writes the status) */
    struct kcr__node *body; /* create/update: the parsed body, a JSON object */
    kcr_status *st;
    /* Set by kcr__fake_write_locate (lock held): */
    size_t pos;
    kcr__fobj *cur;
} kcr__fake_write;

/* The ONE write preamble shared by create, update, patch and delete:
 * request accounting and injected errors (kcr__fake_begin), dryRun and
 * subresource checks, and for create/update the body: valid JSON, a JSON
 * object, metadata an object, metadata.name/namespace/resourceVersion/uid
 * strings. body may be NULL (patch, delete). On KCR_OK the caller owns w
 * and ends it with kcr__fake_write_end. */
kcr_err kcr__fake_write_begin(kcr__fake_write *w, kcr_fake *f, kcr_fake_verb verb,
                              const kcr_resource *res, const char *ns, const char *name,
                              const char *subresource, bool dry_run, const char *body, size_t len,
                              kcr_status *st);
void kcr__fake_write_end(kcr__fake_write *w);

/* Finds the object the write names (lock held): 404 NotFound when absent. */
kcr_err kcr__fake_write_locate(kcr__fake_write *w);

/* Checks that an object about to be written (`next`: the update's body or
 * the patched object) has the URL's name and no other namespace than the
 * request's (400 BadRequest otherwise, as the apiserver's checkName). */
kcr_err kcr__fake_write_check_name(kcr__fake_write *w, const struct kcr__node *next);

/* How a resourceVersion in a write is meant. */
typedef enum kcr__fake_rv_rule {
    /* update/patch: the object's metadata.resourceVersion; empty means an
     * unconditional update where the resource allows one, else must equal
     * the stored one (409 Conflict, "the object has been modified") */
    KCR__FAKE_RV_OPTIMISTIC,
    /* delete: DeleteOptions.preconditions.resourceVersion; NULL means none,
     * anything else must equal the stored one (409 "Precondition failed") */
    KCR__FAKE_RV_PRECONDITION
} kcr__fake_rv_rule;

/* The preconditions and the ONE conflict rule, as the apiserver applies them
 * to w->cur (lock held): uid (NULL: none) must equal the stored uid (409
 * "Precondition failed"), rv per `rule`. */
kcr_err kcr__fake_write_preconditions(kcr__fake_write *w, const char *uid, const char *rv,
                                      kcr__fake_rv_rule rule);

/* ---- objects.c -------------------------------------------------------------------------- */

/* "group/resource" (malloc'd), the key of a resource in the table. */
char *kcr__fake_rkey(const kcr_resource *res);
/* Index of the object, or where it would go (*found false); lock held. */
size_t kcr__fake_find(kcr_fake *f, const char *rkey, const char *ns, const char *name, bool *found);
/* The effective namespace of a request on res: "" for a cluster-scoped
 * resource or no namespace; lock held. */
const char *kcr__fake_scope_ns(kcr_fake *f, const kcr_resource *res, const char *ns);

/* Stores a new object from `doc` (taken): stamps resourceVersion, uid,
 * creationTimestamp, generation 1, kind and apiVersion, then emits ADDED.
 * doc's metadata.name and namespace are already checked; pos is where
 * kcr__fake_find said it goes. Lock held. */
kcr_err kcr__fake_store_create(kcr__fake_write *w, size_t pos, const char *ns,
                               struct kcr__node *doc, kcr_object **out);

/* Stores `next` (taken) as the new state of w->cur: server-set fields kept
 * from the stored object, nothing written for a no-op, generation bumped
 * when anything outside metadata and status changed, or when `deleting`
 * marks it for deletion (deletionTimestamp now, deletionGracePeriodSeconds
 * 0); an object marked for deletion without finalizers is removed. Emits
 * MODIFIED (or DELETED). Lock held. */
kcr_err kcr__fake_store_update(kcr__fake_write *w, struct kcr__node *next, bool deleting,
                               kcr_object **out);

/* Removes w->cur: bumps the resourceVersion, emits DELETED with the final
 * state (*out, may be NULL). Lock held. */
kcr_err kcr__fake_store_remove(kcr__fake_write *w, kcr_object **out);

void kcr__fake_fobj_free(kcr__fobj *o);

/* ---- tree.c: kcr__node helpers --------------------------------------------------------------- */

/* m[key] when m is an object that has it, else NULL. */
struct kcr__node *kcr__fake_member(const struct kcr__node *m, const char *key);
/* doc.metadata[key] when it is a string, else NULL. */
const char *kcr__fake_meta_str(const struct kcr__node *doc, const char *key);
/* doc.metadata, made an object when absent or not one; NULL when out of memory. */
struct kcr__node *kcr__fake_metadata_of(struct kcr__node *doc);
/* Removes m[key]; false when it was absent. */
bool kcr__fake_remove(struct kcr__node *m, const char *key);
/* m[key] = a copy of v (absent v: no key; strings and integers are set
 * with object/edit_tree.h's kcr__node_put_*). False when out of memory. */
bool kcr__fake_set_value(struct kcr__node *m, const char *key, kcr_value v);
/* Whether tree n holds the same JSON as the stored value v (numbers by their
 * text or integer value, maps regardless of member order), compared in place. */
bool kcr__fake_same(const struct kcr__node *n, kcr_value v);
/* Whether anything but apiVersion, kind, metadata and status differs
 * between the tree and the stored object: what bumps metadata.generation. */
bool kcr__fake_spec_changed(const struct kcr__node *next, kcr_value cur);

/* ---- read.c, write.c, watch.c: the client back end's verbs ------------------------------ */

kcr_err kcr__fake_get(kcr_client *c, const kcr_resource *res, const char *ns, const char *name,
                      const kcr__get_options *opts, kcr_object **out, kcr_status *st);
kcr_err kcr__fake_list(kcr_client *c, const kcr_resource *res, const char *ns,
                       const kcr__list_options *opts, kcr_list_item_fn fn, void *ud,
                       kcr_list_meta *meta, kcr_status *st);
kcr_err kcr__fake_create(kcr_client *c, const kcr_resource *res, const char *ns, const char *json,
                         size_t len, const kcr__write_options *opts, kcr_object **out,
                         kcr_status *st);
kcr_err kcr__fake_update(kcr_client *c, const kcr_resource *res, const char *ns, const char *name,
                         const char *json, size_t len, const kcr__write_options *opts,
                         kcr_object **out, kcr_status *st);
kcr_err kcr__fake_patch(kcr_client *c, const kcr_resource *res, const char *ns, const char *name,
                        kcr_patch_type type, const char *patch, size_t len,
                        const kcr__write_options *opts, kcr_object **out, kcr_status *st);
kcr_err kcr__fake_delete(kcr_client *c, const kcr_resource *res, const char *ns, const char *name,
                         const kcr__delete_options *opts, kcr_object **out, kcr_status *st);
kcr_err kcr__fake_watch(kcr_client *c, const kcr_resource *res, const char *ns,
                        const kcr__list_options *opts, kcr_watch_event_fn fn, void *ud,
                        kcr_status *st);

/* Creates an object from a parsed body (taken): kcr_fake_add and apply's
 * create. Takes and releases the lock. */
kcr_err kcr__fake_create_doc(kcr_fake *f, const kcr_resource *res, const char *ns,
                             struct kcr__node *doc, kcr_object **out, kcr_status *st);

/* A PartialObjectMetadata view of obj (new reference), NULL when out of memory. */
kcr_object *kcr__fake_metadata_view(const kcr_object *obj);

/* Parses opts->shard_selector into *out unless the fake ignores selectors;
 * malformed text is a 500 InternalError with the parser's words, as the
 * apiserver answers. Lock not held. */
kcr_err kcr__fake_parse_shard(const kcr_fake *f, const kcr__list_options *opts, kcr__fshard *out,
                              kcr_status *st);
/* Whether obj is in the shard (always without a selector). */
bool kcr__fake_shard_selects(const kcr__fshard *s, const kcr_object *obj);
void kcr__fake_shard_clear(kcr__fshard *s);

/* Parses list/watch label and field selectors (400 BadRequest when bad). */
kcr_err kcr__fake_parse_selectors(const kcr__list_options *opts, kcr__selector **labels,
                                  kcr__selector **fields, kcr_status *st);
bool kcr__fake_selects(const kcr__selector *labels, const kcr__selector *fields,
                       const kcr_object *obj);

/* ---- watch.c ------------------------------------------------------------------------------ */

/* Records a write at f->rv (takes refs of obj and old) and fans it out. Lock held. */
void kcr__fake_emit(kcr_fake *f, kcr_watch_event_type type, const char *rkey, const char *ns,
                    kcr_object *obj, kcr_object *old);
/* Frees the event history (compaction and the fake's end); lock held. */
void kcr__fake_history_clear(kcr_fake *f);

#endif
