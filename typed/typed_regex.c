/* ECMA-262 schema patterns on POSIX <regex.h> (typed_regex.h). */
#include <regex.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "typed/typed_regex.h"

static bool put(char *out, size_t cap, size_t *n, const char *s)
{
    size_t k = strlen(s);
    if (*n + k + 1 > cap)
        return false;
    memcpy(out + *n, s, k + 1);
    *n += k;
    return true;
}

/* The class text of \d \w \s (inside brackets: without the brackets). */
static const char *escape_class(char c, bool in_bracket)
{
    switch (c) {
    case 'd': return in_bracket ? "0-9" : "[0-9]";
    case 'w': return in_bracket ? "A-Za-z0-9_" : "[A-Za-z0-9_]";
    case 's': return in_bracket ? "[:space:]" : "[[:space:]]";
    case 'D': return in_bracket ? NULL : "[^0-9]";
    case 'W': return in_bracket ? NULL : "[^A-Za-z0-9_]";
    case 'S': return in_bracket ? NULL : "[^[:space:]]";
    default: return NULL;
    }
}

bool kcr__typed_regex_translate(const char *pattern, char *out, size_t cap)
{
    size_t n = 0;
    bool in_bracket = false;
    out[0] = '\0';
    for (const char *p = pattern; *p; p++) {
        char one[3] = {*p, 0, 0};
        if (*p == '\\') {
            char c = *++p;
            if (!c)
                return false;
            const char *cls = escape_class(c, in_bracket);
            if (cls) {
                if (!put(out, cap, &n, cls))
                    return false;
                continue;
            }
            if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
                return false; /* \b \B \u \x \1 ... */
            if (in_bracket) {
                /* Brackets have no escapes in POSIX: a literal ']' or '-'
                 * cannot be written anywhere but first or last. */
                if (c == ']' || c == '-' || c == '^' || c == '[')
                    return false;
                one[0] = c;
            } else {
                one[0] = '\\';
                one[1] = c;
            }
        } else if (in_bracket) {
            if (*p == ']')
                in_bracket = false;
        } else if (*p == '[') {
            in_bracket = true;
            if (p[1] == '^') {
                one[1] = '^';
                p++;
            }
            if (p[1] == ']')
                return false;
        } else if (*p == '(' && p[1] == '?') {
            if (p[2] != ':')
                return false; /* lookaround, named groups */
            p += 2;           /* (?:x) is (x) here */
        } else if ((*p == '*' || *p == '+' || *p == '?' || *p == '}') && p[1] == '?') {
            return false; /* lazy quantifier */
        }
        if (!put(out, cap, &n, one))
            return false;
    }
    return !in_bracket;
}

int kcr__typed_regex_match(const char *pattern, const char *s)
{
    size_t cap = strlen(pattern) * 12 + 1;
    char *ere = malloc(cap);
    regex_t re;
    if (!ere || !kcr__typed_regex_translate(pattern, ere, cap) ||
        regcomp(&re, ere, REG_EXTENDED | REG_NOSUB) != 0) {
        free(ere);
        return -1;
    }
    free(ere);
    int r = regexec(&re, s, 0, NULL, 0) == 0 ? 1 : 0;
    regfree(&re);
    return r;
}
