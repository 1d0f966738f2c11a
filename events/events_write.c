/* Building events.k8s.io/v1 Events and writing them: a create for a new
 * event, a merge patch of `series` for a repeat (a create with the series
 * when the Event is gone, as client-go does). Failures are counted and the
 * first of each reason logged; nothing is retried, so a server that refuses
 * events never makes the recorder loop. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "events/events_internal.h"
#include "core/identity.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"

/* Sets path.<field> for each non-empty ObjectReference field of obj. */
static kcr_err set_reference(kcr_object_edit *ed, const char *path, const kcr_object *obj)
{
    const struct {
        const char *field, *value;
    } f[] = {
        {"apiVersion", kcr_object_api_version(obj)},
        {"kind", kcr_object_kind(obj)},
        {"namespace", kcr_object_namespace(obj)},
        {"name", kcr_object_name(obj)},
        {"uid", kcr_object_uid(obj)},
        {"resourceVersion", kcr_object_resource_version(obj)},
    };
    kcr_err err = KCR_OK;
    char p[64];
    for (size_t i = 0; err == KCR_OK && i < sizeof f / sizeof f[0]; i++) {
        if (!f[i].value[0])
            continue;
        snprintf(p, sizeof p, "%s.%s", path, f[i].field);
        err = kcr_object_edit_set_string(ed, p, f[i].value);
    }
    return err;
}

/* "<regarding name>.<hex>", unique within this recorder (the hex is the
 * wall clock in ns, bumped past the last one used); a UUID when that is not
 * a valid object name, as client-go does. */
static kcr_err event_name(kcr_event_recorder *r, const char *regarding, char *out, size_t size)
{
    uint64_t ns = (uint64_t)kcr__wall_ns();
    pthread_mutex_lock(&r->lock);
    if (ns <= r->last_name_ns)
        ns = r->last_name_ns + 1;
    r->last_name_ns = ns;
    pthread_mutex_unlock(&r->lock);
    int n = snprintf(out, size, "%s.%" PRIx64, regarding, ns);
    if (n > 0 && (size_t)n < size && kcr__is_dns_subdomain(out))
        return KCR_OK;
    return kcr__uuid_v4(out);
}

kcr_err kcr__event_build(kcr_event_recorder *r, const kcr_event *ev, const char *note,
                         int64_t now_ms, kcr_object **out)
{
    *out = NULL;
    const kcr_object *reg = ev->regarding;
    const char *ns = kcr_object_namespace(reg)[0] ? kcr_object_namespace(reg) : "default";
    char name[300], when[32];
    kcr_err err = event_name(r, kcr_object_name(reg), name, sizeof name);
    if (err != KCR_OK)
        return err;
    kcr_time_format_micro(now_ms * 1000, when, sizeof when);
    kcr_object_edit *ed;
    if ((err = kcr_object_edit_new(NULL, &ed)) != KCR_OK)
        return err;
    const struct {
        const char *path, *value;
    } f[] = {
        {"apiVersion", "events.k8s.io/v1"},
        {"kind", "Event"},
        {"metadata.name", name},
        {"metadata.namespace", ns},
        {"eventTime", when},
        {"type", ev->type == KCR_EVENT_WARNING ? "Warning" : "Normal"},
        {"reason", ev->reason},
        {"action", ev->action && *ev->action ? ev->action : ev->reason},
        {"note", note},
        {"reportingController", ev->reporting_controller ? ev->reporting_controller
                                                         : r->controller},
        {"reportingInstance", r->instance},
    };
    for (size_t i = 0; err == KCR_OK && i < sizeof f / sizeof f[0]; i++)
        if (f[i].value[0])
            err = kcr_object_edit_set_string(ed, f[i].path, f[i].value);
    if (err == KCR_OK)
        err = set_reference(ed, "regarding", reg);
    if (err == KCR_OK && ev->related)
        err = set_reference(ed, "related", ev->related);
    if (err == KCR_OK)
        err = kcr_object_edit_freeze(ed, out);
    kcr_object_edit_free(ed);
    if (err == KCR_ERR_INVALID) { /* copy: kcr__fail writes the buffer it points at */
        char why[512];
        snprintf(why, sizeof why, "%s", kcr_last_error());
        return kcr__fail(err, "event: %s", why);
    }
    return err;
}

