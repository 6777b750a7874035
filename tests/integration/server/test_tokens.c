/* test_tokens.c: tokens against the real culpritd on a real PostgreSQL, over real sockets.
 *
 *   1. Agents: a wrong, a missing or another job's token gets HelloAck refused with
 *      "authentication failed" and the connection closed, counted in a metric; the right
 *      shared token and a job's own token stream and get Acks. `culprit sim` passes the
 *      token from $CULPRIT_TOKEN.
 *   2. REST: GET needs the read or the write token (401 with WWW-Authenticate: Bearer
 *      otherwise), a write needs the write token (403 for the read token), /metrics needs
 *      a token, /healthz does not.
 *   3. SIGHUP: a new agent token in the file refuses the old one and accepts the new one; an
 *      agent streaming with the old token stays while both are listed ("NEW,OLD") and is
 *      disconnected when the old one goes, one whose token still holds goes on; a broken file keeps the old configuration with one log line naming the setting.
 *   4. No token appears in the log. */
#include <arpa/inet.h>
#include <endian.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "frame.h"
#include "harness.h"

#define SHARED_1 "shared-token-one-0123456789"
#define SHARED_2 "shared-token-two-9876543210"
#define JOB_A_TOKEN "job-a-token-abcdefabcdef"
#define READ_TOKEN "read-token-r3ad"
#define WRITE_TOKEN "write-token-wr1te"

static struct h_proc proc;
static char conf_path[700];
static char jobs_path[700];

static void send_batch(int fd, uint64_t seq, uint32_t iter)
{
	frame_envelope env = CULPRIT__V1__ENVELOPE__INIT;
	Culprit__V1__Batch b = CULPRIT__V1__BATCH__INIT;
	uint32_t ir[8], ii[8];
	int64_t is[8], id[8];

	for (int r = 0; r < 8; r++) {
		ir[r] = (uint32_t)r;
		ii[r] = iter;
		is[r] = 1700000000000000LL + (int64_t)iter * 30000000;
		id[r] = 30000000;
	}
	b.seq = seq;
	b.iter_rank = ir, b.n_iter_rank = 8;
	b.iter_iter = ii, b.n_iter_iter = 8;
	b.iter_start_us = is, b.n_iter_start_us = 8;
	b.iter_dur_us = id, b.n_iter_dur_us = 8;
	env.msg_case = CULPRIT__V1__ENVELOPE__MSG_BATCH;
	env.batch = &b;
	h_send_env(fd, &env);
}

/* An agent of job says Hello with token: 1 when accepted and a batch is acknowledged; 0
 * when refused with "authentication failed" and closed after the reply. Anything else
 * fails the test. */
static int agent_try(const char *job, const char *agent, const char *token)
{
	int fd = h_connect(proc.agent_port), ok;
	frame_envelope *e;

	H_CHECK(fd >= 0, &proc);
	h_send_hello(fd, job, agent, "node-0", token);
	e = h_recv_env(fd, 10000);
	H_CHECK(e && e->msg_case == CULPRIT__V1__ENVELOPE__MSG_HELLO_ACK, &proc);
	ok = e->hello_ack->accepted;
	if (!ok) {
		H_CHECK(strcmp(e->hello_ack->reason, "authentication failed") == 0, &proc);
		H_CHECK(h_peer_closed(fd, 5000), &proc);
	} else {
		uint64_t s = e->hello_ack->durable_seq + 1;

		send_batch(fd, s, (uint32_t)s);
		H_CHECK(h_wait_ack(fd, s), &proc);
	}
	frame_free(e);
	close(fd);
	return ok;
}

/* An agent of job that stays connected: accepted, one batch acknowledged. Returns the socket;
 * *seq is the last sequence sent. */
static int agent_open(const char *job, const char *agent, const char *token, uint64_t *seq)
{
	int fd = h_connect(proc.agent_port);
	frame_envelope *e;

	H_CHECK(fd >= 0, &proc);
	h_send_hello(fd, job, agent, "node-0", token);
	e = h_recv_env(fd, 10000);
	H_CHECK(e && e->msg_case == CULPRIT__V1__ENVELOPE__MSG_HELLO_ACK && e->hello_ack->accepted, &proc);
	*seq = e->hello_ack->durable_seq + 1;
	frame_free(e);
	send_batch(fd, *seq, (uint32_t)*seq);
	H_CHECK(h_wait_ack(fd, *seq), &proc);
	return fd;
}

/* The agent on fd still streams: its next batch is acknowledged. */
static void agent_goes_on(int fd, uint64_t *seq)
{
	++*seq;
	send_batch(fd, *seq, (uint32_t)*seq);
	H_CHECK(h_wait_ack(fd, *seq), &proc);
}

static double metric(const char *sample)
{
	char *body = NULL;
	double v;

	H_CHECK(h_http_ex(proc.http_port, "GET", "/metrics", "Authorization: Bearer " READ_TOKEN "\r\n", NULL, NULL,
			  &body) == 200,
		&proc);
	v = h_metric(body, sample);
	free(body);
	return v;
}

