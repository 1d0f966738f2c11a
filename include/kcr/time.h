/* Kubernetes timestamps (RFC 3339, as in metadata.creationTimestamp or a
 * condition's lastTransitionTime) to and from Unix seconds. Thread-safe:
 * no shared state. */
#ifndef KCR_TIME_H
#define KCR_TIME_H

#include <stddef.h>
#include <stdint.h>

#include "kcr/error.h"
#include "kcr/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Parses an RFC 3339 timestamp ("2024-02-29T12:34:56Z", fractions and
 * "+01:00"-style offsets allowed) into Unix seconds, fractions dropped.
 * KCR_ERR_PARSE (kcr_last_error() says why) for anything else,
 * KCR_ERR_INVALID for a NULL `unix_seconds`. */
KCR_API kcr_err kcr_time_parse(const char *rfc3339, int64_t *unix_seconds);

/* Writes `unix_seconds` as "YYYY-MM-DDTHH:MM:SSZ" (20 characters and a NUL)
 * into `buf`; truncated (still NUL-terminated) if `size` is smaller, and
 * nothing written if `buf` is NULL or `size` 0. */
KCR_API void kcr_time_format(int64_t unix_seconds, char *buf, size_t size);

/* Writes `unix_us` (microseconds since the Unix epoch) as a Kubernetes
 * MicroTime, "YYYY-MM-DDTHH:MM:SS.uuuuuuZ" (27 characters and a NUL), as
 * Lease renewTime and Event eventTime use; truncated like kcr_time_format. */
KCR_API void kcr_time_format_micro(int64_t unix_us, char *buf, size_t size);

/* Durations: int64_t milliseconds in every field and parameter named *_ms,
 * with one meaning of 0 and of negative values everywhere (docs/abi.md):
 *   - in an options field, KCR_DURATION_DEFAULT (0) is the field's default,
 *     given in its comment;
 *   - KCR_DURATION_INFINITE: no limit (wait forever, never time out, never
 *     repeat), accepted where the field or parameter says so;
 *   - KCR_DURATION_ZERO: no time at all (do not wait, at once), for the
 *     fields that say so (as a timeout parameter, 0 means that already);
 *   - any other negative value, and any value above KCR_DURATION_MAX, is
 *     refused with KCR_ERR_INVALID.
 * A delay to a point in time (kcr_workqueue_add_after) is the one exception:
 * a delay <= 0 is due now. */
#define KCR_DURATION_DEFAULT INT64_C(0)
#define KCR_DURATION_INFINITE INT64_C(-1)
#define KCR_DURATION_ZERO INT64_C(-2)
/* The largest finite duration, 2^40 ms (about 35 years). */
#define KCR_DURATION_MAX (INT64_C(1) << 40)

/* A source of time that tests can replace (a virtual clock). now_ms returns
 * milliseconds since the Unix epoch; it is called from any thread, so it must
 * be thread-safe. Components take `const kcr_clock *clock` in their options
 * (NULL: the real clock) and borrow it for their lifetime. */
typedef struct kcr_clock {
    int64_t (*now_ms)(void *user_data);
    void *user_data;
    /* Zero. Fields added after 1.0 take these bytes: the struct is reached through options,
     * so its size never changes (docs/abi.md). Not zero: KCR_ERR_INVALID. */
    uint64_t reserved[4];
} kcr_clock;

/* clock's time in ms since the Unix epoch; the real (CLOCK_REALTIME) time
 * when `clock` or its now_ms is NULL. Thread-safe. */
KCR_API int64_t kcr_clock_now_ms(const kcr_clock *clock);

#ifdef __cplusplus
}
#endif

#endif
