/* The shard Lease store over a kcr_client (lease_store.h): Leases listed by
 * the ring's label, written with leader/'s Lease record plus the shard
 * labels and annotations, conditional on resourceVersion. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "leader/lease.h"
#include "shard/lease_store.h"

typedef struct client_store {
    kcr__lease_store store; /* first: the handle given out */
    kcr_client *client;     /* borrowed */
    kcr_cancel *cancel;     /* borrowed; may be NULL */
    char *ns;
} client_store;

/* The slot annotation as a number; -1 when absent or not a small number. */
static int parse_slot(const char *text)
{
    if (!text || !*text)
        return -1;
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    return errno || *end || v < 0 || v > 1000000 ? -1 : (int)v;
}

static kcr_err read_lease(kcr_object *obj, kcr__shard_lease *out)
{
    kcr__lease_record rec = {0};
    kcr_err err = kcr__lease_read(obj, &rec);
    if (err != KCR_OK)
        return err;
    const char *identity = kcr_object_label(obj, KCR__SHARD_IDENTITY_LABEL);
    const char *held = kcr_object_annotation(obj, KCR__SHARD_HELD_ANNOTATION);
    const char *restarting = kcr_object_annotation(obj, KCR__SHARD_RESTARTING_ANNOTATION);
    kcr__shard_lease l = {.identity = (char *)(identity ? identity : ""),
                          .holder = rec.holder,
                          .duration_ms = rec.duration_s * 1000,
                          .renew_ms = rec.renew_us / 1000,
                          .slot =
                              parse_slot(kcr_object_annotation(obj, KCR__SHARD_SLOT_ANNOTATION)),
                          .held = (char *)(held ? held : ""),
                          .restarting = restarting && strcmp(restarting, "true") == 0,
                          .version = (char *)kcr_object_resource_version(obj)};
    err = kcr__shard_lease_copy(&l, out);
    kcr__lease_record_clear(&rec);
    return err;
}

typedef struct list_ctx {
    kcr__shard_lease_list *out;
    size_t cap;
} list_ctx;

static kcr_err add_item(kcr_object *obj, void *user_data)
{
    list_ctx *ctx = user_data;
    kcr__shard_lease_list *out = ctx->out;
    if (out->n == ctx->cap) {
        size_t cap = ctx->cap ? ctx->cap * 2 : 8;
        kcr__shard_lease *grown = realloc(out->items, cap * sizeof *grown);
        if (!grown)
            return kcr__fail(KCR_ERR_NOMEM, "out of memory listing shard Leases");
        out->items = grown;
        ctx->cap = cap;
    }
    kcr_err err = read_lease(obj, &out->items[out->n]);
    if (err == KCR_OK)
        out->n++;
    return err;
}

static kcr_err store_list(const char *ring, kcr__shard_lease_list *out, void *user_data)
{
    client_store *s = user_data;
    kcr__shard_lease_list_clear(out);
    char selector[320];
    if ((size_t)snprintf(selector, sizeof selector, "%s=%s", KCR__SHARD_RING_LABEL, ring) >=
        sizeof selector)
        return kcr__fail(KCR_ERR_INVALID, "shard ring name \"%.40s...\" is too long", ring);
    list_ctx ctx = {out, 0};
    kcr_err err = kcr_client_list(
        s->client,
        &(kcr_request){.resource = &KCR__LEASES,
                       .ns = s->ns,
                       .label_selector = selector,
                       .cancel = s->cancel},
        add_item,
        &ctx, NULL);
    if (err != KCR_OK)
        kcr__shard_lease_list_clear(out);
    return err;
}

