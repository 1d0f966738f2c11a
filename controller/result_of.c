/* The result a reconcile returns for a failed call (kcr_result_of, KCR_TRY). */
#include "kcr/controller.h"

kcr_result kcr_result_of(kcr_err err)
{
    if (err == KCR_OK)
        return KCR_DONE;
    return kcr_err_is_permanent(err) ? KCR_TERMINAL(err) : KCR_RETRY(err);
}
