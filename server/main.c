/* main.c: culpritd's start-up, signals and shutdown.
 *
 * Start-up (may exit): settings, the database (embedded or by DSN), migrations, the writer,
 * the listeners. Then one libevent loop owns every socket. SIGHUP reloads the settings
 * atomically (a bad file keeps the old ones); SIGTERM or SIGINT drains (stop accepting and
 * reading, let the writer commit and the agents get their Acks, then exit), the drain and
 * everything after it (writers, the embedded PostgreSQL) within one deadline of
 * DRAIN_TIMEOUT_MS; a second one exits at once. SIGPIPE is ignored. The embedded PostgreSQL
 * is supervised from the tick: started again when its postmaster exits. */
#include <errno.h>
#include <event2/event.h>
#include <event2/thread.h>
#include <event2/util.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "actions.h"
#include "alerts.h"
#include "auth.h"
#include "build_info.h"
#include "clock.h"
#include "cluster.h"
#include "config.h"
#include "dbhealth.h"
#include "diagnosis.h"
#include "embedded.h"
#include "http.h"
#include "ingest.h"
#include "jobs.h"
#include "log.h"
#include "migrate.h"
#include "notify.h"
#include "retention.h"
#include "server.h"
#include "tls.h"
#include "writer.h"

#define DRAIN_TIMEOUT_MS 30000 /* from SIGTERM to exit (docs/operations.md, "Signals") */
#define DIAGNOSIS_QUEUE 64     /* jobs waiting for the diagnosis worker */

static struct embedded *pg;
static int64_t watchdog_us, watchdog_sent_us; /* systemd's WatchdogSec (0: none) */

/* Tells systemd (Type=notify) a state; a failure is logged, culpritd goes on. */
static void notify(const char *state)
{
	if (notify_send(state) < 0)
		log_warning("could not notify systemd (%s): %s", getenv("NOTIFY_SOCKET"), strerror(errno));
}

/* argv[i] as an option and its value: "--name=value" (like the CLI's options) or "--name"
 * (*value NULL: the value, if any, is the next argument) */
static const char *split_arg(const char *arg, char *buf, size_t size, const char **value)
{
	const char *eq = strncmp(arg, "--", 2) == 0 ? strchr(arg, '=') : NULL;
	size_t n;

	*value = NULL;
	if (!eq)
		return arg;
	n = (size_t)(eq - arg) < size ? (size_t)(eq - arg) : size - 1;
	memcpy(buf, arg, n);
	buf[n] = '\0';
	*value = eq + 1;
	return buf;
}

static int parse_args(struct server *s, int argc, char **argv, int *check_only)
{
	char err[512], name[128], opt[160];
	const char *arg, *value;

	/* the file first, so that flags override it */
	for (int i = 1; i < argc; i++) {
		arg = split_arg(argv[i], opt, sizeof(opt), &value);
		if (strcmp(arg, "--config") != 0)
			continue;
		if (!value && i + 1 >= argc) {
			fprintf(stderr, "culpritd: --config needs a file\n");
			return -1;
		}
		s->config_path = value ? value : argv[++i];
		if (config_load_file(&s->cfg, s->config_path, false, err, sizeof(err)) < 0) {
			fprintf(stderr, "culpritd: %s\n", err);
			return -1;
		}
	}
	for (int i = 1; i < argc; i++) {
		const char *setting;

		arg = split_arg(argv[i], opt, sizeof(opt), &value);
		if (strcmp(arg, "--config") == 0) {
			i += !value;
		} else if (strcmp(arg, "-t") == 0) {
			*check_only = 1;
		} else if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
			config_print_help(stdout);
			exit(0);
		} else if (strcmp(arg, "--version") == 0) {
			printf("culpritd %s (commit %s, %s build)\n", CULPRIT_VERSION, CULPRIT_COMMIT,
			       CULPRIT_BUILD_TYPE);
			exit(0);
		} else if (strcmp(arg, "--config-doc") == 0) {
			config_print_doc(stdout);
			exit(0);
		} else if (strcmp(arg, "--routes") == 0) {
			http_routes_print(stdout);
			exit(0);
		} else if ((setting = config_option_name(arg, name, sizeof(name)))) {
			if (!value && i + 1 < argc)
				value = argv[++i];
			if (!value) {
				fprintf(stderr, "culpritd: %s needs a value\n", arg);
				return -1;
			}
			if (config_set(&s->cfg, setting, value, false, err, sizeof(err)) < 0) {
				fprintf(stderr, "culpritd: %s\n", err);
				return -1;
			}
		} else {
			fprintf(stderr, "culpritd: unknown argument \"%s\" (try --help)\n", argv[i]);
			return -1;
		}
	}
	if (config_check(&s->cfg, err, sizeof(err)) < 0) {
		fprintf(stderr, "culpritd: %s\n", err);
		return -1;
	}
	return 0;
}

