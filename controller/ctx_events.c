/* Recording events from a reconcile (kcr_ctx_eventf). */
#include <stdarg.h>
#include <stdio.h>

#include "controller/controller_internal.h"

void kcr_ctx_eventf(kcr_ctx *ctx, const kcr_object *regarding, kcr_event_type type,
                    const char *reason, const char *note_fmt, ...)
{
    if (!ctx->recorder || !regarding)
        return;
    char note[1024] = "";
    if (note_fmt) {
        va_list ap;
        va_start(ap, note_fmt);
        vsnprintf(note, sizeof note, note_fmt, ap);
        va_end(ap);
    }
    kcr_event ev = {.regarding = regarding, .type = type, .reason = reason, .note = note};
    kcr_event_recorder_record(ctx->recorder, &ev);
}
