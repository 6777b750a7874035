/* config.c: the settings table and what reads and renders it (see config.h). */
#include "config.h"

#include "log.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

enum setting_type { SETTING_STRING, SETTING_INT, SETTING_BOOL };

/* Flags of a string setting (STRF). What -t prints and culpritd logs of its value:
 *   SECRET       nothing but whether it is set (tokens, keys, a URL whose path is the key);
 *   CREDENTIALS  the value with the passwords in it masked (a URL's user:password@, a
 *                PostgreSQL DSN's password=...);
 * and what it must be:
 *   HTTP_URL     empty, or a URL starting http:// or https:// (refused at load otherwise). */
enum { SECRET = 1, CREDENTIALS = 2, HTTP_URL = 4 };

struct setting {
	const char *name;
	enum setting_type type;
	size_t offset;
	const char *def;
	int64_t min, max;
	bool reloadable;
	unsigned flags;
	const char *help;
};

#define STRF(field, def, reload, flags, help)                                                          \
	{                                                                                              \
#field, SETTING_STRING, offsetof(struct config, field), def, 0, 0, reload, flags, help \
	}
#define STR(field, def, reload, help) STRF(field, def, reload, 0, help)
#define INT(field, def, lo, hi, reload, help)                                                      \
	{                                                                                          \
#field, SETTING_INT, offsetof(struct config, field), #def, lo, hi, reload, 0, help \
	}
#define BOOL(field, def, reload, help)                                                           \
	{                                                                                        \
#field, SETTING_BOOL, offsetof(struct config, field), def, 0, 1, reload, 0, help \
	}