/* addr ("host:port") is a loopback address, so only this machine reaches it */
static bool loopback(const char *addr)
{
	struct sockaddr_storage ss;
	int len = (int)sizeof(ss);

	if (evutil_parse_sockaddr_port(addr, (struct sockaddr *)&ss, &len) < 0)
		return false;
	if (ss.ss_family == AF_INET)
		return ntohl(((const struct sockaddr_in *)&ss)->sin_addr.s_addr) >> 24 == 127;
	return ss.ss_family == AF_INET6 && IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)&ss)->sin6_addr);
}

/* What guards the listeners. Open on loopback alone (a demo on one machine) that is one
 * line; anywhere else each open door is a warning of its own. */
static void log_security(const struct server *s)
{
	if (!s->tls && auth_open(s->auth) && loopback(s->cfg.agent_listen) && loopback(s->cfg.http_listen)) {
		log_warning("no tokens and no TLS: fine on loopback, where only this machine connects; set them "
			    "before other hosts may (docs/operations.md, \"Security\")");
		return;
	}
	auth_log_summary(s->auth);
	if (s->tls)
		log_info("TLS on: agents and the REST API use the certificate \"%s\"", s->cfg.tls_cert);
	else
		log_warning("TLS is off: records%s travel in clear text (set tls_cert and tls_key)",
			    s->cfg.agent_token[0] || s->cfg.job_tokens_file[0] || s->cfg.http_write_token[0]
				    ? " and tokens"
				    : "");
}

static void raise_nofile(const struct config *cfg)
{
	struct rlimit rl;
	rlim_t want = (rlim_t)cfg->max_connections + (rlim_t)cfg->max_http_connections + 1024;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur >= want)
		return;
	rl.rlim_cur = want;
	if (rl.rlim_max < want)
		rl.rlim_max = want; /* works as root; otherwise fall back below */
	if (setrlimit(RLIMIT_NOFILE, &rl) < 0) {
		getrlimit(RLIMIT_NOFILE, &rl);
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
		log_warning("open-file limit is %llu, below max_connections + max_http_connections + 1024 = %llu: "
			    "raise it (ulimit -n, "
			    "LimitNOFILE= in the systemd unit)",
			    (unsigned long long)rl.rlim_cur, (unsigned long long)want);
	}
}

/* ---- the writer's wake-up reaches the loop through an event ---- */

static void writer_wake_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	ingest_writer_progress(arg);
	alerts_tick(arg);
}

static void writer_wake(void *arg)
{
	struct server *s = arg;

	event_active(s->writer_wake, EV_READ, 0);
}

/* Many instances: a job's lease is another instance's now: its agents' connections close
 * (they come back and are redirected), the job is forgotten. */
static void lease_lost(struct server *s, const char *job)
{
	ingest_close_job(s, job);
	jobs_lost(s, job);
}

static const struct cluster_calls lease_calls = {.resume = ingest_hello_resume,
						 .progress = ingest_set_progress,
						 .taken_over = jobs_taken_over,
						 .lost = lease_lost};

/* embedded_listen: the login "grafana" with the password of embedded_grafana_password_file. */
static int grant_grafana(struct server *s)
{
	char password[1024] = "", err[512];
	FILE *f = fopen(s->cfg.embedded_grafana_password_file, "r");

	if (!f || !fgets(password, sizeof(password), f)) {
		log_error("embedded_grafana_password_file \"%s\": %s", s->cfg.embedded_grafana_password_file,
			  f ? "empty" : strerror(errno));
		if (f)
			fclose(f);
		return -1;
	}
	fclose(f);
	password[strcspn(password, "\r\n")] = '\0';
	if (!password[0] || embedded_grant_grafana(pg, password, err, sizeof(err)) < 0) {
		log_error("embedded: could not set up the login \"grafana\": %s",
			  password[0] ? err : "an empty password");
		explicit_bzero(password, sizeof(password));
		return -1;
	}
	explicit_bzero(password, sizeof(password));
	log_info("embedded: PostgreSQL listens on %s too, for the login \"grafana\" (read-only views)",
		 s->cfg.embedded_listen);
	return 0;
}

