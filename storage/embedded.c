/* embedded.c: see embedded.h. */
#include "embedded.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <libpq-fe.h>

#include "log.h"
#include "clock.h"

#define PG_PORT 5432

/* The identity the server runs as: ours, or run_as when we are root. */
struct ident {
	bool drop;
	uid_t uid;
	gid_t gid;
	char name[64];
	gid_t groups[64]; /* supplementary groups, looked up once: a child forked by a threaded */
	int n_groups;     /* process must not call initgroups (locks, malloc) */
};

#define RESTART_MIN_MS 1000
#define RESTART_MAX_MS 30000

struct embedded {
	char dir[PATH_MAX];  /* <data_dir>/pg, absolute */
	char data[PATH_MAX]; /* <dir>/data */
	char dsn[2 * PATH_MAX + 64];
	char bindir[PATH_MAX];
	char log_path[PATH_MAX + 32];
	struct ident id;
	bool fast;
	int port;              /* PG_PORT, or embedded_listen's: the socket's name and the TCP port */
	char listen_host[256]; /* "": no TCP (listen_addresses = '') */
	pid_t pid;             /* our child, the postmaster; 0 while none runs */
	int lock_fd;
	/* supervision (embedded_supervise) */
	long long started_ms, exited_ms, next_start_ms; /* monotonic ms */
	int delay_ms;                                   /* before the next restart */
};

static void fail(char *err, size_t err_size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void fail(char *err, size_t err_size, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, err_size, fmt, ap);
	va_end(ap);
	size_t n = strlen(err);
	while (n > 0 && err[n - 1] == '\n')
		err[--n] = '\0';
}

/* A conninfo value in single quotes: ' and \ escaped with \. */
static void conninfo_quote(const char *v, char *out, size_t out_size)
{
	size_t o = 0;
	if (out_size < 3) {
		out[0] = '\0';
		return;
	}
	out[o++] = '\'';
	for (; *v && o + 3 < out_size; v++) {
		if (*v == '\'' || *v == '\\')
			out[o++] = '\\';
		out[o++] = *v;
	}
	out[o++] = '\'';
	out[o] = '\0';
}

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static bool is_exe(const char *dir, const char *name)
{
	char p[PATH_MAX + 64];
	snprintf(p, sizeof p, "%s/%s", dir, name);
	return access(p, X_OK) == 0;
}

static int find_bindir(char *out, size_t out_size)
{
	FILE *f = popen("pg_config --bindir 2>/dev/null", "r");
	if (f) {
		char line[PATH_MAX] = "";
		if (!fgets(line, sizeof line, f))
			line[0] = '\0';
		pclose(f);
		line[strcspn(line, "\n")] = '\0';
		if (line[0] && is_exe(line, "postgres") && is_exe(line, "initdb")) {
			snprintf(out, out_size, "%s", line);
			return 0;
		}
	}
	DIR *d = opendir("/usr/lib/postgresql");
	if (!d)
		return -1;
	long best = -1;
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		char *end;
		long v = strtol(de->d_name, &end, 10);
		if (end == de->d_name || *end != '\0')
			continue;
		char bin[PATH_MAX];
		snprintf(bin, sizeof bin, "/usr/lib/postgresql/%s/bin", de->d_name);
		if (v > best && is_exe(bin, "postgres") && is_exe(bin, "initdb")) {
			best = v;
			snprintf(out, out_size, "%s", bin);
		}
	}
	closedir(d);
	return best < 0 ? -1 : 0;
}

/* In a forked child: become the server's user. Async-signal-safe calls only (culpritd has
 * threads when it restarts the server). */
static void child_become(const struct ident *id)
{
	if (id->drop) {
		if (setgid(id->gid) < 0 || setgroups((size_t)id->n_groups, id->groups) < 0 || setuid(id->uid) < 0) {
			dprintf(STDERR_FILENO, "embedded: could not become user \"%s\": errno %d\n", id->name, errno);
			_exit(127);
		}
	}
}

