/* kcr_delta_fifo_sink: a DeltaFIFO as a reflector's sink. */
#include "kcr/informer.h"

static kcr_err fifo_add(const kcr_object *obj, void *ud)
{
    return kcr_delta_fifo_add(ud, obj);
}

static kcr_err fifo_update(const kcr_object *obj, void *ud)
{
    return kcr_delta_fifo_update(ud, obj);
}

static kcr_err fifo_delete(const kcr_object *obj, void *ud)
{
    return kcr_delta_fifo_delete(ud, obj);
}

static kcr_err fifo_replace(kcr_object *const *objs, size_t n, const char *rv, void *ud)
{
    (void)rv;
    return kcr_delta_fifo_replace(ud, objs, n);
}

kcr_reflector_sink kcr_delta_fifo_sink(kcr_delta_fifo *fifo)
{
    return (kcr_reflector_sink){.on_add = fifo_add,
                                .on_update = fifo_update,
                                .on_delete = fifo_delete,
                                .on_replace = fifo_replace,
                                .user_data = fifo};
}