static int open_storage(struct server *s)
{
	char err[512];
	struct storage_writer_config wc = {0};
	int applied;

	if (!s->cfg.storage) {
		log_warning("storage is off: records are kept in memory only and acknowledged on receipt");
		return 0;
	}
	if (s->cfg.db[0] == '\0') {
		struct embedded_config ec = {.data_dir = s->cfg.data_dir, .listen = s->cfg.embedded_listen};

		pg = embedded_start(&ec, err, sizeof(err));
		if (!pg) {
			log_error("could not start the embedded PostgreSQL: %s", err);
			return -1;
		}
		s->db_dsn = strdup(embedded_dsn(pg));
		s->embedded = true;
	} else {
		s->db_dsn = strdup(s->cfg.db);
	}
	if (!s->db_dsn)
		return -1;
	applied = storage_migrate(s->db_dsn, NULL, err, sizeof(err));
	if (applied < 0) {
		log_error("could not migrate the database: %s", err);
		return -1;
	}
	if (applied > 0)
		log_info("applied %d schema migrations", applied);
	if (pg && s->cfg.embedded_listen[0] && grant_grafana(s) < 0)
		return -1;
	{
		struct storage_retention_config rc = {.dsn = s->db_dsn, .retention_days = (int)s->cfg.retention_days};

		s->retention = storage_retention_start(&rc);
		if (!s->retention) {
			log_error("could not start partition maintenance");
			return -1;
		}
	}
	s->writer_wake = event_new(s->base, -1, 0, writer_wake_cb, s);
	wc.dsn = s->db_dsn;
	wc.queue_max_records = (size_t)s->cfg.writer_queue_records;
	wc.max_txn_records = (size_t)s->cfg.writer_txn_records;
	wc.wake = writer_wake;
	wc.wake_arg = s;
	if (s->cfg.advertise_agent_addr[0]) {
		if (cluster_start(s, &lease_calls) < 0)
			return -1;
		wc.lease_owner = cluster_owner(s);
	}
	s->writer = s->writer_wake ? storage_writer_start(&wc) : NULL;
	if (!s->writer) {
		log_error("could not start the storage writer");
		return -1;
	}
	/* many instances: a job's open incident is taken up with its lease (cluster.c) */
	return ingest_load_progress(s) < 0 || (!s->cluster && jobs_load_incidents(s) < 0) ? -1 : 0;
}

/* ---- diagnoses off the loop, and the periodic tick ---- */

static void diagnosis_wake_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	jobs_diagnosis_results(arg);
}

static void diagnosis_wake(void *arg)
{
	struct server *s = arg;

	event_active(s->diagnosis_wake, EV_READ, 0);
}

static void tick_job(const char *name, void *value, void *arg)
{
	(void)name;
	jobs_check_hang(arg, value, clock_wall_us());
	jobs_diagnose_due(arg, value);
}

static void tick_cb(evutil_socket_t fd, short what, void *arg)
{
	struct server *s = arg;
	int64_t answered_ms;

	(void)fd;
	(void)what;
	/* the loop turns: systemd's watchdog is fed at least twice per WatchdogSec */
	if (watchdog_us && clock_mono_ms() * 1000 - watchdog_sent_us >= watchdog_us / 2 - 1000000) {
		notify("WATCHDOG=1");
		watchdog_sent_us = clock_mono_ms() * 1000;
	}
	strmap_each(&s->jobs, tick_job, s);
	ingest_tick(s);
	jobs_retire(s, clock_wall_us(), s->started_us);
	alerts_tick(s);
	/* also while draining: the drain needs the database; a restart's backoff starts over
	 * once the server it started answers the liveness check */
	answered_ms = dbhealth_tick(s);
	if (pg)
		embedded_answered(pg, answered_ms);
	if (pg && embedded_supervise(pg))
		s->m.embedded_restarts++;
}

static int start_diagnosis(struct server *s)
{
	struct timeval second = {1, 0};

	s->diagnosis_wake = event_new(s->base, -1, 0, diagnosis_wake_cb, s);
	s->tick = event_new(s->base, -1, EV_PERSIST, tick_cb, s);
	if (!s->diagnosis_wake || !s->tick || event_add(s->tick, &second) < 0)
		return -1;
	s->diagnosis = diagnosis_start(DIAGNOSIS_QUEUE, diagnosis_wake, s);
	return s->diagnosis ? 0 : -1;
}

