/* kcr-gen: how JSON names become C names (docs/types.md, "Names"). */
#include <ctype.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "gen.h"

void gen_die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("kcr-gen: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

char *gen_strdup(const char *s)
{
    char *r = strdup(s);
    if (!r)
        gen_die("out of memory");
    return r;
}

char *gen_printf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *r = malloc((size_t)n + 1);
    if (!r)
        gen_die("out of memory");
    va_start(ap, fmt);
    vsnprintf(r, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return r;
}

static bool is_alnum(char c)
{
    return isalnum((unsigned char)c) != 0;
}

/* Word boundaries: lower->Upper ("podIP"), an upper run followed by a word
 * ("HTTPGet" -> HTTP Get) except a plural "s" closing the run ("podIPs"),
 * letter<->digit is no boundary ("v1beta1"), any other character is one. */
char *gen_snake(const char *json)
{
    size_t n = strlen(json);
    char *r = malloc(2 * n + 2);
    if (!r)
        gen_die("out of memory");
    size_t w = 0;
    if (n && isdigit((unsigned char)json[0]))
        r[w++] = '_';
    for (size_t i = 0; i < n; i++) {
        char c = json[i];
        if (!is_alnum(c)) {
            if (w && r[w - 1] != '_')
                r[w++] = '_';
            continue;
        }
        if (isupper((unsigned char)c) && i > 0 && w && r[w - 1] != '_') {
            char prev = json[i - 1], next = i + 1 < n ? json[i + 1] : '\0';
            bool plural_s = next == 's' && (i + 2 >= n || !islower((unsigned char)json[i + 2]));
            if (islower((unsigned char)prev) || isdigit((unsigned char)prev) ||
                (isupper((unsigned char)prev) && islower((unsigned char)next) && !plural_s))
                r[w++] = '_';
        }
        r[w++] = (char)tolower((unsigned char)c);
    }
    while (w > 1 && r[w - 1] == '_')
        w--;
    if (w == 0)
        r[w++] = '_';
    r[w] = '\0';
    return r;
}

char *gen_camel(const char *json)
{
    size_t n = strlen(json);
    char *r = malloc(n + 2);
    if (!r)
        gen_die("out of memory");
    size_t w = 0;
    bool up = true;
    for (size_t i = 0; i < n; i++) {
        char c = json[i];
        if (!is_alnum(c)) {
            up = true;
            continue;
        }
        if (w == 0 && isdigit((unsigned char)c))
            r[w++] = 'X';
        r[w++] = up ? (char)toupper((unsigned char)c) : c;
        up = false;
    }
    if (w == 0)
        r[w++] = 'X';
    r[w] = '\0';
    return r;
}

char *gen_upper(const char *s)
{
    char *snake = gen_snake(s);
    for (char *p = snake; *p; p++)
        *p = (char)toupper((unsigned char)*p);
    return snake;
}
