/* metrics.c: Prometheus text rendering of struct metrics. */
#include "metrics.h"

#include <dirent.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "build_info.h"

static const char *const close_names[CLOSE_REASONS] = {
	"peer", "protocol", "hello_timeout", "idle", "refused", "limit", "replaced", "shutdown", "nomem", "tls",
	"frame_timeout",
};

/* upper bounds of the diagnosis duration histogram, in seconds */
static const double diag_bounds[METRICS_DIAG_BUCKETS] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};

void metrics_observe_diagnosis(struct metrics *m, double ms)
{
	for (int i = 0; i < METRICS_DIAG_BUCKETS; i++)
		if (ms / 1000.0 <= diag_bounds[i])
			m->diagnosis_buckets[i]++;
}

uint64_t metrics_open_connections(const struct metrics *m)
{
	return m->conns_hello + m->conns_active + m->conns_blocked;
}

const char *metrics_close_reason_name(enum metrics_close_reason r)
{
	return (unsigned)r < CLOSE_REASONS ? close_names[r] : "unknown";
}

static void one(FILE *out, const char *name, const char *type, const char *help, uint64_t v)
{
	fprintf(out, "# HELP %s %s\n# TYPE %s %s\n%s %" PRIu64 "\n", name, help, name, type, name, v);
}

static void per_target(FILE *out, const char *name, const char *help, const uint64_t *v)
{
	fprintf(out, "# HELP %s %s\n# TYPE %s counter\n", name, help, name);
	for (int t = 0; t < DELIVER_TARGETS; t++)
		fprintf(out, "%s{target=\"%s\"} %" PRIu64 "\n", name, deliver_target_name((enum deliver_target)t),
			v[t]);
}

static void render_alerts(const struct metrics *m, FILE *out)
{
	one(out, "culprit_reports_queued_total", "counter",
	    "Reports and incident changes handed to the storage writer (stored with their alerts in one transaction).",
	    m->reports_queued);
	one(out, "culprit_alert_ops_waiting", "gauge",
	    "Reports and incident changes waiting on the loop for room in the writer queue.", m->alert_ops_waiting);
	one(out, "culprit_alert_ops_dropped_total", "counter",
	    "Reports and incident changes dropped because too many were waiting for the writer.", m->alert_ops_dropped);
	per_target(out, "culprit_alert_deliveries_total", "Alerts delivered (2xx), by target.", m->alert_sent);
	per_target(out, "culprit_alert_delivery_failures_total",
		   "Alert delivery attempts that failed (error, timeout, status not 2xx), by target.",
		   m->alert_failures);
	per_target(out, "culprit_alert_given_up_total", "Alerts given up after alert_give_up_s, by target.",
		   m->alert_given_up);
	one(out, "culprit_alert_resends_total", "counter",
	    "Re-sends of the open incidents to Alertmanager (keeps them firing).", m->alert_resends);
	one(out, "culprit_alert_resend_failures_total", "counter", "Re-sends to Alertmanager that failed.",
	    m->alert_resend_failures);
	fprintf(out,
		"# HELP culprit_alert_outbox_pending Alert outbox rows not yet delivered (-1: unknown).\n"
		"# TYPE culprit_alert_outbox_pending gauge\n"
		"culprit_alert_outbox_pending %" PRId64 "\n",
		m->alert_pending);
}