static const struct setting settings[] = {
	STR(data_dir, "./var", false,
	    "Directory for culpritd's own files: the embedded PostgreSQL cluster (pg/) and its socket."),
	STRF(db, "", false, CREDENTIALS,
	     "PostgreSQL connection string (postgresql://... or key=value). Empty: run a private, embedded "
	     "PostgreSQL under data_dir/pg."),
	STR(embedded_listen, "", false,
	    "HOST:PORT on which the embedded PostgreSQL also listens on TCP, for Grafana: only the login "
	    "\"grafana\" is let in there, by the password in embedded_grafana_password_file, and may read the "
	    "Grafana views and nothing else (docs/deep-dive.md). Empty: no TCP, the private socket only."),
	STR(embedded_grafana_password_file, "", false,
	    "File whose first line is the password of the embedded PostgreSQL's login \"grafana\" (set again at "
	    "every start). Needed by embedded_listen."),
	BOOL(storage, "true", false,
	     "Store records in PostgreSQL. false keeps everything in memory only (benchmarks, dry runs): "
	     "agents are acknowledged at once and nothing survives a restart."),
	STR(agent_listen, "0.0.0.0:7433", false, "Address and port for agent connections (protobuf frames over TCP)."),
	STR(http_listen, "127.0.0.1:7434", false, "Address and port for the REST API, /metrics and health checks."),
	STR(log_level, "info", true, "Least severe level logged: debug, info, warning or error."),
	INT(max_connections, 20000, 1, 1000000, false,
	    "Most agent connections at once; more are accepted and closed at once. culpritd raises its "
	    "open-file limit to fit (see docs/operations.md)."),
	INT(max_connections_per_addr, 256, 1, 1000000, true,
	    "Most agent connections from one IP address at once; more are closed at accept. A node agent "
	    "is one connection per node; raise it for NAT, or for many agents on one host (loopback tests)."),
	INT(max_connections_before_hello, 4096, 1, 1000000, true,
	    "Most connections at once that have not yet said Hello (slow or flooding clients); more are "
	    "closed at accept. Each may buffer up to max_frame_before_hello."),
	INT(max_jobs, 256, 1, 100000, true,
	    "Most jobs culpritd keeps at once; a Hello that would create another is refused."),
	INT(job_retire_s, 3600, 1, 2592000, true,
	    "A job none of whose agents has been connected for this long is forgotten: its window is freed, "
	    "it no longer counts against max_jobs, and its open incident is resolved (\"its agents left\"). "
	    "Its records and reports stay in PostgreSQL; agents of the same job coming back start it afresh. "
	    "An incident a previous culpritd left open is resolved the same way when its job has not come back "
	    "this long after start."),
	INT(max_world, 262144, 1, 16777216, true,
	    "Largest world size (ranks) a job may declare in Hello; its in-memory window grows with it."),
	INT(max_frame, 4194304, 1024, 67108864, true, "Largest frame body an agent may send, in bytes, after Hello."),
	INT(max_frame_before_hello, 65536, 256, 1048576, true,
	    "Largest frame body accepted before a connection has said Hello, in bytes."),
	INT(max_input_buffer_bytes, 268435456, 1048576, 68719476736, true,
	    "Most bytes of unfinished frames all agent connections may hold together. Beyond it culpritd stops "
	    "reading from each connection that grows past its share (this budget divided among the connections "
	    "holding unfinished frames) until the total is back under half of it; TCP holds those agents back "
	    "(culprit_agent_input_paused_total). Connections within their share go on. At least 4 times "
	    "max_frame."),
	INT(max_names_per_job, 65536, 16, 16777216, true,
	    "Most distinct phase and kernel names one job may have. A batch bringing more is refused with "
	    "the reason and its connection closed (culprit_agent_names_over_limit_total)."),
	INT(hello_timeout_ms, 5000, 100, 600000, true, "Time a new connection has to say Hello before it is closed."),
	INT(idle_timeout_s, 120, 5, 86400, true,
	    "A connection that sends nothing (not even a heartbeat) for this long is closed."),
	INT(frame_timeout_s, 5, 1, 3600, true,
	    "A frame must arrive whole within this long of its first byte, whatever the connection's idle "
	    "time; otherwise its connection is closed (culprit_agent_connections_closed_total{reason="
	    "\"frame_timeout\"}). Time the connection is not read because of culpritd (writer queue full) "
	    "does not count; time it is not read because of max_input_buffer_bytes does."),
	INT(max_ranks_per_agent, 4096, 1, 1048576, true, "Most ranks one agent may serve."),
	INT(writer_queue_records, 2000000, 1000, 100000000, false,
	    "Bound of the storage writer's queue, in records. When full, culpritd stops reading from "
	    "agents until the database catches up (backpressure); nothing is dropped."),
	INT(writer_txn_records, 200000, 100, 10000000, false, "Most records the writer puts in one transaction."),
	INT(db_stall_s, 10, 2, 3600, true,
	    "The database is down when for this long it has not answered the liveness check (\"SELECT 1\" once a "
	    "second on a connection of its own, 5 s connect and statement timeouts), or the storage writer has "
	    "not been connected, or its transaction has not committed: culprit_database_up is 0, /readyz answers "
	    "503, one warning is logged, and a line when it makes progress again."),
	INT(retention_days, 14, 1, 3650, true,
	    "Days of iteration, phase and kernel records kept; older daily partitions are dropped whole."),
	INT(window_iters, 64, 8, 1024, false, "Iterations of each rank kept in memory for diagnosis."),
	INT(http_max_body, 1048576, 1024, 67108864, true, "Largest REST request body, in bytes (413 beyond)."),
	INT(http_max_headers, 16384, 1024, 1048576, true, "Largest REST request header block, in bytes."),
	/* REST connections (http_conn.c) */
	INT(http_timeout_s, 30, 1, 3600, true,
	    "Deadline for a whole REST request, headers and body, counted from accept (or from the end of the "
	    "previous answer on a kept-alive connection): a connection without one is closed. Also the limit on "
	    "any one read or write while answering."),
	INT(max_http_connections, 1024, 1, 1000000, true,
	    "Most REST connections at once; more are accepted and closed at once (counted, logged once in a while)."),
	STRF(agent_token, "", true, SECRET,
	     "Token agents present in Hello (jobs listed in job_tokens_file present theirs instead); up to 4 "
	     "separated by commas during a rotation. With neither set, agents are not authenticated (a warning at "
	     "start-up). On SIGHUP, agents whose token is no longer accepted are disconnected."),
	STR(job_tokens_file, "", true,
	    "File of \"JOB TOKEN\" lines ('#' comments): an agent of a listed job must present that job's token "
	    "(a job listed up to 4 times: any of them); a job not listed needs agent_token, and is refused when "
	    "that is empty. Re-read on SIGHUP."),
	STRF(http_read_token, "", true, SECRET,
	     "Bearer token for REST reads (GET, HEAD) and /metrics (up to 4, separated by commas); the write "
	     "token also reads. Empty: reads are open. Needs http_write_token. /healthz and /readyz stay open."),
	STRF(http_write_token, "", true, SECRET,
	     "Bearer token for REST writes (POST, PUT, DELETE, PATCH: events, diagnose ...; up to 4, separated by "
	     "commas). Empty: the REST API is open (a warning at start-up)."),
	INT(auth_failures_per_addr, 20, 1, 1000000, true,
	    "Failed token checks (agents' Hellos and REST requests with a wrong token, together) one IP address "
	    "may make in a minute: that many at once, then one every 60 / N s. Beyond, its tokens are not "
	    "checked: a Hello is refused with the time to wait, a REST request answered 429 with Retry-After "
	    "(culprit_auth_limited_total)."),
	STR(tls_cert, "", true,
	    "PEM file of the server certificate (and its chain). With tls_key: agents and the REST API speak "
	    "TLS (1.2 or later) only. SIGHUP re-reads the files; turning TLS on or off needs a restart."),
	STR(tls_key, "", true, "PEM file of the private key of tls_cert."),
	STRF(alertmanager_url, "", false, HTTP_URL | CREDENTIALS,
	     "Prometheus Alertmanager base URL (http or https); incidents are POSTed to its /api/v2/alerts. "
	     "Empty: off."),
	STRF(webhook_url, "", false, HTTP_URL | CREDENTIALS,
	     "URL (http or https) of a generic JSON webhook receiving every incident change. Empty: off."),
	STRF(webhook_secret, "", false, SECRET,
	     "Key of the webhook's X-Culprit-Signature header (sha256=<hex HMAC-SHA256 of the body>). Empty: "
	     "unsigned."),
	STRF(slack_url, "", false, HTTP_URL | SECRET, "Slack incoming-webhook URL (its path is the key). Empty: off."),
	STRF(pagerduty_url, "https://events.pagerduty.com/v2/enqueue", false, HTTP_URL | CREDENTIALS,
	     "PagerDuty Events API v2 endpoint."),
	STRF(pagerduty_routing_key, "", false, SECRET, "PagerDuty integration (routing) key. Empty: PagerDuty off."),
	STRF(public_url, "", false, HTTP_URL | CREDENTIALS,
	     "Base URL of this culpritd's REST API and web console as on-call reaches it, for the links in alerts "
	     "(each links to its job's page, <public_url>/#/jobs/<job>). Empty: http://<http_listen>."),
	STRF(grafana_url, "", true, HTTP_URL | CREDENTIALS,
	     "Base URL of a Grafana with culprit's dashboards (docs/deep-dive.md): a job's page in the web console "
	     "links to its culprit-job dashboard there. Empty: no link."),
	INT(alert_resend_s, 60, 5, 3600, false,
	    "Interval at which open incidents are re-sent to Alertmanager (which resolves alerts not re-sent)."),
	INT(alert_backoff_max_s, 60, 1, 86400, false,
	    "Longest delay between two delivery attempts of an alert (exponential backoff from 1 s, with jitter): "
	    "a target that comes back gets the alerts that waited for it at most this long after."),
	INT(alert_give_up_s, 86400, 10, 2592000, false,
	    "An alert not delivered this long after it was queued is given up (outbox state failed)."),
	STR(advertise_agent_addr, "", false,
	    "host:port at which the agents of other culpritd instances' jobs reach this one's agent listener. "
	    "Set: several instances share the database (db), each job is owned by one of them through a "
	    "lease (docs/operations.md, \"Many instances\"). Empty: a single instance that owns every job."),
	STRF(advertise_api_url, "", false, HTTP_URL,
	     "Base URL at which REST clients reach this instance, where other instances redirect them for a "
	     "job it owns. Empty: http://<http_listen>."),
	STR(instance_id, "", false,
	    "This instance's name in the job leases (at most 127 bytes). Empty: <hostname>:<pid>."),
	INT(lease_s, 4, 2, 60, false,
	    "A job's lease lasts this long from its last renewal (every lease_s / 3); an instance that dies "
	    "loses its jobs to another this long after its last renewal at most."),
	INT(max_relayed_agents, 20000, 0, 1000000, false,
	    "Many instances: agents of this instance's jobs that reach it through other instances (relays, "
	    "over one connection per relay and job), on top of max_connections. A job's owner with no room "
	    "left for agents has them relayed instead of redirected (docs/operations.md, \"Many instances\")."),
	INT(metrics_max_jobs, 1000, 0, 100000, true,
	    "Most jobs with series of their own on /metrics (culprit_job_*: step time, baseline, open incident, "
	    "time lost), those with an open incident first; the others are left out and counted "
	    "(culprit_job_series_omitted_total). 0: none."),
	/* actions (actions.c, hooks.c; docs/operations.md, "Actions") */
	STR(action_modes, "", true,
	    "What culpritd does with the actions of an incident, per kind: KIND=MODE pairs separated by "
	    "commas, KIND one of drain_node, check_network, rebalance_stage, inspect_host, inspect_kernel, "
	    "investigate_hang, MODE one of off, dry_run (the hook is told not to act and says what it would "
	    "do), approve (run once an operator approves it: POST "
	    "/api/v1/incidents/{key}/actions/{n}/approve), auto (run at once). A kind not named is off. "
	    "Empty: every kind off. Needs action_hook; approve needs operator_tokens_file."),
	STR(action_hook, "", true,
	    "Program run for an action (culpritd's share/culprit/hooks/ has slurm-drain and k8s-cordon): it "
	    "reads the action as JSON on standard input; exit status 0 is success. Its output (the first 4 KiB) "
	    "is stored with the attempt."),
	INT(action_timeout_s, 30, 1, 3600, true,
	    "Time an action hook may run; then its process group is killed and the attempt counts as timed out."),
	INT(action_retries, 2, 0, 10, true,
	    "Attempts after a failed or timed-out one (1 s, 2 s, 4 s ... apart); each attempt is a row of "
	    "action_attempts."),
	BOOL(action_resume_on_resolve, "false", true,
	     "When an incident resolves, run the hook again with op \"resume\" for each of its actions that ran "
	     "(or, in dry_run, would have): a drained node is resumed, a cordoned one uncordoned."),
	STR(operator_tokens_file, "", true,
	    "File of \"NAME TOKEN\" lines ('#' comments): bearer tokens of operators, who may approve actions "
	    "(and do whatever the write token may); NAME is recorded as who approved. Re-read on SIGHUP."),
};
#define N_SETTINGS (sizeof(settings) / sizeof(settings[0]))