/* status of method path with an Authorization header for token (NULL: none); *head
 * receives the response headers when head is not NULL */
static int rest(const char *method, const char *path, const char *token, const char *body, char **head)
{
	char hdr[256] = "", *resp = NULL;
	int st;

	if (token)
		snprintf(hdr, sizeof(hdr), "Authorization: Bearer %s\r\n", token);
	st = h_http_ex(proc.http_port, method, path, hdr, body, head, &resp);
	free(resp);
	return st;
}

static void write_conf(const char *agent_token, const char *extra)
{
	FILE *f = fopen(conf_path, "w");

	H_CHECK(f != NULL, &proc);
	/* the wrong tokens here are many: what they cost the guesser is test_auth_limit's */
	fprintf(f,
		"# test_auth\nagent_token = \"%s\"\njob_tokens_file = %s\nhttp_read_token = %s\n"
		"http_write_token = %s\nauth_failures_per_addr = 1000000\n%s",
		agent_token, jobs_path, READ_TOKEN, WRITE_TOKEN, extra ? extra : "");
	fclose(f);
}

static int log_contains(const char *needle)
{
	FILE *f = fopen(proc.log_path, "r");
	char line[4096];
	int found = 0;

	H_CHECK(f != NULL, &proc);
	while (fgets(line, sizeof(line), f))
		if (strstr(line, needle))
			found = 1;
	fclose(f);
	return found;
}

