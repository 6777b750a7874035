/* query.c: see query.h. */
#include "query.h"

#include <libpq-fe.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "connect.h"
#include "log.h"
#include "queue.h"

#define MAX_THREADS 8

struct request {
	struct queue_item link;
	uint64_t token;
	storage_query_fn fn; /* instead of sql */
	void *fn_ctx;
	char *sql;
	int nparams;
	char *params[STORAGE_QUERY_MAX_PARAMS];
};

struct result {
	struct queue_item link;
	struct storage_query_result r;
};

struct storage_query {
	char *dsn;
	int statement_timeout_ms;
	pthread_t threads[MAX_THREADS];
	int n_threads;
	struct queue requests; /* bounded by queue_max, the ones running included */
	struct queue results;  /* wakes the loop */
	pthread_mutex_t mu;
	struct log_complaint down; /* shared by the workers, under mu */
};

static void request_free(struct request *q)
{
	if (!q)
		return;
	free(q->sql);
	for (int i = 0; i < q->nparams; i++)
		free(q->params[i]);
	free(q);
}

/* A live connection, reconnecting when needed; NULL with r->error set when unreachable. */
static PGconn *connection(struct storage_query *q, PGconn **conn, struct storage_query_result *r)
{
	char sql[96], msg[256];
	PGresult *res;

	if (*conn && PQstatus(*conn) == CONNECTION_OK)
		return *conn;
	if (*conn)
		PQfinish(*conn);
	/* a dead server must not hold a worker for long: 5 s unless the DSN says otherwise */
	*conn = storage_connect(q->dsn, "culprit-query", 5, msg, sizeof msg);
	if (!*conn) {
		snprintf(r->error, sizeof(r->error), "could not connect to the database: %.*s",
			 (int)sizeof(r->error) - 40, msg);
		pthread_mutex_lock(&q->mu);
		log_complain(&q->down, LOG_WARNING, "query: %s", r->error);
		pthread_mutex_unlock(&q->mu);
		return NULL;
	}
	/* short statements: JIT compilation costs more than it saves */
	snprintf(sql, sizeof(sql), "SET statement_timeout = %d; SET jit = off", q->statement_timeout_ms);
	res = PQexec(*conn, sql);
	PQclear(res);
	pthread_mutex_lock(&q->mu);
	log_release(&q->down, LOG_INFO, "query: connected to the database again");
	pthread_mutex_unlock(&q->mu);
	return *conn;
}

static void run(struct storage_query *q, PGconn **conn, struct request *rq, struct storage_query_result *r)
{
	PGresult *res;
	PGconn *c;

	for (int attempt = 0; attempt < 2; attempt++) {
		c = connection(q, conn, r);
		if (!c) {
			r->failed = 1;
			return;
		}
		if (rq->fn) {
			r->failed = 0;
			r->sqlstate[0] = r->error[0] = '\0';
			free(r->text);
			r->text = NULL;
			r->len = 0;
			rq->fn(c, rq->fn_ctx, r);
			if (!r->failed || PQstatus(c) == CONNECTION_OK)
				return;
			continue; /* the connection broke: once more on a fresh one */
		}
		res = PQexecParams(c, rq->sql, rq->nparams, NULL, (const char *const *)rq->params, NULL, NULL, 0);
		if (PQresultStatus(res) == PGRES_TUPLES_OK || PQresultStatus(res) == PGRES_COMMAND_OK) {
			r->failed = 0;
			r->error[0] = '\0';
			if (PQntuples(res) > 0 && PQnfields(res) > 0 && !PQgetisnull(res, 0, 0)) {
				r->text = strdup(PQgetvalue(res, 0, 0));
				r->len = r->text ? strlen(r->text) : 0;
				if (!r->text) {
					r->failed = 1;
					snprintf(r->error, sizeof(r->error), "out of memory");
				}
			}
			PQclear(res);
			return;
		}
		storage_query_fail(r, res, c);
		PQclear(res);
		if (PQstatus(c) == CONNECTION_OK)
			return; /* the statement's own error */
				/* the connection broke: once more on a fresh one */
	}
}

void storage_query_fail(struct storage_query_result *r, const PGresult *res, const PGconn *conn)
{
	r->failed = 1;
	if (res && PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY))
		snprintf(r->error, sizeof(r->error), "%s", PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY));
	else if (res && PQresultErrorMessage(res)[0])
		snprintf(r->error, sizeof(r->error), "%s", PQresultErrorMessage(res));
	else
		snprintf(r->error, sizeof(r->error), "%s", conn ? PQerrorMessage(conn) : "statement failed");
	r->error[strcspn(r->error, "\n")] = '\0';
	r->sqlstate[0] = '\0';
	if (res && PQresultErrorField(res, PG_DIAG_SQLSTATE))
		snprintf(r->sqlstate, sizeof(r->sqlstate), "%s", PQresultErrorField(res, PG_DIAG_SQLSTATE));
}

struct pg_result *storage_query_rows(struct pg_conn *c, struct storage_query_result *r, const char *sql, int n,
				     const char *const *p)
{
	PGresult *res = PQexecParams(c, sql, n, NULL, p, NULL, NULL, 0);

	if (PQresultStatus(res) == PGRES_TUPLES_OK)
		return res;
	storage_query_fail(r, res, c);
	PQclear(res);
	return NULL;
}

