/* test_client_strings.c: every string a client sends is checked at the door (common/text.h:
 * UTF-8 without control characters, bounded). Each field of each message is sent holding a
 * newline (a forged log line), an ANSI escape, a C1 control written in UTF-8, a raw 8-bit CSI
 * (0x9b) and bytes that are not UTF-8:
 *   Hello    job, agent_id, host, token, topology.order: refused, the HelloAck's reason
 *            names the field, the connection closed and counted ("refused");
 *   Batch    a dictionary name and a NameDef name: a Reject naming the rule, the
 *            connection stays;
 *   Goodbye  reason: a protocol violation (closed, counted "protocol");
 *   REST     POST /api/v1/events host, kind, source, detail, job; a path segment; the
 *            query parameters of GET /api/v1/events: 400 with the reason.
 * A good agent whose host is UTF-8 ("nöde") is accepted. At the end culpritd's log holds no
 * control byte but its line ends, no byte past ASCII (what clients sent is logged escaped),
 * and no line that a client wrote. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "frame.h"
#include "harness.h"

static struct h_proc proc;

static const struct {
	const char *what, *text;
} bad[] = {
	{"newline", "tp\nFAKE LOG LINE"},
	{"csi", "x\x1b[2Jy"},
	{"c1", "x\xc2\x9b"
	       "2Jy"},
	{"raw 0x9b", "x\x9b"
		     "2Jy"},
	{"not utf-8", "x\xff\xfey"},
};
#define N_BAD (sizeof(bad) / sizeof(bad[0]))

/* A Hello with one field replaced by value (field: job, agent_id, host, token, order or
 * NULL for none); the HelloAck's verdict: 1 accepted, 0 refused (reason copied), -1 none. */
static int hello(int fd, const char *field, const char *value, char *reason, size_t size)
{
	frame_envelope env = CULPRIT__V1__ENVELOPE__INIT, *e;
	Culprit__V1__Hello h = CULPRIT__V1__HELLO__INIT;
	Culprit__V1__Topology t = CULPRIT__V1__TOPOLOGY__INIT;
	uint32_t ranks[8] = {0, 1, 2, 3, 4, 5, 6, 7};
	int accepted;

	t.world = 8, t.tp = 1, t.cp = 1, t.pp = 1, t.dp = 8, t.ep = 1, t.gpus_per_node = 8;
	t.order = (char *)"tp-cp-ep-dp-pp";
	h.protocol_version = FRAME_PROTOCOL_VERSION;
	h.job = (char *)"strings";
	h.agent_id = (char *)"a1";
	h.host = (char *)"n\xc3\xb6"
			 "de-1";
	h.topology = &t;
	h.ranks = ranks;
	h.n_ranks = 8;
	if (field && !strcmp(field, "job"))
		h.job = (char *)value;
	else if (field && !strcmp(field, "agent_id"))
		h.agent_id = (char *)value;
	else if (field && !strcmp(field, "host"))
		h.host = (char *)value;
	else if (field && !strcmp(field, "token"))
		h.token = (char *)value;
	else if (field && !strcmp(field, "topology.order"))
		t.order = (char *)value;
	env.msg_case = CULPRIT__V1__ENVELOPE__MSG_HELLO;
	env.hello = &h;
	h_send_env(fd, &env);
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

/* A batch of one phase of rank 0 named name, in the batch's dictionary or (def) by a NameDef;
 * the Reject's reason copied, 1 when refused, 0 acknowledged. */
static int batch(int fd, uint64_t seq, const char *name, int def, char *reason, size_t size)
{
	frame_envelope env = CULPRIT__V1__ENVELOPE__INIT, *e;
	Culprit__V1__Batch b = CULPRIT__V1__BATCH__INIT;
	Culprit__V1__NameDef d = CULPRIT__V1__NAME_DEF__INIT, *defs[1] = {&d};
	char *names[1] = {(char *)name};
	uint32_t rank = 0, iter = 1, zero = 0;
	int64_t start = -1, dur = 1000;
	int refused = -1;

	b.seq = seq;
	if (def) {
		d.id = 7;
		d.name = (char *)name;
		b.name_defs = defs, b.n_name_defs = 1;
	} else {
		b.names = names, b.n_names = 1;
	}
	b.phase_rank = &rank, b.n_phase_rank = 1;
	b.phase_iter = &iter, b.n_phase_iter = 1;
	b.phase_name = def ? &d.id : &zero, b.n_phase_name = 1;
	b.phase_kind = &zero, b.n_phase_kind = 1;
	b.phase_group = &zero, b.n_phase_group = 1;
	b.phase_start_us = &start, b.n_phase_start_us = 1;
	b.phase_dur_us = &dur, b.n_phase_dur_us = 1;
	env.msg_case = CULPRIT__V1__ENVELOPE__MSG_BATCH;
	env.batch = &b;
	h_send_env(fd, &env);
	while ((e = h_recv_env(fd, 10000)) && refused < 0) {
		if (e->msg_case == CULPRIT__V1__ENVELOPE__MSG_REJECT && e->reject->seq == seq) {
			snprintf(reason, size, "%s", e->reject->reason);
			refused = 1;
		} else if (e->msg_case == CULPRIT__V1__ENVELOPE__MSG_ACK && e->ack->durable_seq >= seq) {
			refused = 0;
		}
		frame_free(e);
		if (refused >= 0)
			return refused;
	}
	frame_free(e);
	return refused;
}

/* A JSON string literal of s as the bytes it is: control characters escaped (\n, \u001b),
 * bytes past ASCII as they are (invalid UTF-8 stays invalid). */
static void json_str(char *out, size_t size, const char *s)
{
	size_t n = 0;

	out[n++] = '"';
	for (; *s && n + 8 < size; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch < 0x20 || ch == '"' || ch == '\\')
			n += (size_t)snprintf(out + n, size - n, "\\u%04x", ch);
		else
			out[n++] = (char)ch;
	}
	out[n++] = '"';
	out[n] = '\0';
}

