/* test_auth_limit.c: a wrong token costs the guesser, and a database error's text stays in
 * the log. The real culpritd on the test PostgreSQL, with REST and agent tokens and
 * auth_failures_per_addr = 30 (one failure every 2 s once 30 are spent):
 *
 *   1. REST: 30 requests with a wrong token get 401, the 31st 429 with Retry-After, and so
 *      does the right token from the same address (it is not checked); a request without a
 *      token to an open route still gets its answer. Once Retry-After has passed the right
 *      token works again. culprit_auth_limited_total{listener="http"} counts the 429s.
 *   2. Agents share the address's budget: once it has room, wrong tokens get "authentication
 *      failed" until a Hello, then even one with the right token, is refused "too many failed
 *      token checks from this address; retry in N s" ({listener="agent"}); once the wait is
 *      over the right token is accepted.
 *   3. A query PostgreSQL refuses (since=yesterday-ish): 400 whose detail is a reference,
 *      not PostgreSQL's text; the log has the text under that reference. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "frame.h"
#include "harness.h"

#define AGENT_TOKEN "agent-token-0123456789"
#define READ_TOKEN "read-token-r3ad"
#define WRITE_TOKEN "write-token-wr1te"
#define BUDGET 30

static struct h_proc proc;

static int get(const char *path, const char *token, char **head, char **body)
{
	char hdr[128] = "";

	if (token)
		snprintf(hdr, sizeof(hdr), "Authorization: Bearer %s\r\n", token);
	return h_http_ex(proc.http_port, "GET", path, hdr[0] ? hdr : NULL, NULL, head, body);
}

/* Hello with token; the HelloAck's verdict (1 accepted, 0 refused: reason copied). */
static int hello(const char *token, char *reason, size_t size)
{
	int fd = h_connect(proc.agent_port), ok;
	frame_envelope *e;

	H_CHECK(fd >= 0, &proc);
	h_send_hello(fd, "limited", "a0", "node-0", token);
	e = h_recv_env(fd, 10000);
	H_CHECK(e && e->msg_case == CULPRIT__V1__ENVELOPE__MSG_HELLO_ACK, &proc);
	ok = e->hello_ack->accepted;
	snprintf(reason, size, "%s", e->hello_ack->reason);
	frame_free(e);
	close(fd);
	return ok;
}

int main(void)
{
	char dir[600], dsn[512], *head = NULL, *body = NULL, reason[256], ref[32] = "", *p;
	const char *extra[] = {"--db",
			       dsn,
			       "--agent-token",
			       AGENT_TOKEN,
			       "--http-read-token",
			       READ_TOKEN,
			       "--http-write-token",
			       WRITE_TOKEN,
			       "--auth-failures-per-addr",
			       "30",
			       NULL};
	int64_t until;
	int code;

	h_db_create("test_auth_limit", dsn, sizeof(dsn));
	h_tmpdir("auth_limit", dir, sizeof(dir));
	H_CHECK(h_culpritd_start(&proc, dir, extra) == 0, &proc);

	/* 1. REST */
	for (int i = 0; i < BUDGET; i++) {
		H_CHECK(get("/api/v1/jobs", "guess", NULL, &body) == 401, &proc);
		free(body);
	}
	code = get("/api/v1/jobs", "guess", &head, &body);
	fprintf(stderr, "REST, failure %d: %d %s", BUDGET + 1, code, body ? body : "\n");
	H_CHECK(code == 429 && (p = strstr(head, "Retry-After: ")) && atoi(p + 13) >= 1 && atoi(p + 13) <= 2, &proc);
	H_CHECK(strstr(body, "too many failed token checks from this address"), &proc);
	free(head);
	free(body);
	H_CHECK(get("/api/v1/jobs", READ_TOKEN, NULL, &body) == 429, &proc); /* not even checked */
	free(body);
	H_CHECK(get("/healthz", NULL, NULL, &body) == 200, &proc); /* no token, nothing to check */
	free(body);
	until = h_now_ms() + 10000;
	while ((code = get("/api/v1/jobs", READ_TOKEN, NULL, &body)) == 429 && h_now_ms() < until) {
		free(body);
		usleep(200 * 1000); /* polls for the budget's return (Retry-After is 1 to 2 s) */
	}
	free(body);
	H_CHECK(code == 200, &proc);
	{
		char *text = NULL;

		H_CHECK(get("/metrics", READ_TOKEN, NULL, &text) == 200, &proc);
		H_CHECK(h_metric(text, "culprit_auth_limited_total{listener=\"http\"}") >= 2, &proc);
		free(text);
	}

	/* 2. agents share the address's budget: the right token once it has room again, then
	 * wrong ones until refused for the budget, then the right one refused too, until room */
	until = h_now_ms() + 10000;
	while (!hello(AGENT_TOKEN, reason, sizeof(reason)) && h_now_ms() < until)
		usleep(200 * 1000);
	H_CHECK(strcmp(reason, "") == 0, &proc);
	for (int i = 0;; i++) {
		H_CHECK(i <= BUDGET && !hello("guess", reason, sizeof(reason)), &proc);
		if (strstr(reason, "too many failed token checks from this address; retry in "))
			break;
		H_CHECK(strcmp(reason, "authentication failed") == 0, &proc);
	}
	fprintf(stderr, "agents: %s\n", reason);
	H_CHECK(!hello(AGENT_TOKEN, reason, sizeof(reason)) && strstr(reason, "too many failed token checks"), &proc);
	until = h_now_ms() + 10000;
	while (!hello(AGENT_TOKEN, reason, sizeof(reason)) && h_now_ms() < until)
		usleep(200 * 1000);
	H_CHECK(strcmp(reason, "") == 0, &proc);
	{
		char *text = NULL;

		H_CHECK(get("/metrics", READ_TOKEN, NULL, &text) == 200, &proc);
		H_CHECK(h_metric(text, "culprit_auth_limited_total{listener=\"agent\"}") >= 2, &proc);
		free(text);
	}

	/* 3. PostgreSQL's own words stay in the log */
	code = get("/api/v1/events?since=yesterday-ish", WRITE_TOKEN, NULL, &body);
	fprintf(stderr, "since=yesterday-ish: %d %s", code, body);
	H_CHECK(code == 400 && !strstr(body, "invalid input syntax") && !strstr(body, "timestamp"), &proc);
	H_CHECK((p = strstr(body, "reference ")) && sscanf(p, "reference %31[0-9a-f]", ref) == 1, &proc);
	free(body);
	{
		char needle[96];

		snprintf(needle, sizeof(needle), "reference %s): ", ref);
		H_CHECK(h_log_wait(&proc, needle, 1, 5000), &proc);
		H_CHECK(h_count_lines(proc.log_path, "invalid input syntax") >= 1, &proc);
	}
	H_CHECK(h_proc_stop(&proc, SIGTERM, 30000) == 0, &proc);
	printf("auth limit: 429 after %d wrong tokens, agents refused alike, database errors by reference\n", BUDGET);
	return 0;
}
