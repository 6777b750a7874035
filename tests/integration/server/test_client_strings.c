/* test_client_strings.c: the strings a client sends that reach culpritd's log cannot forge a
 * log line or reach the terminal as an escape. A Hello whose host, job or agent id holds a
 * control character (newline, ANSI escape, C1 in UTF-8) is refused with a reason and counted
 * (closed, reason "refused"); a Goodbye reason and a REST path full of them are logged
 * escaped; the whole log has no control byte but its line ends. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "frame.h"
#include "harness.h"

static struct h_proc proc;

/* Hello, and the HelloAck's verdict: 1 accepted, 0 refused (reason copied), -1 no answer. */
static int hello(int fd, const char *job, const char *agent, const char *host, char *reason, size_t size)
{
	frame_envelope *e;
	int accepted;

	h_send_hello(fd, job, agent, host, NULL);
	e = h_recv_env(fd, 10000);
	if (!e || e->msg_case != CULPRIT__V1__ENVELOPE__MSG_HELLO_ACK) {
		frame_free(e);
		return -1;
	}
	accepted = e->hello_ack->accepted;
	snprintf(reason, size, "%s", e->hello_ack->reason ? e->hello_ack->reason : "");
	frame_free(e);
	return accepted;
}

int main(void)
{
	static const struct {
		const char *job, *agent, *host;
	} bad[] = {
		{"strings", "a1", "a\nb"},
		{"strings", "a2", "\x1b[31mred"},
		{"strings", "a3",
		 "x\xc2\x9b"
		 "2Jy"},
		{"strings", "a4\r", "node"},
		{"str\x1b]0;title\x07ings", "a5", "node"},
	};
	char dir[600], reason[256], *body = NULL;
	const char *extra[] = {"--storage", "false", "--log-level", "debug", "--http-write-token", "wtok", NULL};
	double refused0;
	int fd;

	h_tmpdir("client_strings", dir, sizeof(dir));
	H_CHECK(h_culpritd_start(&proc, dir, extra) == 0, &proc);
	refused0 = h_get_metric(proc.http_port, "culprit_agent_connections_closed_total{reason=\"refused\"}");

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		fd = h_connect(proc.agent_port);
		H_CHECK(fd >= 0, &proc);
		H_CHECK(hello(fd, bad[i].job, bad[i].agent, bad[i].host, reason, sizeof(reason)) == 0, &proc);
		H_CHECK(strstr(reason, "control characters") != NULL, &proc);
		H_CHECK(h_peer_closed(fd, 5000), &proc);
		close(fd);
	}
	H_CHECK(h_get_metric(proc.http_port, "culprit_agent_connections_closed_total{reason=\"refused\"}") ==
			refused0 + (double)(sizeof(bad) / sizeof(bad[0])),
		&proc);

	/* a good agent (UTF-8 in its host is fine), then a Goodbye whose reason tries to forge a line */
	fd = h_connect(proc.agent_port);
	H_CHECK(hello(fd, "strings", "good",
		      "n\xc3\xb6"
		      "de-1",
		      reason, sizeof(reason)) == 1,
		&proc);
	{
		frame_envelope env = CULPRIT__V1__ENVELOPE__INIT;
		Culprit__V1__Goodbye g = CULPRIT__V1__GOODBYE__INIT;

		g.reason = (char *)"done\n2026-01-01 00:00:00.000 ERROR  forged\x1b[2J";
		env.msg_case = CULPRIT__V1__ENVELOPE__MSG_GOODBYE;
		env.goodbye = &g;
		h_send_env(fd, &env);
	}
	H_CHECK(h_peer_closed(fd, 5000), &proc);
	close(fd);
	H_CHECK(h_log_wait(&proc, "goodbye: done\\n2026-01-01 00:00:00.000 ERROR  forged\\x1b[2J", 1, 10000), &proc);

	/* a REST path with an escape, refused for its token: logged escaped */
	H_CHECK(h_http_ex(proc.http_port, "POST", "/api/v1/events?q=\x1b[2J", NULL, "{}", NULL, &body) == 401, &proc);
	free(body);
	H_CHECK(h_log_wait(&proc, "/api/v1/events?q=\\x1b[2J refused", 1, 10000), &proc);

	H_CHECK(h_proc_stop(&proc, SIGTERM, 30000) == 0, &proc);
	{
		FILE *f = fopen(proc.log_path, "rb");
		int ch, lines = 0;

		H_CHECK(f != NULL, &proc);
		while ((ch = fgetc(f)) != EOF) {
			lines += ch == '\n';
			if ((ch < 0x20 && ch != '\n' && ch != '\t') || ch == 0x7f) {
				fprintf(stderr, "culpritd's log has the control byte 0x%02x on line %d\n", ch,
					lines + 1);
				h_dump_log(&proc);
				return 1;
			}
		}
		fclose(f);
	}
	H_CHECK(h_count_lines(proc.log_path, "forged") == 1,
		&proc); /* inside the goodbye line, not a line of its own */
	printf("client strings: control characters refused at Hello, escaped in the log\n");
	return 0;
}
