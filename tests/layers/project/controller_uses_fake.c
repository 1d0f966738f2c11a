/* Violation: the fake is in kcr-testing; libkcr's controller/ cannot use it. */
#include "fake/fake_internal.h"

int controller_uses_fake(void);
int controller_uses_fake(void)
{
    return 0;
}
