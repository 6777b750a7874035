/* test_console.c: the web console (console/, server/console.c) in a real headless Chromium
 * against the real culpritd on a real PostgreSQL. This program runs culpritd and the jobs;
 * console_check.py drives Chromium through its DevTools protocol (cdp.py) and checks the pages.
 *
 * 1. Jobs: the seed incident (culprit sim --scenario case5 --iters 12: 12,960 ranks on 1,620
 *    node agents) with the out-of-band port_down on node-1294 posted once its incident is
 *    open; compute_straggler twice, as fleet-a and fleet-b (the same culprit, rank 517 on
 *    node-64); and a small job whose name, host, phase and event are all XSS (markup a client
 *    may choose), diagnosed on demand.
 * 2. The pages (console_check.py live): the console's files under 300 KB, naming no other
 *    origin; the jobs listed; sim-case5's verdict (node-1294's
 *    ranks, the drain, the port_down contradicted), its heat map's culprit rows hot and the
 *    rest grey, a hover telling the culprit's numbers, a zoom; the node grid and the timeline; the fleet ranking node-64 first; XSS shown as
 *    text everywhere, no script run, nothing in the browser's console. Every answer of the
 *    console carries a Content-Security-Policy with no inline script and no outside origin.
 * 3. culpritd restarted: sim-case5 still listed (ended) and its page shows its report and a
 *    heat map read from PostgreSQL (console_check.py restarted).
 * 4. culpritd restarted with REST tokens: the API answers 401 without one, the pages show the
 *    token form and no data, and the data with the token (console_check.py tokens). */
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "apitest.h"
#include "harness.h"

#define CASE5 "sim-case5"
#define XSS "<img src=x onerror=alert(1)>"
#define XSS_PATH "%3Cimg%20src%3Dx%20onerror%3Dalert(1)%3E"
#define READ_TOKEN "console-read-token"
#define WRITE_TOKEN "console-write-token"

static struct h_proc proc;
static char dir[512], dsn[512];

static void start(const char *const *more)
{
	const char *extra[16] = {"--db", dsn};
	int n = 2;

	for (int i = 0; more && more[i]; i++)
		extra[n++] = more[i];
	extra[n] = NULL;
	H_CHECK(h_culpritd_start(&proc, dir, extra) == 0, &proc);
}

static pid_t sim(const char *scenario, const char *job, const char *iters)
{
	char server[64];
	pid_t pid;

	snprintf(server, sizeof(server), "127.0.0.1:%d", proc.agent_port);
	pid = fork();
	if (pid == 0) {
		execl(CULPRIT_BIN, CULPRIT_BIN, "sim", "--scenario", scenario, "--iters", iters, "--server", server,
		      "--quiet", job ? "--job" : NULL, job, (char *)NULL);
		_exit(127);
	}
	return pid;
}

/* Waits (60 s) until the job's latest report is a verdict of category, with the event's verdict
 * when host is set. */
static void wait_report(const char *path_job, const char *category, const char *host, const char *verdict)
{
	char path[512];

	snprintf(path, sizeof(path), "/api/v1/jobs/%s/reports/latest", path_job);
	for (int64_t deadline = h_now_ms() + 60000;; poll(NULL, 0, 200)) {
		json_t *j = NULL, *e;
		size_t i;
		int ok = 0;

		if (api_call(&proc, "GET", path, NULL, &j) == 200) {
			const char *c = json_string_value(json_object_get(json_object_get(j, "verdict"), "category"));

			ok = c && (!category || strcmp(c, category) == 0) && !host;
			json_array_foreach(json_object_get(j, "events"), i, e)
			{
				ok |= host && !strcmp(json_string_value(json_object_get(e, "host")), host) &&
				      !strcmp(json_string_value(json_object_get(e, "verdict")), verdict);
			}
		}
		json_decref(j);
		if (ok)
			return;
		if (h_now_ms() > deadline)
			fprintf(stderr, "no report of %s (%s) yet\n", path_job, category ? category : "any");
		H_CHECK(h_now_ms() < deadline, &proc);
	}
}

/* The case5 job with the port_down on node-1294 posted once its incident is open. */
static void seed_incident(void)
{
	pid_t pid = sim("case5", NULL, "12");
	int posted = 0;

	for (int64_t deadline = h_now_ms() + 180000; !posted; poll(NULL, 0, 200)) {
		json_t *job = NULL, *j = NULL;

		H_CHECK(h_now_ms() < deadline, &proc);
		if (api_call(&proc, "GET", "/api/v1/jobs/" CASE5, NULL, &job) == 200 &&
		    json_is_object(json_object_get(job, "incident"))) {
			H_CHECK(api_call(&proc, "POST", "/api/v1/events",
					 "{\"host\":\"node-1294\",\"kind\":\"port_down\",\"source\":\"oob\",\"detail\":"
					 "\"eth3\"}",
					 &j) == 202,
				&proc);
			posted = 1;
		}
		json_decref(job);
		json_decref(j);
	}
	H_CHECK(api_sim_wait(pid, 180000) == 0, &proc);
	wait_report(CASE5, "compute_degradation", "node-1294", "contradicted");
}