int main(void)
{
	static const char *const hello_fields[] = {"job", "agent_id", "host", "token", "topology.order"};
	static const char *const event_fields[] = {"host", "kind", "source", "detail", "job"};
	char dir[600], reason[512], *body = NULL, req[1024], val[256], path[256];
	const char *extra[] = {"--storage", "false", "--log-level", "debug", NULL};
	double refused0, protocol0;
	uint64_t seq = 0;
	int fd, good;

	h_tmpdir("client_strings", dir, sizeof(dir));
	H_CHECK(h_culpritd_start(&proc, dir, extra) == 0, &proc);
	refused0 = h_get_metric(proc.http_port, "culprit_agent_connections_closed_total{reason=\"refused\"}");
	protocol0 = h_get_metric(proc.http_port, "culprit_agent_connections_closed_total{reason=\"protocol\"}");

	/* Hello: every field, every kind of bad text */
	for (size_t f = 0; f < sizeof(hello_fields) / sizeof(hello_fields[0]); f++)
		for (size_t i = 0; i < N_BAD; i++) {
			char want[64];

			fd = h_connect(proc.agent_port);
			H_CHECK(fd >= 0, &proc);
			if (hello(fd, hello_fields[f], bad[i].text, reason, sizeof(reason)) != 0 ||
			    !strstr(reason, "without control characters")) {
				fprintf(stderr, "hello with %s in %s: not refused (reason \"%s\")\n", bad[i].what,
					hello_fields[f], reason);
				h_dump_log(&proc);
				return 1;
			}
			snprintf(want, sizeof(want), "hello field %s ", hello_fields[f]);
			H_CHECK(strstr(reason, want) != NULL, &proc);
			H_CHECK(h_peer_closed(fd, 5000), &proc);
			close(fd);
		}
	H_CHECK(h_get_metric(proc.http_port, "culprit_agent_connections_closed_total{reason=\"refused\"}") ==
			refused0 + (double)(5 * N_BAD),
		&proc);

	/* a good agent (UTF-8 in its host is fine); its batches with bad names are refused, it stays */
	good = h_connect(proc.agent_port);
	H_CHECK(hello(good, NULL, NULL, reason, sizeof(reason)) == 1, &proc);
	for (int def = 0; def < 2; def++)
		for (size_t i = 0; i < N_BAD; i++) {
			if (batch(good, ++seq, bad[i].text, def, reason, sizeof(reason)) != 1) {
				fprintf(stderr, "batch with %s in a %s name: not refused\n", bad[i].what,
					def ? "NameDef" : "dictionary");
				h_dump_log(&proc);
				return 1;
			}
			H_CHECK(strstr(reason, "UTF-8 without control characters") != NULL, &proc);
		}
	H_CHECK(batch(good, ++seq, "mlp", 0, reason, sizeof(reason)) == 0, &proc);

	/* Goodbye: a protocol violation */
	for (size_t i = 0; i < N_BAD; i++) {
		frame_envelope env = CULPRIT__V1__ENVELOPE__INIT;
		Culprit__V1__Goodbye g = CULPRIT__V1__GOODBYE__INIT;
		char agent[16];

		fd = h_connect(proc.agent_port);
		snprintf(agent, sizeof(agent), "bye%zu", i);
		H_CHECK(h_hello(fd, "bye", agent, 1, 0) == 1, &proc);
		g.reason = (char *)bad[i].text;
		env.msg_case = CULPRIT__V1__ENVELOPE__MSG_GOODBYE;
		env.goodbye = &g;
		h_send_env(fd, &env);
		H_CHECK(h_peer_closed(fd, 5000), &proc);
		close(fd);
	}
	H_CHECK(h_get_metric(proc.http_port, "culprit_agent_connections_closed_total{reason=\"protocol\"}") ==
			protocol0 + (double)N_BAD,
		&proc);

	/* REST: each field of an event */
	for (size_t f = 0; f < sizeof(event_fields) / sizeof(event_fields[0]); f++)
		for (size_t i = 0; i < N_BAD; i++) {
			int code;

			json_str(val, sizeof(val), bad[i].text);
			snprintf(req, sizeof(req), "{\"host\":\"n1\",\"kind\":\"port_down\",\"%s\":%s}", event_fields[f],
				 val);
			code = h_http_ex(proc.http_port, "POST", "/api/v1/events", NULL, req, NULL, &body);
			if (code != 400 || !body || (!strstr(body, "without control characters") && !strstr(body, "JSON"))) {
				fprintf(stderr, "event with %s in %s: %d %s\n", bad[i].what, event_fields[f], code,
					body ? body : "");
				h_dump_log(&proc);
				return 1;
			}
			free(body);
			body = NULL;
		}
	/* REST: a path segment and the query parameters, percent-encoded */
	{
		static const char *const enc[] = {"a%0AFAKE", "a%1B%5B2J", "a%C2%9B2J", "a%9B2J", "a%FF%FE"};
		static const char *const params[] = {"host", "kind", "since"};

		for (size_t i = 0; i < sizeof(enc) / sizeof(enc[0]); i++) {
			snprintf(path, sizeof(path), "/api/v1/jobs/%s/reports", enc[i]);
			H_CHECK(h_http(proc.http_port, "GET", path, NULL, &body) == 400, &proc);
			H_CHECK(body && strstr(body, "without control characters"), &proc);
			free(body);
			for (size_t p = 0; p < sizeof(params) / sizeof(params[0]); p++) {
				snprintf(path, sizeof(path), "/api/v1/events?%s=%s", params[p], enc[i]);
				H_CHECK(h_http(proc.http_port, "GET", path, NULL, &body) == 400, &proc);
				H_CHECK(body && strstr(body, "without control characters"), &proc);
				free(body);
			}
		}
		body = NULL;
	}

	close(good);
	H_CHECK(h_proc_stop(&proc, SIGTERM, 30000) == 0, &proc);
	{
		FILE *f = fopen(proc.log_path, "rb");
		int ch, lines = 0;
		char start[8];
		size_t n = 0;

		H_CHECK(f != NULL, &proc);
		while ((ch = fgetc(f)) != EOF) {
			if ((ch < 0x20 && ch != '\n' && ch != '\t') || ch >= 0x7f) {
				fprintf(stderr, "culpritd's log has the byte 0x%02x on line %d\n", ch, lines + 1);
				h_dump_log(&proc);
				return 1;
			}
			if (n < sizeof(start))
				start[n++] = (char)ch;
			if (ch == '\n') {
				lines++;
				/* every line is culpritd's: it starts with its timestamp (a digit) */
				H_CHECK(n > 0 && start[0] >= '0' && start[0] <= '9', &proc);
				n = 0;
			}
		}
		fclose(f);
	}
	printf("client strings: every field refused with its reason, nothing raw in the log\n");
	return 0;
}
