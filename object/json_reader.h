/* Internal: kcr's incremental JSON reader (RFC 8259), the one lexer and
 * grammar under kcr_object_parse (object/parse.c) and the streaming LIST and
 * watch decoders (client/framer.c).
 *
 * Fed in any chunking, it reports the same events for the same bytes: each
 * token is found in one pass over its bytes; a token split across feeds is
 * kept and completed from the next feed (so total work stays linear however
 * small the chunks). Strings without escapes are reported in place (pointing
 * into the fed buffer); strings with escapes are decoded into the reader's
 * own buffer (\u escapes to UTF-8, a surrogate pair to one code point, a
 * lone surrogate to U+FFFD as Go's encoding/json does). Bytes >= 0x80 pass
 * as they are: UTF-8 is checked by the object builder (object/utf8.h), not
 * here; unescaped control characters in strings are errors. Numbers are
 * checked against JSON's grammar and reported as their text.
 * A reader belongs to the thread that feeds it. */
#ifndef KCR_OBJECT_JSON_READER_H
#define KCR_OBJECT_JSON_READER_H

#include <stdbool.h>
#include <stddef.h>

typedef enum kcr__jev_type {
    KCR__JEV_NULL,
    KCR__JEV_BOOL,
    KCR__JEV_NUMBER, /* s/len: the number's text */
    KCR__JEV_STRING, /* s/len: the string (not NUL-terminated) */
    KCR__JEV_KEY,    /* s/len: the key */
    KCR__JEV_START_MAP,
    KCR__JEV_END_MAP,
    KCR__JEV_START_ARRAY,
    KCR__JEV_END_ARRAY,
    KCR__JEV_CAPTURED /* never from the reader: client/framer.h's own event */
} kcr__jev_type;

/* One parse event. s points into the fed buffer or the reader's own storage
 * and is valid only during the callback. */
typedef struct kcr__jev {
    kcr__jev_type type;
    const char *s;
    size_t len;
    bool b;     /* KCR__JEV_BOOL */
    bool ascii; /* STRING, KEY: every byte < 0x80, so valid UTF-8 as it is */
} kcr__jev;

/* Called for each event; returns true to go on, false to stop the reader
 * (feed then returns KCR__JR_STOPPED). */
typedef bool (*kcr__jreader_fn)(void *user_data, const kcr__jev *ev);

typedef enum kcr__jreader_status {
    KCR__JR_OK,
    KCR__JR_STOPPED, /* the callback returned false */
    KCR__JR_ERROR    /* invalid JSON or out of memory: kcr__jreader_error() */
} kcr__jreader_status;

typedef struct kcr__jreader kcr__jreader;

/* multiple_values: the input is a sequence of JSON values (a watch stream),
 * not exactly one. NULL when out of memory. Free with kcr__jreader_free. */
kcr__jreader *kcr__jreader_new(bool multiple_values, kcr__jreader_fn fn, void *user_data);
void kcr__jreader_free(kcr__jreader *r);

/* Reads the next len bytes. After STOPPED or ERROR, stop feeding. */
kcr__jreader_status kcr__jreader_feed(kcr__jreader *r, const char *buf, size_t len);
/* At the end of the input: a value (or a number) still open is an error, as
 * is no value at all unless multiple_values. */
kcr__jreader_status kcr__jreader_complete(kcr__jreader *r);

/* During a callback for a KEY: the key's value is skipped; for a START_MAP or
 * START_ARRAY: the rest of that container, its end included. A skipped value
 * is read and checked like any other (invalid JSON in it is an error, its
 * escapes are checked but not decoded) and reported as no events at all; the
 * events after it are reported as usual. */
void kcr__jreader_skip_value(kcr__jreader *r);

/* During a callback: bytes of the buffer being fed up to the end of the token
 * reported (a '{' is at consumed - 1). */
size_t kcr__jreader_consumed(const kcr__jreader *r);
/* After ERROR: a static message, and the offset in the whole input of the
 * byte (or token) found wrong; out_of_memory tells NOMEM from a parse error. */
const char *kcr__jreader_error(const kcr__jreader *r, size_t *offset, bool *out_of_memory);

#endif
