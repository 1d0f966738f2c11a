/* Internal: the client vtable shared by the HTTP back end and the fake, plus
 * helpers every back end uses (Status decoding, discovery resolution). */
#ifndef KCR_CLIENT_CLIENT_IMPL_H
#define KCR_CLIENT_CLIENT_IMPL_H

#include <stdatomic.h>

#include "kcr/object.h"
#include "kcr/client.h"

typedef struct kcr__disc_query kcr__disc_query;

/* The options of each verb as its back end reads them, taken from the
 * caller's kcr_request by client.c (field meanings as in kcr_request). */
typedef struct kcr__get_options {
    const char *resource_version;
    const char *subresource;
    bool metadata_only;
    kcr_cancel *cancel;
} kcr__get_options;

typedef struct kcr__write_options {
    const char *field_manager; /* never NULL once client.c filled in the default */
    const char *subresource;
    bool force;
    bool dry_run;
    kcr_cancel *cancel;
} kcr__write_options;

typedef struct kcr__delete_options {
    const char *propagation_policy;
    const char *precondition_uid;
    const char *precondition_resource_version;
    int64_t grace_period_ms;
    bool has_grace_period;
    bool dry_run;
    kcr_cancel *cancel;
} kcr__delete_options;

typedef struct kcr__list_options {
    const char *label_selector;
    const char *field_selector;
    const char *resource_version;
    const char *resource_version_match;
    int64_t limit;
    const char *continue_token;
    int64_t timeout_ms;
    bool metadata_only;
    bool drop_managed_fields;
    bool allow_bookmarks;
    bool send_initial_events;
    int64_t idle_timeout_ms;
    kcr_cancel *cancel;
    const char *shard_selector; /* NULL or "": none */
    kcr_shard_info *shard_info; /* list: NULL, or where shardInfo goes (cleared by the caller) */
} kcr__list_options;

/* The list/watch options of a request. */
kcr__list_options kcr__list_options_of(const kcr_request *req);

/* Every operation gets a non-NULL, cleared `st` and non-NULL options. */
typedef struct kcr__client_ops {
    kcr_err (*get)(kcr_client *c, const kcr_resource *res, const char *ns, const char *name,
                   const kcr__get_options *opts, kcr_object **out, kcr_status *st);
    kcr_err (*create)(kcr_client *c, const kcr_resource *res, const char *ns, const char *json,
                      size_t len, const kcr__write_options *opts, kcr_object **out, kcr_status *st);
    kcr_err (*update)(kcr_client *c, const kcr_resource *res, const char *ns, const char *name,
                      const char *json, size_t len, const kcr__write_options *opts,
                      kcr_object **out, kcr_status *st);
    kcr_err (*patch)(kcr_client *c, const kcr_resource *res, const char *ns, const char *name,
                     kcr_patch_type type, const char *patch, size_t len,
                     const kcr__write_options *opts, kcr_object **out, kcr_status *st);
    kcr_err (*del)(kcr_client *c, const kcr_resource *res, const char *ns, const char *name,
                   const kcr__delete_options *opts, kcr_object **out, kcr_status *st);
    kcr_err (*list)(kcr_client *c, const kcr_resource *res, const char *ns,
                    const kcr__list_options *opts, kcr_list_item_fn fn, void *ud,
                    kcr_list_meta *meta, kcr_status *st);
    kcr_err (*watch)(kcr_client *c, const kcr_resource *res, const char *ns,
                     const kcr__list_options *opts, kcr_watch_event_fn fn, void *ud,
                     kcr_status *st);
    /* Resolves with kcr__disc_resolve() over the back end's resource table;
     * refresh=true re-reads it first. */
    kcr_err (*resolve)(kcr_client *c, const kcr__disc_query *q, bool refresh,
                       kcr_api_resource *out, kcr_status *st);
    void (*invalidate)(kcr_client *c);
    /* opts is non-NULL with method, accept and content_type filled in. */
    kcr_err (*raw)(kcr_client *c, const char *path, const char *body, size_t body_len,
                   const kcr_raw_options *opts, char **out, size_t *out_len, kcr_status *st);
    void (*destroy)(kcr_client *c);
    /* Non-NULL: the back end sends no HTTP (the fake), so client.c reports
     * each call to the request observer under this host. NULL: the back end
     * reports each HTTP attempt itself (kcr__client_observe). */
    const char *dispatch_host;
} kcr__client_ops;

struct kcr_client {
    const kcr__client_ops *ops;
    char *ns;
    char *field_manager;              /* default fieldManager of writes; NULL: the program's name */
    kcr_request_observer_fn observer; /* NULL: none */
    void *observer_data;
};

/* kcr__transport_set_idle_close for c, a client of kcr_client_new (not a
 * fake's). For tests. Thread-safe. */
void kcr__http_client_set_idle_close(kcr_client *c, int64_t ms);

