/* harness.h: what integration tests share: a database of their own on the test PostgreSQL
 * (CULPRIT_TEST_DSN, started by test.sh), the real culpritd binary as a child process with
 * readiness waits (never sleeps), raw TCP and HTTP on loopback, and the server log printed
 * when a test fails. */
#ifndef CULPRIT_HARNESS_H
#define CULPRIT_HARNESS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "frame.h"

struct h_proc {
	pid_t pid;
	char log_path[512];
	int agent_port;
	int http_port;
	char data_dir[512];
};

/* Creates (or empties) database `name`; writes its DSN. Exits the test on failure. */
void h_db_create(const char *name, char *dsn, size_t size);
/* A TCP port free on 127.0.0.1 right now. */
int h_free_port(void);
/* A fresh directory under the build tree for this test. */
void h_tmpdir(const char *name, char *out, size_t size);

/* Starts culpritd with --agent-listen/--http-listen on free ports, --data-dir dir, and the
 * extra arguments (NULL-terminated). Waits until /healthz answers (or, for HTTPS, the log
 * says "culpritd ready"). Returns 0 or -1. */
int h_culpritd_start(struct h_proc *p, const char *dir, const char *const *extra);
/* The culpritd it starts: this build's; a benchmark sets another (a build to compare with). */
extern const char *h_culpritd_bin;
/* One of several culpritd on database dsn (docs/operations.md, "Many instances"): instance_id
 * name, its agent listener on a free port that it advertises, in a fresh directory, with the
 * extra arguments (NULL-terminated, at most 40). h_culpritd_start's answer. */
int h_culpritd_start_instance(struct h_proc *p, const char *name, const char *dsn, const char *const *extra);
/* Sends sig and waits up to timeout_ms for exit; returns the exit status (or -1 on timeout
 * after which it SIGKILLs). */
int h_proc_stop(struct h_proc *p, int sig, int timeout_ms);
/* Runs argv (NULL-terminated) with its stderr in err_path (NULL: inherited) and returns its
 * exit status; -1 when it did not exit within timeout_ms (it is then SIGKILLed) or died of
 * a signal. */
int h_run(const char *const *argv, const char *err_path, int timeout_ms);
/* Prints the last lines of the process log to stderr (nothing when p is NULL). */
void h_dump_log(const struct h_proc *p);

/* A connected TCP socket to 127.0.0.1:port, or -1. */
int h_connect(int port);
/* Writes all of buf; 0 or -1. */
int h_write_all(int fd, const void *buf, size_t len);
/* 1 when the peer closed the connection within timeout_ms (reads and discards data), 0 if
 * still open. */
int h_peer_closed(int fd, int timeout_ms);

/* GET path on 127.0.0.1:port: returns the status, the body in a malloc'd *body. */
int h_http(int port, const char *method, const char *path, const char *req_body, char **body);
/* Value of a Prometheus sample line "name{labels} value" in text (exact name with labels). */
double h_metric(const char *text, const char *sample);
/* The value of sample in culpritd's /metrics on port (no token); -1 when /metrics did not
 * answer 200 or has no such line. */
double h_get_metric(int port, const char *sample);

/* Like h_http, with extra request header lines (each ending in "\r\n", or NULL) and the
 * response's status line and headers in a malloc'd *head (when head is not NULL). */
int h_http_ex(int port, const char *method, const char *path, const char *headers, const char *req_body, char **head,
	      char **body);
/* The lines of the file at path that contain needle (0 when it cannot be read). */
int h_count_lines(const char *path, const char *needle);
/* 1 once the process log has at least count lines containing needle (within timeout_ms). */
int h_log_wait(const struct h_proc *p, const char *needle, int count, int timeout_ms);

/* Monotonic milliseconds. */
int64_t h_now_ms(void);

#define H_CHECK(cond, proc)                                                                      \
	do {                                                                                     \
		if (!(cond)) {                                                                   \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
			h_dump_log(proc);                                                        \
			exit(1);                                                                 \
		}                                                                                \
	} while (0)

/* The agent protocol by hand: one frame out (a failed write fails the test), one frame in
 * (NULL when the peer closed, on a timeout or a malformed frame), and waiting (20 s) for an
 * Ack of at least seq, skipping other frames (1, or 0). */
void h_send_env(int fd, const frame_envelope *env);
frame_envelope *h_recv_env(int fd, int timeout_ms);
/* Hello of an agent serving ranks 0..7 of a job of world 8 (data-parallel, one node);
 * token NULL: none. (h_send_hello_as below for any other.) */
void h_send_hello(int fd, const char *job, const char *agent, const char *host, const char *token);
int h_wait_ack(int fd, uint64_t seq);
/* Hello of agent for one rank of job (a data-parallel world of world ranks); 1 when the
 * HelloAck accepts it, else 0. */
int h_hello(int fd, const char *job, const char *agent, uint32_t world, uint32_t rank);

/* A Hello (protocol version FRAME_PROTOCOL_VERSION) of agent `agent` for job `job` serving
 * ranks first_rank .. first_rank + n_ranks - 1 of a tp-cp-ep-dp-pp topology. */
struct h_hello {
	const char *job, *agent;
	const char *host;  /* NULL: the agent id */
	const char *token; /* NULL: none */
	uint32_t world, pp, dp, ep, first_rank, n_ranks;
	uint64_t resume_seq;
};
void h_send_hello_as(int fd, const struct h_hello *h);
/* Sends h and reads the HelloAck: 1 when accepted, 0 otherwise (refused, closed, timeout). */
int h_hello_ok(int fd, const struct h_hello *h);

/* A self-contained Batch: iteration iter of ranks first_rank .. + n_ranks (at most 64), each
 * with its iteration record (start_us, dur_us or else 30 ms), one phase ("mlp" or .phase) and one kernel "gemm" of
 * kernel_count calls whose sketch is the sketch_len bytes at sketch (none when 0); with
 * raw_start_us, one raw kernel "gemm" of first_rank starting then. */
struct h_batch {
	uint64_t seq;
	uint32_t first_rank, n_ranks, iter;
	int64_t start_us;
	int64_t dur_us; /* 0: 30 ms */
	uint32_t kernel_count;
	const uint8_t *sketch;
	size_t sketch_len;
	int64_t raw_start_us;
	const char *phase; /* the phase's name (NULL: "mlp") */
};
void h_send_batch(int fd, const struct h_batch *b);

#endif