/* fork + exec argv as the server's user with stdout/stderr to log_path; returns the pid. */
static pid_t spawn(const struct ident *id, const char *const argv[], const char *log_path, bool daemon, char *err,
		   size_t err_size)
{
	int logfd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (logfd < 0) {
		fail(err, err_size, "could not open \"%s\": %s", log_path, strerror(errno));
		return -1;
	}
	if (id->drop && fchown(logfd, id->uid, id->gid) < 0) {
		fail(err, err_size, "could not chown \"%s\": %s", log_path, strerror(errno));
		close(logfd);
		return -1;
	}
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid < 0) {
		fail(err, err_size, "could not fork: %s", strerror(errno));
		close(logfd);
		return -1;
	}
	if (pid == 0) {
		int devnull = open("/dev/null", O_RDONLY);
		if (devnull >= 0)
			dup2(devnull, STDIN_FILENO);
		dup2(logfd, STDOUT_FILENO);
		dup2(logfd, STDERR_FILENO);
		/* own session: a terminal's ^C reaches culpritd, which then stops the server in order */
		if (daemon)
			setsid();
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		child_become(id);
		/* after the uid change, which clears it */
		if (daemon) {
			prctl(PR_SET_PDEATHSIG, SIGINT);
			if (getppid() != parent)
				_exit(1);
		}
		execv(argv[0], (char *const *)argv);
		dprintf(STDERR_FILENO, "embedded: could not execute \"%s\": errno %d\n", argv[0], errno);
		_exit(127);
	}
	close(logfd);
	return pid;
}

/* Last lines of a file, for error messages. */
static void tail_file(const char *path, char *out, size_t out_size)
{
	out[0] = '\0';
	FILE *f = fopen(path, "r");
	if (!f)
		return;
	char buf[2048];
	long off = 0;
	if (fseek(f, 0, SEEK_END) == 0) {
		long len = ftell(f);
		off = len > (long)sizeof buf - 1 ? len - (long)sizeof buf + 1 : 0;
	}
	fseek(f, off, SEEK_SET);
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* keep the last 4 lines */
	int lines = 0;
	char *p = buf + n;
	while (p > buf) {
		p--;
		if (*p == '\n' && p + 1 < buf + n && ++lines == 4) {
			p++;
			break;
		}
	}
	size_t m = strlen(p);
	if (m >= out_size)
		m = out_size - 1;
	memcpy(out, p, m);
	out[m] = '\0';
	while (m > 0 && out[m - 1] == '\n')
		out[--m] = '\0';
	for (char *q = out; *q; q++)
		if (*q == '\n')
			*q = '|';
}

static int mkdir_owned(const char *path, mode_t mode, const struct ident *id, char *err, size_t err_size)
{
	if (mkdir(path, mode) < 0 && errno != EEXIST) {
		fail(err, err_size, "could not create directory \"%s\": %s", path, strerror(errno));
		return -1;
	}
	if (id->drop && chown(path, id->uid, id->gid) < 0) {
		fail(err, err_size, "could not chown \"%s\" to \"%s\": %s", path, id->name, strerror(errno));
		return -1;
	}
	if (chmod(path, mode) < 0) {
		fail(err, err_size, "could not chmod \"%s\": %s", path, strerror(errno));
		return -1;
	}
	return 0;
}

