/* Internal: a label selection of one key's values, `<base>,<key> in (v1,v2)`,
 * which label-mode sharding gives its primary caches (the shard label's
 * values a replica watches). The reflector follows a change of the values
 * by listing only those it gains. Value type: the caller owns a set; no
 * locks, safe from any thread on distinct sets. */
#ifndef KCR_INFORMER_LABEL_SET_H
#define KCR_INFORMER_LABEL_SET_H

#include <stdbool.h>
#include <stddef.h>

#include "kcr/error.h"
#include "kcr/object.h"

typedef struct kcr__label_set {
    char *base;    /* the rest of the label selector, malloc'd; NULL: none */
    char *key;     /* malloc'd; NULL: an empty set (no selection) */
    char **values; /* n malloc'd values, in the order given */
    size_t n;
} kcr__label_set;

/* *s = base (NULL or "": none), key and the n values, copied; s is
 * cleared first. KCR_ERR_NOMEM only. */
kcr_err kcr__label_set_init(kcr__label_set *s, const char *base, const char *key,
                            const char *const *values, size_t n);

void kcr__label_set_clear(kcr__label_set *s);

/* The label selector: `<base>,<key>=<v>` for one value, `<base>,<key> in
 * (<v1>,<v2>)` for more (no base: no leading part). Malloc'd; NULL when
 * out of memory. */
char *kcr__label_set_selector(const kcr__label_set *s);

/* Whether obj carries s's key with one of its values. */
bool kcr__label_set_matches(const kcr__label_set *s, const kcr_object *obj);

/* Whether a and b select by the same key with the same base. */
bool kcr__label_set_same_key(const kcr__label_set *a, const kcr__label_set *b);

/* *out = the values of a that b lacks, with a's base and key (out is
 * cleared first; no values: out->n 0). KCR_ERR_NOMEM only. */
kcr_err kcr__label_set_subtract(const kcr__label_set *a, const kcr__label_set *b,
                                kcr__label_set *out);

#endif
