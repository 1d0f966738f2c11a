/* Control: controller/ is declared on informer/, leader/, events/, metrics/,
 * ctrlutil/ and workqueue/. */
#include "ctrlutil/ctrlutil_internal.h"
#include "events/events_internal.h"
#include "informer/informer_internal.h"
#include "leader/leader_internal.h"
#include "metrics/metrics_impl.h"
#include "workqueue/queue.h"

int controller_uses_below(void);
int controller_uses_below(void)
{
    return 0;
}
