/* The soak's content and memory checks (check.h). */
#include "soak/check.h"

#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct content_walk {
    kcr_store *store;
    size_t listed;
    char *why;
    size_t why_len;
    bool ok;
} content_walk;

static bool same_value(const kcr_object *a, const kcr_object *b, const char *path)
{
    char *ja = NULL, *jb = NULL;
    kcr_value va = kcr_object_get(a, path), vb = kcr_object_get(b, path);
    if (kcr_value_get_type(va) == KCR_VALUE_ABSENT || kcr_value_get_type(vb) == KCR_VALUE_ABSENT)
        return kcr_value_get_type(va) == kcr_value_get_type(vb);
    bool same = kcr_value_to_json(va, &ja, NULL) == KCR_OK &&
                kcr_value_to_json(vb, &jb, NULL) == KCR_OK && strcmp(ja, jb) == 0;
    free(ja);
    free(jb);
    return same;
}

static kcr_err compare_one(kcr_object *srv, void *ud)
{
    content_walk *w = ud;
    w->listed++;
    if (!w->ok)
        return KCR_OK;
    kcr_object *mine = kcr_lister_get(w->store, kcr_object_namespace(srv), kcr_object_name(srv));
    static const char *const paths[] = {"metadata.uid", "metadata.resourceVersion",
                                        "metadata.labels", "data"};
    const char *differs = mine ? NULL : "presence";
    /* a List's items carry no kind/apiVersion: the informer stamps them, on
     * relists too, so an owner reference built from the cache is valid */
    if (mine && strcmp(kcr_object_kind(mine), "ConfigMap") != 0)
        differs = "kind (the cached object's is not ConfigMap)";
    if (mine && strcmp(kcr_object_api_version(mine), "v1") != 0)
        differs = "apiVersion (the cached object's is not v1)";
    for (size_t i = 0; mine && !differs && i < sizeof paths / sizeof *paths; i++)
        if (!same_value(mine, srv, paths[i]))
            differs = paths[i];
    if (differs) {
        snprintf(w->why, w->why_len, "cache and server differ in %s of %s/%s", differs,
                 kcr_object_namespace(srv), kcr_object_name(srv));
        w->ok = false;
    }
    kcr_object_unref(mine);
    return KCR_OK;
}

bool soak_same_content(kcr_client *c, const char *ns, kcr_store *store, char *why, size_t why_len)
{
    static const kcr_resource cm = {"", "v1", "configmaps"};
    content_walk w = {.store = store, .why = why, .why_len = why_len, .ok = true};
    kcr_status st = {0};
    kcr_err err = kcr_client_list(c, &(kcr_request){.resource = &cm, .ns = ns, .status = &st},
                                  compare_one, &w, NULL);
    kcr_status_clear(&st);
    if (err != KCR_OK) {
        snprintf(why, why_len, "fresh LIST failed: %s: %s", kcr_strerror(err), kcr_last_error());
        return false;
    }
    if (w.ok && w.listed != kcr_store_len(store)) {
        snprintf(why, why_len, "the cache holds %zu objects, the server %zu", kcr_store_len(store),
                 w.listed);
        w.ok = false;
    }
    return w.ok;
}

long soak_rss_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return -1;
    char line[256];
    long kib = -1;
    while (kib < 0 && fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld kB", &kib) != 1)
            kib = -1;
    fclose(f);
    return kib;
}

long soak_heap_kib(void)
{
    struct mallinfo2 mi = mallinfo2();
    return (long)(mi.uordblks / 1024);
}