/* Reports one completed request to c's observer, if any (code 0: no response). */
void kcr__client_observe(const kcr_client *c, const char *method, const char *host, int code,
                         int64_t start_ns);

/* The program's name (program_invocation_short_name, else /proc/self/comm,
 * else "kcr"); static storage, computed once. Thread-safe. */
const char *kcr__program_name(void);

/* ---- Status --------------------------------------------------------------------------- */

/* Fills st from a parsed document if it is a Status (kind "Status" or
 * status "Failure"/"Success" with a code). KCR_ERR_PARSE otherwise. */
kcr_err kcr__status_from_value(kcr_value doc, kcr_status *st);

/* Fills st from an HTTP error response: the Status in the body, or a
 * Status-like error with the HTTP code and the body's first bytes. Sets
 * kcr_last_error() and returns the mapped error. */
kcr_err kcr__status_from_http(long http_code, const char *body, size_t len, kcr_status *st);

/* Sets kcr_last_error() to "<code> <reason>: <message>" and returns the mapped error. */
kcr_err kcr__status_fail(const kcr_status *st);

/* Builds a Status (for the fake); strings copied. */
kcr_err kcr__status_make(kcr_status *st, int code, const char *reason, const char *message);

/* The Status as JSON (for the fake and tests); malloc'd. NULL, with
 * kcr_last_error() set, when out of memory or a string is not valid UTF-8. */
char *kcr__status_to_json(const kcr_status *st);

/* Maps an HTTP code (+ reason for 409) to kcr_err. */
kcr_err kcr__err_for_code(int code, const char *reason);

/* ---- Discovery ----------------------------------------------------------------------- */

/* The verbs discovery lists for a resource or subresource, as bits. */
enum {
    KCR__VERB_GET = 1u << 0,
    KCR__VERB_LIST = 1u << 1,
    KCR__VERB_WATCH = 1u << 2,
    KCR__VERB_CREATE = 1u << 3,
    KCR__VERB_UPDATE = 1u << 4,
    KCR__VERB_PATCH = 1u << 5,
    KCR__VERB_DELETE = 1u << 6,
    KCR__VERB_DELETECOLLECTION = 1u << 7,
    KCR__VERB_ALL = (1u << 8) - 1
};

/* A subresource ("status", "scale", "log") and its verbs. */
typedef struct kcr__disc_sub {
    char *name;
    unsigned verbs;
} kcr__disc_sub;

typedef struct kcr__disc_entry {
    kcr_api_resource r;
    char **short_names; /* n_short, malloc'd */
    size_t n_short;
    bool preferred;     /* the group's preferred version */
    unsigned verbs;     /* KCR__VERB_* bits; KCR__VERB_ALL when discovery did not say */
    kcr__disc_sub *subs; /* n_subs, malloc'd */
    size_t n_subs;
} kcr__disc_entry;

/* Entries in priority order (core first, then groups as the server orders
 * them, preferred version first within a group). */
typedef struct kcr__disc_table {
    kcr__disc_entry *e;
    size_t n, cap;
} kcr__disc_table;

struct kcr__disc_query {
    const char *name;    /* what the user typed (resolve by name), or NULL */
    const char *group;   /* resolve by kind: group, version (NULL: preferred), kind */
    const char *version;
    const char *kind;
    kcr_cancel *cancel; /* the discovery requests' token, or NULL */
};

kcr_err kcr__disc_add(kcr__disc_table *t, const kcr_api_resource *r, const char *const *shorts,
                      size_t n_short, bool preferred);
void kcr__disc_clear(kcr__disc_table *t);
/* The bits of the verbs named in `csv` ("get,list,watch"); unknown ones are ignored. */
unsigned kcr__disc_verbs(const char *csv);
/* Adds a subresource with its verbs (bits) to e. */
kcr_err kcr__disc_add_sub(kcr__disc_entry *e, const char *name, unsigned verbs);
/* e's subresource `name`, or NULL. */
const kcr__disc_sub *kcr__disc_find_sub(const kcr__disc_entry *e, const char *name);
/* KCR_ERR_NOT_FOUND (with a message) when nothing matches. */
kcr_err kcr__disc_resolve(const kcr__disc_table *t, const kcr__disc_query *q,
                          kcr_api_resource *out);
/* Parses an APIGroupDiscoveryList (aggregated discovery) into t. */
kcr_err kcr__disc_parse_aggregated(kcr_value doc, kcr__disc_table *t);
/* Parses a legacy APIResourceList for group/version into t. */
kcr_err kcr__disc_parse_resource_list(kcr_value doc, const char *group, const char *version,
                                      bool preferred, kcr__disc_table *t);

/* ---- Cancellation ----------------------------------------------------------------------- */

struct kcr_cancel {
    atomic_bool triggered;
    int fds[2]; /* a pipe: readable once triggered, for the transport's poll() */
};

#endif
