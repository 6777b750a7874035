/* apitest.h: what the REST API tests share: JSON answers parsed with jansson, raw requests
 * (to see headers), `culprit sim` streaming into the culpritd under test. */
#ifndef CULPRIT_APITEST_H
#define CULPRIT_APITEST_H

#include <jansson.h>
#include <sys/types.h>

#include "harness.h"

/* method path [body] on the culpritd p: the status; *out the parsed JSON body (or NULL). */
int api_call(const struct h_proc *p, const char *method, const char *path, const char *body, json_t **out);
/* Checks an error answer: status want and a JSON body {"error": string, "detail": string}. */
void api_expect_error(const struct h_proc *p, const char *method, const char *path, const char *body, int want);
/* A raw request (headers and all); returns the whole answer (malloc'd) or NULL. */
char *api_raw(int port, const char *request, size_t len);
/* Starts `culprit sim --scenario NAME --server 127.0.0.1:<agent port> [--iters N]`. */
pid_t api_sim_start(const struct h_proc *p, const char *scenario, int iters);
/* The same with --kernels (kernel names per rank; 0: the simulator's default). */
pid_t api_sim_start_kernels(const struct h_proc *p, const char *scenario, int iters, int kernels);
/* Waits for it; 0 when it exited 0. */
int api_sim_wait(pid_t pid, int timeout_ms);

#endif
