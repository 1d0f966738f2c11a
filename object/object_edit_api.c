/* The public kcr_object_edit_* calls: each runs its edit (object_edit.c,
 * json_patch.c) unless an earlier one failed, and keeps the first failure
 * with the call and path that caused it, so an object is built as a plain
 * sequence of calls checked once, at freeze. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "object/edit_tree.h"

/* KCR_ERR_INVALID for a NULL editor; the kept error (kcr_last_error() set
 * to its message again) when an earlier edit failed; KCR_OK otherwise. */
static kcr_err replay(const kcr_object_edit *e, const char *call)
{
    if (!e)
        return kcr__fail(KCR_ERR_INVALID, "kcr_object_edit_%s: NULL editor", call);
    if (e->first_error == KCR_OK)
        return KCR_OK;
    if (e->first_error_msg)
        return kcr__fail(e->first_error, "%s", e->first_error_msg);
    return kcr__fail(e->first_error, "an earlier edit failed (out of memory keeping its message)");
}

/* The end of every edit: a failure becomes the editor's first error, its
 * message prefixed with the call and its path or key. Returns err. */
static kcr_err keep(kcr_object_edit *e, kcr_err err, const char *call, const char *arg)
{
    if (err == KCR_OK)
        return KCR_OK;
    if (arg)
        err = kcr__refail(err, "kcr_object_edit_%s \"%s\": ", call, arg);
    else
        err = kcr__refail(err, "kcr_object_edit_%s: ", call);
    e->first_error = err;
    e->first_error_msg = strdup(kcr_last_error());
    return err;
}

#define RUN(call, arg, edit)                                                                       \
    do {                                                                                           \
        kcr_err prior_ = replay(e, call);                                                          \
        return prior_ != KCR_OK ? prior_ : keep(e, (edit), call, arg);                             \
    } while (0)

kcr_err kcr_object_edit_set_string(kcr_object_edit *e, const char *path, const char *value)
{
    RUN("set_string", path, kcr__edit_set_string(e, path, value));
}

kcr_err kcr_object_edit_set_int(kcr_object_edit *e, const char *path, int64_t value)
{
    RUN("set_int", path, kcr__edit_set_int(e, path, value));
}

kcr_err kcr_object_edit_set_bool(kcr_object_edit *e, const char *path, bool value)
{
    RUN("set_bool", path, kcr__edit_set_bool(e, path, value));
}

kcr_err kcr_object_edit_set_null(kcr_object_edit *e, const char *path)
{
    RUN("set_null", path, kcr__edit_set_null(e, path));
}

kcr_err kcr_object_edit_set_json(kcr_object_edit *e, const char *path, const char *json, size_t len)
{
    RUN("set_json", path, kcr__edit_set_json(e, path, json, len));
}

kcr_err kcr_object_edit_set_value(kcr_object_edit *e, const char *path, kcr_value value)
{
    RUN("set_value", path, kcr__edit_set_value(e, path, value));
}

kcr_err kcr_object_edit_append_json(kcr_object_edit *e, const char *path, const char *json,
                                    size_t len, size_t *index)
{
    RUN("append_json", path, kcr__edit_append_json(e, path, json, len, index));
}

kcr_err kcr_object_edit_delete(kcr_object_edit *e, const char *path)
{
    RUN("delete", path, kcr__edit_delete(e, path));
}

kcr_err kcr_object_edit_set_label(kcr_object_edit *e, const char *key, const char *value)
{
    RUN("set_label", key, kcr__edit_set_label(e, key, value));
}

kcr_err kcr_object_edit_delete_label(kcr_object_edit *e, const char *key)
{
    RUN("delete_label", key, kcr__edit_delete_label(e, key));
}

kcr_err kcr_object_edit_set_annotation(kcr_object_edit *e, const char *key, const char *value)
{
    RUN("set_annotation", key, kcr__edit_set_annotation(e, key, value));
}

kcr_err kcr_object_edit_delete_annotation(kcr_object_edit *e, const char *key)
{
    RUN("delete_annotation", key, kcr__edit_delete_annotation(e, key));
}

kcr_err kcr_object_edit_add_finalizer(kcr_object_edit *e, const char *finalizer)
{
    RUN("add_finalizer", finalizer, kcr__edit_add_finalizer(e, finalizer));
}

kcr_err kcr_object_edit_remove_finalizer(kcr_object_edit *e, const char *finalizer)
{
    RUN("remove_finalizer", finalizer, kcr__edit_remove_finalizer(e, finalizer));
}

kcr_err kcr_object_edit_set_owner_ref(kcr_object_edit *e, const kcr_owner_ref *ref)
{
    RUN("set_owner_ref", ref ? ref->name : NULL, kcr__edit_set_owner_ref(e, ref));
}

kcr_err kcr_object_edit_remove_owner_ref(kcr_object_edit *e, const char *uid)
{
    RUN("remove_owner_ref", uid, kcr__edit_remove_owner_ref(e, uid));
}

kcr_err kcr_object_edit_merge_patch(kcr_object_edit *e, const char *patch, size_t len)
{
    RUN("merge_patch", NULL, kcr__edit_merge_patch(e, patch, len));
}

kcr_err kcr_object_edit_json_patch(kcr_object_edit *e, const char *patch, size_t len)
{
    RUN("json_patch", NULL, kcr__edit_json_patch(e, patch, len));
}

/* Freeze and snapshot report the first error instead of building. */
static kcr_err build(kcr_object_edit *e, bool need_name, kcr_object **out, const char *call)
{
    if (!out)
        return kcr__fail(KCR_ERR_INVALID, "kcr_object_edit_%s: NULL out", call);
    *out = NULL;
    kcr_err err = replay(e, call);
    return err != KCR_OK ? err : kcr__edit_freeze(e, need_name, out);
}

kcr_err kcr_object_edit_freeze(kcr_object_edit *e, kcr_object **out)
{
    return build(e, true, out, "freeze");
}

kcr_err kcr_object_edit_snapshot(kcr_object_edit *e, kcr_object **out)
{
    return build(e, false, out, "snapshot");
}

kcr_err kcr_object_edit_error(const kcr_object_edit *e)
{
    if (!e)
        return kcr__fail(KCR_ERR_INVALID, "kcr_object_edit_error: NULL editor");
    return e->first_error;
}
