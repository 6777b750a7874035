/* pgtest.h: what the storage integration tests share: a database of their own on the test
 * PostgreSQL (CULPRIT_TEST_DSN, started by test.sh), a throwaway cluster of their own
 * (tests/pg.sh) for tests that stop and restart the server, and CHECK macros. */
#ifndef CULPRIT_TESTS_PGTEST_H
#define CULPRIT_TESTS_PGTEST_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <libpq-fe.h>

#define CHECK(cond)                                                                              \
	do {                                                                                     \
		if (!(cond)) {                                                                   \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
			pgtest_fail();                                                           \
		}                                                                                \
	} while (0)
#define CHECK_MSG(cond, ...)                                                                     \
	do {                                                                                     \
		if (!(cond)) {                                                                   \
			fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__);                                            \
			fputc('\n', stderr);                                                     \
			pgtest_fail();                                                           \
		}                                                                                \
	} while (0)

/* Exits 1 after printing the end of the server log of the clusters started here. */
void pgtest_fail(void) __attribute__((noreturn));
/* CULPRIT_TEST_DSN; exits 1 (a failure, not a skip) when unset. */
const char *pgtest_base_dsn(void);
/* Drops and creates database name on the server of base_dsn; writes its DSN. */
void pgtest_db_create(const char *base_dsn, const char *name, char *dsn, size_t size);
/* Runs sql, exits on failure; returns the first column of the first row as an integer
 * (0 when none). */
long long pgtest_scalar(const char *dsn, const char *sql);
/* A new directory under /tmp that the user postgres can reach. */
void pgtest_tmpdir(const char *name, char *out, size_t size);
/* tests/pg.sh start|stop dir (CULPRIT_SOURCE_DIR); start writes the DSN (dbname=postgres).
 * A cluster started here is stopped and its directory removed at exit, also when a check
 * fails. */
void pgtest_cluster_start(const char *dir, char *dsn, size_t size);
void pgtest_cluster_stop(const char *dir);
/* rm -rf dir */
void pgtest_rmdir(const char *dir);
int64_t pgtest_now_ms(void);

#endif
