/* Path text for typed/ (typed_path.h). */
#include <string.h>

#include "typed/typed_path.h"

static bool plain_key(const char *key)
{
    if (!*key)
        return false;
    for (const char *p = key; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '_' || *p == '-' || *p == '$' || *p == '@'))
            return false;
    return true;
}

bool kcr__typed_path_key(char *path, size_t *len, size_t cap, const char *key)
{
    size_t n = *len;
    if (plain_key(key)) {
        size_t k = strlen(key);
        if (n + (n ? 1 : 0) + k + 1 > cap)
            return false;
        if (n)
            path[n++] = '.';
        memcpy(path + n, key, k);
        n += k;
    } else {
        if (n + 2 > cap)
            return false;
        path[n++] = '[';
        path[n++] = '"';
        for (const char *p = key; *p; p++) {
            if (n + (*p == '"' || *p == '\\' ? 2 : 1) + 3 > cap) {
                path[*len] = '\0';
                return false;
            }
            if (*p == '"' || *p == '\\')
                path[n++] = '\\';
            path[n++] = *p;
        }
        path[n++] = '"';
        path[n++] = ']';
    }
    path[n] = '\0';
    *len = n;
    return true;
}