void metrics_render(const struct metrics *m, FILE *out)
{
	static const char *const record_names[4] = {"iteration", "phase", "kernel", "raw_kernel"};

	one(out, "culprit_agent_connections_accepted_total", "counter", "Agent connections accepted.", m->accepted);
	fprintf(out,
		"# HELP culprit_agent_connections_over_limit_total Agent connections closed at accept, by the limit "
		"they exceeded (max_connections, max_connections_per_addr, max_connections_before_hello).\n"
		"# TYPE culprit_agent_connections_over_limit_total counter\n"
		"culprit_agent_connections_over_limit_total{limit=\"connections\"} %" PRIu64 "\n"
		"culprit_agent_connections_over_limit_total{limit=\"per_address\"} %" PRIu64 "\n"
		"culprit_agent_connections_over_limit_total{limit=\"before_hello\"} %" PRIu64 "\n",
		m->over_limit[LIMIT_CONNECTIONS], m->over_limit[LIMIT_PER_ADDR], m->over_limit[LIMIT_BEFORE_HELLO]);
	fprintf(out, "# HELP culprit_agent_connections_closed_total Agent connections closed, by reason.\n"
		     "# TYPE culprit_agent_connections_closed_total counter\n");
	for (int r = 0; r < CLOSE_REASONS; r++)
		fprintf(out, "culprit_agent_connections_closed_total{reason=\"%s\"} %" PRIu64 "\n", close_names[r],
			m->closed[r]);
	fprintf(out,
		"# HELP culprit_agent_connections Agent connections open, by state.\n"
		"# TYPE culprit_agent_connections gauge\n"
		"culprit_agent_connections{state=\"hello\"} %" PRIu64 "\n"
		"culprit_agent_connections{state=\"active\"} %" PRIu64 "\n"
		"culprit_agent_connections{state=\"blocked\"} %" PRIu64 "\n",
		m->conns_hello, m->conns_active, m->conns_blocked);
	fprintf(out,
		"# HELP culprit_agent_frames_total Agent frames received, by outcome.\n"
		"# TYPE culprit_agent_frames_total counter\n"
		"culprit_agent_frames_total{outcome=\"ok\"} %" PRIu64 "\n"
		"culprit_agent_frames_total{outcome=\"malformed\"} %" PRIu64 "\n",
		m->frames_ok, m->frames_malformed);
	one(out, "culprit_agent_received_bytes_total", "counter", "Bytes read from agents.", m->bytes_in);
	fprintf(out,
		"# HELP culprit_agent_batches_total Agent batches, by outcome.\n"
		"# TYPE culprit_agent_batches_total counter\n"
		"culprit_agent_batches_total{outcome=\"accepted\"} %" PRIu64 "\n"
		"culprit_agent_batches_total{outcome=\"rejected\"} %" PRIu64 "\n"
		"culprit_agent_batches_total{outcome=\"duplicate\"} %" PRIu64 "\n",
		m->batches_ok, m->batches_rejected, m->batches_duplicate);
	fprintf(out, "# HELP culprit_records_total Records received from agents, by type and outcome.\n"
		     "# TYPE culprit_records_total counter\n");
	for (int i = 0; i < 4; i++)
		fprintf(out, "culprit_records_total{type=\"%s\",outcome=\"accepted\"} %" PRIu64 "\n", record_names[i],
			m->records_in[i]);
	fprintf(out, "culprit_records_total{type=\"any\",outcome=\"rejected\"} %" PRIu64 "\n", m->records_rejected);
	one(out, "culprit_agent_acks_total", "counter", "Ack frames sent to agents.", m->acks_sent);
	one(out, "culprit_captures_total", "counter", "On-demand kernel captures started (POST .../capture, 202).",
	    m->captures);
	one(out, "culprit_capture_commands_total", "counter", "Capture Commands sent to agents.", m->capture_commands);
	one(out, "culprit_leases_acquired_total", "counter", "Job leases this instance took (many instances).",
	    m->leases_acquired);
	one(out, "culprit_leases_lost_total", "counter",
	    "Job leases this instance found another's (its agents' connections were closed).", m->leases_lost);
	one(out, "culprit_hellos_redirected_total", "counter", "Hellos answered with a redirect to the job's owner.",
	    m->hellos_redirected);
	one(out, "culprit_relay_connections", "gauge",
	    "Connections from other instances relaying agents of this instance's jobs.", m->relay_conns);
	one(out, "culprit_agents_via_relay", "gauge", "Agents of this instance's jobs that reach it through relays.",
	    m->agents_via_relay);
	one(out, "culprit_agents_relayed", "gauge", "Agents this instance relays to their job's owner.",
	    m->agents_relayed);
	one(out, "culprit_relayed_batches_total", "counter", "Batches this instance relayed to their job's owner.",
	    m->batches_relayed);
	one(out, "culprit_embedded_restarts_total", "counter",
	    "Times the embedded PostgreSQL was started again after its postmaster exited.", m->embedded_restarts);
	one(out, "culprit_backpressure_events_total", "counter",
	    "Times a connection stopped being read because the storage queue was full.", m->backpressure_events);
	fprintf(out,
		"# HELP culprit_backpressure_seconds_total Time connections spent unread because the storage queue was "
		"full.\n"
		"# TYPE culprit_backpressure_seconds_total counter\n"
		"culprit_backpressure_seconds_total %.6f\n",
		(double)m->backpressure_us / 1e6);
	one(out, "culprit_agent_input_buffer_bytes", "gauge",
	    "Bytes of agent frames received and not yet processed, all connections together (bounded by "
	    "max_input_buffer_bytes).",
	    m->input_held);
	one(out, "culprit_agent_input_paused_total", "counter",
	    "Times a connection stopped being read because all connections together held more than "
	    "max_input_buffer_bytes.",
	    m->input_paused);
	one(out, "culprit_agent_names_over_limit_total", "counter",
	    "Batches refused, and their connections closed, because their job has max_names_per_job names.",
	    m->names_over_limit);
	one(out, "culprit_jobs", "gauge", "Jobs known to this culpritd.", m->jobs);
	fprintf(out, "# HELP culprit_diagnosis_duration_seconds Time one diagnosis (L2, L3, attribution) took.\n"
		     "# TYPE culprit_diagnosis_duration_seconds histogram\n");
	for (int i = 0; i < METRICS_DIAG_BUCKETS; i++)
		fprintf(out, "culprit_diagnosis_duration_seconds_bucket{le=\"%g\"} %" PRIu64 "\n", diag_bounds[i],
			m->diagnosis_buckets[i]);
	fprintf(out,
		"culprit_diagnosis_duration_seconds_bucket{le=\"+Inf\"} %" PRIu64 "\n"
		"culprit_diagnosis_duration_seconds_sum %.6f\n"
		"culprit_diagnosis_duration_seconds_count %" PRIu64 "\n",
		m->diagnoses, m->diagnosis_ms_sum / 1000.0, m->diagnoses);
	one(out, "culprit_diagnoses_deferred_total", "counter",
	    "Diagnoses not started at once because the diagnosis queue was full.", m->diagnoses_refused);
	one(out, "culprit_window_records_held_total", "counter",
	    "Records held while a diagnosis read their job's window, and given to it after.", m->window_held);
	one(out, "culprit_window_records_not_held_total", "counter",
	    "Records dropped because the hold of a job under diagnosis was full (stored, but not diagnosed).",
	    m->window_not_held);
	fprintf(out,
		"# HELP culprit_incident_changes_total Incident state changes, by state.\n"
		"# TYPE culprit_incident_changes_total counter\n"
		"culprit_incident_changes_total{state=\"firing\"} %" PRIu64 "\n"
		"culprit_incident_changes_total{state=\"updated\"} %" PRIu64 "\n"
		"culprit_incident_changes_total{state=\"resolved\"} %" PRIu64 "\n",
		m->incident_changes[1], m->incident_changes[2], m->incident_changes[3]);
	render_alerts(m, out);
	one(out, "culprit_agent_auth_failures_total", "counter",
	    "Agent Hellos refused with \"authentication failed\" (wrong or missing token, or a job without one), "
	    "and connections closed because SIGHUP removed their token.",
	    m->agent_auth_failures);
	fprintf(out,
		"# HELP culprit_http_auth_failures_total REST requests refused by authentication, by status.\n"
		"# TYPE culprit_http_auth_failures_total counter\n"
		"culprit_http_auth_failures_total{code=\"401\"} %" PRIu64 "\n"
		"culprit_http_auth_failures_total{code=\"403\"} %" PRIu64 "\n",
		m->http_auth_failures, m->http_auth_forbidden);
	fprintf(out,
		"# HELP culprit_auth_limited_total Agent Hellos and REST requests refused without a token check: their "
		"address failed more than auth_failures_per_addr checks a minute.\n"
		"# TYPE culprit_auth_limited_total counter\n"
		"culprit_auth_limited_total{listener=\"agent\"} %" PRIu64 "\n"
		"culprit_auth_limited_total{listener=\"http\"} %" PRIu64 "\n",
		m->auth_limited[0], m->auth_limited[1]);
}

