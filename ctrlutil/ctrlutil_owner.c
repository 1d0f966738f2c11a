/* Owner references: set the controller reference (refusing a second
 * controller, stamping the controller's bucket label) or a plain owner
 * reference, on objects and on edits. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/abi.h"
#include "core/error.h"
#include "kcr/controllerutil.h"
#include "kcr/shard.h"

/* The owner reference to write, its strings borrowed from the owner or opts. */
static kcr_err owner_ref_of(const kcr_object *owner, const kcr_ctrlutil_owner_options *opts,
                            kcr_owner_ref *ref)
{
    const char *av = opts && opts->api_version && *opts->api_version
                         ? opts->api_version
                         : kcr_object_api_version(owner);
    const char *kind = opts && opts->kind && *opts->kind ? opts->kind : kcr_object_kind(owner);
    const char *name = kcr_object_name(owner), *uid = kcr_object_uid(owner);
    if (!*av || !*kind)
        return kcr__fail(KCR_ERR_INVALID,
                         "owner %s has no %s (an object built by hand?): pass it in "
                         "kcr_ctrlutil_owner_options",
                         name, !*av ? "apiVersion" : "kind");
    if (strcmp(kind, "PartialObjectMetadata") == 0)
        return kcr__fail(KCR_ERR_INVALID,
                         "owner %s is a PartialObjectMetadata (from a metadata-only cache): pass "
                         "its real apiVersion and kind in kcr_ctrlutil_owner_options",
                         name);
    if (!*name || !*uid)
        return kcr__fail(KCR_ERR_INVALID,
                         "owner %s/%s has no %s: use an object read from the server", kind, name,
                         !*name ? "metadata.name" : "metadata.uid");
    *ref = (kcr_owner_ref){.api_version = av, .kind = kind, .name = name, .uid = uid};
    return KCR_OK;
}

/* The API group of an apiVersion ("apps/v1" -> "apps", "v1" -> ""). */
static size_t group_len(const char *api_version)
{
    const char *slash = strchr(api_version, '/');
    return slash ? (size_t)(slash - api_version) : 0;
}

/* Same object: API group, kind and name (versions and uids may differ). */
static bool same_owner(const kcr_owner_ref *a, const kcr_owner_ref *b)
{
    size_t ga = group_len(a->api_version), gb = group_len(b->api_version);
    return ga == gb && memcmp(a->api_version, b->api_version, ga) == 0 &&
           strcmp(a->kind, b->kind) == 0 && strcmp(a->name, b->name) == 0;
}

static bool same_ref(const kcr_owner_ref *a, const kcr_owner_ref *b)
{
    return strcmp(a->api_version, b->api_version) == 0 && strcmp(a->kind, b->kind) == 0 &&
           strcmp(a->name, b->name) == 0 && strcmp(a->uid, b->uid) == 0 &&
           a->controller == b->controller && a->block_owner_deletion == b->block_owner_deletion;
}

