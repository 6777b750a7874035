/* test_action_slurm.c: culpritd's action hook (hooks/slurm-drain) against a real Slurm.
 *
 * The test starts a single-node Slurm of Debian's slurm-wlm under its scratch directory:
 * munged (a key of its own), slurmctld and slurmd, with a slurm.conf naming one node,
 * node-64, the node the compute_straggler scenario's culprit runs on. Then, each with a
 * database of its own and `culprit sim --scenario compute_straggler` streamed into culpritd:
 *   - dry_run (resume on resolve): the incident fires and resolves; action_attempts holds
 *     a dry_run row for the drain, with the scontrol command it would have run, and one for
 *     the resume; sinfo shows node-64 idle all along;
 *   - approve: a row awaiting approval and node-64 still idle; the approval refused with the
 *     write token (403) and accepted with an operator's token (202); then sinfo shows node-64
 *     drained with the reason naming the incident, and the attempt's row says who approved;
 *   - auto (resume on resolve): the node drained by itself and resumed when the incident
 *     resolved: both attempts ok, slurmctld's log has the drain with its reason, and sinfo
 *     shows node-64 idle at the end.
 * Skipped (77) when not root (slurmctld, slurmd and munged run as root here) or without
 * slurm-wlm and munge. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "alerttest.h"
#include "harness.h"

#define NODE "node-64"
#define JOB "sim-compute_straggler"

static char dir[600], conf[700];
static pid_t munged, slurmctld, slurmd, simpid;
static struct h_proc proc;

/* Starts argv (NULL-terminated) with its output in dir/name.log. */
static pid_t start(const char *name, const char *const *argv)
{
	char path[800];
	pid_t pid = fork();

	if (pid == 0) {
		snprintf(path, sizeof(path), "%s/%s.log", dir, name);
		int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
			close(fd);
		}
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	return pid;
}

static void stop(pid_t pid)
{
	if (pid > 0) {
		kill(pid, SIGTERM);
		waitpid(pid, NULL, 0);
	}
}

static int passed;

/* The end of NAME's log in dir, to stderr: what Slurm or munge said when a check failed. */
static void tail_log(const char *name)
{
	char cmd[900];

	snprintf(cmd, sizeof(cmd), "echo '--- %s.log:' >&2; tail -n 15 '%s/%s.log' >&2", name, dir, name);
	if (system(cmd) != 0)
		fprintf(stderr, "no %s.log\n", name);
}

static void stop_all(void)
{
	if (!passed) {
		tail_log("munged");
		tail_log("slurmctld");
		tail_log("slurmd");
		tail_log("sim");
	}
	stop(simpid);
	if (proc.pid > 0)
		h_proc_stop(&proc, SIGTERM, 30000);
	stop(slurmd);
	stop(slurmctld);
	stop(munged);
	slurmd = slurmctld = munged = 0;
}

/* The first line of the shell command's output, without its newline ("" when none). */
static void sh_line(const char *cmd, char *out, size_t size)
{
	FILE *f = popen(cmd, "r");

	out[0] = '\0';
	if (f) {
		if (!fgets(out, (int)size, f))
			out[0] = '\0';
		pclose(f);
	}
	out[strcspn(out, "\n")] = '\0';
}

/* sinfo's "STATE|REASON" of NODE */
static void node_state(char *out, size_t size)
{
	char cmd[900];

	snprintf(cmd, sizeof(cmd), "SLURM_CONF=%s sinfo -h -N -n %s -o '%%T|%%E' 2>&1", conf, NODE);
	sh_line(cmd, out, size);
}

/* Waits up to timeout_ms for NODE's state to begin with want. */
static int wait_state(const char *want, int timeout_ms)
{
	char st[512] = "";

	for (int64_t end = h_now_ms() + timeout_ms; h_now_ms() < end;) {
		node_state(st, sizeof(st));
		if (strncmp(st, want, strlen(want)) == 0)
			return 1;
		usleep(200 * 1000); /* polling Slurm's own answer, not a sleep in place of it */
	}
	fprintf(stderr, "node %s: \"%s\", not %s\n", NODE, st, want);
	return 0;
}

