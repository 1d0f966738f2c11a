/* Value flags taken out of argv (flags.h). */
#include "flags.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* The value of flag `name` at argv[*i] ("--name V" or "--name=V"), or NULL
 * when argv[*i] is another flag; *i moves past the value. */
static const char *flag_value(char **argv, int argc, int *i, const char *name, bool *missing)
{
    size_t n = strlen(name);
    const char *a = argv[*i];
    if (strncmp(a, name, n) != 0)
        return NULL;
    if (a[n] == '=')
        return a + n + 1;
    if (a[n] != '\0')
        return NULL;
    if (*i + 1 >= argc) {
        *missing = true;
        return NULL;
    }
    return argv[++*i];
}

int sample_take_flags(int *argc, char **argv, const sample_flag *flags, size_t n)
{
    int out = 1;
    for (int i = 1; i < *argc; i++) {
        bool missing = false, taken = false;
        int at = i;
        for (size_t f = 0; f < n && !taken && !missing; f++) {
            const char *v = flag_value(argv, *argc, &i, flags[f].name, &missing);
            if (v) {
                *flags[f].value = v;
                taken = true;
            }
        }
        if (missing) {
            fprintf(stderr, "%s: %s needs a value\n", argv[0], argv[at]);
            return 2;
        }
        if (!taken)
            argv[out++] = argv[i];
    }
    argv[out] = NULL;
    *argc = out;
    return 0;
}
