#include "kcr/version.h"

const char *kcr_version(void)
{
    return KCR_VERSION_STRING;
}
