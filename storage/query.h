/* query.h: reads (and small writes) behind the REST API, off the event loop.
 *
 * A few worker threads, each with its own libpq connection, take parameterised SQL from a
 * bounded queue. Every statement must answer at most one row of one text column: the JSON
 * the REST API sends (PostgreSQL builds it with json_build_object / json_agg). The worker
 * hands the text back through a result list and calls wake (e.g. event_active() on the
 * loop). A full queue refuses the submission (the REST API answers 503).
 *
 * Thread safety: submit, take and stop are called from one producer thread (the loop). */
#ifndef CULPRIT_STORAGE_QUERY_H
#define CULPRIT_STORAGE_QUERY_H

#include <stddef.h>
#include <stdint.h>
#include "attrs.h"

#define STORAGE_QUERY_MAX_PARAMS 8

struct storage_query;

struct storage_query_config {
	const char *dsn;
	int threads;              /* 1..8 (default 2) */
	size_t queue_max;         /* statements waiting (default 256) */
	int statement_timeout_ms; /* per statement (default 10000) */
	void (*wake)(void *arg);  /* called on a worker thread when a result is ready */
	void *wake_arg;
};

struct storage_query_result {
	uint64_t token;   /* the submitter's */
	char *text;       /* the row's text (malloc'd, free it); NULL: no row, or failed */
	size_t len;       /* bytes in text (a storage_query_fn may return binary data) */
	int failed;       /* 1: the statement failed (error and sqlstate say why) */
	char sqlstate[6]; /* "" when the database could not be reached */
	char error[256];
};

struct storage_query *storage_query_start(const struct storage_query_config *cfg);
/* Stops the workers after the statements they are running; drops the rest (and their results). */
void storage_query_stop(struct storage_query *q);
/* Copies sql and params (NULL params are SQL NULLs). 0 queued, -1 queue full or no memory. */
MUST_CHECK int storage_query_submit(struct storage_query *q, uint64_t token, const char *sql, int nparams,
			 const char *const *params);
/* A statement sequence of the submitter's own, run on a worker thread with the worker's
 * connection (statement_timeout set): it fills r->text / r->len (malloc'd; NULL for "no
 * such thing") or sets r->failed with error and sqlstate. ctx belongs to the submitter, who
 * must not touch or free it until the result was taken (or the workers were stopped). */
struct pg_conn;   /* libpq's PGconn */
struct pg_result; /* libpq's PGresult */
typedef void (*storage_query_fn)(struct pg_conn *conn, void *ctx, struct storage_query_result *r);
MUST_CHECK int storage_query_submit_fn(struct storage_query *q, uint64_t token, storage_query_fn fn, void *ctx);
/* Copies the error of a failed PGresult (may be NULL) into r; the helper for a storage_query_fn. */
void storage_query_fail(struct storage_query_result *r, const struct pg_result *res, const struct pg_conn *conn);
/* Runs a statement that answers rows (params text, NULL for SQL NULL): its result, or NULL with
 * r filled (storage_query_fail); for a storage_query_fn. */
struct pg_result *storage_query_rows(struct pg_conn *c, struct storage_query_result *r, const char *sql, int n,
				     const char *const *p);

/* Moves up to max results into out; returns how many. */
size_t storage_query_take(struct storage_query *q, struct storage_query_result *out, size_t max);

#endif
