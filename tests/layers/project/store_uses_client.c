/* Violation: store/ does not depend on client/ (they are siblings above
 * object/), so client's private header must not be found. */
#include "client/http.h"

int store_uses_client(void);
int store_uses_client(void)
{
    return 0;
}
