/* Violation: workqueue/ sits on core/ only. */
#include "object/object_internal.h"

int workqueue_uses_object(void);
int workqueue_uses_object(void)
{
    return 0;
}