/* Counts a failure; logs it when its reason is new. Lock not held. */
static void failed(kcr_event_recorder *r, const kcr__event_item *item, kcr_err err,
                   const kcr_status *st)
{
    const char *reason = st->reason && st->reason[0] ? st->reason : kcr_strerror(err);
    bool log = false;
    pthread_mutex_lock(&r->lock);
    r->stats.failed++;
    size_t i = 0;
    while (i < r->n_logged && strcmp(r->logged[i], reason) != 0)
        i++;
    if (i == r->n_logged && i < KCR__EVENT_LOGGED_MAX && (r->logged[i] = strdup(reason))) {
        r->n_logged++;
        log = true;
    }
    pthread_mutex_unlock(&r->lock);
    if (log)
        kcr__log(KCR_LOG_WARN, "events",
                 "cannot write Event %s/%s (%s; later failures for this reason are only "
                 "counted): %s",
                 kcr_object_namespace(item->event), kcr_object_name(item->event), reason,
                 kcr_last_error());
}

static void counted(kcr_event_recorder *r, uint64_t *counter)
{
    pthread_mutex_lock(&r->lock);
    (*counter)++;
    pthread_mutex_unlock(&r->lock);
}

static kcr_err create(kcr_event_recorder *r, const kcr_object *event, kcr_status *st)
{
    char *json;
    kcr_err err = kcr_object_to_json(event, &json, NULL);
    if (err != KCR_OK)
        return err;
    err = kcr_client_create(r->client,
                            &(kcr_request){.resource = &KCR__EVENTS,
                                           .ns = kcr_object_namespace(event),
                                           .body = json,
                                           .cancel = r->cancel,
                                           .status = st},
                            NULL);
    free(json);
    return err;
}

/* The Event with its series set, for a create when the patch found none. */
static kcr_err with_series(const kcr__event_item *item, const char *when, kcr_object **out)
{
    kcr_object_edit *ed;
    kcr_err err = kcr_object_edit_new(item->event, &ed);
    if (err != KCR_OK)
        return err;
    err = kcr_object_edit_set_int(ed, "series.count", item->count);
    if (err == KCR_OK)
        err = kcr_object_edit_set_string(ed, "series.lastObservedTime", when);
    if (err == KCR_OK)
        err = kcr_object_edit_freeze(ed, out);
    kcr_object_edit_free(ed);
    return err;
}

void kcr__event_send(kcr_event_recorder *r, const kcr__event_item *item)
{
    kcr_status st = {0};
    kcr_err err;
    if (item->count == 0) {
        err = create(r, item->event, &st);
        if (err == KCR_OK)
            counted(r, &r->stats.created);
    } else {
        char when[32], patch[128];
        kcr_time_format_micro(item->last_ms * 1000, when, sizeof when);
        snprintf(patch, sizeof patch,
                 "{\"series\":{\"count\":%" PRId64 ",\"lastObservedTime\":\"%s\"}}",
                 item->count, when);
        err = kcr_client_patch(r->client,
                               &(kcr_request){.resource = &KCR__EVENTS,
                                              .ns = kcr_object_namespace(item->event),
                                              .name = kcr_object_name(item->event),
                                              .patch_type = KCR_PATCH_MERGE,
                                              .body = patch,
                                              .cancel = r->cancel,
                                              .status = &st},
                               NULL);
        if (err == KCR_OK) {
            counted(r, &r->stats.series_updates);
        } else if (err == KCR_ERR_NOT_FOUND) { /* expired or never created */
            kcr_object *full = NULL;
            err = with_series(item, when, &full);
            if (err == KCR_OK)
                err = create(r, full, &st);
            kcr_object_unref(full);
            if (err == KCR_OK)
                counted(r, &r->stats.created);
        }
    }
    if (err != KCR_OK)
        failed(r, item, err, &st);
    kcr_status_clear(&st);
}
