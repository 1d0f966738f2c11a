/* Internal: Kubernetes label selectors ("a=b,c!=d,e in (x,y),f notin (z),g,!h")
 * and the simple field selectors the fake serves. Immutable once parsed, so
 * safe to share between threads. */
#ifndef KCR_OBJECT_SELECTOR_H
#define KCR_OBJECT_SELECTOR_H

#include <stdbool.h>

#include "kcr/error.h"

typedef struct kcr__selector kcr__selector;

/* Returns the value of label `key`, or NULL when absent. */
typedef const char *(*kcr__label_fn)(const char *key, void *ud);

/* Parses a label selector; NULL or "" selects everything. KCR_ERR_INVALID
 * with a message on bad syntax. */
kcr_err kcr__selector_parse(const char *text, kcr__selector **out);
void kcr__selector_free(kcr__selector *s);
bool kcr__selector_matches(const kcr__selector *s, kcr__label_fn get, void *ud);

/* Field selectors use the same syntax restricted to =, ==, != (no sets). */
kcr_err kcr__field_selector_parse(const char *text, kcr__selector **out);

#endif
