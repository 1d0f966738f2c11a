/* Violation: shard/ sits beside informer/, below controller/; it does not use it. */
#include "informer/informer_internal.h"

int shard_uses_informer(void);
int shard_uses_informer(void)
{
    return 0;
}