/* Upserts the reference into `edit`; *changed says whether it did anything. */
static kcr_err set_ref(const kcr_object *owner, kcr_object_edit *edit,
                       const kcr_ctrlutil_owner_options *opts, bool controller, bool *changed)
{
    *changed = false;
    if (!owner || !edit)
        return kcr__fail(KCR_ERR_INVALID, "owner reference: NULL owner or object");
    kcr_owner_ref want;
    kcr_err err = owner_ref_of(owner, opts, &want);
    if (err != KCR_OK)
        return err;
    kcr_object *cur = NULL;
    if ((err = kcr_object_edit_snapshot(edit, &cur)) != KCR_OK)
        return err;
    const char *owner_ns = kcr_object_namespace(owner), *ns = kcr_object_namespace(cur);
    if (*owner_ns && strcmp(owner_ns, ns) != 0) {
        /* the garbage collector would treat such a reference as dangling */
        if (*ns)
            err = kcr__fail(KCR_ERR_INVALID,
                            "cross-namespace owner references are not allowed: owner %s %s is in "
                            "namespace %s, the object in %s",
                            want.kind, want.name, owner_ns, ns);
        else
            err = kcr__fail(KCR_ERR_INVALID,
                            "a cluster-scoped object cannot have a namespaced owner (%s %s in "
                            "namespace %s)",
                            want.kind, want.name, owner_ns);
        kcr_object_unref(cur);
        return err;
    }
    kcr_owner_ref r, found = {0};
    bool have = false;
    for (size_t i = 0; kcr_object_owner_ref(cur, i, &r); i++) {
        if (same_owner(&r, &want)) {
            found = r;
            have = true;
        } else if (controller && r.controller) {
            const char *kind = kcr_object_kind(cur);
            err = kcr__fail(KCR_ERR_EXISTS,
                            "%s %s%s%s is already controlled by %s %s (uid %s): an object has at "
                            "most one controller",
                            *kind ? kind : "object", ns, *ns ? "/" : "", kcr_object_name(cur),
                            r.kind, r.name, r.uid);
            kcr_object_unref(cur);
            return err;
        }
    }
    if (controller) {
        want.controller = true;
        want.block_owner_deletion = !(opts && opts->no_block_owner_deletion);
    } else if (have) { /* a plain reference keeps the entry's flags */
        want.controller = found.controller;
        want.block_owner_deletion = found.block_owner_deletion;
    }
    /* a controlled object carries its controller's bucket (kcr/shard.h) */
    char bucket[4] = "";
    if (want.controller) {
        snprintf(bucket, sizeof bucket, "%u",
                 kcr_shard_bucket(kcr_shard_hash(want.uid, strlen(want.uid))));
        const char *had = kcr_object_label(cur, KCR_SHARD_BUCKET_LABEL);
        if (had && strcmp(had, bucket) == 0)
            bucket[0] = '\0'; /* already stamped */
    }
    bool same = have && same_ref(&found, &want);
    if (same && !bucket[0]) {
        kcr_object_unref(cur);
        return KCR_OK; /* already exactly this reference */
    }
    const char *old_uid = have && strcmp(found.uid, want.uid) != 0 ? found.uid : NULL;
    /* New entry first (replaces one with the same uid in place), then drop
     * the stale incarnation's: a failure leaves the edit as it was (but for
     * the label, whose only failure is out of memory). */
    err = same ? KCR_OK : kcr_object_edit_set_owner_ref(edit, &want);
    if (err == KCR_OK && old_uid)
        err = kcr_object_edit_remove_owner_ref(edit, old_uid);
    if (err == KCR_OK && bucket[0])
        err = kcr_object_edit_set_label(edit, KCR_SHARD_BUCKET_LABEL, bucket);
    kcr_object_unref(cur);
    *changed = err == KCR_OK;
    return err;
}

static kcr_err set_ref_object(const kcr_object *owner, const kcr_object *obj,
                              const kcr_ctrlutil_owner_options *opts, bool controller,
                              kcr_object **out)
{
    if (!out)
        return kcr__fail(KCR_ERR_INVALID, "owner reference: NULL out");
    *out = NULL;
    if (!obj)
        return kcr__fail(KCR_ERR_INVALID, "owner reference: NULL object");
    kcr_object_edit *e;
    kcr_err err = kcr_object_edit_new(obj, &e);
    if (err != KCR_OK)
        return err;
    bool changed;
    err = set_ref(owner, e, opts, controller, &changed);
    if (err == KCR_OK && !changed)
        *out = kcr_object_ref(obj);
    else if (err == KCR_OK)
        err = kcr_object_edit_freeze(e, out);
    kcr_object_edit_free(e);
    return err;
}

kcr_err (kcr_ctrlutil_set_controller_reference)(size_t opts_size, const kcr_object *owner,
                                                const kcr_object *obj,
                                                const kcr_ctrlutil_owner_options *opts,
                                                kcr_object **out)
{
    KCR__ABI_OPTS(kcr_ctrlutil_owner_options, opts, opts_size);
    return set_ref_object(owner, obj, opts, true, out);
}

kcr_err (kcr_ctrlutil_set_controller_reference_edit)(size_t opts_size, const kcr_object *owner,
                                                     kcr_object_edit *edit,
                                                     const kcr_ctrlutil_owner_options *opts)
{
    KCR__ABI_OPTS(kcr_ctrlutil_owner_options, opts, opts_size);
    bool changed;
    return set_ref(owner, edit, opts, true, &changed);
}

kcr_err (kcr_ctrlutil_set_owner_reference)(size_t opts_size, const kcr_object *owner,
                                           const kcr_object *obj,
                                           const kcr_ctrlutil_owner_options *opts, kcr_object **out)
{
    KCR__ABI_OPTS(kcr_ctrlutil_owner_options, opts, opts_size);
    return set_ref_object(owner, obj, opts, false, out);
}

kcr_err (kcr_ctrlutil_set_owner_reference_edit)(size_t opts_size, const kcr_object *owner,
                                                kcr_object_edit *edit,
                                                const kcr_ctrlutil_owner_options *opts)
{
    KCR__ABI_OPTS(kcr_ctrlutil_owner_options, opts, opts_size);
    bool changed;
    return set_ref(owner, edit, opts, false, &changed);
}