/* Can the server's user enter dir? Checked in a child that drops privileges. */
static bool reachable(const struct ident *id, const char *dir)
{
	if (!id->drop)
		return access(dir, X_OK) == 0;
	pid_t pid = fork();
	if (pid < 0)
		return false;
	if (pid == 0) {
		child_become(id);
		_exit(access(dir, X_OK) == 0 ? 0 : 1);
	}
	int st;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

static int run_initdb(const struct embedded *e, char *err, size_t err_size)
{
	char exe[PATH_MAX + 16], log_path[PATH_MAX + 16];
	snprintf(exe, sizeof exe, "%s/initdb", e->bindir);
	snprintf(log_path, sizeof log_path, "%s/initdb.log", e->dir);
	const char *argv[] = {exe,
			      "-D",
			      e->data,
			      "-U",
			      "culprit",
			      "-A",
			      "trust",
			      "-E",
			      "UTF8",
			      "--locale=C",
			      e->fast ? "--no-sync" : NULL,
			      NULL};
	log_info("embedded: initializing a new cluster in \"%s\"", e->data);
	pid_t pid = spawn(&e->id, argv, log_path, false, err, err_size);
	if (pid < 0)
		return -1;
	int st;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		char tail[1024];
		tail_file(log_path, tail, sizeof tail);
		fail(err, err_size, "initdb failed (see \"%s\"): %s", log_path, tail);
		return -1;
	}
	return 0;
}

/* pid in postmaster.pid, 0 when none; *shmid and *shmkey those of its System V shared memory
 * (-1 when none). */
static pid_t read_pidfile(const struct embedded *e, int *shmid, long *shmkey)
{
	char p[PATH_MAX + 32], line[256];
	snprintf(p, sizeof p, "%s/postmaster.pid", e->data);
	*shmid = -1;
	*shmkey = -1;
	FILE *f = fopen(p, "r");
	if (!f)
		return 0;
	long v = 0;
	/* line 1 the pid, line 7 "<shmem key> <shmem id>" */
	for (int n = 1; fgets(line, sizeof line, f); n++) {
		long key;
		int id;
		if (n == 1)
			v = strtol(line, NULL, 10);
		else if (n == 7 && sscanf(line, "%ld %d", &key, &id) == 2) {
			*shmid = id;
			*shmkey = key;
		}
	}
	fclose(f);
	return (pid_t)v;
}

/* Processes of a postmaster that is gone (its backends exit when they notice) still attached
 * to its shared memory: PostgreSQL refuses to start until they are gone. */
static bool shm_in_use(const struct embedded *e)
{
	int shmid;
	long key;
	struct shmid_ds ds;
	read_pidfile(e, &shmid, &key);
	/* the key too: the id may have been reused by another program's segment */
	return shmid >= 0 && shmctl(shmid, IPC_STAT, &ds) == 0 && (long)ds.shm_perm.__key == key && ds.shm_nattch > 0;
}

static bool is_postgres(pid_t pid)
{
	char p[64], comm[64] = "";
	snprintf(p, sizeof p, "/proc/%ld/comm", (long)pid);
	FILE *f = fopen(p, "r");
	if (!f)
		return false;
	if (!fgets(comm, sizeof comm, f))
		comm[0] = '\0';
	fclose(f);
	comm[strcspn(comm, "\n")] = '\0';
	return strcmp(comm, "postgres") == 0 || strcmp(comm, "postmaster") == 0;
}

static bool alive(pid_t pid) { return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM); }

static int wait_ready(struct embedded *e, int timeout_ms, char *err, size_t err_size)
{
	char ping_dsn[sizeof e->dsn + 32], qdir[2 * PATH_MAX + 3];
	conninfo_quote(e->dir, qdir, sizeof qdir);
	snprintf(ping_dsn, sizeof ping_dsn, "host=%s port=%d user=culprit dbname=postgres connect_timeout=5", qdir,
		 e->port);
	long long deadline = clock_mono_ms() + timeout_ms;
	for (;;) {
		if (PQping(ping_dsn) == PQPING_OK)
			return 0;
		int st;
		if (waitpid(e->pid, &st, WNOHANG) == e->pid) {
			char tail[1024];
			tail_file(e->log_path, tail, sizeof tail);
			fail(err, err_size, "postgres exited during start-up (see \"%s\"): %s", e->log_path, tail);
			e->pid = 0;
			return -1;
		}
		if (clock_mono_ms() > deadline) {
			fail(err, err_size, "postgres not ready after %d ms (see \"%s\")", timeout_ms, e->log_path);
			return -1;
		}
		sleep_ms(50);
	}
}

