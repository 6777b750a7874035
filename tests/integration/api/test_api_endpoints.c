/* test_api_endpoints.c: every /api/v1 endpoint of the real culpritd, with good input and with
 * bad input (malformed JSON, wrong types, huge bodies, unknown jobs and reports, bad ranges,
 * wrong methods), each answering the right status and a JSON error {"error", "detail"}.
 *
 * A 1,024-rank job with a compute straggler (`culprit sim --scenario compute_straggler`) is
 * streamed in first; report rows for paging are added to PostgreSQL by the test itself, so
 * that paging is checked whatever writes reports. */
#include <libpq-fe.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apitest.h"

#define JOB "sim-compute_straggler"

static struct h_proc proc;

static json_t *get_ok(const char *path)
{
	json_t *j;
	int status = api_call(&proc, "GET", path, NULL, &j);

	if (status != 200 || !j) {
		fprintf(stderr, "GET %s: %d\n", path, status);
		H_CHECK(0, &proc);
	}
	fprintf(stderr, "ok: GET %s -> 200\n", path);
	return j;
}

static void sql(PGconn *c, const char *q)
{
	PGresult *r = PQexec(c, q);

	if (PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK) {
		fprintf(stderr, "%s: %s", q, PQerrorMessage(c));
		H_CHECK(0, &proc);
	}
	PQclear(r);
}

static long long sql_int(PGconn *c, const char *q)
{
	PGresult *r = PQexec(c, q);
	long long v;

	H_CHECK(PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1, &proc);
	v = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
	PQclear(r);
	return v;
}

static void jobs_and_latest(void)
{
	json_t *j, *job;
	int64_t deadline;
	long long before;

	j = get_ok("/api/v1/jobs");
	H_CHECK(json_array_size(json_object_get(j, "jobs")) == 1, &proc);
	job = json_array_get(json_object_get(j, "jobs"), 0);
	H_CHECK(strcmp(json_string_value(json_object_get(job, "job")), JOB) == 0, &proc);
	H_CHECK(json_integer_value(json_object_get(json_object_get(job, "topology"), "world")) == 1024, &proc);
	json_decref(j);

	/* the job by a percent-encoded name */
	j = get_ok("/api/v1/jobs/sim%2Dcompute%5Fstraggler");
	H_CHECK(strcmp(json_string_value(json_object_get(j, "job")), JOB) == 0, &proc);
	before = json_integer_value(json_object_get(j, "diagnoses"));
	json_decref(j);

	/* run now: 202, then the job counts one more diagnosis and has a latest report */
	H_CHECK(api_call(&proc, "POST", "/api/v1/jobs/" JOB "/diagnose", NULL, &j) == 202, &proc);
	H_CHECK(json_is_string(json_object_get(j, "latest")), &proc);
	json_decref(j);
	for (deadline = h_now_ms() + 60000;;) {
		j = get_ok("/api/v1/jobs/" JOB);
		if (json_integer_value(json_object_get(j, "diagnoses")) > before) {
			json_decref(j);
			break;
		}
		json_decref(j);
		H_CHECK(h_now_ms() < deadline, &proc);
		poll(NULL, 0, 100);
	}
	j = get_ok("/api/v1/jobs/" JOB "/reports/latest");
	H_CHECK(strcmp(json_string_value(json_object_get(j, "job")), JOB) == 0, &proc);
	H_CHECK(json_is_object(json_object_get(j, "verdict")), &proc);
	H_CHECK(strcmp(json_string_value(json_object_get(json_object_get(j, "verdict"), "category")),
		       "compute_degradation") == 0,
		&proc);
	H_CHECK(json_is_array(json_object_get(j, "suspects")), &proc);
	json_decref(j);
}