static const char *const action_kinds[] = {"drain_node",   "check_network",  "rebalance_stage",
					   "inspect_host", "inspect_kernel", "investigate_hang"};
static const char *const action_mode_names[] = {"off", "dry_run", "approve", "auto"};

const char *config_action_mode_name(enum action_mode m)
{
	return (unsigned)m <= ACTION_AUTO ? action_mode_names[m] : "?";
}

int config_action_mode(const char *modes, const char *kind)
{
	int found = ACTION_OFF;

	for (const char *p = modes ? modes : ""; *p;) {
		size_t n = strcspn(p, ","), k = strcspn(p, "=");
		int mode = -1, known = 0;

		if (k >= n)
			return -1; /* no '=' in this pair */
		for (size_t i = 0; i < sizeof(action_kinds) / sizeof(action_kinds[0]); i++)
			known |= strlen(action_kinds[i]) == k && strncmp(p, action_kinds[i], k) == 0;
		for (int m = ACTION_OFF; m <= ACTION_AUTO; m++)
			if (strlen(action_mode_names[m]) == n - k - 1 &&
			    strncmp(p + k + 1, action_mode_names[m], n - k - 1) == 0)
				mode = m;
		if (!known || mode < 0 || (p[n] == ',' && !p[n + 1]))
			return -1; /* an unknown kind or mode, or a trailing comma */
		if (kind && strlen(kind) == k && strncmp(p, kind, k) == 0)
			found = mode;
		p += n + (p[n] == ',');
	}
	return found;
}

