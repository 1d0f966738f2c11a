/* Violation: client/ does not depend on store/. */
#include "store/store_internal.h"

int client_uses_store(void);
int client_uses_store(void)
{
    return 0;
}
