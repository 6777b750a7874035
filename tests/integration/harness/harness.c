/* harness.c: see harness.h. */
#include "harness.h"

#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"

int64_t h_now_ms(void) { return clock_mono_ms(); }

void h_db_create(const char *name, char *dsn, size_t size)
{
	const char *base = getenv("CULPRIT_TEST_DSN");
	char sql[256];
	PGconn *c;
	PGresult *r;

	if (!base || !*base) {
		fprintf(stderr, "CULPRIT_TEST_DSN is not set: run the tests through ./test.sh\n");
		exit(1);
	}
	c = PQconnectdb(base);
	if (PQstatus(c) != CONNECTION_OK) {
		fprintf(stderr, "could not connect to the test database: %s", PQerrorMessage(c));
		exit(1);
	}
	snprintf(sql, sizeof(sql), "DROP DATABASE IF EXISTS %s WITH (FORCE)", name);
	PQclear(PQexec(c, sql));
	snprintf(sql, sizeof(sql), "CREATE DATABASE %s", name);
	r = PQexec(c, sql);
	if (PQresultStatus(r) != PGRES_COMMAND_OK) {
		fprintf(stderr, "could not create database %s: %s", name, PQerrorMessage(c));
		exit(1);
	}
	PQclear(r);
	PQfinish(c);
	snprintf(dsn, size, "%s dbname=%s", base, name);
}

/* A free port for a test's server (or a benchmark's), picked at random below the kernel's
 * range for outgoing connections (ip_local_port_range): no connection of another test can
 * take it between this pick and the server's bind. A port handed out before in this process
 * is not handed out again: a culpritd given one port for agents and HTTP does not start
 * (binds to port 0 may give the same port twice). */
int h_free_port(void)
{
	static int handed[256];
	static unsigned n_handed, seed;
	int low = 0;
	FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");

	if (f) {
		if (fscanf(f, "%d", &low) != 1)
			low = 0;
		fclose(f);
	}
	if (low < 12000)
		low = 32768;
	if (!seed)
		seed = (unsigned)getpid() ^ (unsigned)h_now_ms();
	for (int tries = 0;; tries++) {
		struct sockaddr_in a = {0};
		int port = low - 10000 + (int)(rand_r(&seed) % 10000u), seen = 0;
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		int bound;

		a.sin_family = AF_INET;
		a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		a.sin_port = htons((uint16_t)port);
		bound = fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
		if (fd >= 0)
			close(fd);
		for (unsigned i = 0; i < n_handed && i < 256; i++)
			seen |= handed[i] == port;
		if (bound && !seen) {
			handed[n_handed++ % 256] = port;
			return port;
		}
		if (tries == 10000) {
			fprintf(stderr, "h_free_port: no free port in %d..%d\n", low - 10000, low - 1);
			exit(1);
		}
	}
}

void h_tmpdir(const char *name, char *out, size_t size)
{
	char cmd[1100];

	const char *base = getenv("CULPRIT_TEST_TMP");

	snprintf(out, size, "%s/%s.%d", base && *base ? base : CULPRIT_TEST_TMP, name, (int)getpid());
	snprintf(cmd, sizeof(cmd), "rm -rf '%s' && mkdir -p '%s'", out, out);
	if (system(cmd) != 0) {
		fprintf(stderr, "could not make %s\n", out);
		exit(1);
	}
}

/* Processes started and not yet stopped: stopped at exit, so a failing test leaves nothing
 * running (SIGTERM first, so that an embedded PostgreSQL is stopped too). */
#define MAX_PROCS 16
static struct h_proc *running[MAX_PROCS];

static void stop_running(void)
{
	for (int i = 0; i < MAX_PROCS; i++)
		if (running[i] && running[i]->pid > 0)
			h_proc_stop(running[i], SIGTERM, 20000);
}

static void track(struct h_proc *p)
{
	static int registered;

	if (!registered && atexit(stop_running) == 0)
		registered = 1;
	for (int i = 0; i < MAX_PROCS; i++)
		if (running[i] == p)
			return;
	for (int i = 0; i < MAX_PROCS; i++)
		if (!running[i]) {
			running[i] = p;
			return;
		}
}

int h_count_lines(const char *path, const char *needle)
{
	FILE *f = fopen(path, "r");
	char line[4096];
	int n = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (strstr(line, needle))
			n++;
	fclose(f);
	return n;
}

const char *h_culpritd_bin = CULPRITD_BIN;

