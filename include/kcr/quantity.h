/* kcr_quantity: Kubernetes resource quantities ("500m", "1536Mi", "1e3").
 *
 * A value type: a fixed-size struct, no allocation, copied by assignment,
 * safe to use from any thread (functions only read their inputs and write
 * their outputs). It follows apimachinery's resource.Quantity (the version
 * testenv runs, v0.37):
 *
 *   text    ::= sign? number suffix
 *   number  ::= digits | digits "." digits? | "." digits?   (leading zeros ok)
 *   suffix  ::= binary SI   "Ki" "Mi" "Gi" "Ti" "Pi" "Ei"    (2^10 .. 2^60)
 *             | decimal SI  "n" "u" "m" "" "k" "M" "G" "T" "P" "E"
 *             | exponent    ("e" | "E") sign? digits          ("1e3", "5E-1")
 *
 * What parsing keeps, as Go does: the value, exactly, down to 1n (10^-9); a
 * finer non-zero value is rounded away from zero to the next nano ("0.9n"
 * is 1n, "3.001n" is 4n). A binary SI value is capped at 2^63-1 in
 * magnitude ("9Ei" parses as 9223372036854775807); a decimal one is not
 * capped. The format family of the suffix is remembered (a binary value
 * under 1 becomes decimal SI: "0.000000000001Ki" is "2n"). A lone sign or
 * dot ("-", ".") is zero, as in Go. Refused (KCR_ERR_PARSE): "", spaces,
 * "1.1.M", "0.1mi", "1i", "1e", "1e-", an unknown suffix.
 *
 * kcr's limits (Go uses unbounded decimals): at most 38 significant digits
 * and an exponent within int32 after rounding; beyond that parsing and
 * arithmetic give KCR_ERR_TOO_LARGE instead of a value. Exponent text that
 * does not fit int32 is refused (Go wraps it to another value).
 *
 * Canonical text (kcr_quantity_to_string), as the apiserver writes it:
 *   - zero is "0", whatever the format;
 *   - decimal SI and exponent: no fractional digits, the largest exponent
 *     that is a multiple of 3 ("0.5" -> "500m", "1000m" -> "1", "1.5k" ->
 *     "1500", "1e3" -> "1e3", "1.2e3" -> "1200", "0.5e-1" -> "50e-3");
 *   - binary SI: the largest power of 1024 that divides the value ("1.5Gi"
 *     -> "1536Mi", "1024Mi" -> "1Gi"); a value under 1024 in magnitude, or
 *     one that is not a whole number, is written as decimal SI ("0.5Ki" ->
 *     "512", "1.5" of binary -> "1500m");
 *   - a sign only when negative.
 * Two deliberate differences, only for values parsing cannot produce or
 * that apimachinery v0.37 corrupts: a decimal SI value above the "E" suffix
 * is written with an exponent ("1000E" -> "1e21"; v0.37 writes "1", which
 * later apimachinery fixed the same way), and a binary value beyond 1024Ei
 * keeps the "Ei" suffix. The apiserver also echoes some inputs verbatim:
 * see kcr_quantity_server_text. */
#ifndef KCR_QUANTITY_H
#define KCR_QUANTITY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kcr/error.h"
#include "kcr/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The suffix family a quantity is written in. */
typedef enum kcr_quantity_format {
    KCR_QUANTITY_DECIMAL_SI = 0,       /* "500m", "2k", "3G" */
    KCR_QUANTITY_BINARY_SI = 1,        /* "1Ki", "1536Mi" */
    KCR_QUANTITY_DECIMAL_EXPONENT = 2  /* "1e3", "50e-3" */
} kcr_quantity_format;

/* Room for any canonical text kcr_quantity_to_string writes, NUL included. */
#define KCR_QUANTITY_TEXT_MAX 64

/* A quantity: (-1)^neg * mant * 10^exp. Read it through the functions
 * below; the fields are shown only so the type can live on the stack and be
 * copied. Invariants every function keeps and expects: mant (hi:lo, an
 * unsigned 128-bit integer) has no factor of 10 unless the value is zero;
 * zero has exp 0 and neg 0, so equal values have equal fields apart from
 * `format`. A zero-initialised struct is the quantity 0 in decimal SI. */
typedef struct kcr_quantity {
    uint64_t mant_lo;      /* low 64 bits of the magnitude's mantissa */
    uint64_t mant_hi;      /* high 64 bits */
    int32_t exp;           /* power of ten, >= -9 for every parsed value */
    uint8_t neg;           /* 1 when negative (never for zero) */
    uint8_t format;        /* a kcr_quantity_format */
    uint8_t reserved[2];   /* zero */
} kcr_quantity;