static void start_slurm(void)
{
	char key[800], sock[800], ctl_port[16], d_port[16], path[800], mdir[700];
	FILE *f;

	snprintf(mdir, sizeof(mdir), "%s/munge", dir);
	mkdir(mdir, 0700);
	snprintf(key, sizeof(key), "%s/munge.key", mdir);
	snprintf(sock, sizeof(sock), "%s/munge.sock", mdir);
	H_CHECK((f = fopen(key, "w")) != NULL, NULL);
	for (int i = 0; i < 1024; i++)
		fputc((int)(random() & 0xff), f);
	fclose(f);
	chmod(key, 0400);
	char a_sock[820], a_key[820], a_log[820], a_pid[820], a_seed[820];
	snprintf(a_sock, sizeof(a_sock), "--socket=%s", sock);
	snprintf(a_key, sizeof(a_key), "--key-file=%s", key);
	snprintf(a_log, sizeof(a_log), "--log-file=%s/munged.log", mdir);
	snprintf(a_pid, sizeof(a_pid), "--pid-file=%s/munged.pid", mdir);
	snprintf(a_seed, sizeof(a_seed), "--seed-file=%s/munged.seed", mdir);
	munged = start("munged",
		       (const char *[]){"/usr/sbin/munged", "-F", "-f", a_sock, a_key, a_log, a_pid, a_seed, NULL});

	snprintf(ctl_port, sizeof(ctl_port), "%d", h_free_port());
	snprintf(d_port, sizeof(d_port), "%d", h_free_port());
	snprintf(conf, sizeof(conf), "%s/slurm.conf", dir);
	H_CHECK((f = fopen(conf, "w")) != NULL, NULL);
	fprintf(f,
		"ClusterName=culprittest\nSlurmctldHost=localhost(127.0.0.1)\nSlurmctldPort=%s\nSlurmdPort=%s\n"
		"AuthType=auth/munge\nAuthInfo=socket=%s\nCredType=cred/munge\nSlurmUser=root\nSlurmdUser=root\n"
		"StateSaveLocation=%s/state\nSlurmdSpoolDir=%s/spool\nSlurmctldPidFile=%s/slurmctld.pid\n"
		"SlurmdPidFile=%s/slurmd.pid\nSlurmctldLogFile=%s/slurmctld.log\nSlurmdLogFile=%s/slurmd.log\n"
		"ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\nJobAcctGatherType=jobacct_gather/none\n"
		"AccountingStorageType=accounting_storage/none\nSchedulerType=sched/builtin\n"
		"SelectType=select/cons_tres\nReturnToService=2\nMpiDefault=none\n"
		"NodeName=%s NodeHostname=localhost NodeAddr=127.0.0.1 CPUs=1 State=UNKNOWN\n"
		"PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP\n",
		ctl_port, d_port, sock, dir, dir, dir, dir, dir, dir, NODE);
	fclose(f);
	snprintf(path, sizeof(path), "%s/state", dir);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/spool", dir);
	mkdir(path, 0755);
	setenv("SLURM_CONF", conf, 1); /* for scontrol and sinfo here and in culpritd's hook */
	/* munged answers before slurmctld starts: munge's own round trip */
	char cmd[1800], out[256] = "";
	snprintf(cmd, sizeof(cmd), "munge -S %s -n 2>/dev/null | unmunge -S %s 2>&1 | head -1", sock, sock);
	for (int64_t end = h_now_ms() + 10000; h_now_ms() < end && !strstr(out, "Success"); usleep(100 * 1000))
		sh_line(cmd, out, sizeof(out));
	H_CHECK(strstr(out, "Success"), NULL);
	slurmctld = start("slurmctld", (const char *[]){"/usr/sbin/slurmctld", "-D", "-i", "-f", conf, NULL});
	slurmd = start("slurmd", (const char *[]){"/usr/sbin/slurmd", "-D", "-N", NODE, "-f", conf, NULL});
	H_CHECK(wait_state("idle", 30000), NULL);
}