static const struct setting *find(const char *name)
{
	for (size_t i = 0; i < N_SETTINGS; i++)
		if (strcmp(settings[i].name, name) == 0)
			return &settings[i];
	return NULL;
}

void config_fail(char *err, size_t err_size, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, err_size, fmt, ap);
	va_end(ap);
}

static int parse_int(const char *s, int64_t *out)
{
	char *end;
	long long v;
	int64_t mult = 1;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (end == s || errno)
		return -1;
	if (*end == 'k' || *end == 'K')
		mult = 1024, end++;
	else if (*end == 'M')
		mult = 1024 * 1024, end++;
	else if (*end == 'G')
		mult = 1024LL * 1024 * 1024, end++;
	if (*end != '\0')
		return -1;
	if (v > INT64_MAX / mult || v < INT64_MIN / mult)
		return -1;
	*out = v * mult;
	return 0;
}

static int set_one(struct config *cfg, const struct setting *s, const char *value, char *err, size_t err_size)
{
	void *field = (char *)cfg + s->offset;

	switch (s->type) {
	case SETTING_STRING: {
		char *copy = strdup(value);

		if (!copy) {
			config_fail(err, err_size, "out of memory");
			return -1;
		}
		free(*(char **)field);
		*(char **)field = copy;
		return 0;
	}
	case SETTING_INT: {
		int64_t v;

		if (parse_int(value, &v) < 0) {
			config_fail(err, err_size, "invalid value for setting \"%s\": \"%s\" is not an integer",
				    s->name, value);
			return -1;
		}
		if (v < s->min || v > s->max) {
			config_fail(err, err_size,
				    "invalid value for setting \"%s\": %lld is outside the allowed range %lld .. %lld",
				    s->name, (long long)v, (long long)s->min, (long long)s->max);
			return -1;
		}
		*(int64_t *)field = v;
		return 0;
	}
	case SETTING_BOOL:
		if (!strcmp(value, "true") || !strcmp(value, "on") || !strcmp(value, "yes") || !strcmp(value, "1"))
			*(bool *)field = true;
		else if (!strcmp(value, "false") || !strcmp(value, "off") || !strcmp(value, "no") ||
			 !strcmp(value, "0"))
			*(bool *)field = false;
		else {
			config_fail(err, err_size, "invalid value for setting \"%s\": \"%s\" is not true or false",
				    s->name, value);
			return -1;
		}
		return 0;
	}
	return -1;
}

