/* test_wheel.c: the Python agent as a user installs it, in a real job under Slurm's variables.
 *   - `pip wheel --no-build-isolation python/` builds the wheel (the agent library built from
 *     the tree inside it) and writes nothing into python/;
 *   - the wheel installs into a fresh venv of Debian's python3 (--system-site-packages, for
 *     python3-torch), and `python -m culprit_agent check` is accepted by culpritd, with the
 *     job, rank and node taken from Slurm's variables;
 *   - 8 gloo processes of train.py started as srun starts tasks (SLURM_PROCID, SLURM_NTASKS,
 *     SLURMD_NODENAME ...; no CULPRIT_AGENT_LIB, no PYTHONPATH, no job or server argument:
 *     CULPRIT_SERVER only), rank 6 computing three times as long from step 30: culpritd names
 *     rank 6 alone, on its node, in job "wheeljob-4242";
 *   - close() with culpritd down returns within its bound (1 s);
 *   - with the library removed from the installed package, `import culprit_agent` fails and
 *     names the paths it tried.
 * Skipped (exit 77) when no python3 imports torch. */
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "apitest.h"
#include "torchjob.h"

#define NPROC 8
#define SLOW_RANK 6
#define JOB "wheeljob-4242"

static struct h_proc proc;
static char dir[600], venv[700], py[800];

/* Runs the shell command (printf format) with its output in out (size bytes, may be NULL);
 * returns its exit status, -1 when it did not exit. */