static int culpritd_start_once(struct h_proc *p, const char *dir, const char *const *extra)
{
	char agent[64], http[64];
	const char *argv[64];
	int n = 0, ready_before;

	memset(p, 0, sizeof(*p));
	p->agent_port = h_free_port();
	p->http_port = h_free_port();
	snprintf(p->data_dir, sizeof(p->data_dir), "%s", dir);
	snprintf(p->log_path, sizeof(p->log_path), "%s/culpritd.log", dir);
	snprintf(agent, sizeof(agent), "127.0.0.1:%d", p->agent_port);
	snprintf(http, sizeof(http), "127.0.0.1:%d", p->http_port);
	argv[n++] = h_culpritd_bin;
	argv[n++] = "--data-dir";
	argv[n++] = dir;
	argv[n++] = "--agent-listen";
	argv[n++] = agent;
	argv[n++] = "--http-listen";
	argv[n++] = http;
	/* every agent of a loopback test comes from 127.0.0.1; a test of the limit sets it again */
	argv[n++] = "--max-connections-per-addr";
	argv[n++] = "20000";
	for (int i = 0; extra && extra[i] && n < 62; i++)
		argv[n++] = extra[i];
	argv[n] = NULL;
	ready_before = h_count_lines(p->log_path, "culpritd ready");

	p->pid = fork();
	if (p->pid < 0)
		return -1;
	if (p->pid == 0) {
		int fd = open(p->log_path, O_WRONLY | O_CREAT | O_APPEND, 0644);

		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
			close(fd);
		}
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	track(p);
	for (int64_t deadline = h_now_ms() + 60000; h_now_ms() < deadline;) {
		char *body = NULL;
		int status;

		if (waitpid(p->pid, &status, WNOHANG) == p->pid) {
			fprintf(stderr, "culpritd exited during start-up\n");
			p->pid = 0;
			h_dump_log(p);
			return -1;
		}
		if (h_http(p->http_port, "GET", "/healthz", NULL, &body) == 200) {
			free(body);
			return 0;
		}
		/* with TLS on, plain HTTP gets no answer: the log says when it listens (the log
		 * is appended to: a process before this one may have said so too) */
		if (h_log_wait(p, "culpritd ready", ready_before + 1, 0)) {
			free(body);
			return 0;
		}
		free(body);
		poll(NULL, 0, 20);
	}
	fprintf(stderr, "culpritd did not answer /healthz within 60 s\n");
	h_dump_log(p);
	return -1;
}

/* A free port may still be taken by another test's server between its pick and culpritd's
 * bind: then culpritd says so and exits, and it is started again on other ports. */
int h_culpritd_start(struct h_proc *p, const char *dir, const char *const *extra)
{
	char log_path[sizeof(p->log_path)];
	int rc = -1;

	snprintf(log_path, sizeof(log_path), "%s/culpritd.log", dir);
	for (int attempt = 0; attempt < 3; attempt++) {
		int in_use = h_count_lines(log_path, "Address already in use");

		rc = culpritd_start_once(p, dir, extra);
		if (rc == 0 || p->pid != 0 || h_count_lines(log_path, "Address already in use") == in_use)
			break;
		fprintf(stderr, "culpritd could not bind a port; starting it again\n");
	}
	return rc;
}

int h_culpritd_start_instance(struct h_proc *p, const char *name, const char *dsn, const char *const *extra)
{
	char dir[600], listen[64], tmp[64];
	const char *argv[50] = {"--db",          dsn, "--agent-listen", listen, "--advertise-agent-addr", listen,
				"--instance-id", name};
	int n = 8, port = h_free_port(), rc;

	snprintf(tmp, sizeof(tmp), "instance_%s", name);
	h_tmpdir(tmp, dir, sizeof(dir));
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", port);
	for (int i = 0; extra && extra[i] && n < 48; i++)
		argv[n++] = extra[i];
	argv[n] = NULL;
	rc = h_culpritd_start(p, dir, argv);
	p->agent_port = port; /* the later --agent-listen wins */
	return rc;
}

int h_proc_stop(struct h_proc *p, int sig, int timeout_ms)
{
	int status = 0;

	if (p->pid <= 0)
		return -1;
	kill(p->pid, sig);
	for (int64_t deadline = h_now_ms() + timeout_ms; h_now_ms() < deadline;) {
		if (waitpid(p->pid, &status, WNOHANG) == p->pid) {
			p->pid = 0;
			return status;
		}
		poll(NULL, 0, 10);
	}
	kill(p->pid, SIGKILL);
	waitpid(p->pid, &status, 0);
	p->pid = 0;
	return -1;
}