void config_defaults(struct config *cfg)
{
	char err[256];

	memset(cfg, 0, sizeof(*cfg));
	for (size_t i = 0; i < N_SETTINGS; i++)
		if (set_one(cfg, &settings[i], settings[i].def, err, sizeof(err)) < 0)
			abort(); /* a default outside its own bounds is a programming error */
}

void config_free(struct config *cfg)
{
	for (size_t i = 0; i < N_SETTINGS; i++)
		if (settings[i].type == SETTING_STRING) {
			char **p = (char **)((char *)cfg + settings[i].offset);

			free(*p);
			*p = NULL;
		}
}

int config_copy(struct config *dst, const struct config *src)
{
	*dst = *src;
	for (size_t i = 0; i < N_SETTINGS; i++)
		if (settings[i].type == SETTING_STRING) {
			char **p = (char **)((char *)dst + settings[i].offset);

			*p = strdup(*p);
			if (!*p) {
				for (size_t j = 0; j < i; j++)
					if (settings[j].type == SETTING_STRING)
						free(*(char **)((char *)dst + settings[j].offset));
				return -1;
			}
		}
	return 0;
}

int config_set(struct config *cfg, const char *name, const char *value, bool reload, char *err, size_t err_size)
{
	const struct setting *s = find(name);

	if (!s) {
		config_fail(err, err_size, "unrecognized setting \"%s\"", name);
		return -1;
	}
	if (reload && !s->reloadable) {
		void *field = (char *)cfg + s->offset;
		struct config probe;
		int same;

		/* an unchanged value is fine; a change needs a restart */
		config_defaults(&probe);
		if (set_one(&probe, s, value, err, err_size) < 0) {
			config_free(&probe);
			return -1;
		}
		if (s->type == SETTING_STRING)
			same = strcmp(*(char **)field, *(char **)((char *)&probe + s->offset)) == 0;
		else if (s->type == SETTING_INT)
			same = *(int64_t *)field == *(int64_t *)((char *)&probe + s->offset);
		else
			same = *(bool *)field == *(bool *)((char *)&probe + s->offset);
		config_free(&probe);
		if (!same) {
			config_fail(err, err_size, "setting \"%s\" cannot be changed without restarting culpritd",
				    name);
			return -1;
		}
		return 0;
	}
	return set_one(cfg, s, value, err, err_size);
}

static char *trim(char *s)
{
	char *end;

	while (isspace((unsigned char)*s))
		s++;
	end = s + strlen(s);
	while (end > s && isspace((unsigned char)end[-1]))
		*--end = '\0';
	return s;
}