static void reports_paged(const char *dsn)
{
	PGconn *c = PQconnectdb(dsn);
	long long total, seen = 0, last = 0, id = 0;
	char path[256], q[512];
	json_t *j;

	H_CHECK(PQstatus(c) == CONNECTION_OK, &proc);
	for (int k = 0; k < 5; k++) {
		snprintf(q, sizeof(q),
			 "INSERT INTO reports (job_id, first_iter, last_iter, category, json) SELECT id, %d, %d, "
			 "'compute_degradation', '{\"job\":\"" JOB "\",\"test\":%d}' FROM jobs WHERE name = '" JOB "'",
			 10 + k, 20 + k, k);
		sql(c, q);
	}
	total = sql_int(c, "SELECT count(*) FROM reports r JOIN jobs j ON j.id = r.job_id WHERE j.name = '" JOB "'");
	id = sql_int(c, "SELECT max(id) FROM reports");
	PQfinish(c);
	H_CHECK(total >= 5, &proc);

	snprintf(path, sizeof(path), "/api/v1/jobs/" JOB "/reports?limit=2");
	for (int pages = 0;; pages++) {
		json_t *list, *next;

		H_CHECK(pages <= total, &proc);
		j = get_ok(path);
		list = json_object_get(j, "reports");
		H_CHECK(json_array_size(list) <= 2, &proc);
		for (size_t i = 0; i < json_array_size(list); i++) {
			json_t *r = json_array_get(list, i);
			long long rid = json_integer_value(json_object_get(r, "id"));

			H_CHECK(last == 0 || rid < last, &proc); /* newest first, never twice */
			H_CHECK(json_is_object(json_object_get(r, "report")), &proc);
			last = rid;
			seen++;
		}
		next = json_object_get(j, "next_before");
		if (!json_is_integer(next)) {
			json_decref(j);
			break;
		}
		snprintf(path, sizeof(path), "/api/v1/jobs/" JOB "/reports?limit=2&before=%lld",
			 (long long)json_integer_value(next));
		json_decref(j);
	}
	fprintf(stderr, "reports: %lld stored, %lld seen through pages of 2\n", total, seen);
	H_CHECK(seen == total, &proc);

	snprintf(path, sizeof(path), "/api/v1/reports/%lld", id);
	j = get_ok(path);
	H_CHECK(json_integer_value(json_object_get(j, "id")) == id, &proc);
	H_CHECK(strcmp(json_string_value(json_object_get(j, "job")), JOB) == 0, &proc);
	json_decref(j);
	api_expect_error(&proc, "GET", "/api/v1/reports/999999999", NULL, 404);
	api_expect_error(&proc, "GET", "/api/v1/reports/abc", NULL, 400);
	api_expect_error(&proc, "GET", "/api/v1/reports/-3", NULL, 400);
	api_expect_error(&proc, "POST", "/api/v1/reports/1", "{}", 405);
	api_expect_error(&proc, "GET", "/api/v1/jobs/" JOB "/reports?limit=0", NULL, 400);
	api_expect_error(&proc, "GET", "/api/v1/jobs/" JOB "/reports?limit=101", NULL, 400);
	api_expect_error(&proc, "GET", "/api/v1/jobs/" JOB "/reports?before=x", NULL, 400);
	api_expect_error(&proc, "GET", "/api/v1/jobs/nojob/reports", NULL, 404);
}