static void *worker(void *arg)
{
	struct storage_query *q = arg;
	PGconn *conn = NULL;
	struct queue_item *it;

	while ((it = queue_take(&q->requests, 0, true))) {
		struct request *rq = queue_entry(it, struct request, link);
		struct result *res = calloc(1, sizeof(*res));

		if (res) {
			res->r.token = rq->token;
			run(q, &conn, rq, &res->r);
		}
		request_free(rq);
		queue_release(&q->requests, 1, 1);
		if (res)
			IGNORE_RESULT(queue_push(&q->results, &res->link, 1)); /* unbounded: never refused */
	}
	if (conn)
		PQfinish(conn);
	return NULL;
}

static void drain_requests(struct storage_query *q)
{
	for (struct queue_item *it = queue_drain(&q->requests); it;) {
		struct queue_item *next = it->next;

		request_free(queue_entry(it, struct request, link));
		it = next;
	}
}

struct storage_query *storage_query_start(const struct storage_query_config *cfg)
{
	struct storage_query *q = calloc(1, sizeof(*q));
	int n = cfg->threads > 0 ? cfg->threads : 2;

	if (!q)
		return NULL;
	if (n > MAX_THREADS)
		n = MAX_THREADS;
	q->dsn = strdup(cfg->dsn ? cfg->dsn : "");
	if (!q->dsn)
		goto fail_dsn;
	q->statement_timeout_ms = cfg->statement_timeout_ms > 0 ? cfg->statement_timeout_ms : 10000;
	if (queue_init(&q->requests, cfg->queue_max ? cfg->queue_max : 256, NULL, NULL) != 0)
		goto fail_dsn;
	if (queue_init(&q->results, SIZE_MAX, cfg->wake, cfg->wake_arg) != 0)
		goto fail_requests;
	if (pthread_mutex_init(&q->mu, NULL) != 0)
		goto fail_results;
	for (int i = 0; i < n; i++) {
		if (pthread_create(&q->threads[i], NULL, worker, q) != 0)
			break;
		q->n_threads++;
	}
	if (q->n_threads > 0)
		return q;
	pthread_mutex_destroy(&q->mu);
fail_results:
	queue_destroy(&q->results);
fail_requests:
	queue_destroy(&q->requests);
fail_dsn:
	free(q->dsn);
	free(q);
	return NULL;
}

void storage_query_stop(struct storage_query *q)
{
	if (!q)
		return;
	queue_close(&q->requests, false);
	for (int i = 0; i < q->n_threads; i++)
		pthread_join(q->threads[i], NULL);
	drain_requests(q);
	for (struct queue_item *it = queue_drain(&q->results); it;) {
		struct result *r = queue_entry(it, struct result, link);

		it = it->next;
		free(r->r.text);
		free(r);
	}
	queue_destroy(&q->requests);
	queue_destroy(&q->results);
	pthread_mutex_destroy(&q->mu);
	free(q->dsn);
	free(q);
}

/* Full: a submit is refused before anything is allocated (the bound is soft by the few
 * submits racing past this check together; the push itself is not). */
static bool queue_full(struct storage_query *q)
{
	size_t used;

	queue_count(&q->requests, &used, NULL);
	return used >= q->requests.max;
}

static int enqueue(struct storage_query *q, struct request *rq)
{
	if (queue_push(&q->requests, &rq->link, 1) == 0)
		return 0;
	request_free(rq);
	return -1;
}

int storage_query_submit(struct storage_query *q, uint64_t token, const char *sql, int nparams,
			 const char *const *params)
{
	struct request *rq;

	if (nparams < 0 || nparams > STORAGE_QUERY_MAX_PARAMS)
		return -1;
	if (queue_full(q))
		return -1;
	rq = calloc(1, sizeof(*rq));
	if (!rq)
		return -1;
	rq->token = token;
	rq->sql = strdup(sql);
	rq->nparams = nparams;
	for (int i = 0; i < nparams; i++)
		if (params[i] && !(rq->params[i] = strdup(params[i]))) {
			request_free(rq);
			return -1;
		}
	if (!rq->sql) {
		request_free(rq);
		return -1;
	}
	return enqueue(q, rq);
}

int storage_query_submit_fn(struct storage_query *q, uint64_t token, storage_query_fn fn, void *ctx)
{
	struct request *rq;

	if (queue_full(q))
		return -1;
	rq = calloc(1, sizeof(*rq));
	if (!rq)
		return -1;
	rq->token = token;
	rq->fn = fn;
	rq->fn_ctx = ctx;
	return enqueue(q, rq);
}

size_t storage_query_take(struct storage_query *q, struct storage_query_result *out, size_t max)
{
	struct queue_item *it = max ? queue_take(&q->results, max, false) : NULL;
	size_t n = 0;

	while (it) {
		struct result *r = queue_entry(it, struct result, link);

		it = it->next;
		out[n++] = r->r;
		free(r);
	}
	queue_release(&q->results, n, n);
	return n;
}
