/* Violation: ctrlutil/ sits below controller/. */
#include "controller/controller_internal.h"

int ctrlutil_uses_controller(void);
int ctrlutil_uses_controller(void)
{
    return 0;
}