static void history(void)
{
	json_t *j, *a;

	j = get_ok("/api/v1/jobs/" JOB "/incidents");
	H_CHECK(json_is_array(json_object_get(j, "incidents")), &proc);
	H_CHECK(json_is_object(json_object_get(j, "current")), &proc); /* the straggler's incident */
	json_decref(j);

	j = get_ok("/api/v1/jobs/" JOB "/ranks/5/iterations?from_iter=3&to_iter=7");
	a = json_object_get(j, "iterations");
	H_CHECK(json_array_size(a) == 5, &proc);
	H_CHECK(json_integer_value(json_object_get(json_array_get(a, 0), "iter")) == 3, &proc);
	H_CHECK(json_integer_value(json_object_get(json_array_get(a, 4), "dur_us")) > 0, &proc);
	json_decref(j);

	/* heat map: every rank of iteration 12 for one phase */
	j = get_ok("/api/v1/jobs/" JOB "/phases?name=mlp&from_iter=12&to_iter=12");
	a = json_object_get(j, "cells");
	fprintf(stderr, "phases: %zu cells\n", json_array_size(a));
	H_CHECK(json_array_size(a) == 1024, &proc);
	H_CHECK(json_integer_value(json_array_get(json_array_get(a, 0), 2)) > 0, &proc);
	json_decref(j);
	j = get_ok("/api/v1/jobs/" JOB "/phases?name=no_such_phase&from_iter=0&to_iter=3");
	H_CHECK(json_array_size(json_object_get(j, "cells")) == 0, &proc);
	json_decref(j);

	api_expect_error(&proc, "GET", "/api/v1/jobs/" JOB "/ranks/abc/iterations", NULL, 400);
	api_expect_error(&proc, "GET", "/api/v1/jobs/" JOB "/ranks/1024/iterations", NULL, 404);
	api_expect_error(&proc, "GET", "/api/v1/jobs/" JOB "/ranks/1/iterations?from_iter=9&to_iter=2", NULL, 400);
	api_expect_error(&proc, "GET", "/api/v1/jobs/" JOB "/ranks/1/iterations?from_iter=-1", NULL, 400);
	api_expect_error(&proc, "GET", "/api/v1/jobs/" JOB "/ranks/1/iterations?from_iter=0&to_iter=20000", NULL, 400);
	api_expect_error(&proc, "GET", "/api/v1/jobs/" JOB "/ranks/1/iterations?to_iter=1e3", NULL, 400);
	api_expect_error(&proc, "GET", "/api/v1/jobs/nojob/ranks/1/iterations", NULL, 404);
	api_expect_error(&proc, "GET", "/api/v1/jobs/" JOB "/phases", NULL, 400);
	api_expect_error(&proc, "GET", "/api/v1/jobs/" JOB "/phases?name=mlp&from_iter=0&to_iter=64", NULL, 400);
	api_expect_error(&proc, "GET", "/api/v1/jobs/" JOB "/phases?name=mlp&from_rank=9&to_rank=3", NULL, 400);
	api_expect_error(&proc, "GET", "/api/v1/jobs/nojob/phases?name=mlp", NULL, 404);
	api_expect_error(&proc, "GET", "/api/v1/jobs/nojob/incidents", NULL, 404);
	api_expect_error(&proc, "PUT", "/api/v1/jobs/" JOB "/incidents", "{}", 405);
}

