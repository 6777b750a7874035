/* api.h: what the handlers of the /api/v1 routes (routes.h) share: the request being routed,
 * its query parameters, the queries to PostgreSQL (storage/query.c; api.c answers a request
 * that waits for one when its result comes back), the shared latest reports and the
 * counters. api_jobs.c and api_events.c hold handlers. Everything here runs on the event
 * loop. */
#ifndef CULPRIT_API_H
#define CULPRIT_API_H

#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "rest.h"
#include "attrs.h"

struct server;

#define API_MAX_SEGMENTS 8

/* One request being routed. */
struct api_req {
	struct server *s;
	struct evhttp_request *req;
	enum evhttp_cmd_type method;
	char *seg[API_MAX_SEGMENTS]; /* decoded path segments after /api/v1 */
	int nseg;
	struct evkeyvalq query; /* decoded query parameters */
};

/* Starts the query workers (when there is a database) and their wake-up event. */
MUST_CHECK int api_start(struct server *s);
/* After evhttp_free(): stops the workers, forgets the requests that waited. */
void api_stop(struct server *s);
/* Its counters in Prometheus text format (the /metrics page). */
void api_metrics(const struct server *s, FILE *f);
/* A request under /api/v1 arrived (counted for /metrics). */
void api_request_arrived(struct server *s);
/* The answer to an /api/v1 request went out: counted by status class. */
void api_answered(struct server *s, struct evhttp_request *req);

/* 200 with text, shared without a copy by the answers of one (key, version): the latest
 * reports, asked for far more often than they change. */
void api_reply_shared(struct server *s, struct evhttp_request *req, const char *key, uint64_t version,
		      const char *text);
/* Query parameter name as an integer in [lo, hi]: 1 found, 0 absent (out = def), -1 invalid
 * (400 answered). */
int api_param_int(struct api_req *r, const char *name, int64_t lo, int64_t hi, int64_t def, int64_t *out);
/* Runs a statement of storage/rest.h on a query worker and answers req with its text
 * (ok_status), 404 with not_found when it returns no row, 400 for a value PostgreSQL refuses
 * (SQLSTATE class 22), 503 when the database is unreachable or the queue is full. */
void api_query(struct api_req *r, int ok_status, const char *not_found, enum storage_rest stmt,
	       const char *const *params);

struct storage_query_result;
struct pg_conn;
/* Like api_query, but done answers the request itself when the result comes (on the loop);
 * ctx_free(ctx) follows done, or runs at shutdown. 0 submitted; -1 answered (503) and ctx
 * NOT taken. */
typedef void (*api_done_fn)(struct server *s, struct evhttp_request *req, const struct storage_query_result *res,
			    void *ctx);
MUST_CHECK int api_query_then(struct api_req *r, enum storage_rest stmt, const char *const *params, api_done_fn done, void *ctx,
		   void (*ctx_free)(void *ctx));
/* Like api_query_then, but fn runs on a query worker with its connection (storage/query.h):
 * for answers built from several statements or in another format than one JSON text. ctx
 * is read by fn on the worker and freed (ctx_free) on the loop after done. */
typedef void (*storage_query_fn)(struct pg_conn *conn, void *ctx, struct storage_query_result *r);
MUST_CHECK int api_query_fn(struct api_req *r, storage_query_fn fn, api_done_fn done, void *ctx, void (*ctx_free)(void *ctx));
/* The answer to a failed statement (400 for SQLSTATE class 22, 503 unreachable or timed out, else 500). */
void api_reply_db_error(struct evhttp_request *req, const struct storage_query_result *res);

/* A job this culpritd does not hold: 404, or with many instances 307 to the instance that
 * owns it (Location: its advertise_api_url and the request's path), answered when the lease
 * is read. */
void api_job_unknown(struct api_req *r);
/* The handlers of api_jobs.c and api_events.c in the route table (routes.c), each called
 * for its method and path only. */
void api_jobs_list(struct api_req *r);
void api_actions_list(struct api_req *r);
void api_actions_approve(struct api_req *r);
void api_jobs_get(struct api_req *r);
void api_jobs_reports(struct api_req *r);
void api_jobs_latest(struct api_req *r);
void api_jobs_diagnose(struct api_req *r);
void api_jobs_incidents(struct api_req *r);
void api_jobs_iterations(struct api_req *r);
void api_jobs_phases(struct api_req *r);
void api_reports_get(struct api_req *r);
void api_events_list(struct api_req *r);
void api_events_post(struct api_req *r);
/* api_console.c */
void api_jobs_heatmap(struct api_req *r);
void api_fleet(struct api_req *r);
/* After evhttp_free(): forgets the heat maps being gathered. */
void api_console_stop(struct server *s);

#endif