static int sh(char *out, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int sh(char *out, size_t size, const char *fmt, ...)
{
	char cmd[4096];
	va_list ap;
	FILE *f;
	size_t n = 0;
	int st;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	fprintf(stderr, "$ %s\n", cmd);
	if (!(f = popen(cmd, "r")))
		return -1;
	if (out) {
		n = fread(out, 1, size - 1, f);
		out[n] = '\0';
		fprintf(stderr, "%s", out);
	} else {
		char buf[4096];
		while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
			fwrite(buf, 1, n, stderr);
	}
	st = pclose(f);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Slurm's variables of task `task` of an 8-task step on two nodes of 4 (as srun sets them) */
static void slurm_env(int task)
{
	char v[32];

	setenv("SLURM_JOB_ID", "4242", 1);
	setenv("SLURM_JOB_NAME", "wheeljob", 1);
	snprintf(v, sizeof(v), "%d", task);
	setenv("SLURM_PROCID", v, 1);
	snprintf(v, sizeof(v), "%d", task % 4);
	setenv("SLURM_LOCALID", v, 1);
	setenv("SLURM_NTASKS", "8", 1);
	setenv("SLURM_TASKS_PER_NODE", "4(x2)", 1);
	setenv("SLURMD_NODENAME", task < 4 ? "gpu-a" : "gpu-b", 1);
}

/* The training job: NPROC tasks of train.py; 0 when every one exited 0 (all acknowledged). */
static int run_job(void)
{
	char master[16], server[64], logp[800];
	pid_t pids[NPROC];
	int failed = 0;

	snprintf(master, sizeof(master), "%d", h_free_port());
	snprintf(server, sizeof(server), "127.0.0.1:%d", proc.agent_port);
	fflush(stdout);
	for (int t = 0; t < NPROC; t++) {
		if ((pids[t] = fork()) == 0) {
			char slow[8];

			snprintf(logp, sizeof(logp), "%s/task-%d.log", dir, t);
			if (!freopen(logp, "w", stdout) || dup2(fileno(stdout), 2) < 0)
				_exit(126);
			slurm_env(t);
			setenv("MASTER_ADDR", "127.0.0.1", 1);
			setenv("MASTER_PORT", master, 1);
			setenv("CULPRIT_SERVER", server, 1);
			setenv("OMP_NUM_THREADS", "1", 1);
			snprintf(slow, sizeof(slow), "%d", SLOW_RANK);
			execl(py, py, TRAIN_PY, "--slurm", "--steps", "50", "--slow-rank", slow, "--slow-from", "30",
			      "--device-ms", "60", (char *)NULL);
			_exit(127);
		}
	}
	for (int t = 0; t < NPROC; t++)
		if (torchjob_wait(pids[t]) != 0) {
			fprintf(stderr, "task %d failed (%s/task-%d.log)\n", t, dir, t);
			failed = 1;
		}
	return failed ? -1 : 0;
}

/* Some report of JOB is compute_degradation with SLOW_RANK, on gpu-b, as its only culprit. */
static int slow_rank_named(void)
{
	json_t *all = NULL, *r, *s;
	size_t i, j;
	int named = 0;

	if (api_call(&proc, "GET", "/api/v1/jobs/" JOB "/reports?limit=100", NULL, &all) != 200)
		return 0;
	json_array_foreach(json_object_get(all, "reports"), i, r)
	{
		json_t *rep = json_object_get(r, "report");
		int culprits = 0, right = 0;

		fprintf(stderr, "report: %s\n",
			json_string_value(json_object_get(json_object_get(rep, "verdict"), "summary")));
		if (strcmp(json_string_value(json_object_get(json_object_get(rep, "verdict"), "category")),
			   "compute_degradation") != 0)
			continue;
		json_array_foreach(json_object_get(rep, "suspects"), j, s)
		{
			if (strcmp(json_string_value(json_object_get(s, "role")), "culprit") != 0)
				continue;
			culprits++;
			right += json_integer_value(json_object_get(s, "rank")) == SLOW_RANK &&
				 strcmp(json_string_value(json_object_get(s, "host")), "gpu-b") == 0;
		}
		named |= culprits == 1 && right == 1;
	}
	json_decref(all);
	return named;
}

int main(void)
{
	char dsn[1024], out[8192];
	const char *extra[] = {"--db", dsn, NULL};

	if (!TORCH_PYTHON[0]) {
		printf("skipped: no python3 here imports torch (install the Debian package python3-torch)\n");
		return 77;
	}
	/* as a user's shell would be: nothing points at the build tree */
	unsetenv("CULPRIT_AGENT_LIB");
	unsetenv("PYTHONPATH");
	unsetenv("LD_PRELOAD");
	h_tmpdir("wheel", dir, sizeof(dir));
	snprintf(venv, sizeof(venv), "%s/venv", dir);
	snprintf(py, sizeof(py), "%s/bin/python", venv);
	int64_t t0 = h_now_ms();

	H_CHECK(sh(NULL, 0, "%s -m venv --system-site-packages %s 2>&1", TORCH_PYTHON, venv) == 0, NULL);
	H_CHECK(sh(NULL, 0, "touch %s/stamp", dir) == 0, NULL);
	H_CHECK(sh(NULL, 0,
		   "%s/bin/pip wheel -q --disable-pip-version-check --no-deps --no-index --no-build-isolation -w "
		   "%s/wheels %s 2>&1",
		   venv, dir, PYTHON_DIR) == 0,
		NULL);
	/* nothing written into the source tree (Python's own bytecode cache aside) */
	H_CHECK(sh(out, sizeof(out), "find %s -newer %s/stamp -not -path '*/__pycache__*'", PYTHON_DIR, dir) == 0 &&
			!out[0],
		NULL);
	H_CHECK(sh(NULL, 0,
		   "%s/bin/pip install -q --disable-pip-version-check --no-deps --no-index %s/wheels/*.whl 2>&1", venv,
		   dir) == 0,
		NULL);
	printf("wheel built and installed (%lld ms)\n", (long long)(h_now_ms() - t0));

	h_db_create("test_wheel", dsn, sizeof(dsn));
	H_CHECK(h_culpritd_start(&proc, dir, extra) == 0, &proc);

	/* the check command: accepted, identity from Slurm */
	slurm_env(3);
	H_CHECK(sh(out, sizeof(out), "%s -m culprit_agent check 127.0.0.1:%d --job check-4242 2>&1", py,
		   proc.agent_port) == 0,
		&proc);
	H_CHECK(strstr(out, "rank: 3 (slurm)") && strstr(out, "node: gpu-a (slurm)") && strstr(out, ": accepted"),
		&proc);
	H_CHECK(strstr(out, "site-packages/culprit_agent/libculprit_agent.so.0"), &proc);

	int64_t t1 = h_now_ms();
	H_CHECK(run_job() == 0, &proc);
	H_CHECK(slow_rank_named(), &proc);
	printf("8-process gloo job under Slurm's variables: rank %d on gpu-b named (%lld ms)\n", SLOW_RANK,
	       (long long)(h_now_ms() - t1));
	H_CHECK(h_proc_stop(&proc, SIGTERM, 30000) == 0, &proc);

	/* close() with culpritd down: within its bound of 1 s (CLOSE_DISCONNECTED_S) */
	H_CHECK(sh(out, sizeof(out),
		   "%s -c 'import time; from culprit_agent import Agent; a = Agent(\"127.0.0.1:%d\", \"j\", 0, 1); "
		   "a.begin_iteration(0); a.end_iteration(); t = time.monotonic(); a.close(); "
		   "print(\"close took %%.3f s\" %% (time.monotonic() - t))' 2>/dev/null",
		   py, h_free_port()) == 0,
		NULL);
	double took = 99;
	H_CHECK(sscanf(out, "close took %lf", &took) == 1 && took < 1.5, NULL);

	/* the library removed: the import fails, naming where it looked */
	H_CHECK(sh(NULL, 0, "rm %s/lib/python3*/site-packages/culprit_agent/libculprit_agent.so.0", venv) == 0, NULL);
	H_CHECK(sh(out, sizeof(out), "%s -c 'import culprit_agent' 2>&1", py) == 1, NULL);
	H_CHECK(strstr(out, "ImportError") && strstr(out, "tried:") &&
			strstr(out, "site-packages/culprit_agent/libculprit_agent.so.0: "),
		NULL);
	printf("wheel: built without touching the tree, installed, named the slow rank, close %.3f s with culpritd "
	       "down, no library: ImportError with the paths tried (%lld ms)\n",
	       took, (long long)(h_now_ms() - t0));
	return 0;
}
