/* migrate.c: see migrate.h. */
#include "migrate.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "share.h"

#ifndef CULPRIT_MIGRATIONS_SOURCE_DIR
#define CULPRIT_MIGRATIONS_SOURCE_DIR ""
#endif
#ifndef CULPRIT_BUILD_DIR
#define CULPRIT_BUILD_DIR ""
#endif
#ifndef CULPRIT_INSTALL_PREFIX
#define CULPRIT_INSTALL_PREFIX "/usr/local"
#endif

/* Key of the advisory lock held while migrating ("culprit" "migr" in ASCII). */
#define MIGRATE_LOCK_KEY INT64_C(0x63756c7072697401)

struct migration {
	long version;
	char *name; /* file name */
};

static void fail(char *err, size_t err_size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void fail(char *err, size_t err_size, const char *fmt, ...)
{
	if (!err || err_size == 0)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, err_size, fmt, ap);
	va_end(ap);
	/* libpq messages end in a newline */
	size_t n = strlen(err);
	while (n > 0 && (err[n - 1] == '\n' || err[n - 1] == ' '))
		err[--n] = '\0';
}

const char *storage_migrations_dir(void)
{
	static char buf[PATH_MAX];

	return share_dir("CULPRIT_MIGRATIONS_DIR", CULPRIT_BUILD_DIR, CULPRIT_MIGRATIONS_SOURCE_DIR,
			 CULPRIT_INSTALL_PREFIX, "migrations", buf, sizeof(buf));
}

static int cmp_migration(const void *a, const void *b)
{
	const struct migration *x = a, *y = b;
	return (x->version > y->version) - (x->version < y->version);
}

static void free_list(struct migration *list, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(list[i].name);
	free(list);
}

/* Lists NNN_*.sql files sorted by number; -1 on error (unreadable dir, duplicate numbers). */
static int list_migrations(const char *dir, struct migration **out, size_t *n_out, char *err, size_t err_size)
{
	DIR *d = opendir(dir);
	if (!d) {
		fail(err, err_size, "could not open migrations directory \"%s\": %s", dir, strerror(errno));
		return -1;
	}
	struct migration *list = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		const char *nm = de->d_name;
		size_t len = strlen(nm);
		if (len < 5 || strcmp(nm + len - 4, ".sql") != 0 || nm[0] < '0' || nm[0] > '9')
			continue;
		char *end;
		long v = strtol(nm, &end, 10);
		if (*end != '_' || v <= 0) {
			log_warning("migrate: ignoring \"%s/%s\": name is not NNN_description.sql", dir, nm);
			continue;
		}
		if (n == cap) {
			cap = cap ? cap * 2 : 16;
			struct migration *nl = realloc(list, cap * sizeof *nl);
			if (!nl) {
				closedir(d);
				free_list(list, n);
				fail(err, err_size, "out of memory");
				return -1;
			}
			list = nl;
		}
		list[n].version = v;
		list[n].name = strdup(nm);
		if (!list[n].name) {
			closedir(d);
			free_list(list, n);
			fail(err, err_size, "out of memory");
			return -1;
		}
		n++;
	}
	closedir(d);
	if (n) /* no migrations: no list to sort */
		qsort(list, n, sizeof *list, cmp_migration);
	for (size_t i = 1; i < n; i++) {
		if (list[i].version == list[i - 1].version) {
			fail(err, err_size, "migrations \"%s\" and \"%s\" have the same number", list[i - 1].name,
			     list[i].name);
			free_list(list, n);
			return -1;
		}
	}
	*out = list;
	*n_out = n;
	return 0;
}

static char *read_file(const char *dir, const char *name, char *err, size_t err_size)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	FILE *f = fopen(path, "rb");
	if (!f) {
		fail(err, err_size, "could not open \"%s\": %s", path, strerror(errno));
		return NULL;
	}
	char *buf = NULL;
	size_t len = 0, cap = 0;
	for (;;) {
		if (cap - len < 4096) {
			cap = cap ? cap * 2 : 16384;
			char *nb = realloc(buf, cap + 1);
			if (!nb) {
				free(buf);
				fclose(f);
				fail(err, err_size, "out of memory reading \"%s\"", path);
				return NULL;
			}
			buf = nb;
		}
		size_t r = fread(buf + len, 1, cap - len, f);
		len += r;
		if (r == 0)
			break;
	}
	int bad = ferror(f);
	fclose(f);
	if (bad) {
		free(buf);
		fail(err, err_size, "could not read \"%s\"", path);
		return NULL;
	}
	buf[len] = '\0';
	return buf;
}