int config_load_file(struct config *cfg, const char *path, bool reload, char *err, size_t err_size)
{
	FILE *f = fopen(path, "r");
	char line[4096], msg[512];
	int lineno = 0, set_on[N_SETTINGS] = {0}; /* the line that set each setting */

	if (!f) {
		config_fail(err, err_size, "could not open configuration file \"%s\": %s", path, strerror(errno));
		return -1;
	}
	while (fgets(line, sizeof(line), f)) {
		const struct setting *s;
		char *p, *eq, *name, *value;

		lineno++;
		if (!strchr(line, '\n') && !feof(f)) {
			config_fail(err, err_size, "%s:%d: line too long", path, lineno);
			fclose(f);
			return -1;
		}
		p = strchr(line, '#');
		if (p)
			*p = '\0';
		p = trim(line);
		if (*p == '\0')
			continue;
		eq = strchr(p, '=');
		if (!eq) {
			config_fail(err, err_size, "%s:%d: expected \"name = value\"", path, lineno);
			fclose(f);
			return -1;
		}
		*eq = '\0';
		name = trim(p);
		value = trim(eq + 1);
		if (value[0] == '"' && strlen(value) >= 2 && value[strlen(value) - 1] == '"') {
			value[strlen(value) - 1] = '\0';
			value++;
		}
		if ((s = find(name)) && set_on[s - settings]) {
			config_fail(err, err_size, "%s:%d: setting \"%s\" is set twice, on lines %d and %d", path,
				    lineno, name, set_on[s - settings], lineno);
			fclose(f);
			return -1;
		}
		if (s)
			set_on[s - settings] = lineno;
		if (config_set(cfg, name, value, reload, msg, sizeof(msg)) < 0) {
			config_fail(err, err_size, "%s:%d: %s", path, lineno, msg);
			fclose(f);
			return -1;
		}
	}
	/* a directory opens but does not read; neither it nor a read error mid-file may leave
	 * culpritd on the settings read so far */
	if (ferror(f)) {
		config_fail(err, err_size, "could not read configuration file \"%s\": %s", path, strerror(errno));
		fclose(f);
		return -1;
	}
	fclose(f);
	return 0;
}

static int check_hostport(const char *name, const char *v, char *err, size_t err_size)
{
	const char *colon = strrchr(v, ':');
	int64_t port;

	if (!colon || colon == v || parse_int(colon + 1, &port) < 0 || port < 0 || port > 65535) {
		config_fail(err, err_size, "invalid value for setting \"%s\": \"%s\" is not HOST:PORT", name, v);
		return -1;
	}
	return 0;
}

