/* test_cluster.c: two culpritd instances on one PostgreSQL (docs/operations.md, "Many
 * instances"), agents written by hand.
 *
 * Checked: the first Hello of a job takes its lease on the instance it reached; a Hello for
 * that job on the other instance is answered accepted = false with redirect = the owner's
 * agent address (and counted), while a second job is taken there; when the owner stops
 * (SIGSTOP: alive, but silent) the other instance takes the job on the next Hello within
 * 10 s (the time is printed), tells the agent the durable sequence the first owner committed,
 * and stores what follows; the deposed owner, woken up, stores nothing more of the job (its
 * writer is fenced by the lease epoch, or its renewal finds the lease lost first) and closes
 * the agent's old connection; a job forgotten by its owner (no agent for job_retire_s) has its
 * lease given back: the other instance takes it on the next Hello, without waiting for it to
 * expire, and so does a clean stop (SIGTERM) for all of its instance's jobs. REST: a live endpoint of a job another instance owns answers 307 to it, history
 * (reports) is answered by any instance, an unknown job is 404. */
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "alerttest.h"
#include "harness.h"

static struct h_proc a, b;

static void start(struct h_proc *p, const char *name, const char *dsn)
{
	const char *extra[] = {"--lease-s", "2", "--job-retire-s", "2", NULL};

	H_CHECK(h_culpritd_start_instance(p, name, dsn, extra) == 0, p);
}

/* Hello of agent for job (8 ranks) on port: the HelloAck (NULL: none), the socket in *fd. */
static frame_envelope *hello(int port, const char *job, const char *agent, uint64_t resume, int *fd)
{
	frame_envelope *e;

	*fd = h_connect(port);
	if (*fd < 0)
		return NULL;
	h_send_hello_as(*fd, &(struct h_hello){.job = job,
					       .agent = agent,
					       .world = 8,
					       .pp = 1,
					       .dp = 8,
					       .ep = 1,
					       .first_rank = 0,
					       .n_ranks = 8,
					       .resume_seq = resume});
	e = h_recv_env(*fd, 10000);
	if (e && e->msg_case != CULPRIT__V1__ENVELOPE__MSG_HELLO_ACK) {
		frame_free(e);
		return NULL;
	}
	return e;
}

static void batch(int fd, uint64_t seq, uint32_t iter)
{
	h_send_batch(fd, &(struct h_batch){.seq = seq,
					   .first_rank = 0,
					   .n_ranks = 8,
					   .iter = iter,
					   .start_us = 1764633600000000 + (int64_t)iter * 1000000,
					   .kernel_count = 1});
}