/* Runs a command that returns no rows (or whose rows are ignored); 0 or -1 with err set. */
static int exec_ok(PGconn *conn, const char *sql, const char *what, char *err, size_t err_size)
{
	PGresult *r = PQexec(conn, sql);
	ExecStatusType st = PQresultStatus(r);
	if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
		fail(err, err_size, "%s: %s", what, PQerrorMessage(conn));
		PQclear(r);
		return -1;
	}
	PQclear(r);
	return 0;
}

static int apply(PGconn *conn, const char *dir, const struct migration *m, char *err, size_t err_size)
{
	char what[512];
	char *sql = read_file(dir, m->name, err, err_size);
	if (!sql)
		return -1;
	snprintf(what, sizeof what, "migration \"%s\"", m->name);
	if (exec_ok(conn, "BEGIN", what, err, err_size) < 0) {
		free(sql);
		return -1;
	}
	if (exec_ok(conn, sql, what, err, err_size) < 0) {
		free(sql);
		PQclear(PQexec(conn, "ROLLBACK"));
		return -1;
	}
	free(sql);
	char ver[32];
	snprintf(ver, sizeof ver, "%ld", m->version);
	const char *params[2] = {ver, m->name};
	PGresult *r = PQexecParams(conn, "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", 2, NULL,
				   params, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_COMMAND_OK) {
		fail(err, err_size, "%s: could not record it: %s", what, PQerrorMessage(conn));
		PQclear(r);
		PQclear(PQexec(conn, "ROLLBACK"));
		return -1;
	}
	PQclear(r);
	if (exec_ok(conn, "COMMIT", what, err, err_size) < 0)
		return -1;
	log_debug("migrate: applied %s", m->name);
	return 0;
}

int storage_migrate_conn(PGconn *conn, const char *dir, char *err, size_t err_size)
{
	if (!dir)
		dir = storage_migrations_dir();
	struct migration *list = NULL;
	size_t n = 0;
	if (list_migrations(dir, &list, &n, err, err_size) < 0)
		return -1;
	if (n == 0) {
		fail(err, err_size, "no migrations found in \"%s\"", dir);
		free(list);
		return -1;
	}
	char lock_sql[96], unlock_sql[96];
	snprintf(lock_sql, sizeof lock_sql, "SELECT pg_advisory_lock(%lld)", (long long)MIGRATE_LOCK_KEY);
	snprintf(unlock_sql, sizeof unlock_sql, "SELECT pg_advisory_unlock(%lld)", (long long)MIGRATE_LOCK_KEY);
	if (exec_ok(conn, lock_sql, "could not take the migration lock", err, err_size) < 0) {
		free_list(list, n);
		return -1;
	}
	int applied = 0;
	PGresult *r = NULL;
	/* Quiet the NOTICE of IF NOT EXISTS. */
	PQclear(PQexec(conn, "SET client_min_messages = warning"));
	if (exec_ok(conn,
		    "CREATE TABLE IF NOT EXISTS schema_migrations ("
		    " version integer PRIMARY KEY, name text NOT NULL,"
		    " applied timestamptz NOT NULL DEFAULT now())",
		    "could not create schema_migrations", err, err_size) < 0) {
		applied = -1;
		goto out;
	}
	r = PQexec(conn, "SELECT version FROM schema_migrations ORDER BY version");
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		fail(err, err_size, "could not read schema_migrations: %s", PQerrorMessage(conn));
		applied = -1;
		goto out;
	}
	int nrows = PQntuples(r);
	for (size_t i = 0; i < n; i++) {
		int done = 0;
		for (int k = 0; k < nrows && !done; k++)
			done = atol(PQgetvalue(r, k, 0)) == list[i].version;
		if (done)
			continue;
		if (apply(conn, dir, &list[i], err, err_size) < 0) {
			applied = -1;
			goto out;
		}
		applied++;
	}
	/* A database migrated by a newer culprit: say so, but carry on (migrations only add). */
	if (nrows > 0) {
		long newest = atol(PQgetvalue(r, nrows - 1, 0));
		if (newest > list[n - 1].version)
			log_warning("migrate: database has migration %ld, newer than the newest known here (%ld)",
				    newest, list[n - 1].version);
	}
out:
	PQclear(r);
	PQclear(PQexec(conn, "RESET client_min_messages"));
	if (PQstatus(conn) == CONNECTION_OK)
		PQclear(PQexec(conn, unlock_sql));
	free_list(list, n);
	return applied;
}

int storage_migrate(const char *dsn, const char *dir, char *err, size_t err_size)
{
	PGconn *conn = PQconnectdb(dsn);
	if (PQstatus(conn) != CONNECTION_OK) {
		fail(err, err_size, "could not connect to the database: %s", PQerrorMessage(conn));
		PQfinish(conn);
		return -1;
	}
	int rc = storage_migrate_conn(conn, dir, err, err_size);
	PQfinish(conn);
	return rc;
}