/* The Lease object to write (a complete object: an update replaces it). */
static kcr_err lease_object(const client_store *s, const char *ring, const kcr__shard_lease *l,
                            kcr_object **out)
{
    *out = NULL;
    char name[256], slot[16], renew[32];
    if ((size_t)snprintf(name, sizeof name, "%s-%s", ring, l->identity) >= sizeof name)
        return kcr__fail(KCR_ERR_INVALID, "shard Lease name \"%s-%s\" is too long", ring,
                         l->identity);
    snprintf(slot, sizeof slot, "%d", l->slot);
    kcr_time_format_micro(l->renew_ms * 1000, renew, sizeof renew);
    kcr__lease_spec spec = {.holder = l->holder,
                            .duration_s = (l->duration_ms + 999) / 1000,
                            .acquire_time = renew,
                            .renew_us = l->renew_ms * 1000,
                            .transitions = 0};
    kcr_object_edit *e;
    kcr_err err = kcr_object_edit_new(NULL, &e);
    if (err != KCR_OK)
        return err;
    kcr_object_edit_set_string(e, "apiVersion", "coordination.k8s.io/v1");
    kcr_object_edit_set_string(e, "kind", "Lease");
    kcr_object_edit_set_string(e, "metadata.name", name);
    kcr_object_edit_set_string(e, "metadata.namespace", s->ns);
    if (*l->version)
        kcr_object_edit_set_string(e, "metadata.resourceVersion", l->version);
    kcr_object_edit_set_label(e, KCR__SHARD_RING_LABEL, ring);
    kcr_object_edit_set_label(e, KCR__SHARD_IDENTITY_LABEL, l->identity);
    kcr_object_edit_set_annotation(e, KCR__SHARD_SLOT_ANNOTATION, slot);
    kcr_object_edit_set_annotation(e, KCR__SHARD_HELD_ANNOTATION, l->held);
    if (l->restarting)
        kcr_object_edit_set_annotation(e, KCR__SHARD_RESTARTING_ANNOTATION, "true");
    kcr__lease_edit_spec(e, &spec);
    err = kcr_object_edit_freeze(e, out); /* an edit keeps its first error until here */
    kcr_object_edit_free(e);
    return err;
}

static kcr_err store_put(const char *ring, const kcr__shard_lease *l, char **version,
                         void *user_data)
{
    client_store *s = user_data;
    *version = NULL;
    kcr_object *obj, *written = NULL;
    kcr_err err = lease_object(s, ring, l, &obj);
    if (err != KCR_OK)
        return err;
    kcr_request req = {.resource = &KCR__LEASES, .ns = s->ns, .object = obj, .cancel = s->cancel};
    err = *l->version ? kcr_client_update(s->client, &req, &written)
                      : kcr_client_create(s->client, &req, &written);
    kcr_object_unref(obj);
    if (err == KCR_OK) {
        *version = strdup(kcr_object_resource_version(written));
        if (!*version)
            err = kcr__fail(KCR_ERR_NOMEM, "out of memory writing a shard Lease");
    }
    kcr_object_unref(written);
    return err;
}

static const kcr__lease_store_ops client_ops = {store_list, store_put};

kcr_err kcr__lease_store_client_new(kcr_client *client, const char *ns, kcr__lease_store **out)
{
    *out = NULL;
    if (!client || !ns || !*ns)
        return kcr__fail(KCR_ERR_INVALID, "shard Lease store: a client and a namespace are "
                                          "required");
    client_store *s = calloc(1, sizeof *s);
    if (!s || !(s->ns = strdup(ns))) {
        free(s);
        return kcr__fail(KCR_ERR_NOMEM, "out of memory creating a shard Lease store");
    }
    s->client = client;
    s->store = (kcr__lease_store){&client_ops, s};
    *out = &s->store;
    return KCR_OK;
}

void kcr__lease_store_client_free(kcr__lease_store *store)
{
    if (!store)
        return;
    client_store *s = store->user_data;
    free(s->ns);
    free(s);
}

void kcr__lease_store_client_set_cancel(kcr__lease_store *store, kcr_cancel *cancel)
{
    ((client_store *)store->user_data)->cancel = cancel;
}