int h_run(const char *const *argv, const char *err_path, int timeout_ms)
{
	int64_t deadline = h_now_ms() + timeout_ms;
	sigset_t chld, old;
	pid_t pid;
	int status, rc = -1;

	/* the child's exit wakes sigtimedwait: SIGCHLD blocked here, delivered as pending */
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_BLOCK, &chld, &old);
	pid = fork();
	if (pid == 0) {
		int fd = err_path ? open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644) : -1;

		sigprocmask(SIG_SETMASK, &old, NULL);
		if (fd >= 0)
			dup2(fd, 2);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	while (pid > 0) {
		pid_t w = waitpid(pid, &status, WNOHANG);
		int64_t left = deadline - h_now_ms();

		if (w == pid) {
			rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
			break;
		}
		if (w < 0 || left <= 0) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			break;
		}
		struct timespec ts = {(time_t)(left / 1000), (long)(left % 1000) * 1000000L};
		sigtimedwait(&chld, NULL, &ts);
	}
	sigprocmask(SIG_SETMASK, &old, NULL);
	return rc;
}

void h_dump_log(const struct h_proc *p)
{
	char cmd[700];

	if (!p || !p->log_path[0])
		return;
	fprintf(stderr, "---- %s (last 80 lines) ----\n", p->log_path);
	snprintf(cmd, sizeof(cmd), "tail -n 80 '%s' >&2", p->log_path);
	if (system(cmd) != 0)
		fprintf(stderr, "(no log)\n");
	fprintf(stderr, "----\n");
}

int h_connect(int port)
{
	struct sockaddr_in a = {0};
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	a.sin_family = AF_INET;
	a.sin_port = htons((uint16_t)port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

int h_write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int h_peer_closed(int fd, int timeout_ms)
{
	char buf[4096];

	for (int64_t deadline = h_now_ms() + timeout_ms;;) {
		struct pollfd pfd = {fd, POLLIN, 0};
		int64_t left = deadline - h_now_ms();
		ssize_t n;

		if (left <= 0)
			return 0;
		if (poll(&pfd, 1, (int)left) <= 0)
			return 0;
		n = recv(fd, buf, sizeof(buf), 0);
		if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN))
			return 1;
	}
}

int h_http(int port, const char *method, const char *path, const char *req_body, char **body)
{
	return h_http_ex(port, method, path, NULL, req_body, NULL, body);
}

double h_metric(const char *text, const char *sample)
{
	size_t n = strlen(sample);

	for (const char *line = text; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL)
		if (strncmp(line, sample, n) == 0 && line[n] == ' ')
			return atof(line + n + 1);
	return -1;
}

double h_get_metric(int port, const char *sample)
{
	char *body = NULL;
	double v = -1;

	if (h_http(port, "GET", "/metrics", NULL, &body) == 200)
		v = h_metric(body, sample);
	free(body);
	return v;
}

