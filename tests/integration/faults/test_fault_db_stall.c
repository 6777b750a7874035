/* test_fault_db_stall: a PostgreSQL that stops answering without going away is seen. The
 * test's own cluster (tests/pg.sh), culpritd with db_stall_s 3; every process of the cluster
 * (postmaster and backends) gets SIGSTOP, as a hung server, for 12 s.
 *
 * Checked: within db_stall_s and the liveness check's 5 s timeout culprit_database_up is 0
 * (it stayed 1: the writer's connection was still open) and /readyz answers 503 (it said
 * 200); one warning says so, once, however long it lasts; a batch sent meanwhile is not
 * acknowledged. After SIGCONT: culprit_database_up is 1 again, /readyz 200, one line says
 * so, the batch is acknowledged and both batches are stored. */
#include <dirent.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "alerttest.h"
#include "harness.h"
#include "pgtest.h"

#define STALL_S 3
#define STOPPED_S 12

static struct h_proc proc;
static pid_t pg_pids[256];
static int n_pg;

/* The cluster's postmaster (postmaster.pid's first line) and its children. */
static void find_pg(const char *pgdir)
{
	char path[700];
	FILE *f;
	long pm = 0;
	DIR *d = opendir("/proc");
	struct dirent *e;

	snprintf(path, sizeof(path), "%s/data/postmaster.pid", pgdir);
	f = fopen(path, "r");
	H_CHECK(f && fscanf(f, "%ld", &pm) == 1 && pm > 0, &proc);
	fclose(f);
	n_pg = 0;
	pg_pids[n_pg++] = (pid_t)pm;
	while (d && (e = readdir(d)) && n_pg < 256) {
		char stat[512];
		long ppid = 0;
		FILE *s;

		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/stat", e->d_name);
		if (!(s = fopen(path, "r")))
			continue;
		/* pid (comm) state ppid: comm may hold spaces, so from its closing parenthesis */
		if (fgets(stat, sizeof(stat), s) && strrchr(stat, ')') &&
		    sscanf(strrchr(stat, ')') + 2, "%*c %ld", &ppid) == 1 && ppid == pm)
			pg_pids[n_pg++] = (pid_t)atol(e->d_name);
		fclose(s);
	}
	if (d)
		closedir(d);
}

static void signal_pg(int sig)
{
	for (int i = 0; i < n_pg; i++)
		kill(pg_pids[i], sig);
}

static void cont_pg(void) { signal_pg(SIGCONT); } /* a failed check must not leave it stopped */

static int readyz(void)
{
	char *body = NULL;
	int code = h_http(proc.http_port, "GET", "/readyz", NULL, &body);

	free(body);
	return code;
}

/* A batch of iteration iter of rank 0. */
static void batch(int fd, uint64_t seq)
{
	h_send_batch(fd,
		     &(struct h_batch){.seq = seq,
				       .n_ranks = 1,
				       .iter = (uint32_t)seq,
				       .start_us = (int64_t)time(NULL) * 1000000 - 60000000 + (int64_t)seq * 1000000,
				       .kernel_count = 1});
}

int main(void)
{
	char dir[600], pgdir[600], pgdsn[700], stall[16];
	const char *extra[] = {"--db", pgdsn, "--db-stall-s", stall, NULL};
	int64_t t_stop, t_down, t_cont;
	int fd;

	snprintf(stall, sizeof(stall), "%d", STALL_S);
	pgtest_tmpdir("fault_db_stall", pgdir, sizeof(pgdir));
	pgtest_cluster_start(pgdir, pgdsn, sizeof(pgdsn));
	atexit(cont_pg); /* registered after the cluster's stop: runs before it */
	h_tmpdir("fault_db_stall", dir, sizeof(dir));
	H_CHECK(h_culpritd_start(&proc, dir, extra) == 0, &proc);
	H_CHECK(h_get_metric(proc.http_port, "culprit_database_up") == 1 && readyz() == 200, &proc);
	fd = h_connect(proc.agent_port);
	H_CHECK(fd >= 0 && h_hello(fd, "stall", "a0", 1, 0), &proc);
	batch(fd, 1);
	H_CHECK(h_wait_ack(fd, 1), &proc);

	/* the server hangs */
	find_pg(pgdir);
	fprintf(stderr, "SIGSTOP to %d PostgreSQL processes\n", n_pg);
	signal_pg(SIGSTOP);
	t_stop = h_now_ms();
	batch(fd, 2);
	while (h_get_metric(proc.http_port, "culprit_database_up") != 0 && h_now_ms() - t_stop < 20000)
		poll(NULL, 0, 100);
	t_down = h_now_ms();
	fprintf(stderr, "culprit_database_up 0 after %.1f s (db_stall_s %d)\n", (double)(t_down - t_stop) / 1000.0,
		STALL_S);
	H_CHECK(h_get_metric(proc.http_port, "culprit_database_up") == 0, &proc);
	H_CHECK(readyz() == 503, &proc);
	H_CHECK(h_log_wait(&proc, "database: no progress for db_stall_s (3 s)", 1, 5000), &proc);
	/* it lasts: said once, the batch not acknowledged */
	while (h_now_ms() - t_stop < STOPPED_S * 1000) {
		H_CHECK(h_get_metric(proc.http_port, "culprit_database_up") == 0 && readyz() == 503, &proc);
		poll(NULL, 0, 500);
	}
	H_CHECK(h_count_lines(proc.log_path, "database: no progress") == 1, &proc);
	{
		frame_envelope *e = h_recv_env(fd, 10);

		H_CHECK(e == NULL, &proc);
	}

	/* it answers again */
	signal_pg(SIGCONT);
	t_cont = h_now_ms();
	H_CHECK(h_wait_ack(fd, 2), &proc);
	while (h_get_metric(proc.http_port, "culprit_database_up") != 1 && h_now_ms() - t_cont < 20000)
		poll(NULL, 0, 100);
	fprintf(stderr, "culprit_database_up 1 again %.1f s after SIGCONT\n", (double)(h_now_ms() - t_cont) / 1000.0);
	H_CHECK(h_get_metric(proc.http_port, "culprit_database_up") == 1 && readyz() == 200, &proc);
	H_CHECK(h_log_wait(&proc, "database: making progress again after", 1, 5000), &proc);
	H_CHECK(at_sql_long(pgdsn, "SELECT count(*) FROM iterations") == 2, &proc);
	close(fd);
	H_CHECK(h_proc_stop(&proc, SIGTERM, 30000) == 0, &proc);
	printf("a stopped PostgreSQL is seen within %.1f s\n", (double)(t_down - t_stop) / 1000.0);
	return 0;
}