int config_check(const struct config *cfg, char *err, size_t err_size)
{
	if (check_hostport("agent_listen", cfg->agent_listen, err, err_size) < 0 ||
	    check_hostport("http_listen", cfg->http_listen, err, err_size) < 0)
		return -1;
	if (log_level_parse(cfg->log_level) < 0) {
		config_fail(err, err_size,
			    "invalid value for setting \"log_level\": \"%s\" is not debug, info, warning or error",
			    cfg->log_level);
		return -1;
	}
	if (cfg->max_input_buffer_bytes / 4 < cfg->max_frame) {
		/* a quarter of it stays for connections that are read: a whole frame must fit */
		config_fail(err, err_size,
			    "setting \"max_input_buffer_bytes\" (%lld) must be at least 4 times \"max_frame\" (%lld)",
			    (long long)cfg->max_input_buffer_bytes, (long long)cfg->max_frame);
		return -1;
	}
	if (cfg->max_frame_before_hello > cfg->max_frame) {
		config_fail(err, err_size,
			    "setting \"max_frame_before_hello\" (%lld) must not exceed \"max_frame\" (%lld)",
			    (long long)cfg->max_frame_before_hello, (long long)cfg->max_frame);
		return -1;
	}
	if (cfg->writer_txn_records > cfg->writer_queue_records) {
		config_fail(err, err_size, "setting \"writer_txn_records\" must not exceed \"writer_queue_records\"");
		return -1;
	}
	if (cfg->advertise_agent_addr[0] &&
	    check_hostport("advertise_agent_addr", cfg->advertise_agent_addr, err, err_size) < 0)
		return -1;
	if (cfg->advertise_agent_addr[0] && !cfg->storage) {
		config_fail(err, err_size,
			    "setting \"advertise_agent_addr\" needs \"storage\": the leases are in the database");
		return -1;
	}
	if (strlen(cfg->instance_id) > 127) {
		config_fail(err, err_size, "setting \"instance_id\" is longer than 127 bytes");
		return -1;
	}
	if (cfg->data_dir[0] == '\0') {
		config_fail(err, err_size, "setting \"data_dir\" must not be empty");
		return -1;
	}
	if (cfg->embedded_listen[0] && check_hostport("embedded_listen", cfg->embedded_listen, err, err_size) < 0)
		return -1;
	if (cfg->embedded_listen[0] && (cfg->db[0] || !cfg->storage || !cfg->embedded_grafana_password_file[0])) {
		config_fail(err, err_size,
			    "setting \"embedded_listen\" needs the embedded PostgreSQL (db empty, storage on) and "
			    "\"embedded_grafana_password_file\"");
		return -1;
	}
	if (config_action_mode(cfg->action_modes, NULL) < 0) {
		config_fail(
			err, err_size,
			"invalid value for setting \"action_modes\": \"%s\" is not KIND=MODE pairs separated by commas "
			"(KIND: drain_node, check_network, rebalance_stage, inspect_host, inspect_kernel, "
			"investigate_hang; MODE: off, dry_run, approve, auto)",
			cfg->action_modes);
		return -1;
	}
	for (size_t i = 0; i < sizeof(action_kinds) / sizeof(action_kinds[0]); i++) {
		int m = config_action_mode(cfg->action_modes, action_kinds[i]);

		if (m != ACTION_OFF && !cfg->action_hook[0]) {
			config_fail(err, err_size, "setting \"action_modes\" turns %s on: it needs \"action_hook\"",
				    action_kinds[i]);
			return -1;
		}
		if (m == ACTION_APPROVE && !cfg->operator_tokens_file[0]) {
			config_fail(
				err, err_size,
				"setting \"action_modes\" has %s=approve: it needs \"operator_tokens_file\" (who may "
				"approve)",
				action_kinds[i]);
			return -1;
		}
	}
	for (size_t i = 0; i < N_SETTINGS; i++) {
		const char *v =
			settings[i].flags & HTTP_URL ? *(char *const *)((const char *)cfg + settings[i].offset) : "";

		/* the value is not echoed: it may be a secret */
		if (v[0] && strncasecmp(v, "http://", 7) != 0 && strncasecmp(v, "https://", 8) != 0) {
			config_fail(err, err_size, "invalid value for setting \"%s\": not an http:// or https:// URL",
				    settings[i].name);
			return -1;
		}
	}
	return 0;
}

const char *config_option_name(const char *option, char *buf, size_t size)
{
	size_t n;

	if (strncmp(option, "--", 2) != 0)
		return NULL;
	option += 2;
	n = strlen(option);
	if (n == 0 || n >= size)
		return NULL;
	for (size_t i = 0; i <= n; i++)
		buf[i] = option[i] == '-' ? '_' : option[i];
	return find(buf) ? buf : NULL;
}

static const char *type_name(enum setting_type t)
{
	return t == SETTING_STRING ? "string" : t == SETTING_INT ? "integer" : "boolean";
}

void config_print_help(FILE *out)
{
	fprintf(out, "usage: culpritd [--config FILE] [-t] [--SETTING VALUE | --SETTING=VALUE ...]\n\n"
		     "  --config FILE   read settings from FILE (\"name = value\" lines); flags override it\n"
		     "  -t              check the configuration, print it, and exit\n"
		     "  --version       print the version, the git commit and the build type, and exit\n"
		     "  --config-doc    print the settings as Markdown (docs/config.md) and exit\n"
		     "  --routes        print the REST routes (method and path, one a line) and exit\n"
		     "  --help          this text\n\nsettings:\n");
	for (size_t i = 0; i < N_SETTINGS; i++) {
		const struct setting *s = &settings[i];
		char opt[64];

		snprintf(opt, sizeof(opt), "--%s", s->name);
		for (char *p = opt + 2; *p; p++)
			if (*p == '_')
				*p = '-';
		fprintf(out, "  %-28s %s (default \"%s\")\n", opt, s->help, s->def);
	}
}