static int create_database(struct embedded *e, char *err, size_t err_size)
{
	char dsn[sizeof e->dsn + 32], qdir[2 * PATH_MAX + 3];
	conninfo_quote(e->dir, qdir, sizeof qdir);
	snprintf(dsn, sizeof dsn, "host=%s port=%d user=culprit dbname=postgres", qdir, e->port);
	PGconn *c = PQconnectdb(dsn);
	if (PQstatus(c) != CONNECTION_OK) {
		fail(err, err_size, "could not connect to the embedded server: %s", PQerrorMessage(c));
		PQfinish(c);
		return -1;
	}
	PGresult *r = PQexec(c, "SELECT 1 FROM pg_database WHERE datname = 'culprit'");
	bool exists = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1;
	PQclear(r);
	if (!exists) {
		r = PQexec(c, "CREATE DATABASE culprit");
		if (PQresultStatus(r) != PGRES_COMMAND_OK) {
			fail(err, err_size, "could not create database \"culprit\": %s", PQerrorMessage(c));
			PQclear(r);
			PQfinish(c);
			return -1;
		}
		PQclear(r);
		log_info("embedded: created database \"culprit\"");
	}
	PQfinish(c);
	return 0;
}

/* Sends sig to pid (our child or not) and waits up to ms for it to exit. */
static bool signal_wait(pid_t pid, bool child, int sig, int ms)
{
	if (kill(pid, sig) < 0 && errno == ESRCH)
		return true;
	long long deadline = clock_mono_ms() + ms;
	for (;;) {
		if (child) {
			int st;
			pid_t r = waitpid(pid, &st, WNOHANG);
			if (r == pid || (r < 0 && errno == ECHILD))
				return true;
		} else if (!alive(pid)) {
			return true;
		}
		if (clock_mono_ms() > deadline)
			return false;
		sleep_ms(20);
	}
}

/* Fast shutdown for up to ms, then immediate shutdown (crash recovery at the next start,
 * nothing committed lost), then SIGKILL. false when the fast shutdown did not do. */
static bool stop_pid(pid_t pid, bool child, int ms)
{
	if (signal_wait(pid, child, SIGINT, ms))
		return true;
	log_warning("embedded: postgres (pid %ld) did not stop in %d ms; immediate shutdown", (long)pid, ms);
	if (!signal_wait(pid, child, SIGQUIT, 5000)) {
		log_error("embedded: killing postgres (pid %ld)", (long)pid);
		signal_wait(pid, child, SIGKILL, 5000);
	}
	return false;
}

static void release(struct embedded *e)
{
	if (e->lock_fd >= 0)
		close(e->lock_fd);
	free(e);
}

/* Writes <dir>/pg_hba.conf, the server's only authentication rules (initdb's file is not
 * used): the superuser culprit by "trust" on the private socket; with embedded_listen, the
 * login "grafana" over TCP with its password (SCRAM), and nobody else. "-c hba_file=..." in
 * out. */
static int write_hba(const struct embedded *e, char *out, size_t out_size, char *err, size_t err_size)
{
	char path[PATH_MAX + 16];
	FILE *f;

	snprintf(path, sizeof path, "%s/pg_hba.conf", e->dir);
	if (!(f = fopen(path, "w"))) {
		fail(err, err_size, "could not write \"%s\": %s", path, strerror(errno));
		return -1;
	}
	fprintf(f, "# written by culpritd at every start (storage/embedded.c)\nlocal all all trust\n");
	if (e->listen_host[0])
		fprintf(f, "host all grafana 0.0.0.0/0 scram-sha-256\nhost all grafana ::/0 scram-sha-256\n");
	if (fclose(f) != 0 || (e->id.drop && chown(path, e->id.uid, e->id.gid) < 0)) {
		fail(err, err_size, "could not write \"%s\": %s", path, strerror(errno));
		return -1;
	}
	snprintf(out, out_size, "hba_file=%s", path);
	return 0;
}

