/* libFuzzer target for the streaming LIST decoder: any bytes, fed in chunks
 * whose sizes come from the input, either fail with a kcr_err and a message
 * or decode; and the result never depends on how the bytes were split, with
 * managedFields kept or dropped (skipped by the reader); a body that decodes
 * with them kept decodes alike with them dropped. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "client/decode.h"
#include "kcr/kcr.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static kcr_err count(kcr_object *obj, void *ud)
{
    if (!kcr_object_name(obj)[0])
        abort(); /* items always have a name */
    (*(size_t *)ud)++;
    return KCR_OK;
}

static kcr_err decode(const char *buf, size_t len, size_t step, bool drop, size_t *items,
                      char rv[64])
{
    kcr__list_decoder *d = kcr__list_decoder_new(1 << 20, count, items);
    if (drop)
        kcr__list_decoder_drop_managed_fields(d);
    kcr_err err = KCR_OK;
    for (size_t off = 0; err == KCR_OK && off < len; off += step)
        err = kcr__list_decoder_feed(d, buf + off, len - off < step ? len - off : step);
    kcr_list_meta meta = {0};
    if (err == KCR_OK)
        err = kcr__list_decoder_finish(d, &meta);
    if (err != KCR_OK && kcr_last_error()[0] == '\0')
        abort(); /* every failure explains itself */
    rv[0] = '\0';
    if (meta.resource_version)
        strncat(rv, meta.resource_version, 63);
    kcr_list_meta_clear(&meta);
    kcr__list_decoder_free(d);
    return err;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t step = (size_t)data[0] % 23 + 1;
    const char *body = (const char *)data + 1;
    size_t len = size - 1;
    size_t a = 0, b = 0, c = 0, d = 0;
    char rva[64], rvb[64], rvc[64], rvd[64];
    kcr_err ea = decode(body, len, step, false, &a, rva);
    kcr_err eb = decode(body, len, len ? len : 1, false, &b, rvb);
    /* Splitting never changes the outcome of a valid body. */
    if ((ea == KCR_OK) != (eb == KCR_OK) || (ea == KCR_OK && (a != b || strcmp(rva, rvb) != 0)))
        abort();
    kcr_err ec = decode(body, len, step, true, &c, rvc);
    kcr_err ed = decode(body, len, len ? len : 1, true, &d, rvd);
    if ((ec == KCR_OK) != (ed == KCR_OK) || (ec == KCR_OK && (c != d || strcmp(rvc, rvd) != 0)))
        abort();
    /* dropping only removes checks (the builder's, of what it never gets) */
    if (ea == KCR_OK && (ec != KCR_OK || c != a || strcmp(rvc, rva) != 0))
        abort();
    return 0;
}
