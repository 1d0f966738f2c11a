/* RFC 3339 timestamps (see kcr/time.h). */
#include "kcr/time.h"

#include <stdio.h>

#include "core/clock.h"
#include "core/error.h"

/* Days since 1970-01-01 of a proleptic Gregorian date. */
static int64_t days_from_civil(int64_t y, int m, int d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

kcr_err kcr_time_parse(const char *s, int64_t *out)
{
    if (!out)
        return kcr__fail(KCR_ERR_INVALID, "kcr_time_parse: NULL out");
    int y, mo, d, h, mi, sec, n = 0;
    if (!s || sscanf(s, "%4d-%2d-%2d%*1[Tt ]%2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &sec, &n) != 6 ||
        n == 0 || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60)
        return kcr__fail(KCR_ERR_PARSE, "bad RFC 3339 timestamp \"%.40s\"", s ? s : "");
    const char *p = s + n;
    if (*p == '.')
        for (p++; *p >= '0' && *p <= '9'; p++)
            ;
    int64_t offset = 0;
    if (*p == 'Z' || *p == 'z') {
        p++;
    } else if (*p == '+' || *p == '-') {
        int oh, om, k = 0;
        if (sscanf(p + 1, "%2d:%2d%n", &oh, &om, &k) != 2 || k != 5)
            return kcr__fail(KCR_ERR_PARSE, "bad RFC 3339 offset in \"%.40s\"", s);
        offset = (int64_t)(oh * 3600 + om * 60) * (*p == '-' ? -1 : 1);
        p += 6;
    } else {
        return kcr__fail(KCR_ERR_PARSE, "RFC 3339 timestamp \"%.40s\" lacks a zone", s);
    }
    if (*p)
        return kcr__fail(KCR_ERR_PARSE, "trailing bytes in timestamp \"%.40s\"", s);
    *out = days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + sec - offset;
    return KCR_OK;
}

void kcr_time_format(int64_t t, char *buf, size_t size)
{
    if (!buf || !size)
        return;
    int64_t days = t >= 0 ? t / 86400 : (t - 86399) / 86400;
    int64_t rem = t - days * 86400;
    /* civil_from_days */
    int64_t z = days + 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t y = yoe + era * 400;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    int64_t d = doy - (153 * mp + 2) / 5 + 1;
    int64_t m = mp < 10 ? mp + 3 : mp - 9;
    y += m <= 2;
    snprintf(buf, size, "%04lld-%02lld-%02lldT%02lld:%02lld:%02lldZ", (long long)y, (long long)m,
             (long long)d, (long long)(rem / 3600), (long long)(rem / 60 % 60),
             (long long)(rem % 60));
}

void kcr_time_format_micro(int64_t unix_us, char *buf, size_t size)
{
    if (!buf || !size)
        return;
    int64_t secs = unix_us >= 0 ? unix_us / 1000000 : (unix_us - 999999) / 1000000;
    int64_t micros = unix_us - secs * 1000000;
    char whole[32];
    kcr_time_format(secs, whole, sizeof whole);
    whole[19] = '\0'; /* drop the 'Z' */
    snprintf(buf, size, "%s.%06lldZ", whole, (long long)micros);
}

int64_t kcr_clock_now_ms(const kcr_clock *clock)
{
    if (clock && clock->now_ms)
        return clock->now_ms(clock->user_data);
    return kcr__wall_ns() / KCR_NS_PER_MS;
}
