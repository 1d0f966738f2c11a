/* A loopback HTTP server for tests that accepts every connection, reads
 * what the client sends and never answers: a hung apiserver. One thread;
 * up to 64 connections held open at once. Starting one ignores SIGPIPE in
 * the process. */
#ifndef KCR_TESTS_HELPERS_HUNG_SERVER_H
#define KCR_TESTS_HELPERS_HUNG_SERVER_H

#include "kcr/kcr.h"

typedef struct hung_server hung_server;

/* Starts listening on 127.0.0.1 (a free port). Aborts the test on failure. */
hung_server *hung_server_start(void);

/* A client of the server (plain HTTP), with `opts` (NULL: defaults;
 * allow_insecure_http is set). The caller frees it before the server. */
kcr_client *hung_server_client(hung_server *s, const kcr_client_options *opts);

/* Complete request headers received so far. Thread-safe. */
int hung_server_requests(hung_server *s);

/* Waits (at most 10 s) until at least n requests arrived; false if not. */
bool hung_server_wait_requests(hung_server *s, int n);

/* Closes every connection, stops the thread, frees everything (the config
 * behind its clients too). NULL is ignored. */
void hung_server_stop(hung_server *s);

#endif