/* Starts the postmaster (does not wait for it). */
static int spawn_postgres(struct embedded *e, char *err, size_t err_size)
{
	char exe[PATH_MAX + 16], sockopt[2 * PATH_MAX + 64], portopt[32], listenopt[300], hbaopt[PATH_MAX + 32];
	snprintf(exe, sizeof exe, "%s/postgres", e->bindir);
	if (write_hba(e, hbaopt, sizeof hbaopt, err, err_size) < 0)
		return -1;
	snprintf(listenopt, sizeof listenopt, "listen_addresses=%s", e->listen_host);
	/* a list of directories: quoted, so that spaces stay in the one path */
	size_t so = (size_t)snprintf(sockopt, sizeof sockopt, "unix_socket_directories=\"");
	for (const char *q = e->dir; *q && so + 3 < sizeof sockopt; q++) {
		if (*q == '"')
			sockopt[so++] = '"';
		sockopt[so++] = *q;
	}
	sockopt[so++] = '"';
	sockopt[so] = '\0';
	snprintf(portopt, sizeof portopt, "port=%d", e->port);
	const char *argv[32];
	int a = 0;
	argv[a++] = exe;
	argv[a++] = "-D";
	argv[a++] = e->data;
	argv[a++] = "-c";
	argv[a++] = listenopt;
	argv[a++] = "-c";
	argv[a++] = hbaopt;
	argv[a++] = "-c";
	argv[a++] = sockopt;
	argv[a++] = "-c";
	argv[a++] = "unix_socket_permissions=0700";
	argv[a++] = "-c";
	argv[a++] = portopt;
	argv[a++] = "-c";
	argv[a++] = "logging_collector=off";
	if (e->fast) {
		argv[a++] = "-c";
		argv[a++] = "fsync=off";
	}
	argv[a] = NULL;
	pid_t pid = spawn(&e->id, argv, e->log_path, true, err, err_size);
	if (pid < 0)
		return -1;
	e->pid = pid;
	e->started_ms = clock_mono_ms();
	return 0;
}

/* The identity PostgreSQL runs as: ours, or cfg->run_as (postgres) when we are root, which
 * PostgreSQL refuses to run as. */
static int ident_of(const struct embedded_config *cfg, struct ident *id, char *err, size_t err_size)
{
	if (geteuid() != 0)
		return 0;
	const char *user = cfg->run_as ? cfg->run_as : "postgres";
	struct passwd *pw = getpwnam(user);
	if (!pw) {
		fail(err, err_size,
		     "running as root, and PostgreSQL refuses to: user \"%s\" to run it as does not exist "
		     "(install the Debian package postgresql, or create the user)",
		     user);
		return -1;
	}
	id->drop = true;
	id->uid = pw->pw_uid;
	id->gid = pw->pw_gid;
	snprintf(id->name, sizeof id->name, "%s", user);
	id->n_groups = (int)(sizeof id->groups / sizeof id->groups[0]);
	if (getgrouplist(user, id->gid, id->groups, &id->n_groups) < 0) {
		fail(err, err_size, "user \"%s\" is in more than %zu groups", user,
		     sizeof id->groups / sizeof id->groups[0]);
		return -1;
	}
	return 0;
}

/* embedded_listen's HOST:PORT into e (none: a socket only, on PG_PORT's name). */
static int parse_listen(struct embedded *e, const char *listen, char *err, size_t err_size)
{
	e->port = PG_PORT;
	if (!listen || !listen[0])
		return 0;
	const char *colon = strrchr(listen, ':');
	char *end;
	long port = colon ? strtol(colon + 1, &end, 10) : 0;

	if (!colon || colon == listen || *end || port < 1 || port > 65535 ||
	    (size_t)(colon - listen) >= sizeof e->listen_host) {
		fail(err, err_size, "embedded_listen \"%s\" is not HOST:PORT", listen);
		return -1;
	}
	snprintf(e->listen_host, sizeof e->listen_host, "%.*s", (int)(colon - listen), listen);
	e->port = (int)port;
	return 0;
}

