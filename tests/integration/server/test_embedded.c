/* test_embedded.c: culpritd with no database configured runs its own PostgreSQL under
 * <data_dir>/pg: the first start creates the cluster, the second reuses it (same system
 * identifier, data still there), and SIGTERM leaves no postgres process behind. The first
 * start listens on no TCP port; the second, with embedded_listen, lets the login "grafana" in
 * over TCP with its password, to read the Grafana views and no table, and nobody else.
 * On loopback with no token and no TLS its start-up says so in one line, and the schema
 * migrations are one line too (each file at debug level). */
#include <libpq-fe.h>
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "harness.h"

/* Processes whose command line mentions dir. */
static int processes_using(const char *dir)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	int n = 0;

	while (d && (e = readdir(d))) {
		char path[300], buf[4096];
		FILE *f;
		size_t len;

		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/cmdline", e->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		len = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
		for (size_t i = 0; i < len; i++)
			if (buf[i] == '\0')
				buf[i] = ' ';
		buf[len] = '\0';
		if (strstr(buf, dir) && strstr(buf, "postgres"))
			n++;
	}
	if (d)
		closedir(d);
	return n;
}

/* The first column of sql's first row through conninfo, or NULL with why in err. */
static char *tcp_query(const char *conninfo, const char *sql, char *err, size_t err_size)
{
	PGconn *c = PQconnectdb(conninfo);
	char *out = NULL;

	if (PQstatus(c) != CONNECTION_OK) {
		snprintf(err, err_size, "%s", PQerrorMessage(c));
	} else {
		PGresult *r = PQexec(c, sql);

		if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1)
			out = strdup(PQgetvalue(r, 0, 0));
		else
			snprintf(err, err_size, "%s", PQresultErrorMessage(r));
		PQclear(r);
	}
	PQfinish(c);
	fprintf(stderr, "%s: %s: %s", conninfo, sql, out ? out : err);
	fprintf(stderr, out ? "\n" : "");
	return out;
}

static void read_file(const char *path, char *out, size_t size)
{
	FILE *f = fopen(path, "r");
	size_t n = f ? fread(out, 1, size - 1, f) : 0;

	out[n] = '\0';
	if (f)
		fclose(f);
}

int main(void)
{
	struct h_proc p;
	char dir[600], pgdir[700], version_path[800], v1[64], v2[64];
	struct stat st;

	h_tmpdir("embedded", dir, sizeof(dir));
	/* PostgreSQL runs as "postgres" when we are root: it must reach the directory */
	chmod(dir, 0755);
	snprintf(pgdir, sizeof(pgdir), "%s/pg", dir);

	int port = h_free_port();
	char tcp[256], bad[256], super[256], listen[64], pwfile[700], err[512], *v;
	FILE *f;

	snprintf(tcp, sizeof(tcp),
		 "host=127.0.0.1 port=%d dbname=culprit user=grafana password=s3cret connect_timeout=5", port);
	snprintf(bad, sizeof(bad),
		 "host=127.0.0.1 port=%d dbname=culprit user=grafana password=wrong connect_timeout=5", port);
	snprintf(super, sizeof(super), "host=127.0.0.1 port=%d dbname=culprit user=culprit connect_timeout=5", port);
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", port);
	snprintf(pwfile, sizeof(pwfile), "%s/grafana.password", dir);
	H_CHECK((f = fopen(pwfile, "w")) && fputs("s3cret\n", f) >= 0 && fclose(f) == 0, NULL);

	H_CHECK(h_culpritd_start(&p, dir, NULL) == 0, &p);
	H_CHECK(!tcp_query(tcp, "SELECT 1", err, sizeof(err)), &p); /* embedded_listen is off: no TCP */
	H_CHECK(stat(pgdir, &st) == 0 && S_ISDIR(st.st_mode), &p);
	H_CHECK(processes_using(pgdir) > 0, &p);
	snprintf(version_path, sizeof(version_path), "%s/pg/data/PG_VERSION", dir);
	read_file(version_path, v1, sizeof(v1));
	H_CHECK(v1[0] != '\0', &p);
	H_CHECK(h_proc_stop(&p, SIGTERM, 60000) == 0, &p);
	H_CHECK(processes_using(pgdir) == 0, &p);

	/* second start: the same cluster, no initdb (its log would say so); on TCP for Grafana */
	const char *with_tcp[] = {"--embedded-listen", listen, "--embedded-grafana-password-file", pwfile, NULL};
	H_CHECK(h_culpritd_start(&p, dir, with_tcp) == 0, &p);
	H_CHECK((v = tcp_query(tcp, "SELECT count(*) FROM culprit_jobs", err, sizeof(err))) != NULL, &p);
	free(v);
	H_CHECK(!tcp_query(tcp, "SELECT count(*) FROM phases", err, sizeof(err)) && strstr(err, "permission denied"),
		&p);
	H_CHECK(!tcp_query(tcp, "CREATE TABLE x (i int)", err, sizeof(err)), &p);
	H_CHECK(!tcp_query(bad, "SELECT 1", err, sizeof(err)) && strstr(err, "password authentication failed"), &p);
	H_CHECK(!tcp_query(super, "SELECT 1", err, sizeof(err)) && strstr(err, "no pg_hba.conf entry"), &p);
	read_file(version_path, v2, sizeof(v2));
	H_CHECK(strcmp(v1, v2) == 0, &p);
	{
		char log[65536];

		read_file(p.log_path, log, sizeof(log));
		/* the log holds both runs: one initialisation, two starts */
		char *first = strstr(log, "initializing a new cluster");
		H_CHECK(first != NULL, &p);
		H_CHECK(strstr(first + 1, "initializing a new cluster") == NULL, &p);
		/* a loopback demo's warnings: one line a start */
		H_CHECK(h_count_lines(p.log_path, "no tokens and no TLS: fine on loopback") == 2, &p);
		H_CHECK(h_count_lines(p.log_path, "NOT authenticated") == 0, &p);
		H_CHECK(h_count_lines(p.log_path, "TLS is off") == 0, &p);
		H_CHECK(h_count_lines(p.log_path, " schema migrations") == 1, &p);
		H_CHECK(h_count_lines(p.log_path, "migrate: applied") == 0, &p);
	}
	H_CHECK(h_proc_stop(&p, SIGTERM, 60000) == 0, &p);
	H_CHECK(processes_using(pgdir) == 0, &p);
	printf("embedded: created once, reused, nothing left behind\n");
	return 0;
}
