/* torchjob.c: see torchjob.h. */
#include "torchjob.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

pid_t torchjob_start(const struct h_proc *p, const char *job, int nproc, const char *const *extra)
{
	char server[64], logdir[700], dir[600], np[16], rdzv[64];
	/* a rendezvous on a free port: --standalone's is always 29400, and two jobs on one
	 * machine (this test's and another's) then fail to start */
	const char *argv[48] = {TORCH_PYTHON, "-m", "torch.distributed.run", "--nnodes", "1", "--rdzv_backend", "c10d",
				"--rdzv_endpoint", rdzv, "--rdzv_id", job, "--nproc_per_node", np,
				/* torch 1.13's default "0" for these does not parse under Python 3.11 */
				"--redirects", "2", "--tee", "2", "--log_dir", logdir, TRAIN_PY, "--server", server,
				"--job", job};
	size_t n = 24;
	pid_t pid;

	snprintf(np, sizeof(np), "%d", nproc);
	snprintf(rdzv, sizeof(rdzv), "127.0.0.1:%d", h_free_port());
	snprintf(server, sizeof(server), "127.0.0.1:%d", p->agent_port);
	h_tmpdir(job, dir, sizeof(dir)); /* the ranks' logs */
	snprintf(logdir, sizeof(logdir), "%s/logs", dir);
	for (; *extra && n < sizeof(argv) / sizeof(argv[0]) - 1; extra++)
		argv[n++] = *extra;
	argv[n] = NULL;
	if ((pid = fork()) == 0) {
		setenv("CULPRIT_AGENT_LIB", AGENT_LIB, 1);
		setenv("PYTHONPATH", PYTHON_DIR, 1);
		setenv("OMP_NUM_THREADS", "1", 1);
		if (SANITIZER_PRELOAD[0]) {
			setenv("LD_PRELOAD", SANITIZER_PRELOAD, 1);
			setenv("ASAN_OPTIONS", "detect_leaks=0", 1); /* the interpreter's, not ours */
		}
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	return pid;
}

int torchjob_wait(pid_t pid)
{
	int st;

	if (pid < 0 || waitpid(pid, &st, 0) != pid)
		return -1;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}
