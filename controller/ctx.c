/* The contexts user code gets: a reconcile's (kcr_ctx: what it may use
 * besides its request) and a predicate's or map function's
 * (kcr_source_ctx: the controller's caches and client). */
#include <string.h>

#include "controller/controller_internal.h"

void kcr__request_init(kcr_reconcile_request *req, kcr_controller *c, const char *key,
                       const kcr__pending *p, char ns_buf[KCR__NS_BUF])
{
    memset(req, 0, sizeof *req);
    req->key = key;
    const char *slash = strchr(key, '/');
    req->name = slash ? slash + 1 : key;
    size_t nl = slash ? (size_t)(slash - key) : 0;
    nl = nl < KCR__NS_BUF - 1 ? nl : KCR__NS_BUF - 1; /* keys are validated: <= 63 */
    memcpy(ns_buf, key, nl);
    ns_buf[nl] = '\0';
    req->ns = ns_buf;
    req->trigger.reason = p->reason;
    req->trigger.change = p->change;
    req->trigger.kind = p->kind ? p->kind : "";
    req->trigger.ns = p->ns ? p->ns : "";
    req->trigger.name = p->name ? p->name : "";
    req->reasons = p->reasons;
    req->retries = kcr_rate_limiter_num_requeues(c->limiter, key);
}

kcr_client *kcr_ctx_client(kcr_ctx *ctx)
{
    return ctx->client;
}

/* The cache of the first of c's sources serving res (version NULL: any). */
static kcr_store *cache_of(const kcr_controller *c, const kcr_resource *res)
{
    if (!res || !res->resource)
        return NULL;
    const char *g = res->group ? res->group : "";
    for (size_t i = 0; i < c->n_sources; i++) {
        const kcr__source *s = &c->sources[i];
        if (strcmp(s->resource, res->resource) == 0 && strcmp(s->group, g) == 0 &&
            (!res->version || strcmp(s->version, res->version) == 0))
            return s->cache;
    }
    return NULL;
}

kcr_store *kcr_ctx_cache(kcr_ctx *ctx, const kcr_resource *res)
{
    return cache_of(ctx->ctl, res);
}

kcr_object *kcr_ctx_get_primary(kcr_ctx *ctx)
{
    return kcr_store_get_by_key(ctx->ctl->sources[0].cache, ctx->req->key);
}

kcr_event_recorder *kcr_ctx_recorder(kcr_ctx *ctx)
{
    return ctx->recorder;
}

kcr_cancel *kcr_ctx_cancel(kcr_ctx *ctx)
{
    return ctx->cancel;
}

bool kcr_ctx_canceled(kcr_ctx *ctx)
{
    return ctx->cancel && kcr_cancel_triggered(ctx->cancel);
}

int64_t kcr_ctx_now_ms(kcr_ctx *ctx)
{
    return ctx->ctl->env_ops->now_ms(ctx->ctl->env);
}

kcr_controller *kcr_ctx_controller(kcr_ctx *ctx)
{
    return ctx->ctl;
}

const kcr_shard_member_info *kcr_ctx_shard(kcr_ctx *ctx)
{
    return ctx ? ctx->shard : NULL;
}

kcr_controller *kcr_source_ctx_controller(kcr_source_ctx *ctx)
{
    return ctx ? ctx->src->ctl : NULL;
}

kcr_store *kcr_source_ctx_cache(kcr_source_ctx *ctx, const kcr_resource *res)
{
    return ctx ? cache_of(ctx->src->ctl, res) : NULL;
}

kcr_client *kcr_source_ctx_client(kcr_source_ctx *ctx)
{
    return ctx ? ctx->src->ctl->client : NULL;
}

int64_t kcr_source_ctx_now_ms(kcr_source_ctx *ctx)
{
    kcr_controller *c = ctx ? ctx->src->ctl : NULL;
    return c && c->env_ops ? c->env_ops->now_ms(c->env) : 0;
}