/* culpritd on a fresh database with the action settings (NULL-terminated extra arguments). */
static void start_culpritd(const char *db, const char *const *settings)
{
	static char dsn[1024], ops[800], hook[800];
	const char *argv[32] = {"--db",
				dsn,
				"--action-hook",
				hook,
				"--operator-tokens-file",
				ops,
				"--http-write-token",
				"writer-token",
				"--action-timeout-s",
				"20"};
	size_t n = 10;
	char cdir[700];
	FILE *f;

	snprintf(hook, sizeof(hook), "%s/hooks/slurm-drain", CULPRIT_SOURCE_DIR);
	snprintf(ops, sizeof(ops), "%s/operators", dir);
	H_CHECK((f = fopen(ops, "w")) != NULL, NULL);
	fprintf(f, "# who may approve actions\nalice operator-alice-token\n");
	fclose(f);
	for (; *settings; settings++)
		argv[n++] = *settings;
	argv[n] = NULL;
	h_db_create(db, dsn, sizeof(dsn));
	snprintf(cdir, sizeof(cdir), "%s/%s", dir, db);
	mkdir(cdir, 0755);
	H_CHECK(h_culpritd_start(&proc, cdir, argv) == 0, &proc);
}

/* Waits up to timeout_ms for the SQL count on the phase's database to reach want. */
static int wait_rows(const char *dsn, const char *sql, long want, int timeout_ms)
{
	long got = -1;

	for (int64_t end = h_now_ms() + timeout_ms; h_now_ms() < end; usleep(200 * 1000))
		if ((got = at_sql_long(dsn, sql)) >= want)
			return 1;
	fprintf(stderr, "%s: %ld rows, not %ld\n", sql, got, want);
	return 0;
}

static const char *phase_dsn(const char *db)
{
	static char dsn[1024];
	const char *base = getenv("CULPRIT_TEST_DSN");

	/* the DSN of h_db_create: the test server's with dbname set */
	snprintf(dsn, sizeof(dsn), "%s dbname=%s", base ? base : "", db);
	return dsn;
}

static void sim(int recover_at)
{
	char log[800];

	snprintf(log, sizeof(log), "%s/sim.log", dir);
	H_CHECK(at_sim("compute_straggler", 60, recover_at, proc.agent_port, log) == 0, &proc);
}

static void dry_run(void)
{
	const char *dsn = phase_dsn("test_action_slurm_dry");
	char st[512], *out;

	start_culpritd("test_action_slurm_dry", (const char *[]){"--action-modes", "drain_node=dry_run",
								 "--action-resume-on-resolve", "true", NULL});
	sim(40);
	H_CHECK(wait_rows(dsn,
			  "SELECT count(*) FROM action_attempts WHERE result = 'dry_run' AND kind = 'drain_node' AND "
			  "target = '" NODE "' AND op IN ('apply', 'resume')",
			  2, 90000),
		&proc);
	out = at_sql(dsn, "SELECT output FROM action_attempts WHERE op = 'apply' AND result = 'dry_run'");
	H_CHECK(out && strstr(out, "would run: scontrol update NodeName=" NODE " State=DRAIN") &&
			strstr(out, "Reason=culprit incident " JOB "/"),
		&proc);
	fprintf(stderr, "dry run recorded: %s\n", out);
	free(out);
	node_state(st, sizeof(st));
	H_CHECK(strncmp(st, "idle", 4) == 0, &proc);
	H_CHECK(h_proc_stop(&proc, SIGTERM, 30000) == 0, &proc);
	proc.pid = 0;
}

/* POST approve of action 0 of the incident with the token; the HTTP status */
static int approve(const char *key, const char *token)
{
	char path[512], hdr[256], enc[300];
	size_t j = 0;

	for (const char *p = key; *p && j < sizeof(enc) - 4; p++) /* the key is one path segment */
		j += (size_t)(*p == '/' ? snprintf(enc + j, 4, "%%2F") : (enc[j] = *p, 1));
	enc[j] = '\0';
	snprintf(path, sizeof(path), "/api/v1/incidents/%s/actions/0/approve", enc);
	snprintf(hdr, sizeof(hdr), "Authorization: Bearer %s\r\n", token);
	char *body = NULL;
	int st = h_http_ex(proc.http_port, "POST", path, hdr, "", NULL, &body);
	fprintf(stderr, "POST %s (%s): %d %s\n", path, token, st, body ? body : "");
	free(body);
	return st;
}