/* The directories under data_dir (made), the log, the socket and the DSN, each checked for
 * what libpq and the kernel take. */
static int set_paths(struct embedded *e, const char *data_dir, char *err, size_t err_size)
{
	if (mkdir(data_dir, 0755) < 0 && errno != EEXIST) {
		fail(err, err_size, "could not create data directory \"%s\": %s", data_dir, strerror(errno));
		return -1;
	}
	char abs[PATH_MAX];
	if (!realpath(data_dir, abs)) {
		fail(err, err_size, "could not resolve \"%s\": %s", data_dir, strerror(errno));
		return -1;
	}
	if ((size_t)snprintf(e->dir, sizeof e->dir, "%s/pg", abs) >= sizeof e->dir ||
	    (size_t)snprintf(e->data, sizeof e->data, "%s/data", e->dir) >= sizeof e->data) {
		fail(err, err_size, "data directory path too long");
		return -1;
	}
	snprintf(e->log_path, sizeof e->log_path, "%s/postgres.log", e->dir);
	/* libpq reads host=... as a comma-separated list, even quoted */
	if (strchr(e->dir, ',')) {
		fail(err, err_size,
		     "data directory \"%s\" contains a comma, which libpq cannot use in a socket path: "
		     "use another data_dir",
		     abs);
		return -1;
	}
	/* the socket path must fit sockaddr_un.sun_path */
	char sock[PATH_MAX + 32];
	snprintf(sock, sizeof sock, "%s/.s.PGSQL.%d", e->dir, e->port);
	if (strlen(sock) >= sizeof(((struct sockaddr_un *)0)->sun_path)) {
		fail(err, err_size,
		     "data directory \"%s\" is too long for PostgreSQL's socket \"%s\" (%zu bytes, at most %zu): "
		     "use a shorter data_dir",
		     abs, sock, strlen(sock), sizeof(((struct sockaddr_un *)0)->sun_path) - 1);
		return -1;
	}
	char qdir[2 * PATH_MAX + 3];
	conninfo_quote(e->dir, qdir, sizeof qdir);
	snprintf(e->dsn, sizeof e->dsn, "host=%s port=%d user=culprit dbname=culprit", qdir, e->port);
	if (e->id.drop && !reachable(&e->id, abs)) {
		fail(err, err_size,
		     "user \"%s\" cannot reach the data directory \"%s\": make it and its parents searchable "
		     "(chmod o+x) or use a data_dir elsewhere",
		     e->id.name, abs);
		return -1;
	}
	return mkdir_owned(e->dir, 0700, &e->id, err, err_size);
}

/* One culpritd per data directory: its lock, held until release(). */
static int lock_dir(struct embedded *e, char *err, size_t err_size)
{
	char lock_path[PATH_MAX + 32];
	snprintf(lock_path, sizeof lock_path, "%s/embedded.lock", e->dir);
	e->lock_fd = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (e->lock_fd < 0) {
		fail(err, err_size, "could not open \"%s\": %s", lock_path, strerror(errno));
		return -1;
	}
	if (flock(e->lock_fd, LOCK_EX | LOCK_NB) < 0) {
		/* e->dir is <data_dir>/pg */
		fail(err, err_size, "data directory \"%.*s\" is in use by another culpritd (lock \"%s\")",
		     (int)(strlen(e->dir) - 3), e->dir, lock_path);
		return -1;
	}
	return 0;
}

/* What an earlier postgres left on the data directory, gone before the deadline: a server
 * still running (stopped, so that the server is our child), a stale pid file, backends
 * still holding its shared memory. */