void config_print_doc(FILE *out)
{
	fprintf(out, "# culpritd configuration\n\n"
		     "Generated from the settings table in `server/config.c` by `culpritd --config-doc`; "
		     "do not edit by hand.\n\n"
		     "Settings come from the file given with `--config FILE` (lines `name = value`, `#` starts a "
		     "comment), then from the command line, where `--name value` or `--name=value` sets a setting "
		     "(underscores "
		     "written as dashes: `--agent-listen 0.0.0.0:7433`). `culpritd -t` checks the result, prints it "
		     "and exits: 0 when valid, 2 with a message naming the setting otherwise. Integers accept the "
		     "suffixes k, M and G (powers of 1024). SIGHUP re-reads the file: settings marked reloadable "
		     "take effect, a change to any other is refused, and a file with any error keeps the whole "
		     "old configuration.\n\n"
		     "| setting | type | default | allowed | reloadable | meaning |\n"
		     "|---|---|---|---|---|---|\n");
	for (size_t i = 0; i < N_SETTINGS; i++) {
		const struct setting *s = &settings[i];
		char allowed[64] = "";

		if (s->type == SETTING_INT)
			snprintf(allowed, sizeof(allowed), "%lld .. %lld", (long long)s->min, (long long)s->max);
		else if (s->type == SETTING_BOOL)
			snprintf(allowed, sizeof(allowed), "true, false");
		else if (s->flags & HTTP_URL)
			snprintf(allowed, sizeof(allowed), "empty, `http://...`, `https://...`");
		fprintf(out, "| `%s` | %s | `%s` | %s | %s | %s%s |\n", s->name, type_name(s->type), s->def, allowed,
			s->reloadable ? "yes" : "no", s->help,
			s->flags & SECRET        ? " Secret: `-t` and the log show only whether it is set."
			: s->flags & CREDENTIALS ? " `-t` and the log mask the passwords in it."
						 : "");
	}
}

/* Appends len bytes of s to buf (n bytes used), as many as fit before its NUL. */
static void put(char *buf, size_t size, size_t *n, const char *s, size_t len)
{
	if (len > size - 1 - *n)
		len = size - 1 - *n;
	memcpy(buf + *n, s, len);
	*n += len;
}

/* Copies v into buf (size > 0) with the passwords in it replaced by "****": a URL's
 * user:PASSWORD@ and every password=VALUE (a PostgreSQL key=value DSN, or a URI parameter). */
static void mask_credentials(const char *v, char *buf, size_t size)
{
	const char *scheme = strstr(v, "://"), *at = NULL, *colon = NULL, *p = v, *q;
	size_t n = 0;

	if (scheme) {
		/* the authority: up to the first '/', '?' or '#' after "://" */
		for (q = scheme + 3; *q && !strchr("/?#", *q); q++)
			if (*q == '@')
				at = q;
		if (at)
			colon = memchr(scheme + 3, ':', (size_t)(at - (scheme + 3)));
	}
	while (*p) {
		if (p == colon) {
			put(buf, size, &n, ":****", 5);
			p = at;
		} else if (strncmp(p, "password", 8) == 0 && (p == v || strchr(" \t?&", p[-1])) &&
			   *(q = p + 8 + strspn(p + 8, " \t")) == '=') {
			put(buf, size, &n, "password=****", 13);
			p = q + 1 + strspn(q + 1, " \t");
			if (*p == '\'') { /* quoted: up to the closing quote; \' is escaped */
				for (p++; *p && *p != '\''; p++)
					if (p[0] == '\\' && p[1])
						p++;
				if (*p)
					p++;
			} else {
				while (*p && !strchr(" \t&", *p))
					p++;
			}
		} else {
			put(buf, size, &n, p++, 1);
		}
	}
	buf[n] = '\0';
}

const char *config_shown(const struct config *cfg, const char *name, char *buf, size_t size)
{
	const struct setting *s = find(name);
	const char *v;

	if (!s || s->type != SETTING_STRING || size == 0)
		return "";
	v = *(char *const *)((const char *)cfg + s->offset);
	if ((s->flags & SECRET) && v[0])
		snprintf(buf, size, "(set, not shown)");
	else if (s->flags & CREDENTIALS)
		mask_credentials(v, buf, size);
	else
		snprintf(buf, size, "%s", v);
	return buf;
}

void config_print_values(const struct config *cfg, FILE *out)
{
	char shown[4096];

	for (size_t i = 0; i < N_SETTINGS; i++) {
		const struct setting *s = &settings[i];
		const void *field = (const char *)cfg + s->offset;

		if (s->type == SETTING_STRING)
			fprintf(out, "%s = \"%s\"\n", s->name, config_shown(cfg, s->name, shown, sizeof(shown)));
		else if (s->type == SETTING_INT)
			fprintf(out, "%s = %lld\n", s->name, (long long)*(const int64_t *)field);
		else
			fprintf(out, "%s = %s\n", s->name, *(const bool *)field ? "true" : "false");
	}
}
