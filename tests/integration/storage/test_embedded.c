/* test_embedded.c: the embedded cluster: first start (initdb, database "culprit"), second
 * start on the same data dir reuses the cluster, stop leaves no postgres process behind, one
 * culpritd per data dir, a dying culpritd takes its postgres with it, a data dir too long for
 * the socket path is refused clearly. */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "embedded.h"
#include "pgtest.h"

/* Number of live processes whose command line mentions dir. */
static int procs_using(const char *dir)
{
	DIR *d = opendir("/proc");
	CHECK(d != NULL);
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] < '0' || de->d_name[0] > '9')
			continue;
		char p[300], buf[4096];
		snprintf(p, sizeof p, "/proc/%s/cmdline", de->d_name);
		FILE *f = fopen(p, "r");
		if (!f)
			continue;
		size_t len = fread(buf, 1, sizeof buf - 1, f);
		fclose(f);
		for (size_t i = 0; i < len; i++)
			if (buf[i] == '\0')
				buf[i] = ' ';
		buf[len] = '\0';
		/* zombies have an empty command line */
		if (strstr(buf, dir) && strstr(buf, "postgres"))
			n++;
	}
	closedir(d);
	return n;
}

static bool gone(pid_t pid, int timeout_ms)
{
	int64_t deadline = pgtest_now_ms() + timeout_ms;
	while (pgtest_now_ms() < deadline) {
		if (kill(pid, 0) < 0 && errno == ESRCH)
			return true;
		usleep(20000);
	}
	return false;
}

static struct embedded *start(const char *dir, char *err, size_t err_size)
{
	struct embedded_config cfg = {.data_dir = dir, .fast = 1, .start_timeout_ms = 60000};
	return embedded_start(&cfg, err, err_size);
}

