/* libFuzzer target for kubeconfig parsing: any bytes give a config or a
 * kcr_err with a message; never a crash or a leak. Paths resolve under a
 * directory that does not exist, so no real file is read. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kcr/kcr.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    kcr_config *cfg = NULL;
    kcr_err err = kcr_config_parse_kubeconfig((const char *)data, size, "/nonexistent-kcr-fuzz",
                                              NULL, &cfg);
    if (err != KCR_OK) {
        if (cfg || kcr_last_error()[0] == '\0')
            abort();
        return 0;
    }
    const char *server = kcr_config_server(cfg);
    if (strncmp(server, "http://", 7) != 0 && strncmp(server, "https://", 8) != 0)
        abort();
    if (!kcr_config_namespace(cfg)[0])
        abort();
    kcr_config_free(cfg);
    return 0;
}