int h_http_ex(int port, const char *method, const char *path, const char *headers, const char *req_body, char **head,
	      char **body)
{
	int fd = h_connect(port), status = -1;
	char *req = NULL, *resp = NULL, *p;
	size_t len = 0, cap = 0, blen = req_body ? strlen(req_body) : 0;

	*body = NULL;
	if (head)
		*head = NULL;
	if (fd < 0)
		return -1;
	if (asprintf(&req,
		     "%s %s HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: "
		     "%zu\r\n%s\r\n",
		     method, path, blen, headers ? headers : "") < 0) {
		close(fd);
		return -1;
	}
	if (h_write_all(fd, req, strlen(req)) < 0 || (blen && h_write_all(fd, req_body, blen) < 0)) {
		free(req);
		close(fd);
		return -1;
	}
	free(req);
	for (;;) {
		ssize_t n;

		if (len + 4096 + 1 > cap) {
			cap = cap ? cap * 2 : 65536;
			resp = realloc(resp, cap);
		}
		n = recv(fd, resp + len, cap - len - 1, 0);
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	if (!resp)
		return -1;
	resp[len] = '\0';
	if (sscanf(resp, "HTTP/1.%*d %d", &status) != 1)
		status = -1;
	p = strstr(resp, "\r\n\r\n");
	*body = strdup(p ? p + 4 : "");
	if (head)
		*head = strndup(resp, p ? (size_t)(p - resp) : len);
	free(resp);
	return status;
}

int h_log_wait(const struct h_proc *p, const char *needle, int count, int timeout_ms)
{
	for (int64_t deadline = h_now_ms() + timeout_ms;; poll(NULL, 0, 20)) {
		if (h_count_lines(p->log_path, needle) >= count)
			return 1;
		if (h_now_ms() >= deadline)
			return 0;
	}
}

/* ---- the agent protocol by hand (tests of hostile or unusual agents) ---- */

void h_send_env(int fd, const frame_envelope *env)
{
	uint8_t small[65536], *buf = small;
	size_t n = frame_packed_size(env);

	if (n > sizeof(small))
		H_CHECK((buf = malloc(n)) != NULL, NULL);
	frame_pack(env, buf);
	H_CHECK(h_write_all(fd, buf, n) == 0, NULL);
	if (buf != small)
		free(buf);
}

void h_send_hello(int fd, const char *job, const char *agent, const char *host, const char *token)
{
	h_send_hello_as(fd, &(struct h_hello){.job = job,
					      .agent = agent,
					      .host = host,
					      .token = token,
					      .world = 8,
					      .pp = 1,
					      .dp = 8,
					      .ep = 1,
					      .n_ranks = 8});
}

frame_envelope *h_recv_env(int fd, int timeout_ms)
{
	uint8_t hdr[4], *body;
	uint32_t len;
	size_t got = 0;
	int64_t deadline = h_now_ms() + timeout_ms;
	frame_envelope *env;

	while (got < 4) {
		struct pollfd p = {fd, POLLIN, 0};
		ssize_t n;

		if (poll(&p, 1, (int)(deadline - h_now_ms())) <= 0)
			return NULL;
		n = recv(fd, hdr + got, 4 - got, 0);
		if (n <= 0)
			return NULL;
		got += (size_t)n;
	}
	memcpy(&len, hdr, 4);
	len = be32toh(len);
	body = malloc(len ? len : 1);
	if (!body)
		return NULL;
	for (got = 0; got < len;) {
		struct pollfd p = {fd, POLLIN, 0};
		ssize_t n;

		if (poll(&p, 1, (int)(deadline - h_now_ms())) <= 0) {
			free(body);
			return NULL;
		}
		n = recv(fd, body + got, len - got, 0);
		if (n <= 0) {
			free(body);
			return NULL;
		}
		got += (size_t)n;
	}
	env = frame_unpack(body, len);
	free(body);
	return env;
}

int h_hello(int fd, const char *job, const char *agent, uint32_t world, uint32_t rank)
{
	frame_envelope env = CULPRIT__V1__ENVELOPE__INIT, *e;
	Culprit__V1__Hello h = CULPRIT__V1__HELLO__INIT;
	Culprit__V1__Topology t = CULPRIT__V1__TOPOLOGY__INIT;
	int ok;

	t.world = world;
	t.tp = t.cp = t.pp = t.ep = 1;
	t.dp = world;
	t.gpus_per_node = 8;
	h.protocol_version = FRAME_PROTOCOL_VERSION;
	h.job = (char *)job;
	h.topology = &t;
	h.agent_id = (char *)agent;
	h.host = (char *)agent;
	h.ranks = &rank;
	h.n_ranks = 1;
	env.msg_case = CULPRIT__V1__ENVELOPE__MSG_HELLO;
	env.hello = &h;
	h_send_env(fd, &env);
	e = h_recv_env(fd, 20000);
	ok = e && e->msg_case == CULPRIT__V1__ENVELOPE__MSG_HELLO_ACK && e->hello_ack->accepted;
	frame_free(e);
	return ok;
}

int h_wait_ack(int fd, uint64_t seq)
{
	for (int64_t deadline = h_now_ms() + 20000; h_now_ms() < deadline;) {
		frame_envelope *e = h_recv_env(fd, 20000);
		int done;

		if (!e)
			return 0;
		done = e->msg_case == CULPRIT__V1__ENVELOPE__MSG_ACK && e->ack->durable_seq >= seq;
		frame_free(e);
		if (done)
			return 1;
	}
	return 0;
}

void h_send_hello_as(int fd, const struct h_hello *hh)
{
	frame_envelope env = CULPRIT__V1__ENVELOPE__INIT;
	Culprit__V1__Hello h = CULPRIT__V1__HELLO__INIT;
	Culprit__V1__Topology t = CULPRIT__V1__TOPOLOGY__INIT;
	uint32_t ranks[4096];

	H_CHECK(hh->n_ranks <= 4096, NULL);
	for (uint32_t i = 0; i < hh->n_ranks; i++)
		ranks[i] = hh->first_rank + i;
	t.world = hh->world;
	t.tp = t.cp = 1;
	t.pp = hh->pp;
	t.dp = hh->dp;
	t.ep = hh->ep;
	t.gpus_per_node = 8;
	t.order = (char *)"tp-cp-ep-dp-pp";
	h.protocol_version = FRAME_PROTOCOL_VERSION;
	h.job = (char *)hh->job;
	h.topology = &t;
	h.agent_id = (char *)hh->agent;
	h.host = (char *)(hh->host ? hh->host : hh->agent);
	if (hh->token)
		h.token = (char *)hh->token;
	h.ranks = ranks;
	h.n_ranks = hh->n_ranks;
	h.resume_seq = hh->resume_seq;
	env.msg_case = CULPRIT__V1__ENVELOPE__MSG_HELLO;
	env.hello = &h;
	h_send_env(fd, &env);
}

int h_hello_ok(int fd, const struct h_hello *h)
{
	frame_envelope *e;
	int ok;

	h_send_hello_as(fd, h);
	e = h_recv_env(fd, 10000);
	ok = e && e->msg_case == CULPRIT__V1__ENVELOPE__MSG_HELLO_ACK && e->hello_ack->accepted;
	if (!ok)
		fprintf(stderr, "hello of agent \"%s\": %s\n", h->agent,
			!e                                                    ? "no answer"
			: e->msg_case != CULPRIT__V1__ENVELOPE__MSG_HELLO_ACK ? "not a HelloAck"
									      : e->hello_ack->reason);
	if (e)
		frame_free(e);
	return ok;
}

void h_send_batch(int fd, const struct h_batch *hb)
{
	frame_envelope env = CULPRIT__V1__ENVELOPE__INIT;
	Culprit__V1__Batch b = CULPRIT__V1__BATCH__INIT;
	Culprit__V1__RawKernel raw = CULPRIT__V1__RAW_KERNEL__INIT, *raws[1] = {&raw};
	char *names[] = {(char *)(hb->phase ? hb->phase : "mlp"), (char *)"gemm"};
	uint32_t rank[64], iter[64], zero[64], one[64], count[64], slen[64];
	int64_t start[64], dur[64], noff[64], sum[64];
	uint8_t sketches[64 * 64];
	uint32_t n = hb->n_ranks;

	H_CHECK(n <= 64 && hb->sketch_len <= 64, NULL);
	for (uint32_t r = 0; r < n; r++) {
		rank[r] = hb->first_rank + r;
		iter[r] = hb->iter;
		start[r] = hb->start_us;
		dur[r] = hb->dur_us ? hb->dur_us : 30000;
		zero[r] = 0;
		one[r] = 1;
		noff[r] = -1;
		count[r] = hb->kernel_count;
		sum[r] = 20000;
		slen[r] = (uint32_t)hb->sketch_len;
		if (hb->sketch_len)
			memcpy(sketches + r * hb->sketch_len, hb->sketch, hb->sketch_len);
	}
	b.seq = hb->seq;
	b.names = names, b.n_names = 2;
	b.iter_rank = rank, b.n_iter_rank = n;
	b.iter_iter = iter, b.n_iter_iter = n;
	b.iter_start_us = start, b.n_iter_start_us = n;
	b.iter_dur_us = dur, b.n_iter_dur_us = n;
	b.phase_rank = rank, b.n_phase_rank = n;
	b.phase_iter = iter, b.n_phase_iter = n;
	b.phase_name = zero, b.n_phase_name = n;
	b.phase_kind = zero, b.n_phase_kind = n;
	b.phase_group = zero, b.n_phase_group = n;
	b.phase_start_us = noff, b.n_phase_start_us = n;
	b.phase_dur_us = sum, b.n_phase_dur_us = n;
	b.kernel_rank = rank, b.n_kernel_rank = n;
	b.kernel_iter = iter, b.n_kernel_iter = n;
	b.kernel_name = one, b.n_kernel_name = n;
	b.kernel_count = count, b.n_kernel_count = n;
	b.kernel_sum_us = sum, b.n_kernel_sum_us = n;
	b.kernel_min_us = sum, b.n_kernel_min_us = n;
	b.kernel_max_us = sum, b.n_kernel_max_us = n;
	if (hb->sketch_len) {
		b.kernel_sketch_len = slen, b.n_kernel_sketch_len = n;
		b.kernel_sketches.data = sketches;
		b.kernel_sketches.len = n * hb->sketch_len;
	}
	if (hb->raw_start_us) {
		raw.rank = hb->first_rank;
		raw.iter = hb->iter;
		raw.name = 1;
		raw.start_us = hb->raw_start_us;
		raw.dur_us = 100;
		b.raw_kernels = raws, b.n_raw_kernels = 1;
	}
	env.msg_case = CULPRIT__V1__ENVELOPE__MSG_BATCH;
	env.batch = &b;
	h_send_env(fd, &env);
}
