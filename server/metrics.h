/* metrics.h: culpritd's own counters and gauges, rendered in Prometheus text format.
 * Only the event loop thread touches them (the writer's figures are read through its
 * stats call), so they are plain integers. No per-rank labels. */
#ifndef CULPRIT_METRICS_H
#define CULPRIT_METRICS_H

#include <stdint.h>
#include <stdio.h>

#include "deliver.h"

enum metrics_close_reason {
	CLOSE_PEER,          /* the agent closed or said Goodbye */
	CLOSE_PROTOCOL,      /* malformed frame or message out of place */
	CLOSE_HELLO_TIMEOUT, /* did not say Hello in time */
	CLOSE_IDLE,          /* silent past idle_timeout_s */
	CLOSE_REFUSED,       /* Hello refused */
	CLOSE_LIMIT,         /* over max_connections or per-address limit */
	CLOSE_REPLACED,      /* the same agent connected again */
	CLOSE_SHUTDOWN,      /* culpritd stopping */
	CLOSE_NOMEM,         /* out of memory on this connection */
	CLOSE_TLS,           /* TLS handshake or record error (e.g. a plaintext client) */
	CLOSE_FRAME_TIMEOUT, /* a frame unfinished past frame_timeout_s */
	CLOSE_REASONS
};

#define METRICS_DIAG_BUCKETS 11

/* the limits checked at accept (culprit_agent_connections_over_limit_total{limit=...}) */
enum metrics_limit { LIMIT_CONNECTIONS, LIMIT_PER_ADDR, LIMIT_BEFORE_HELLO, METRICS_LIMITS };

struct metrics {
	uint64_t accepted;
	uint64_t over_limit[METRICS_LIMITS]; /* closed at accept, by enum metrics_limit */
	uint64_t closed[CLOSE_REASONS];
	uint64_t conns_hello, conns_active, conns_blocked; /* gauges, by state */
	uint64_t frames_ok, frames_malformed;
	uint64_t bytes_in;
	uint64_t batches_ok, batches_rejected, batches_duplicate;
	uint64_t records_in[4];    /* iterations, phases, kernels, raw kernels accepted */
	uint64_t records_rejected; /* in refused batches */
	uint64_t acks_sent;
	uint64_t backpressure_events;
	uint64_t backpressure_us; /* total time connections spent blocked */
	/* memory bounds of ingest */
	uint64_t input_held;       /* gauge: bytes in agent input buffers */
	uint64_t input_paused;     /* connections paused over max_input_buffer_bytes */
	uint64_t names_over_limit; /* batches refused at max_names_per_job */
	uint64_t jobs;
	uint64_t diagnoses;
	double diagnosis_ms_sum;
	uint64_t diagnosis_buckets[METRICS_DIAG_BUCKETS]; /* cumulative counts per upper bound */
	uint64_t diagnoses_refused;                       /* queue full: tried again later */
	uint64_t window_held;     /* records held while a diagnosis read their job's window (held.h) */
	uint64_t window_not_held; /* ... refused: the hold was full (HELD_MAX_BYTES) */
	uint64_t incident_changes[4];                     /* by enum incident_change */
	/* alerts (copied from the delivery thread's stats by alerts_tick, once a second) */
	uint64_t reports_queued;                       /* report ops handed to the writer */
	uint64_t alert_ops_waiting, alert_ops_dropped; /* report ops waiting for writer room; dropped */
	uint64_t alert_sent[DELIVER_TARGETS], alert_failures[DELIVER_TARGETS], alert_given_up[DELIVER_TARGETS];
	uint64_t alert_resends, alert_resend_failures;
	int64_t alert_pending; /* outbox rows pending, -1 unknown */
	/* authentication (auth.c) */
	uint64_t agent_auth_failures; /* Hellos refused: bad token or unknown job */
	uint64_t http_auth_failures;  /* REST 401 */
	uint64_t http_auth_forbidden; /* REST 403: read token on a write request */
	uint64_t auth_limited[2];     /* refused over auth_failures_per_addr: Hellos, REST requests */
	/* on-demand captures (capture.c) */
	uint64_t captures;         /* POST .../capture answered 202 */
	uint64_t capture_commands; /* Commands sent to agents for them */
	/* the embedded PostgreSQL (main.c) */
	uint64_t leases_acquired, leases_lost;    /* job leases (cluster.c) */
	uint64_t hellos_redirected;               /* HelloAck sent an agent to the job's owner */
	uint64_t relay_conns, agents_via_relay;   /* gauges, owner: relay connections, agents on them */
	uint64_t agents_relayed, batches_relayed; /* relay: agents it relays (gauge), batches forwarded */
	uint64_t embedded_restarts;               /* postmaster started again after it exited */
	uint64_t job_series_omitted;              /* per-job series left out over metrics_max_jobs (job_metrics.c) */
};

void metrics_observe_diagnosis(struct metrics *m, double ms);
/* Agent connections open (any state). */
uint64_t metrics_open_connections(const struct metrics *m);

const char *metrics_close_reason_name(enum metrics_close_reason r);
void metrics_render(const struct metrics *m, FILE *out);
/* culprit_build_info and the standard process_* metrics (CPU seconds, resident and virtual
 * memory, open and maximum fds, start time), read from /proc/self. */
void metrics_render_process(FILE *out, int64_t started_us);

#endif
