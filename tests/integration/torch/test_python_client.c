/* test_python_client.c: the Python client of culprit_agent (client.py) against the real
 * culpritd on PostgreSQL, with the write token set: client_check.py waits for the verdict on
 * `culprit sim --scenario compute_straggler` (rank 517 named), lists jobs, incidents and
 * reports (paged), reads a report, requests a capture of rank 517 while its agent is still
 * connected, and sees culpritd's errors (404, 401 for a wrong token, 403 for an approval
 * without an operator's token) as ClientError. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "apitest.h"
#include "torchjob.h"

static struct h_proc proc;

int main(void)
{
	char dsn[512], dir[600], server[64], url[64];
	pid_t sim, py;
	int st;

	h_db_create("test_python_client", dsn, sizeof(dsn));
	h_tmpdir("python_client", dir, sizeof(dir));
	H_CHECK(h_culpritd_start(&proc, dir,
				 (const char *const[]){"--db", dsn, "--http-write-token", "w-token", NULL}) == 0,
		&proc);
	snprintf(server, sizeof(server), "127.0.0.1:%d", proc.agent_port);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d", proc.http_port);
	/* its agents stay connected 60 s after the last iteration, for the capture */
	if ((sim = fork()) == 0) {
		execl(CULPRIT_BIN, CULPRIT_BIN, "sim", "--scenario", "compute_straggler", "--server", server, "--iters",
		      "30", "--speed", "50", "--linger", "60", "--quiet", (char *)NULL);
		_exit(127);
	}
	H_CHECK(sim > 0, &proc);
	if ((py = fork()) == 0) {
		setenv("CULPRIT_AGENT_LIB", AGENT_LIB, 1);
		setenv("PYTHONPATH", PYTHON_DIR, 1);
		if (SANITIZER_PRELOAD[0]) {
			setenv("LD_PRELOAD", SANITIZER_PRELOAD, 1);
			setenv("ASAN_OPTIONS", "detect_leaks=0", 1);
		}
		execlp("python3", "python3", CLIENT_CHECK_PY, url, "w-token", "sim-compute_straggler", (char *)NULL);
		_exit(127);
	}
	H_CHECK(waitpid(py, &st, 0) == py, &proc);
	kill(sim, SIGTERM);
	waitpid(sim, NULL, 0);
	H_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, &proc);
	H_CHECK(h_proc_stop(&proc, SIGTERM, 30000) == 0, &proc);
	printf("python client: ok\n");
	return 0;
}
