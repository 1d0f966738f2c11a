/* Control: shard/ is declared on leader/ (the Lease record) and client/. */
#include "client/http.h"
#include "leader/lease.h"

int shard_uses_leader(void);
int shard_uses_leader(void)
{
    return 0;
}