static int clear_leftovers(struct embedded *e, int timeout, long long deadline, char *err, size_t err_size)
{
	int shmid;
	long shmkey;
	pid_t old = read_pidfile(e, &shmid, &shmkey);
	if (old > 0 && alive(old)) {
		if (is_postgres(old)) {
			/* left by a culpritd that died (it got SIGINT then, and may still be shutting
			 * down) or started by hand */
			log_warning("embedded: waiting for postgres (pid %ld) left running on \"%s\" to stop",
				    (long)old, e->data);
			if (!signal_wait(old, false, SIGINT, timeout)) {
				fail(err, err_size, "postgres (pid %ld) left running on \"%s\" did not stop in %d ms",
				     (long)old, e->data, timeout);
				return -1;
			}
		} else {
			/* the pid was reused by an unrelated process after a crash */
			char pf[PATH_MAX + 32];
			snprintf(pf, sizeof pf, "%s/postmaster.pid", e->data);
			log_warning("embedded: removing stale \"%s\" (pid %ld is not postgres)", pf, (long)old);
			unlink(pf);
		}
	}
	/* the backends of a killed postmaster exit by themselves, soon */
	while (shm_in_use(e)) {
		if (clock_mono_ms() > deadline) {
			fail(err, err_size,
			     "processes of an earlier postgres still use its shared memory after %d ms "
			     "(ps -u %s)",
			     timeout, e->id.drop ? e->id.name : "$USER");
			return -1;
		}
		sleep_ms(50);
	}
	return 0;
}

struct embedded *embedded_start(const struct embedded_config *cfg, char *err, size_t err_size)
{
	if (!cfg->data_dir || !cfg->data_dir[0]) {
		fail(err, err_size, "no data directory");
		return NULL;
	}
	struct ident id = {0};
	if (ident_of(cfg, &id, err, err_size) < 0)
		return NULL;
	struct embedded *e = calloc(1, sizeof *e);
	if (!e) {
		fail(err, err_size, "out of memory");
		return NULL;
	}
	e->lock_fd = -1;
	e->id = id;
	e->fast = cfg->fast;
	if (parse_listen(e, cfg->listen, err, err_size) < 0)
		goto fail;
	if (cfg->bindir)
		snprintf(e->bindir, sizeof e->bindir, "%s", cfg->bindir);
	else if (find_bindir(e->bindir, sizeof e->bindir) < 0) {
		fail(err, err_size,
		     "no PostgreSQL server binaries found (pg_config --bindir, /usr/lib/postgresql/*/bin): "
		     "install the Debian package postgresql");
		goto fail;
	}
	if (set_paths(e, cfg->data_dir, err, err_size) < 0 || lock_dir(e, err, err_size) < 0)
		goto fail;
	char pv[PATH_MAX + 32];
	snprintf(pv, sizeof pv, "%s/PG_VERSION", e->data);
	if (access(pv, F_OK) != 0 && run_initdb(e, err, err_size) < 0)
		goto fail;
	int timeout = cfg->start_timeout_ms > 0 ? cfg->start_timeout_ms : 120000;
	long long deadline = clock_mono_ms() + timeout;
	if (clear_leftovers(e, timeout, deadline, err, err_size) < 0 || spawn_postgres(e, err, err_size) < 0)
		goto fail;
	if (wait_ready(e, (int)(deadline - clock_mono_ms() > 1000 ? deadline - clock_mono_ms() : 1000), err, err_size) <
	    0)
		goto fail_stop;
	if (create_database(e, err, err_size) < 0)
		goto fail_stop;
	log_info("embedded: postgres (pid %ld) ready on \"%s\"", (long)e->pid, e->dir);
	return e;
fail_stop:
	if (e->pid > 0)
		stop_pid(e->pid, true, 10000);
fail:
	release(e);
	return NULL;
}

const char *embedded_dsn(const struct embedded *e) { return e->dsn; }

pid_t embedded_pid(const struct embedded *e) { return e->pid; }

