/* apitest.c: see apitest.h. */
#include "apitest.h"

#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

int api_call(const struct h_proc *p, const char *method, const char *path, const char *body, json_t **out)
{
	char *text = NULL;
	int status = h_http(p->http_port, method, path, body, &text);

	*out = text ? json_loads(text, JSON_DECODE_ANY, NULL) : NULL;
	if (!*out && status != 200)
		fprintf(stderr, "%s %s: %d, body not JSON: %.300s\n", method, path, status, text ? text : "(none)");
	free(text);
	return status;
}

void api_expect_error(const struct h_proc *p, const char *method, const char *path, const char *body, int want)
{
	json_t *j;
	int status = api_call(p, method, path, body, &j);

	if (status != want || !json_is_string(json_object_get(j, "error")) ||
	    !json_is_string(json_object_get(j, "detail"))) {
		char *t = j ? json_dumps(j, 0) : NULL;

		fprintf(stderr, "%s %s: expected %d with a JSON error, got %d: %s\n", method, path, want, status,
			t ? t : "(no JSON)");
		free(t);
		H_CHECK(0, p);
	}
	fprintf(stderr, "ok: %s %s -> %d %s\n", method, path, status, json_string_value(json_object_get(j, "detail")));
	json_decref(j);
}

char *api_raw(int port, const char *request, size_t len)
{
	int fd = h_connect(port);
	char *resp = NULL;
	size_t n = 0, cap = 0;

	if (fd < 0)
		return NULL;
	if (h_write_all(fd, request, len) < 0) {
		close(fd);
		return NULL;
	}
	for (;;) {
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		ssize_t r;

		if (n + 4097 > cap) {
			cap = cap ? cap * 2 : 65536;
			resp = realloc(resp, cap);
		}
		if (poll(&pfd, 1, 10000) <= 0)
			break;
		r = recv(fd, resp + n, cap - n - 1, 0);
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	close(fd);
	if (resp)
		resp[n] = '\0';
	return resp;
}

pid_t api_sim_start(const struct h_proc *p, const char *scenario, int iters)
{
	return api_sim_start_kernels(p, scenario, iters, 0);
}

pid_t api_sim_start_kernels(const struct h_proc *p, const char *scenario, int iters, int kernels)
{
	char server[64], it[32], k[32];
	const char *argv[12] = {CULPRIT_BIN, "sim", "--scenario", scenario, "--server", server};
	int n = 6;
	pid_t pid;

	snprintf(server, sizeof(server), "127.0.0.1:%d", p->agent_port);
	snprintf(it, sizeof(it), "%d", iters);
	snprintf(k, sizeof(k), "%d", kernels);
	if (iters > 0)
		argv[n++] = "--iters", argv[n++] = it;
	if (kernels > 0)
		argv[n++] = "--kernels", argv[n++] = k;
	pid = fork();
	if (pid == 0) {
		execv(CULPRIT_BIN, (char *const *)argv);
		_exit(127);
	}
	return pid;
}

int api_sim_wait(pid_t pid, int timeout_ms)
{
	int status;

	for (int64_t deadline = h_now_ms() + timeout_ms; h_now_ms() < deadline;) {
		if (waitpid(pid, &status, WNOHANG) == pid)
			return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
		poll(NULL, 0, 50);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	return -1;
}