static void events(void)
{
	json_t *j, *a;
	char *big, *resp;
	size_t n;

	H_CHECK(api_call(&proc, "POST", "/api/v1/events",
			 "[{\"host\":\"node-3\",\"kind\":\"ecc_error\",\"ts_us\":1796000000000000,\"source\":\"dcgm\","
			 "\"detail\":\"dbe\"},{\"host\":\"elsewhere-1\",\"kind\":\"thermal\"}]",
			 &j) == 202,
		&proc);
	H_CHECK(json_integer_value(json_object_get(j, "accepted")) == 2, &proc);
	a = json_object_get(j, "events");
	/* node-3 hosts ranks 24-31 of the job; elsewhere-1 none */
	H_CHECK(json_array_size(json_object_get(json_array_get(a, 0), "jobs")) == 1, &proc);
	H_CHECK(json_array_size(json_object_get(json_array_get(a, 1), "jobs")) == 0, &proc);
	json_decref(j);
	H_CHECK(api_call(&proc, "POST", "/api/v1/events",
			 "{\"host\":\"node-4\",\"kind\":\"link_flap\",\"job\":\"" JOB "\"}", &j) == 202,
		&proc);
	json_decref(j);

	j = get_ok("/api/v1/events?host=node-3");
	a = json_object_get(j, "events");
	H_CHECK(json_array_size(a) == 1, &proc);
	H_CHECK(strcmp(json_string_value(json_object_get(json_array_get(a, 0), "kind")), "ecc_error") == 0, &proc);
	H_CHECK(json_integer_value(json_object_get(json_array_get(a, 0), "ts_us")) == 1796000000000000LL, &proc);
	json_decref(j);
	j = get_ok("/api/v1/events?kind=link_flap");
	H_CHECK(json_array_size(json_object_get(j, "events")) == 1, &proc);
	H_CHECK(strcmp(json_string_value(json_object_get(json_array_get(json_object_get(j, "events"), 0), "job")),
		       JOB) == 0,
		&proc);
	json_decref(j);
	j = get_ok("/api/v1/events?since=1796000000000001"); /* after the ecc event */
	H_CHECK(json_array_size(json_object_get(j, "events")) == 2, &proc);
	json_decref(j);
	j = get_ok("/api/v1/events?since=2026-01-01T00:00:00Z&limit=1");
	H_CHECK(json_array_size(json_object_get(j, "events")) == 1, &proc);
	json_decref(j);

	api_expect_error(&proc, "POST", "/api/v1/events", "{\"host\":\"node-1\",", 400);       /* malformed */
	api_expect_error(&proc, "POST", "/api/v1/events", "", 400);                            /* empty */
	api_expect_error(&proc, "POST", "/api/v1/events", "[]", 400);                          /* no event */
	api_expect_error(&proc, "POST", "/api/v1/events", "42", 400);                          /* not an object */
	api_expect_error(&proc, "POST", "/api/v1/events", "{\"host\":7,\"kind\":\"x\"}", 400); /* wrong type */
	api_expect_error(&proc, "POST", "/api/v1/events", "{\"host\":\"n\"}", 400);            /* no kind */
	api_expect_error(&proc, "POST", "/api/v1/events", "{\"host\":\"n\",\"kind\":\"k\",\"ts_us\":\"now\"}", 400);
	api_expect_error(&proc, "POST", "/api/v1/events", "{\"host\":\"n\",\"kind\":\"k\",\"ts_us\":-5}", 400);
	api_expect_error(&proc, "POST", "/api/v1/events",
			 "[{\"host\":\"n\",\"kind\":\"k\"},{\"host\":\"\",\"kind\":\"k\"}]", 400);
	api_expect_error(&proc, "POST", "/api/v1/events", "{\"host\":\"n\",\"kind\":\"k\",\"job\":\"nojob\"}", 404);
	api_expect_error(&proc, "DELETE", "/api/v1/events", NULL, 405);
	api_expect_error(&proc, "GET", "/api/v1/events?limit=0", NULL, 400);
	api_expect_error(&proc, "GET", "/api/v1/events?limit=abc", NULL, 400);
	api_expect_error(&proc, "GET", "/api/v1/events?since=yesterday-ish", NULL, 400);
	/* nothing invalid was stored: still the three events */
	j = get_ok("/api/v1/events");
	H_CHECK(json_array_size(json_object_get(j, "events")) == 3, &proc);
	json_decref(j);

	/* too many events in one body: 413 in JSON */
	n = 1001 * 32 + 16;
	big = malloc(n);
	H_CHECK(big != NULL, &proc);
	strcpy(big, "[");
	for (int i = 0; i < 1001; i++)
		strcat(big, i ? ",{\"host\":\"h\",\"kind\":\"k\"}" : "{\"host\":\"h\",\"kind\":\"k\"}");
	strcat(big, "]");
	api_expect_error(&proc, "POST", "/api/v1/events", big, 413);
	free(big);

	/* a body over http_max_body (1 MiB by default): refused from its Content-Length, 413 */
	resp = api_raw(proc.http_port,
		       "POST /api/v1/events HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
		       "Content-Length: 2000000\r\n\r\n[",
		       strlen("POST /api/v1/events HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
			      "Content-Length: 2000000\r\n\r\n["));
	H_CHECK(resp && strncmp(resp, "HTTP/1.1 413", 12) == 0, &proc);
	fprintf(stderr, "ok: 2 MB body -> %.12s\n", resp);
	free(resp);
}

static void wrong_and_unknown(void)
{
	char *resp;
	const char *req = "GET /api/v1/jobs/" JOB "/diagnose HTTP/1.0\r\n\r\n";

	api_expect_error(&proc, "GET", "/api/v1/jobs/nojob", NULL, 404);
	api_expect_error(&proc, "GET", "/api/v1/jobs/nojob/reports/latest", NULL, 404);
	api_expect_error(&proc, "POST", "/api/v1/jobs/nojob/diagnose", NULL, 404);
	api_expect_error(&proc, "GET", "/api/v1/jobs/" JOB "/diagnose", NULL, 405);
	api_expect_error(&proc, "POST", "/api/v1/jobs/" JOB "/reports/latest", "{}", 405);
	api_expect_error(&proc, "DELETE", "/api/v1/jobs", NULL, 405);
	api_expect_error(&proc, "GET", "/api/v1/nothing", NULL, 404);
	api_expect_error(&proc, "GET", "/api/v1/jobs/" JOB "/nothing", NULL, 404);
	api_expect_error(&proc, "GET", "/api/v1/jobs/a%00b", NULL, 400);
	/* a path segment that is not UTF-8 is refused as such; outside /api/v1 it is not found
	 * (the detail quotes it with '?') */
	api_expect_error(&proc, "GET", "/api/v1/jobs/%FF", NULL, 400);
	api_expect_error(&proc, "GET", "/nothing\xff", NULL, 404);
	api_expect_error(&proc, "GET", "/api/v1/jobs/" JOB "/ranks/1/iterations?from_iter=1&from_iter", NULL, 400);
	resp = api_raw(proc.http_port, req, strlen(req));
	H_CHECK(resp && strstr(resp, " 405 ") && strstr(resp, "\r\nAllow: POST\r\n") &&
			strstr(resp, "Content-Type: application/json"),
		&proc);
	free(resp);
}