/* A job of 16 ranks on one host, whose name, host and phase are XSS, and an event of kind XSS
 * on that host: every string a client chooses, as markup. */
static void xss_job(void)
{
	struct h_hello h = {.job = XSS,
			    .agent = "xss-agent",
			    .host = XSS,
			    .world = 16,
			    .pp = 1,
			    .dp = 16,
			    .ep = 1,
			    .first_rank = 0,
			    .n_ranks = 16};
	int64_t now = (int64_t)time(NULL) * 1000000;
	int fd = h_connect(proc.agent_port);
	json_t *j = NULL;

	H_CHECK(fd >= 0 && h_hello_ok(fd, &h), &proc);
	for (uint32_t it = 0; it < 8; it++) {
		struct h_batch b = {.seq = it + 1,
				    .first_rank = 0,
				    .n_ranks = 16,
				    .iter = it,
				    .start_us = now + it * 40000,
				    .kernel_count = 4,
				    .phase = XSS};

		h_send_batch(fd, &b);
		H_CHECK(h_wait_ack(fd, it + 1), &proc);
	}
	H_CHECK(api_call(&proc, "POST", "/api/v1/events",
			 "{\"host\":\"" XSS "\",\"kind\":\"" XSS "\",\"source\":\"" XSS "\",\"detail\":\"" XSS "\"}",
			 &j) == 202,
		&proc);
	json_decref(j);
	H_CHECK(api_call(&proc, "POST", "/api/v1/jobs/" XSS_PATH "/diagnose", "", &j) == 202, &proc);
	json_decref(j);
	wait_report(XSS_PATH, NULL, XSS, "unrelated");
	close(fd);
}

static void browser(const char *phase, const char *arg)
{
	char url[64];
	const char *argv[] = {"/usr/bin/env", "python3", CONSOLE_CHECK, url, phase, dir, arg, NULL};
	int rc;

	snprintf(url, sizeof(url), "http://127.0.0.1:%d/", proc.http_port);
	rc = h_run(argv, NULL, 300000);
	if (rc == 77) {
		fprintf(stderr, "test_console: no chromium (install-deps.sh test installs it): skipped\n");
		h_proc_stop(&proc, SIGTERM, 60000);
		exit(77);
	}
	H_CHECK(rc == 0, &proc);
}

/* The console's answers: the shell and a script, with a CSP that allows no inline script and
 * no other origin. */
static void check_headers(void)
{
	const char *paths[] = {"/", "/console/app.js"};

	for (size_t i = 0; i < 2; i++) {
		char *head = NULL, *body = NULL, *csp;

		H_CHECK(h_http_ex(proc.http_port, "GET", paths[i], NULL, NULL, &head, &body) == 200, &proc);
		csp = strstr(head, "Content-Security-Policy: ");
		H_CHECK(csp, &proc);
		csp[strcspn(csp, "\r\n")] = '\0';
		fprintf(stderr, "%s: %s\n", paths[i], csp);
		H_CHECK(strstr(csp, "script-src 'self'") && strstr(csp, "default-src 'none'") &&
				!strstr(csp, "unsafe-inline") && !strstr(csp, "unsafe-eval") && !strstr(csp, "http") &&
				!strstr(csp, "*"),
			&proc);
		H_CHECK(i || (strstr(body, "<script type=\"module\" src=\"console/app.js\">") &&
			      !strstr(body, "onload=")),
			&proc);
		free(head);
		free(body);
	}
}

int main(void)
{
	pid_t a, b;

	char *body = NULL;

	h_tmpdir("console", dir, sizeof(dir));
	h_db_create("culprit_console", dsn, sizeof(dsn));
	start(NULL);
	check_headers();

	seed_incident();
	a = sim("compute_straggler", "fleet-a", "30");
	b = sim("compute_straggler", "fleet-b", "30");
	H_CHECK(api_sim_wait(a, 120000) == 0 && api_sim_wait(b, 120000) == 0, &proc);
	wait_report("fleet-a", "compute_degradation", NULL, NULL);
	wait_report("fleet-b", "compute_degradation", NULL, NULL);
	xss_job();
	browser("live", XSS);

	H_CHECK(h_proc_stop(&proc, SIGTERM, 60000) == 0, &proc);
	start(NULL);
	browser("restarted", NULL);

	H_CHECK(h_proc_stop(&proc, SIGTERM, 60000) == 0, &proc);
	start((const char *const[]){"--http-read-token", READ_TOKEN, "--http-write-token", WRITE_TOKEN, NULL});
	H_CHECK(h_http(proc.http_port, "GET", "/api/v1/jobs", NULL, &body) == 401, &proc);
	free(body);
	H_CHECK(h_http(proc.http_port, "GET", "/api/v1/jobs/" CASE5 "/heatmap", NULL, &body) == 401, &proc);
	free(body);
	H_CHECK(h_http(proc.http_port, "GET", "/api/v1/fleet", NULL, &body) == 401, &proc);
	free(body);
	browser("tokens", READ_TOKEN);

	H_CHECK(h_proc_stop(&proc, SIGTERM, 60000) == 0, &proc);
	fprintf(stderr, "test_console: ok\n");
	return 0;
}
