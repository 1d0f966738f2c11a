/* Control: informer/ is declared on store/ and client/ (and so on object/ and
 * core/ through them). */
#include "client/decode.h"
#include "core/strmap.h"
#include "informer/informer_internal.h"
#include "object/selector.h"
#include "store/store_internal.h"

int informer_uses_below(void);
int informer_uses_below(void)
{
    return 0;
}