static void approved(void)
{
	const char *dsn = phase_dsn("test_action_slurm_approve");
	char st[512], *key, *who;

	start_culpritd("test_action_slurm_approve", (const char *[]){"--action-modes", "drain_node=approve", NULL});
	/* the job streams on while the approval comes: a job whose agents left ends, and its
	 * incident's actions with it */
	char log[800];
	snprintf(log, sizeof(log), "%s/sim.log", dir);
	simpid = at_sim_start("compute_straggler", 300, 0, proc.agent_port, log); /* slow from 100 */
	H_CHECK(simpid > 0, &proc);
	H_CHECK(wait_rows(dsn, "SELECT count(*) FROM action_attempts WHERE result = 'awaiting_approval'", 1, 90000),
		&proc);
	key = at_sql(dsn, "SELECT incident_key FROM action_attempts WHERE result = 'awaiting_approval'");
	H_CHECK(key && key[0], &proc);
	node_state(st, sizeof(st));
	H_CHECK(strncmp(st, "idle", 4) == 0, &proc); /* nothing before the approval */
	H_CHECK(approve(key, "writer-token") == 403, &proc);
	H_CHECK(approve(key, "no-such-token") == 401, &proc);
	H_CHECK(at_sql_long(dsn, "SELECT count(*) FROM action_attempts WHERE attempt > 0") == 0, &proc);
	H_CHECK(approve(key, "operator-alice-token") == 202, &proc);
	H_CHECK(approve(key, "operator-alice-token") == 409, &proc); /* once */
	H_CHECK(wait_state("drained", 30000), &proc);
	node_state(st, sizeof(st));
	fprintf(stderr, "after the approval: %s\n", st);
	char want[400];
	snprintf(want, sizeof(want), "drained|culprit incident %s: compute_degradation", key);
	H_CHECK(strcmp(st, want) == 0, &proc);
	H_CHECK(wait_rows(dsn, "SELECT count(*) FROM action_attempts WHERE result = 'ok' AND attempt = 1", 1, 10000),
		&proc);
	who = at_sql(dsn, "SELECT who FROM action_attempts WHERE result = 'ok'");
	H_CHECK(who && strcmp(who, "alice") == 0, &proc);
	free(who);
	free(key);
	stop(simpid);
	simpid = 0;
	H_CHECK(h_proc_stop(&proc, SIGTERM, 30000) == 0, &proc);
	proc.pid = 0;
	char cmd[900];
	snprintf(cmd, sizeof(cmd), "SLURM_CONF=%s scontrol update NodeName=%s State=RESUME 2>&1", conf, NODE);
	sh_line(cmd, st, sizeof(st));
	H_CHECK(wait_state("idle", 30000), NULL);
}

static void automatic(void)
{
	const char *dsn = phase_dsn("test_action_slurm_auto");
	char path[800], st[512];

	start_culpritd("test_action_slurm_auto", (const char *[]){"--action-modes", "drain_node=auto",
								  "--action-resume-on-resolve", "true", NULL});
	sim(40);
	H_CHECK(wait_rows(dsn,
			  "SELECT count(*) FROM action_attempts WHERE result = 'ok' AND who = 'culpritd' AND "
			  "op IN ('apply', 'resume')",
			  2, 90000),
		&proc);
	snprintf(path, sizeof(path), "%s/slurmctld.log", dir);
	H_CHECK(h_count_lines(path, "reason set to: culprit incident " JOB "/") >= 1, &proc);
	H_CHECK(wait_state("idle", 30000), &proc);
	node_state(st, sizeof(st));
	fprintf(stderr, "after the incident resolved: %s\n", st);
	H_CHECK(h_proc_stop(&proc, SIGTERM, 30000) == 0, &proc);
	proc.pid = 0;
}

int main(void)
{
	if (geteuid() != 0 || access("/usr/sbin/slurmctld", X_OK) != 0 || access("/usr/sbin/munged", X_OK) != 0) {
		printf("skipped: needs root and Debian's slurm-wlm and munge\n");
		return 77;
	}
	h_tmpdir("action_slurm", dir, sizeof(dir));
	chmod(dir, 0755); /* munged refuses a socket directory others cannot reach */
	atexit(stop_all);
	int64_t t0 = h_now_ms();
	start_slurm();
	dry_run();
	approved();
	automatic();
	passed = 1;
	printf("slurm drain: dry_run recorded and drained nothing, approve drained after an operator's approval "
	       "(403 for the write token), auto drained and resumed on resolve (%lld ms)\n",
	       (long long)(h_now_ms() - t0));
	return 0;
}