/* ---- signals ---- */

static void drain_check_cb(evutil_socket_t fd, short what, void *arg);

static void begin_drain(struct server *s)
{
	static struct event *timer;
	struct timeval tv = {0, 100000};

	s->stopping = 1;
	s->stop_deadline_ms = clock_mono_ms() + DRAIN_TIMEOUT_MS;
	notify("STOPPING=1\nSTATUS=draining: committing what agents sent");
	log_info("shutting down: no new connections; committing what agents sent (a second signal exits at once)");
	ingest_stop_accepting(s);
	timer = event_new(s->base, -1, EV_PERSIST, drain_check_cb, s);
	if (timer)
		event_add(timer, &tv);
	else
		event_base_loopbreak(s->base);
}

static void drain_check_cb(evutil_socket_t fd, short what, void *arg)
{
	struct server *s = arg;
	struct storage_writer_stats st = {0};
	int late;

	(void)fd;
	(void)what;
	if (s->writer)
		storage_writer_stats(s->writer, &st);
	/* done when nothing is queued, no connection waits for queue space, and every report and
	 * incident change (with its outbox rows) is committed */
	alerts_tick(s);
	late = clock_mono_ms() >= s->stop_deadline_ms;
	if ((st.queued_records == 0 && st.queued_ops == 0 && !s->blocked_head && alerts_uncommitted(s) == 0) || late) {
		if (late)
			log_warning("gave up waiting for the database after %d ms", DRAIN_TIMEOUT_MS);
		if (s->writer)
			ingest_writer_progress(s); /* last Acks */
		event_base_loopexit(s->base, NULL);
	}
}

static void reload(struct server *s)
{
	struct config next;
	struct auth *auth;
	struct ssl_ctx_st *tls = NULL;
	char err[512];

	if (!s->config_path) {
		log_info("SIGHUP: no configuration file to reload");
		return;
	}
	if (config_copy(&next, &s->cfg) < 0) {
		log_error("SIGHUP: out of memory; keeping the configuration");
		return;
	}
	if (config_load_file(&next, s->config_path, true, err, sizeof(err)) < 0 ||
	    config_check(&next, err, sizeof(err)) < 0) {
		log_error("SIGHUP: %s; keeping the old configuration", err);
		config_free(&next);
		return;
	}
	if (tls_check_reload(&s->cfg, &next, err, sizeof(err)) < 0 ||
	    (tls_wanted(&next) && !(tls = tls_context_new(&next, err, sizeof(err)))) ||
	    !(auth = auth_new(&next, err, sizeof(err)))) {
		log_error("SIGHUP: %s; keeping the old configuration", err);
		tls_context_free(tls);
		config_free(&next);
		return;
	}
	auth_free(s->auth);
	s->auth = auth;
	size_t revoked = ingest_close_unauthorized(s);
	if (revoked)
		log_warning("SIGHUP: closed %zu agent connection%s whose token is no longer accepted", revoked,
			    revoked == 1 ? "" : "s");
	if (tls) {
		tls_context_free(s->tls);
		s->tls = tls;
	}
	config_free(&s->cfg);
	s->cfg = next;
	log_set_level((enum log_level)log_level_parse(s->cfg.log_level));
	if (s->http)
		http_apply_limits(s);
	if (s->retention)
		storage_retention_set_days(s->retention, (int)s->cfg.retention_days);
	log_info("SIGHUP: configuration reloaded from \"%s\"", s->config_path);
	log_security(s);
}

static void signal_cb(evutil_socket_t sig, short what, void *arg)
{
	struct server *s = arg;

	(void)what;
	if (sig == SIGHUP) {
		reload(s);
		return;
	}
	if (s->stopping) {
		log_info("second signal: exiting now");
		s->stopping = 2;
		event_base_loopbreak(s->base);
		return;
	}
	begin_drain(s);
}

static int setup_signals(struct server *s)
{
	const int sigs[] = {SIGTERM, SIGINT, SIGHUP};

	signal(SIGPIPE, SIG_IGN);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
		s->signals[i] = evsignal_new(s->base, sigs[i], signal_cb, s);
		if (!s->signals[i] || event_add(s->signals[i], NULL) < 0)
			return -1;
	}
	return 0;
}