/* The first line of /proc/self/<name> (procfs: no disk, never blocks), or -1. */
static int proc_line(const char *name, char *buf, size_t size)
{
	char path[64];
	FILE *f;
	int ok;

	snprintf(path, sizeof(path), "/proc/self/%s", name);
	f = fopen(path, "r");
	if (!f)
		return -1;
	ok = fgets(buf, (int)size, f) != NULL;
	fclose(f);
	return ok ? 0 : -1;
}

static long open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	long n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n - 1; /* the directory's own */
}

void metrics_render_process(FILE *out, int64_t started_us)
{
	char line[1024], *p;
	double cpu = -1, rss = -1, vsize = -1;
	struct rlimit rl;
	long tck = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);

	fprintf(out,
		"# HELP culprit_build_info culpritd's version, git commit and build type.\n"
		"# TYPE culprit_build_info gauge\n"
		"culprit_build_info{version=\"%s\",commit=\"%s\",build_type=\"%s\"} 1\n",
		CULPRIT_VERSION, CULPRIT_COMMIT, CULPRIT_BUILD_TYPE);
	/* /proc/self/stat: fields after the command (which may hold spaces) in parentheses */
	if (proc_line("stat", line, sizeof(line)) == 0 && (p = strrchr(line, ')'))) {
		unsigned long utime = 0, stime = 0, vs = 0;
		long rs = 0;

		if (sscanf(p + 2,
			   "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu %*d %*d %*d %*d %*d %*d %*u %lu %ld",
			   &utime, &stime, &vs, &rs) == 4 &&
		    tck > 0) {
			cpu = (double)(utime + stime) / (double)tck;
			vsize = (double)vs;
			rss = (double)rs * (double)page;
		}
	}
	if (cpu >= 0)
		fprintf(out,
			"# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.\n"
			"# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total %.2f\n"
			"# HELP process_resident_memory_bytes Resident memory size in bytes.\n"
			"# TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes %.0f\n"
			"# HELP process_virtual_memory_bytes Virtual memory size in bytes.\n"
			"# TYPE process_virtual_memory_bytes gauge\nprocess_virtual_memory_bytes %.0f\n",
			cpu, rss, vsize);
	fprintf(out,
		"# HELP process_open_fds Number of open file descriptors.\n"
		"# TYPE process_open_fds gauge\nprocess_open_fds %ld\n",
		open_fds());
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
		fprintf(out,
			"# HELP process_max_fds Maximum number of open file descriptors.\n"
			"# TYPE process_max_fds gauge\nprocess_max_fds %llu\n",
			(unsigned long long)rl.rlim_cur);
	fprintf(out,
		"# HELP process_start_time_seconds Start time of the process since unix epoch in seconds.\n"
		"# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds %.3f\n",
		(double)started_us / 1e6);
}
