/* Violation: leader/ and events/ are siblings; neither uses the other. */
#include "events/events_internal.h"

int leader_uses_events(void);
int leader_uses_events(void)
{
    return 0;
}
