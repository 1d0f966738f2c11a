/* Internal: one row of fake/builtins.inc, the built-in resources of
 * testenv's Kubernetes version as its kube-apiserver's discovery lists them
 * (captured by fake/gen-builtins). Expand the table with
 *   static const kcr__fake_builtin rows[] = {
 *   #define ROW KCR__FAKE_BUILTIN_ROW
 *   #include "fake/builtins.inc"
 *   #undef ROW
 *   };
 * (discovery.c serves it; tests/unit/test_fake_builtins.c walks it). */
#ifndef KCR_FAKE_BUILTINS_H
#define KCR_FAKE_BUILTINS_H

#include <stdbool.h>

typedef struct kcr__fake_builtin {
    const char *group, *version, *resource, *singular, *kind;
    bool namespaced, preferred; /* preferred: the group's preferred version */
    const char *shorts;         /* short names, comma-separated */
    const char *verbs;          /* comma-separated */
    const char *subresources;   /* "status:get,patch,update;scale:get,patch,update" */
} kcr__fake_builtin;

#define KCR__FAKE_BUILTIN_ROW(g, v, r, s, k, ns, pref, sh, vb, sub)                                \
    {g, v, r, s, k, ns, pref, sh, vb, sub},

#endif
