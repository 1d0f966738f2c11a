/* libFuzzer target for the streaming watch decoder: any bytes, in chunks
 * whose sizes come from the input, give events and/or a kcr_err with a
 * message; the events seen never depend on how the bytes were split; with
 * managedFields dropped (skipped by the reader) likewise, and a stream that
 * decodes whole decodes to the same events with them dropped. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "client/decode.h"
#include "kcr/kcr.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct seen {
    size_t n;
    unsigned long hash;
};

static kcr_err on_event(const kcr_watch_event *ev, void *ud)
{
    struct seen *s = ud;
    if ((ev->type <= KCR_WATCH_DELETED) != (ev->object != NULL) ||
        (ev->type == KCR_WATCH_ERROR) != (ev->status != NULL) || !ev->resource_version)
        abort();
    s->n++;
    s->hash = s->hash * 31 + (unsigned long)ev->type;
    for (const char *p = ev->resource_version; *p; p++)
        s->hash = s->hash * 31 + (unsigned char)*p;
    return KCR_OK;
}

static kcr_err decode(const char *buf, size_t len, size_t step, bool drop, struct seen *s)
{
    kcr__watch_decoder *d = kcr__watch_decoder_new(1 << 20, on_event, s);
    if (drop)
        kcr__watch_decoder_drop_managed_fields(d);
    kcr_err err = KCR_OK;
    for (size_t off = 0; err == KCR_OK && off < len; off += step)
        err = kcr__watch_decoder_feed(d, buf + off, len - off < step ? len - off : step);
    if (err == KCR_OK)
        err = kcr__watch_decoder_finish(d);
    if (err != KCR_OK && kcr_last_error()[0] == '\0')
        abort();
    kcr__watch_decoder_free(d);
    return err;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t step = (size_t)data[0] % 19 + 1;
    struct seen a = {0}, b = {0}, c = {0}, d = {0};
    kcr_err ea = decode((const char *)data + 1, size - 1, step, false, &a);
    kcr_err eb = decode((const char *)data + 1, size - 1, size, false, &b);
    if (ea != eb || a.n != b.n || a.hash != b.hash)
        abort();
    /* dropping only removes checks (the builder's, of what it never gets) */
    kcr_err ec = decode((const char *)data + 1, size - 1, step, true, &c);
    kcr_err ed = decode((const char *)data + 1, size - 1, size, true, &d);
    if (ec != ed || c.n != d.n || c.hash != d.hash)
        abort();
    if (ea == KCR_OK && (ec != KCR_OK || c.n != a.n || c.hash != a.hash))
        abort();
    return 0;
}
