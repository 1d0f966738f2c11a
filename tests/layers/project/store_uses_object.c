/* Control: store/ is declared on object/ and core/, so their private headers
 * resolve from the store layer's include path. */
#include "core/error.h"
#include "object/object_internal.h"
#include "store/store_internal.h"

int store_uses_object(void);
int store_uses_object(void)
{
    return (int)sizeof(struct kcr_object);
}