int embedded_grant_grafana(struct embedded *e, const char *password, char *err, size_t err_size)
{
	static const char *const grants =
		"DO $$ BEGIN CREATE ROLE culprit_grafana NOLOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$; "
		"GRANT USAGE ON SCHEMA public TO culprit_grafana; "
		"GRANT SELECT ON culprit_jobs, culprit_iteration_time, culprit_rank_iterations, "
		"culprit_phase_durations, "
		"culprit_suspects, culprit_incident_annotations, culprit_event_annotations TO culprit_grafana; "
		"DO $$ BEGIN CREATE ROLE grafana LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$; "
		"GRANT culprit_grafana TO grafana; ";
	PGconn *c = PQconnectdb(e->dsn);
	char *lit = NULL, *sql = NULL;
	int rc = -1;

	if (PQstatus(c) != CONNECTION_OK) {
		fail(err, err_size, "%s", PQerrorMessage(c));
	} else if (!(lit = PQescapeLiteral(c, password, strlen(password))) ||
		   asprintf(&sql, "%sALTER ROLE grafana LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD %s", grants,
			    lit) < 0) {
		fail(err, err_size, "out of memory");
		sql = NULL;
	} else {
		PGresult *r = PQexec(c, sql);

		if (PQresultStatus(r) == PGRES_COMMAND_OK)
			rc = 0;
		else
			fail(err, err_size, "%s", PQresultErrorMessage(r));
		PQclear(r);
	}
	if (sql)
		explicit_bzero(sql, strlen(sql));
	free(sql);
	PQfreemem(lit);
	PQfinish(c);
	return rc;
}

int embedded_supervise(struct embedded *e)
{
	long long now = clock_mono_ms();
	if (e->pid > 0) {
		int st;
		pid_t r = waitpid(e->pid, &st, WNOHANG);
		if (r == 0 || (r < 0 && errno != ECHILD))
			return 0;
		char how[64];
		if (r == e->pid && WIFSIGNALED(st))
			snprintf(how, sizeof how, "was killed by signal %d", WTERMSIG(st));
		else if (r == e->pid && WIFEXITED(st))
			snprintf(how, sizeof how, "exited with status %d", WEXITSTATUS(st));
		else
			snprintf(how, sizeof how, "is gone");
		log_error("embedded: postgres (pid %ld) %s after %lld ms (see \"%s\"); starting it again in %d ms",
			  (long)e->pid, how, now - e->started_ms, e->log_path, e->delay_ms);
		e->pid = 0;
		e->exited_ms = now;
		e->next_start_ms = now + e->delay_ms;
		e->delay_ms = e->delay_ms ? e->delay_ms * 2 : RESTART_MIN_MS;
		if (e->delay_ms > RESTART_MAX_MS)
			e->delay_ms = RESTART_MAX_MS;
	}
	if (now < e->next_start_ms)
		return 0;
	/* its backends are still exiting: PostgreSQL would refuse to start (not forever: it says why) */
	if (shm_in_use(e) && now - e->exited_ms < RESTART_MAX_MS)
		return 0;
	char err[512];
	if (spawn_postgres(e, err, sizeof err) < 0) {
		log_error("embedded: could not start postgres again: %s; retrying in %d ms", err, e->delay_ms);
		e->next_start_ms = now + e->delay_ms;
		return 0;
	}
	log_info("embedded: postgres started again (pid %ld)", (long)e->pid);
	return 1;
}

void embedded_answered(struct embedded *e, long long at_ms)
{
	if (e->pid <= 0 || at_ms <= e->started_ms || e->delay_ms == 0)
		return;
	log_info("embedded: postgres (pid %ld) answers again; a next restart would be at once", (long)e->pid);
	e->delay_ms = 0;
}

int embedded_stop(struct embedded *e, int timeout_ms)
{
	if (!e)
		return 0;
	int rc = e->pid > 0 && !stop_pid(e->pid, true, timeout_ms) ? -1 : 0;
	release(e);
	return rc;
}
