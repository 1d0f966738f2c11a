/* Violation: informer/ does not depend on workqueue/ (controllers own the queues). */
#include "workqueue/queue.h"

int informer_uses_workqueue(void);
int informer_uses_workqueue(void)
{
    return 0;
}
