/* server.h: the state of one culpritd process, passed down to every part of the server. */
#ifndef CULPRIT_SERVER_H
#define CULPRIT_SERVER_H

#include <stdbool.h>
#include <stdint.h>

#include "auth_limit.h"
#include "config.h"
#include "listen.h"
#include "metrics.h"
#include "strmap.h"

struct event_base;
struct event;
struct evconnlistener;
struct evhttp;
struct http_conns;
struct api;
struct console;
struct heatmap_ctx;
struct storage_writer;
struct storage_retention;
struct diagnosis;
struct conn;
struct alerts;
struct actions;
struct auth;
struct ssl_ctx_st;
struct cluster;
struct storage_probe;

/* What culpritd knows of one (job, agent) pair across its connections. */
struct agent_progress {
	uint64_t durable_seq; /* highest sequence committed (or, without storage, received) */
	uint64_t last_seq;    /* highest sequence taken or rejected (>= durable_seq): the next is last_seq + 1 */
	uint64_t conn_id;     /* the live connection of this agent, 0 when none */
};

struct server {
	struct config cfg;
	const char *config_path; /* NULL without --config */
	struct event_base *base;
	struct evconnlistener *agent_listener;
	struct listen_pause agent_pause; /* accept errors on agent_listener (listen.c) */
	struct evhttp *http;
	struct http_conns *http_conns; /* open REST connections, their deadlines (http_conn.c) */
	struct api *api;               /* the /api/v1 routes and their database queries */
	struct console *console;       /* the web console's files (console.c) */
	struct storage_writer *writer; /* NULL when cfg.storage is false */
	struct event *writer_wake;
	struct storage_retention *retention; /* partitions ahead, old ones dropped (own thread) */
	struct event *reclaim;               /* frees closed connections after the loop pass */
	struct diagnosis *diagnosis;         /* the worker that runs diagnoses off the loop */
	struct event *diagnosis_wake;
	struct event *tick;      /* once a second: due diagnoses, hang checks */
	struct alerts *alerts;   /* reports, incidents and the alert outbox (alerts.c) */
	struct actions *actions; /* incident actions and the hook runner (actions.c) */
	struct auth *auth;       /* token guards, rebuilt on SIGHUP (auth.c) */
	struct ssl_ctx_st *tls;  /* NULL: plain TCP; rebuilt on SIGHUP (tls.c) */
	struct cluster *cluster; /* job leases (cluster.c); NULL: a single instance owns every job */
	struct {                 /* whether the database makes progress (dbhealth.c) */
		struct storage_probe *probe;
		bool down;
		int64_t down_since_ms, unconnected_since_ms;
	} db;
	struct event *signals[4];
	char *db_dsn; /* the DSN in use (embedded or configured) */
	bool embedded;

	/* connections: a slot table; a connection's id is (generation << 32) | slot */
	struct conn **slots;
	uint32_t *generations;
	uint32_t *free_slots;
	size_t n_free, n_slots;
	struct conn *blocked_head, *blocked_tail; /* waiting for writer queue space, FIFO */
	struct conn *closing;                     /* to be freed by reclaim */
	uint64_t input_unread;                    /* bytes held by connections not being read */
	bool input_over;                          /* over max_input_buffer_bytes: some connections paused */
	size_t input_holders;                     /* connections holding an unfinished frame */
	uint64_t input_freed;                     /* bytes out of input buffers since the last malloc_trim */
	struct strmap per_addr;                   /* peer address -> open connections (intptr) */
	struct auth_limit auth_limit;             /* failed token checks by address (auth_limit.h) */

	struct strmap jobs;   /* name -> struct job */
	struct strmap agents; /* "job\x1fagent" -> struct agent_progress */
	struct strmap relays; /* job -> struct relay: jobs of other instances this one relays (relay.c) */
	struct strmap
		restored; /* job name -> incident the previous culpritd left open, until the job returns (jobs.c) */

	uint8_t *scratch; /* frame packing buffer, event loop only */
	size_t scratch_size;

	struct metrics m;
	int64_t last_capture_id;  /* POST .../capture: ids increase (capture.c) */
	uint32_t heatmaps;        /* heat maps being gathered or encoded (api_console.c) */
	struct heatmap_ctx *heatmaps_gathering; /* ... of them, those gathered from a window a slice a loop pass */
	int64_t started_us;       /* wall clock at start (restored incidents wait job_retire_s from it) */
	int stopping;             /* 0 running, 1 draining after SIGTERM, 2 exit now */
	int64_t stop_deadline_ms; /* clock_mono_ms(): the whole stop (drain, writers, PostgreSQL) ends by then */
};

#endif