/* Parses `len` bytes of `text` (no NUL needed; NUL bytes inside are refused).
 * On success fills *out. Errors: KCR_ERR_INVALID (NULL text with len > 0, or
 * NULL out), KCR_ERR_PARSE (not a quantity; kcr_last_error() quotes it and
 * says why), KCR_ERR_TOO_LARGE (beyond kcr's limits above). *out is left
 * unchanged on failure. Leading or trailing spaces are refused, as in Go's
 * ParseQuantity (the apiserver trims them from JSON strings first:
 * kcr_quantity_parse_json does the same). */
KCR_API kcr_err kcr_quantity_parse(const char *text, size_t len, kcr_quantity *out);

/* kcr_quantity_parse of a NUL-terminated string. */
KCR_API kcr_err kcr_quantity_parse_str(const char *text, kcr_quantity *out);

/* As kcr_quantity_parse after trimming ASCII white space at both ends: how
 * the apiserver reads a quantity from a JSON string or number. */
KCR_API kcr_err kcr_quantity_parse_json(const char *text, size_t len, kcr_quantity *out);

/* Writes the canonical text (see above) and a NUL into buf, truncating to
 * cap - 1 bytes as snprintf does, and returns the text's full length (less
 * than KCR_QUANTITY_TEXT_MAX). buf may be NULL when cap is 0. */
KCR_API size_t kcr_quantity_to_string(const kcr_quantity *q, char *buf, size_t cap);

/* What the apiserver stores when it is sent `text` (NUL-terminated): Go
 * keeps the caller's text verbatim when its fast path finds it canonical
 * enough ("+1", "01", "1.", "1E3", "1e+3", "1e0" and "1025Ki" stay as
 * written), and writes the canonical text otherwise ("0.5" -> "500m").
 * Writes it with a NUL into buf (cap bytes). Errors: those of
 * kcr_quantity_parse_str, and KCR_ERR_TOO_LARGE when buf is too small. */
KCR_API kcr_err kcr_quantity_server_text(const char *text, char *buf, size_t cap);

/* Compares values, ignoring the format: -1, 0 or 1 as a <, ==, > b. */
KCR_API int kcr_quantity_cmp(const kcr_quantity *a, const kcr_quantity *b);

/* -1, 0 or 1: the sign of q. */
KCR_API int kcr_quantity_sign(const kcr_quantity *q);

/* *out = a + b (out may alias a or b). The result keeps a's format, or b's
 * when a is zero (as Go's Add). Errors: KCR_ERR_INVALID (NULL argument),
 * KCR_ERR_TOO_LARGE (beyond 38 significant digits or the int32 exponent;
 * *out unchanged). Exact otherwise. */
KCR_API kcr_err kcr_quantity_add(const kcr_quantity *a, const kcr_quantity *b, kcr_quantity *out);

/* *out = a - b, formats and errors as kcr_quantity_add. */
KCR_API kcr_err kcr_quantity_sub(const kcr_quantity *a, const kcr_quantity *b, kcr_quantity *out);

/* -q, same format. */
KCR_API kcr_quantity kcr_quantity_neg(kcr_quantity q);

/* Builds value * 10^scale in `format` (scale -3 for milli-units, 0 for whole
 * units). Errors: KCR_ERR_INVALID (NULL out, scale below -9, unknown
 * format). */
KCR_API kcr_err kcr_quantity_from_int64(int64_t value, int32_t scale, kcr_quantity_format format,
                                        kcr_quantity *out);

/* The value in units of 10^scale as an int64, rounded away from zero when
 * not exact (1.5 -> 2 and -1.5 -> -2 at scale 0; "1n" -> 1 at scale -3), as
 * Go's ScaledValue does for int64-sized quantities. Errors: KCR_ERR_INVALID
 * (NULL argument), KCR_ERR_TOO_LARGE when the result does not fit int64
 * (Go returns a wrapped value there); *out unchanged on failure. */
KCR_API kcr_err kcr_quantity_scaled_value(const kcr_quantity *q, int32_t scale, int64_t *out);

/* kcr_quantity_scaled_value at scale 0 (Go's Value). */
KCR_API kcr_err kcr_quantity_value(const kcr_quantity *q, int64_t *out);

/* kcr_quantity_scaled_value at scale -3 (Go's MilliValue). */
KCR_API kcr_err kcr_quantity_milli_value(const kcr_quantity *q, int64_t *out);

#ifdef __cplusplus
}
#endif

#endif
