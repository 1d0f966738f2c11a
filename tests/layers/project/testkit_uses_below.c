/* Control: testkit/ is declared on controller/ and fake/. */
#include "controller/controller_internal.h"
#include "fake/fake_internal.h"

int testkit_uses_below(void);
int testkit_uses_below(void)
{
    return 0;
}