static void free_progress(const char *key, void *value, void *arg)
{
	(void)key;
	(void)arg;
	free(value);
}

/* What is left of the stop's deadline (0 after a second signal). */
static int stop_left_ms(const struct server *s)
{
	int64_t left = s->stop_deadline_ms - clock_mono_ms();

	return s->stopping == 2 || left < 0 ? 0 : (int)left;
}

static void shutdown_all(struct server *s)
{
	if (!s->stopping) /* start-up failed, or the loop ended otherwise */
		s->stop_deadline_ms = clock_mono_ms() + DRAIN_TIMEOUT_MS;
	diagnosis_stop(s->diagnosis);
	if (s->diagnosis_wake)
		event_free(s->diagnosis_wake);
	if (s->tick)
		event_free(s->tick);
	ingest_close_all(s);
	http_stop(s);
	if (s->writer) {
		struct storage_writer_stats st;

		uint64_t lost;

		storage_writer_stats(s->writer, &st);
		lost = storage_writer_stop(s->writer, stop_left_ms(s));
		if (lost)
			log_warning(
				"%llu received records were not committed (the agents still hold them and will resend)",
				(unsigned long long)lost);
	}
	alerts_stop(s, stop_left_ms(s));
	actions_stop(s, stop_left_ms(s));
	dbhealth_stop(s);
	cluster_stop(s); /* after the writers: what they wrote was this instance's to write */
	if (s->writer_wake)
		event_free(s->writer_wake);
	if (s->retention)
		storage_retention_stop(s->retention);
	for (size_t i = 0; i < sizeof(s->signals) / sizeof(s->signals[0]); i++)
		if (s->signals[i])
			event_free(s->signals[i]);
	if (pg && embedded_stop(pg, stop_left_ms(s)) < 0)
		log_warning("the embedded PostgreSQL did not stop in time: immediate shutdown "
			    "(crash recovery at its next start)");
	jobs_free_all(s);
	strmap_each(&s->agents, free_progress, NULL);
	strmap_free(&s->agents);
	strmap_free(&s->per_addr);
	auth_limit_free(&s->auth_limit);
	free(s->scratch);
	free(s->db_dsn);
	if (s->base)
		event_base_free(s->base);
	auth_free(s->auth);
	tls_context_free(s->tls);
	config_free(&s->cfg);
}

int main(int argc, char **argv)
{
	static struct server s;
	int check_only = 0, rc = 1;

	config_defaults(&s.cfg);
	s.started_us = clock_wall_us();
	if (parse_args(&s, argc, argv, &check_only) < 0) {
		config_free(&s.cfg);
		return 2;
	}
	{
		char err[512];

		s.auth = auth_new(&s.cfg, err, sizeof(err));
		if (s.auth && tls_wanted(&s.cfg))
			s.tls = tls_context_new(&s.cfg, err, sizeof(err));
		if (!s.auth || (tls_wanted(&s.cfg) && !s.tls)) {
			fprintf(stderr, "culpritd: %s\n", err);
			auth_free(s.auth);
			config_free(&s.cfg);
			return 2;
		}
	}
	if (check_only) {
		config_print_values(&s.cfg, stdout);
		printf("configuration is valid\n");
		auth_free(s.auth);
		tls_context_free(s.tls);
		config_free(&s.cfg);
		return 0;
	}
	log_set_level((enum log_level)log_level_parse(s.cfg.log_level));
	log_security(&s);
	raise_nofile(&s.cfg);
	if (evthread_use_pthreads() < 0) {
		log_error("could not enable libevent's thread support");
		return 1;
	}
	s.base = event_base_new();
	if (!s.base || setup_signals(&s) < 0) {
		log_error("could not set up the event loop");
		goto out;
	}
	if (open_storage(&s) < 0 || dbhealth_start(&s) < 0 || alerts_start(&s) < 0 || actions_start(&s) < 0 ||
	    start_diagnosis(&s) < 0 || ingest_start(&s) < 0 || http_start(&s) < 0)
		goto out;
	log_info("culpritd ready (database: %s)", !s.cfg.storage ? "none" : s.embedded ? "embedded" : "configured");
	watchdog_us = notify_watchdog_us();
	notify("READY=1\nSTATUS=ready");
	event_base_dispatch(s.base);
	rc = 0;
out:
	shutdown_all(&s);
	log_info("culpritd stopped");
	return rc;
}