int main(void)
{
	char dsn[512], want[64];
	int fd_b, fd_a, fd_a2, fd;
	frame_envelope *e;

	h_db_create("test_cluster", dsn, sizeof(dsn));
	start(&a, "A", dsn);
	start(&b, "B", dsn);

	/* j1 is B's: its first Hello reached B */
	e = hello(b.agent_port, "j1", "a1", 0, &fd_b);
	H_CHECK(e && e->hello_ack->accepted, &b);
	frame_free(e);
	batch(fd_b, 1, 0);
	batch(fd_b, 2, 1);
	H_CHECK(h_wait_ack(fd_b, 2), &b);
	H_CHECK(at_sql_long(dsn, "SELECT (owner = 'B' AND epoch = 1)::int FROM job_leases WHERE job = 'j1'") == 1, &b);

	/* A sends j1's agents to B, and takes j2 */
	e = hello(a.agent_port, "j1", "a2", 0, &fd);
	snprintf(want, sizeof(want), "127.0.0.1:%d", b.agent_port);
	H_CHECK(e && !e->hello_ack->accepted && strcmp(e->hello_ack->redirect, want) == 0, &a);
	frame_free(e);
	H_CHECK(h_peer_closed(fd, 5000), &a);
	close(fd);
	H_CHECK(h_get_metric(a.http_port, "culprit_hellos_redirected_total") == 1, &a);
	e = hello(a.agent_port, "j2", "a1", 0, &fd_a2);
	H_CHECK(e && e->hello_ack->accepted, &a);
	frame_free(e);
	batch(fd_a2, 1, 0);
	H_CHECK(h_wait_ack(fd_a2, 1), &a);

	/* REST on A for B's job: live answers come from B (307), history from PostgreSQL */
	{
		char *head = NULL, *body = NULL, loc[128];

		snprintf(loc, sizeof(loc), "Location: http://127.0.0.1:%d/api/v1/jobs/j1?x=1\r\n", b.http_port);
		H_CHECK(h_http_ex(a.http_port, "GET", "/api/v1/jobs/j1?x=1", NULL, NULL, &head, &body) == 307, &a);
		H_CHECK(head && strstr(head, loc), &a);
		free(head);
		free(body);
		H_CHECK(h_http_ex(a.http_port, "POST", "/api/v1/jobs/j1/diagnose", NULL, "", &head, &body) == 307, &a);
		free(head);
		free(body);
		H_CHECK(h_http(b.http_port, "GET", "/api/v1/jobs/j1", NULL, &body) == 200, &b);
		free(body);
		H_CHECK(h_http(a.http_port, "GET", "/api/v1/jobs/j1/reports", NULL, &body) == 200, &a);
		free(body);
		H_CHECK(h_http(a.http_port, "GET", "/api/v1/jobs/nosuchjob", NULL, &body) == 404, &a);
		free(body);
		/* the list: A's own job, and B's with where to ask */
		H_CHECK(h_http(a.http_port, "GET", "/api/v1/jobs", NULL, &body) == 200, &a);
		{
			json_t *j = json_loads(body, 0, NULL), *mine = json_object_get(j, "jobs"),
			       *others = json_object_get(j, "elsewhere");

			H_CHECK(json_array_size(mine) == 1 && json_array_size(others) == 1, &a);
			H_CHECK(!strcmp(json_string_value(json_object_get(json_array_get(mine, 0), "job")), "j2"), &a);
			H_CHECK(!strcmp(json_string_value(json_object_get(json_array_get(others, 0), "name")), "j1"),
				&a);
			snprintf(loc, sizeof(loc), "http://127.0.0.1:%d", b.http_port);
			H_CHECK(!strcmp(json_string_value(json_object_get(json_array_get(others, 0), "api_url")), loc),
				&a);
			json_decref(j);
		}
		free(body);
	}

	/* B stops answering: A takes j1 once its lease has expired, on the next Hello */
	H_CHECK(kill(b.pid, SIGSTOP) == 0, &b);
	int64_t t0 = h_now_ms(), took_ms = -1;
	int redirects = 0;
	for (;;) {
		e = hello(a.agent_port, "j1", "a1", 3, &fd_a);
		H_CHECK(e != NULL, &a);
		if (e->hello_ack->accepted) {
			took_ms = h_now_ms() - t0;
			break;
		}
		H_CHECK(strcmp(e->hello_ack->redirect, want) == 0, &a);
		frame_free(e);
		close(fd_a);
		redirects++;
		H_CHECK(h_now_ms() - t0 < 10000, &a);
		poll(NULL, 0, 100); /* an agent's reconnect pace */
	}
	fprintf(stderr, "A took j1 %lld ms after B stopped (lease_s 2; %d redirects to B meanwhile)\n",
		(long long)took_ms, redirects);
	H_CHECK(took_ms < 10000, &a);
	H_CHECK(e->hello_ack->durable_seq == 2, &a); /* what B committed, read from the database */
	frame_free(e);
	H_CHECK(at_sql_long(dsn, "SELECT (owner = 'A' AND epoch = 2)::int FROM job_leases WHERE job = 'j1'") == 1, &a);
	batch(fd_a, 3, 2);
	H_CHECK(h_wait_ack(fd_a, 3), &a);

	/* B wakes up: the batch on its old connection is not stored, the connection is closed */
	batch(fd_b, 4, 3);
	H_CHECK(kill(b.pid, SIGCONT) == 0, &b);
	H_CHECK(h_peer_closed(fd_b, 10000), &b);
	H_CHECK(h_log_wait(&b, "is another instance's now", 1, 10000) ||
			h_log_wait(&b, "is no longer this instance's", 1, 1),
		&b);
	fprintf(stderr, "B, woken: %s\n",
		h_count_lines(b.log_path, "is no longer this instance's") ? "its writer was fenced"
									  : "its renewal found the lease lost");
	H_CHECK(at_sql_long(dsn, "SELECT count(*) FROM iterations i JOIN jobs j ON j.id = i.job_id WHERE j.name = 'j1'"
				 " AND i.iter = 3") == 0,
		&b);
	H_CHECK(at_sql_long(dsn,
			    "SELECT count(*) FROM iterations i JOIN jobs j ON j.id = i.job_id WHERE j.name = 'j1'") ==
			3 * 8,
		&a);
	H_CHECK(at_sql_long(dsn, "SELECT durable_seq FROM agent_progress p JOIN jobs j ON j.id = p.job_id"
				 " WHERE j.name = 'j1' AND p.agent = 'a1'") == 3,
		&a);

	/* j2's agent leaves: A forgets j2 and gives its lease back; B takes it at once */
	close(fd_a2);
	H_CHECK(h_log_wait(&a, "job \"j2\": forgotten", 1, 10000), &a);
	for (int64_t deadline = h_now_ms() + 5000;; poll(NULL, 0, 20)) { /* the release is asynchronous */
		if (at_sql_long(dsn, "SELECT (expires_at < now())::int FROM job_leases WHERE job = 'j2'") == 1)
			break;
		H_CHECK(h_now_ms() < deadline, &a);
	}
	e = hello(b.agent_port, "j2", "a1", 2, &fd);
	H_CHECK(e && e->hello_ack->accepted && e->hello_ack->durable_seq == 1, &b);
	frame_free(e);
	H_CHECK(at_sql_long(dsn, "SELECT (owner = 'B' AND epoch = 2)::int FROM job_leases WHERE job = 'j2'") == 1, &b);
	close(fd);

	close(fd_b);
	close(fd_a);
	/* a clean stop gives A's leases back: j1 is free at once, not lease_s later */
	int st = h_proc_stop(&a, SIGTERM, 30000);
	H_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, &a);
	H_CHECK(at_sql_long(dsn, "SELECT (owner = 'A' AND expires_at < now())::int FROM job_leases WHERE job = 'j1'") ==
			1,
		&a);
	st = h_proc_stop(&b, SIGTERM, 30000);
	H_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, &b);
	fprintf(stderr, "ok\n");
	return 0;
}
