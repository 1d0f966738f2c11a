/* promtool_check: writes the exposition to a temporary file and runs
 * `promtool check metrics` on it. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "helpers/promtool.h"

void promtool_check(const char *body)
{
    if (system("command -v promtool >/dev/null 2>&1") != 0)
        cr_assert_fail("promtool not found: it comes with the Debian package `prometheus` "
                       "(cmake/install-deps installs it; or apt-get install prometheus)");
    char path[] = "/tmp/kcr-scrape-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    size_t len = strlen(body);
    cr_assert_eq(write(fd, body, len), (ssize_t)len);
    close(fd);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "promtool check metrics < %s 2>&1", path);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    char out[4096] = "";
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = '\0';
    int status = pclose(p);
    unlink(path);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
              "promtool check metrics failed (status %d):\n%s\non:\n%s", status, out, body);
}