int main(void)
{
	char base[256], dir[300], err[1024];
	pgtest_tmpdir("embedded", base, sizeof base);
	snprintf(dir, sizeof dir, "%s/var x", base); /* a space: quoted in the DSN and the socket list */

	/* first start: a new cluster and its database */
	struct embedded *e = start(dir, err, sizeof err);
	CHECK_MSG(e != NULL, "%s", err);
	const char *dsn = embedded_dsn(e);
	CHECK(strstr(dsn, "dbname=culprit") != NULL);
	pgtest_scalar(dsn, "CREATE TABLE marker (x int); INSERT INTO marker VALUES (42)");
	/* no TCP, the socket in the data dir */
	CHECK(pgtest_scalar(dsn, "SELECT count(*) FROM pg_settings WHERE name = 'listen_addresses' AND setting = ''") ==
	      1);
	char sock[512];
	snprintf(sock, sizeof sock, "%s/pg/.s.PGSQL.5432", dir);
	struct stat st;
	CHECK(stat(sock, &st) == 0 && S_ISSOCK(st.st_mode));

	/* a second culpritd on the same data dir is refused */
	struct embedded *e2 = start(dir, err, sizeof err);
	CHECK(e2 == NULL);
	CHECK_MSG(strstr(err, "in use"), "message: %s", err);

	pid_t pid = embedded_pid(e);
	CHECK(pid > 0);
	CHECK(embedded_stop(e, 30000) == 0);
	CHECK(gone(pid, 1000));
	CHECK_MSG(procs_using(dir) == 0, "postgres processes left behind");
	snprintf(sock, sizeof sock, "%s/pg/data/postmaster.pid", dir);
	CHECK(access(sock, F_OK) != 0);

	/* second start: the same cluster, data kept */
	e = start(dir, err, sizeof err);
	CHECK_MSG(e != NULL, "%s", err);
	CHECK(pgtest_scalar(embedded_dsn(e), "SELECT x FROM marker") == 42);
	pid = embedded_pid(e);
	CHECK(embedded_stop(e, 30000) == 0);
	CHECK(gone(pid, 1000));
	CHECK(procs_using(dir) == 0);

	/* culpritd dies without stopping it: postgres follows (fast shutdown), and the next
	 * start comes up cleanly */
	int fds[2];
	CHECK(pipe(fds) == 0);
	pid_t kid = fork();
	CHECK(kid >= 0);
	if (kid == 0) {
		close(fds[0]);
		struct embedded *k = start(dir, err, sizeof err);
		pid_t p = k ? embedded_pid(k) : -1;
		if (write(fds[1], &p, sizeof p) != sizeof p)
			_exit(2);
		_exit(k ? 0 : 1); /* k is deliberately not stopped */
	}
	close(fds[1]);
	pid_t kid_pg = -1;
	CHECK(read(fds[0], &kid_pg, sizeof kid_pg) == sizeof kid_pg);
	close(fds[0]);
	int status;
	CHECK(waitpid(kid, &status, 0) == kid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CHECK(kid_pg > 0);
	CHECK_MSG(gone(kid_pg, 30000), "postgres of a dead culpritd still running");
	e = start(dir, err, sizeof err);
	CHECK_MSG(e != NULL, "%s", err);
	CHECK(pgtest_scalar(embedded_dsn(e), "SELECT x FROM marker") == 42);
	CHECK(embedded_stop(e, 30000) == 0);
	CHECK(procs_using(dir) == 0);

	/* postgres killed (a crash): its stale postmaster.pid names a dead pid; the next start
	 * recovers */
	e = start(dir, err, sizeof err);
	CHECK_MSG(e != NULL, "%s", err);
	pid = embedded_pid(e);
	CHECK(kill(pid, SIGKILL) == 0);
	CHECK(embedded_stop(e, 30000) == 0); /* reaps it */
	snprintf(sock, sizeof sock, "%s/pg/data/postmaster.pid", dir);
	CHECK(access(sock, F_OK) == 0);
	/* its backends notice the postmaster's death and exit by themselves */
	int64_t deadline = pgtest_now_ms() + 30000;
	while (procs_using(dir) > 0) {
		CHECK_MSG(pgtest_now_ms() < deadline, "children of a killed postmaster still running");
		usleep(50000);
	}
	e = start(dir, err, sizeof err);
	CHECK_MSG(e != NULL, "after a crash: %s", err);
	CHECK(pgtest_scalar(embedded_dsn(e), "SELECT x FROM marker") == 42);
	CHECK(embedded_stop(e, 30000) == 0);

	/* a stale postmaster.pid whose pid now belongs to another process (pid reuse) */
	pid_t other = fork();
	CHECK(other >= 0);
	if (other == 0) {
		pause();
		_exit(0);
	}
	FILE *f = fopen(sock, "w");
	CHECK(f != NULL);
	fprintf(f, "%ld\n%s/pg/data\n", (long)other, dir);
	fclose(f);
	e = start(dir, err, sizeof err);
	CHECK_MSG(e != NULL, "with a reused pid in postmaster.pid: %s", err);
	CHECK(embedded_stop(e, 30000) == 0);
	kill(other, SIGKILL);
	waitpid(other, NULL, 0);

	/* a postgres started by hand on the data dir (no culpritd holds it) is stopped and ours
	 * started in its place */
	char cmd[2048];
	snprintf(cmd, sizeof cmd,
		 "%s\"$(pg_config --bindir)/pg_ctl\" -D '%s/pg/data' -l '%s/pg/manual.log' -w -s "
		 "-o \"-c listen_addresses= -c unix_socket_directories='%s/pg' -c fsync=off\" start",
		 geteuid() == 0 ? "runuser -u postgres -- " : "", dir, dir, dir);
	if (geteuid() == 0) {
		char log_path[512];
		snprintf(log_path, sizeof log_path, "%s/pg/manual.log", dir);
		FILE *lf = fopen(log_path, "a");
		CHECK(lf != NULL);
		fclose(lf);
		char chown_cmd[600];
		snprintf(chown_cmd, sizeof chown_cmd, "chown postgres '%s'", log_path);
		CHECK(system(chown_cmd) == 0);
	}
	CHECK_MSG(system(cmd) == 0, "%s", cmd);
	e = start(dir, err, sizeof err);
	CHECK_MSG(e != NULL, "replacing: %s", err);
	pid = embedded_pid(e);
	CHECK(pgtest_scalar(embedded_dsn(e), "SELECT x FROM marker") == 42);
	CHECK(embedded_stop(e, 30000) == 0);
	CHECK(gone(pid, 1000));
	CHECK(procs_using(dir) == 0);

	/* a data dir libpq could not reach: a comma */
	char commadir[400];
	snprintf(commadir, sizeof commadir, "%s/a,b", base);
	CHECK(start(commadir, err, sizeof err) == NULL);
	CHECK_MSG(strstr(err, "comma"), "message: %s", err);

	/* a data dir whose socket path would not fit */
	char longdir[400];
	snprintf(longdir, sizeof longdir, "%s/%s", base,
		 "a-very-long-directory-name-that-makes-the-socket-path-exceed-the-limit-of-sun-path-xxxxxxxxxxxxxxxx");
	CHECK(start(longdir, err, sizeof err) == NULL);
	CHECK_MSG(strstr(err, "too long"), "message: %s", err);

	pgtest_rmdir(base);
	printf("test_embedded: ok\n");
	return 0;
}
