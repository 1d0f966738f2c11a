/* `promtool check metrics` on a Prometheus text exposition, as a Criterion
 * assertion. Fails (never skips) when promtool is missing: it comes with the
 * Debian package `prometheus` (cmake/install-deps installs it). */
#ifndef KCR_TEST_PROMTOOL_H
#define KCR_TEST_PROMTOOL_H

/* Asserts that promtool accepts `body` (its complaints in the message). */
void promtool_check(const char *body);

#endif