int main(void)
{
	char dir[512], dsn[512];
	const char *extra[3];
	json_t *j;
	pid_t sim;

	h_tmpdir("api_endpoints", dir, sizeof(dir));
	h_db_create("culprit_api_endpoints", dsn, sizeof(dsn));
	extra[0] = "--db";
	extra[1] = dsn;
	extra[2] = NULL;
	H_CHECK(h_culpritd_start(&proc, dir, extra) == 0, &proc);

	j = get_ok("/api/v1/jobs");
	H_CHECK(json_array_size(json_object_get(j, "jobs")) == 0, &proc);
	json_decref(j);
	api_expect_error(&proc, "GET", "/api/v1/jobs/" JOB "/reports/latest", NULL, 404);

	sim = api_sim_start(&proc, "compute_straggler", 30);
	H_CHECK(api_sim_wait(sim, 110000) == 0, &proc);

	jobs_and_latest();
	reports_paged(dsn);
	history();
	events();
	wrong_and_unknown();

	H_CHECK(h_proc_stop(&proc, SIGTERM, 30000) == 0, &proc);

	/* restarted: the job is not in memory until an agent says Hello; it is stored, ended, and
	 * so is its history */
	H_CHECK(h_culpritd_start(&proc, dir, extra) == 0, &proc);
	j = get_ok("/api/v1/jobs/" JOB);
	H_CHECK(!strcmp(json_string_value(json_object_get(j, "state")), "ended") &&
			json_integer_value(json_object_get(json_object_get(j, "topology"), "world")) == 1024 &&
			!strcmp(json_string_value(json_object_get(json_object_get(j, "report"), "category")),
				"compute_degradation"),
		&proc);
	json_decref(j);
	j = get_ok("/api/v1/jobs");
	H_CHECK(json_array_size(json_object_get(j, "jobs")) == 1 &&
			json_integer_value(json_object_get(j, "total")) == 1,
		&proc);
	json_decref(j);
	j = get_ok("/api/v1/jobs?state=live");
	H_CHECK(json_array_size(json_object_get(j, "jobs")) == 0, &proc);
	json_decref(j);
	j = get_ok("/api/v1/jobs?q=STRAGGLER&state=ended&limit=1&offset=0");
	H_CHECK(json_array_size(json_object_get(j, "jobs")) == 1, &proc);
	json_decref(j);
	j = get_ok("/api/v1/jobs?q=nosuch");
	H_CHECK(json_array_size(json_object_get(j, "jobs")) == 0 &&
			json_integer_value(json_object_get(j, "total")) == 0,
		&proc);
	json_decref(j);
	api_expect_error(&proc, "GET", "/api/v1/jobs?state=running", NULL, 400);
	api_expect_error(&proc, "GET", "/api/v1/jobs?limit=0", NULL, 400);
	api_expect_error(&proc, "GET", "/api/v1/jobs/nojob", NULL, 404);
	j = get_ok("/api/v1/jobs/" JOB "/reports?limit=1");
	H_CHECK(json_array_size(json_object_get(j, "reports")) == 1, &proc);
	json_decref(j);
	j = get_ok("/api/v1/jobs/" JOB "/incidents");
	H_CHECK(json_is_null(json_object_get(j, "current")), &proc);
	json_decref(j);
	j = get_ok("/api/v1/jobs/" JOB "/ranks/5/iterations?from_iter=3&to_iter=7");
	H_CHECK(json_array_size(json_object_get(j, "iterations")) == 5, &proc);
	json_decref(j);
	j = get_ok("/api/v1/jobs/" JOB "/phases?name=mlp&from_iter=12&to_iter=12");
	H_CHECK(json_array_size(json_object_get(j, "cells")) == 1024, &proc);
	json_decref(j);
	H_CHECK(h_proc_stop(&proc, SIGTERM, 30000) == 0, &proc);
	fprintf(stderr, "test_api_endpoints: ok\n");
	return 0;
}
