/* Uses the installed kcr through its public header only. */
#include <kcr/kcr.h>
#include <stdio.h>
#include <string.h>

int main(void)
{
    if (strcmp(kcr_version(), KCR_VERSION_STRING) != 0) {
        fprintf(stderr, "header %s but library %s\n", KCR_VERSION_STRING, kcr_version());
        return 1;
    }
    printf("consumer linked kcr %s: %s\n", kcr_version(), kcr_strerror(KCR_ERR_GONE));
    return 0;
}