static int run_sim(const char *token, const char *timeout)
{
	char server[64];
	pid_t pid;
	int status;

	snprintf(server, sizeof(server), "127.0.0.1:%d", proc.agent_port);
	pid = fork();
	if (pid == 0) {
		const char *argv[] = {
			CULPRIT_BIN, "sim",     "--scenario", "compute_straggler", "--iters", "2",       "--server",
			server,      "--speed", "0",          "--timeout",         timeout,   "--quiet", NULL};

		setenv("CULPRIT_TOKEN", token, 1);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return -1;
	return WEXITSTATUS(status);
}

int main(void)
{
	char dsn[1024], dir[600], db_arg[1100], *head = NULL;
	const char *extra[] = {"--db", db_arg, "--config", conf_path, NULL};
	int reloads = 0;
	FILE *f;

	h_db_create("test_tokens", dsn, sizeof(dsn));
	snprintf(db_arg, sizeof(db_arg), "%s", dsn);
	h_tmpdir("tokens", dir, sizeof(dir));
	snprintf(conf_path, sizeof(conf_path), "%s/culpritd.conf", dir);
	snprintf(jobs_path, sizeof(jobs_path), "%s/job_tokens", dir);
	f = fopen(jobs_path, "w");
	H_CHECK(f != NULL, NULL);
	fprintf(f, "# job token\njob-a %s\n", JOB_A_TOKEN);
	fclose(f);
	write_conf(SHARED_1, NULL);
	H_CHECK(h_culpritd_start(&proc, dir, extra) == 0, &proc);

	/* 1. agents */
	H_CHECK(agent_try("job-x", "a1", SHARED_1) == 1, &proc);
	H_CHECK(agent_try("job-x", "a1", "wrong") == 0, &proc);
	H_CHECK(agent_try("job-x", "a1", NULL) == 0, &proc);
	H_CHECK(agent_try("job-x", "a1", JOB_A_TOKEN) == 0, &proc); /* another job's token */
	H_CHECK(agent_try("job-a", "a2", JOB_A_TOKEN) == 1, &proc);
	H_CHECK(agent_try("job-a", "a2", SHARED_1) == 0, &proc); /* a listed job needs its own */
	H_CHECK(metric("culprit_agent_auth_failures_total") == 4, &proc);
	H_CHECK(metric("culprit_agent_connections_closed_total{reason=\"refused\"}") == 4, &proc);
	H_CHECK(log_contains("job \"job-x\" agent \"a1\": authentication failed"), &proc);
	H_CHECK(run_sim(SHARED_1, "120") == 0, &proc);
	H_CHECK(run_sim("not-the-token", "3") != 0, &proc);
	H_CHECK(metric("culprit_agent_auth_failures_total") > 4, &proc);

	/* 2. REST */
	H_CHECK(rest("GET", "/healthz", NULL, NULL, NULL) == 200, &proc);
	H_CHECK(rest("GET", "/api/v1/jobs", NULL, NULL, &head) == 401, &proc);
	H_CHECK(strstr(head, "WWW-Authenticate: Bearer") != NULL, &proc);
	free(head);
	H_CHECK(rest("GET", "/api/v1/jobs", "nope", NULL, NULL) == 401, &proc);
	H_CHECK(rest("GET", "/api/v1/jobs", READ_TOKEN, NULL, NULL) == 200, &proc);
	H_CHECK(rest("GET", "/api/v1/jobs", WRITE_TOKEN, NULL, NULL) == 200, &proc);
	H_CHECK(rest("GET", "/metrics", NULL, NULL, NULL) == 401, &proc);
	{
		const char *ev = "{\"host\":\"node-0\",\"kind\":\"port_down\",\"job\":\"job-x\"}";

		H_CHECK(rest("POST", "/api/v1/events", NULL, ev, NULL) == 401, &proc);
		H_CHECK(rest("POST", "/api/v1/events", READ_TOKEN, ev, NULL) == 403, &proc);
		H_CHECK(rest("POST", "/api/v1/events", WRITE_TOKEN, ev, NULL) == 202, &proc);
		H_CHECK(rest("POST", "/api/v1/jobs/job-x/diagnose", READ_TOKEN, NULL, NULL) == 403, &proc);
		H_CHECK(rest("POST", "/api/v1/jobs/job-x/diagnose", WRITE_TOKEN, NULL, NULL) == 202, &proc);
	}
	H_CHECK(metric("culprit_http_auth_failures_total{code=\"401\"}") == 4, &proc);
	H_CHECK(metric("culprit_http_auth_failures_total{code=\"403\"}") == 2, &proc);

	/* 3. SIGHUP: rotate the shared token; the agent streaming with the old one is closed,
	 * the one with its job's token goes on */
	uint64_t seq_x, seq_a;
	int fd_x = agent_open("job-x", "stays-x", SHARED_1, &seq_x);
	int fd_a = agent_open("job-a", "stays-a", JOB_A_TOKEN, &seq_a);
	double failures = metric("culprit_agent_auth_failures_total");

	/* the overlap of a rotation: both tokens accepted, nobody disconnected */
	write_conf(SHARED_2 "," SHARED_1, NULL);
	kill(proc.pid, SIGHUP);
	H_CHECK(h_log_wait(&proc, "SIGHUP: configuration reloaded", ++reloads, 10000), &proc);
	agent_goes_on(fd_x, &seq_x);
	H_CHECK(agent_try("job-x", "a1", SHARED_1) == 1, &proc);
	H_CHECK(agent_try("job-x", "a1", SHARED_2) == 1, &proc);

	write_conf(SHARED_2, NULL);
	kill(proc.pid, SIGHUP);
	H_CHECK(h_log_wait(&proc, "SIGHUP: configuration reloaded", ++reloads, 10000), &proc);
	H_CHECK(h_log_wait(&proc, "SIGHUP: closed 1 agent connection whose token is no longer accepted", 1, 10000),
		&proc);
	H_CHECK(h_peer_closed(fd_x, 5000), &proc);
	close(fd_x);
	agent_goes_on(fd_a, &seq_a);
	H_CHECK(metric("culprit_agent_auth_failures_total") == failures + 1, &proc);
	H_CHECK(agent_try("job-x", "a1", SHARED_1) == 0, &proc);
	H_CHECK(agent_try("job-x", "a1", SHARED_2) == 1, &proc);

	/* a broken file (a token with a space; a setting that is no integer; a job tokens file
	 * that is not there) keeps the old configuration whole */
	{
		static const struct {
			const char *agent_token, *extra, *names;
		} bad[] = {
			{"shared three", NULL, "\"agent_token\""},
			{"shared-token-four", "max_frame = lots\n", "\"max_frame\""},
			{"shared-token-five", "job_tokens_file = /nonexistent/job_tokens\n", "\"job_tokens_file\""},
		};

		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			char needle[128];

			write_conf(bad[i].agent_token, bad[i].extra);
			kill(proc.pid, SIGHUP);
			snprintf(needle, sizeof(needle), "%s", bad[i].names);
			H_CHECK(h_log_wait(&proc, "keeping the old configuration", (int)i + 1, 10000), &proc);
			H_CHECK(log_contains(needle), &proc);
			H_CHECK(agent_try("job-x", "a1", SHARED_2) == 1, &proc);
			H_CHECK(agent_try("job-x", "a1", bad[i].agent_token) == 0, &proc);
		}
	}
	/* a new job token file content takes effect on SIGHUP too */
	f = fopen(jobs_path, "w");
	H_CHECK(f != NULL, &proc);
	fprintf(f, "job-a %s-rotated\n", JOB_A_TOKEN);
	fclose(f);
	write_conf(SHARED_2, NULL);
	kill(proc.pid, SIGHUP);
	H_CHECK(h_log_wait(&proc, "SIGHUP: configuration reloaded", ++reloads, 10000), &proc);
	H_CHECK(h_peer_closed(fd_a, 5000), &proc);
	close(fd_a);
	H_CHECK(agent_try("job-a", "a2", JOB_A_TOKEN) == 0, &proc);
	H_CHECK(agent_try("job-a", "a2", JOB_A_TOKEN "-rotated") == 1, &proc);

	/* 4. never a token in the log */
	H_CHECK(!log_contains(SHARED_1) && !log_contains(SHARED_2) && !log_contains(JOB_A_TOKEN) &&
			!log_contains(READ_TOKEN) && !log_contains(WRITE_TOKEN) && !log_contains("not-the-token") &&
			!log_contains("shared-token-four"),
		&proc);
	H_CHECK(h_proc_stop(&proc, SIGTERM, 60000) == 0, &proc);
	return 0;
}
