/* replay.c: `culprit replay` (see replay.h). The JSONL reader (client/jsonl.h) calls a
 * handler per line; each record goes to the fanout of its job (client/fanout.h). */
#include "replay.h"

#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fanout.h"
#include "options.h"
#include "import.h"
#include "jsonl.h"
#include "clock.h"

#define REPLAY_MAX_JOBS 16

struct replay {
	struct fanout_config cfg;
	struct fanout *jobs[REPLAY_MAX_JOBS];
	size_t n_jobs;
	struct fanout *cur; /* the job of the last job line */
	uint64_t events;    /* out-of-band events: not part of the agent protocol */
	uint64_t lines;
	double t0, last_progress;
	bool quiet;
	bool shift_set;
	int64_t shift_us; /* added to every iteration start (see on_iter) */
	char msg[256];
};

#define RELATIVE_BEFORE_US 946684800000000LL /* 2000-01-01: culpritd refuses earlier starts */

static void progress(struct replay *r)
{
	double now;

	if (r->quiet || !r->cur || (++r->lines & 4095) != 0)
		return;
	now = clock_mono_s();
	if (now - r->last_progress < 1.0)
		return;
	r->last_progress = now;
	fanout_print_progress(r->cur, "replay", now - r->t0);
}

static int on_job(void *ctx, const struct jsonl_job *j, const char **why)
{
	struct replay *r = ctx;
	struct fanout_job fj = fanout_job_of(j);

	for (size_t i = 0; i < r->n_jobs; i++)
		if (strcmp(fanout_job_name(r->jobs[i]), j->job ? j->job : "") == 0) {
			r->cur = r->jobs[i]; /* the same job again (one file per node, say) */
			return 0;
		}
	if (r->n_jobs == REPLAY_MAX_JOBS) {
		*why = "more than 16 jobs in one replay";
		return -1;
	}
	if (!(r->cur = fanout_new(&r->cfg, &fj, r->msg, sizeof(r->msg)))) {
		*why = r->msg;
		return -1;
	}
	r->jobs[r->n_jobs++] = r->cur;
	return 0;
}

static int need_job(struct replay *r, const char **why)
{
	if (!r->cur) {
		*why = "record before the job line";
		return -1;
	}
	progress(r);
	return 0;
}

static int on_host(void *ctx, uint32_t rank, const char *host, const char **why)
{
	struct replay *r = ctx;

	if (need_job(r, why) < 0)
		return -1;
	return fanout_set_host(r->cur, rank, host, why);
}

static int on_iter(void *ctx, const struct record_iter *rec, const char **why)
{
	struct replay *r = ctx;

	struct record_iter it = *rec;

	if (need_job(r, why) < 0)
		return -1;
	/* a file on a relative clock (the CSV importer counts from 0) is moved as a whole to
	 * start now: culpritd refuses iteration starts before 2000 */
	if (!r->shift_set) {
		r->shift_set = true;
		r->shift_us = rec->start_us < RELATIVE_BEFORE_US ? (int64_t)time(NULL) * 1000000 - rec->start_us : 0;
	}
	it.start_us += r->shift_us;
	return fanout_iter(r->cur, &it, why);
}

static int on_phase(void *ctx, const struct record_phase *rec, const char *name, const char **why)
{
	struct replay *r = ctx;

	if (need_job(r, why) < 0)
		return -1;
	return fanout_phase(r->cur, rec, name, why);
}

static int on_kernel(void *ctx, const struct record_kernel *rec, const char *name, const int64_t *durs, size_t ndurs,
		     const char **why)
{
	struct replay *r = ctx;

	if (need_job(r, why) < 0)
		return -1;
	return fanout_kernel(r->cur, rec, name, durs, ndurs, why);
}

static int on_event(void *ctx, const char *host, const char *kind, int64_t ts_us, const char *source,
		    const char *detail, const char **why)
{
	struct replay *r = ctx;

	(void)host, (void)kind, (void)ts_us, (void)source, (void)detail, (void)why;
	r->events++;
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: culprit replay --server HOST:PORT [--per-rank] [--token TOKEN] [--tls] [--ca FILE]\n"
		   "                      [--format auto|jsonl|kineto|chrome|csv] [--meta FILE] [--job NAME]\n"
		   "                      [--timeout SECONDS] [--quiet] PATH...\n"
		   "streams interchange JSONL files, PyTorch profiler or Chrome traces, or worker CSVs (plain\n"
		   "or gzipped; see culprit diagnose --format) to culpritd as agents, one per node\n"
		   "(host) or, with --per-rank, one per rank, and waits until every record is acknowledged\n"
		   "(for at most --timeout seconds; no limit by default). --token is the agent token sent in\n"
		   "Hello (default: $CULPRIT_TOKEN). --tls speaks TLS and verifies the server's certificate\n"
		   "against the system's CAs, --ca FILE against the CA certificates in FILE (implies --tls).\n"
		   "--job names the job of a format that has no job name (kineto, chrome, csv; default: the\n"
		   "format's name); --format and --meta are those of culprit diagnose\n");
}

int replay_main(int argc, char **argv)
{
	static const struct option opts[] = {
		AGENT_OPTIONS,
		{"per-rank", no_argument, NULL, 'p'},
		{"quiet", no_argument, NULL, 'q'},
		{"format", required_argument, NULL, 'f'},
		{"meta", required_argument, NULL, 'm'},
		{"job", required_argument, NULL, 'j'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	struct replay r;
	struct jsonl_handler h = {.ctx = &r,
				  .job = on_job,
				  .host = on_host,
				  .iter = on_iter,
				  .phase = on_phase,
				  .kernel = on_kernel,
				  .event = on_event};
	struct import_options iopt = {.warn = import_warn_stderr, .warn_ctx = (void *)"culprit replay"};
	char err[1024];
	int c, rc = 0, bad_input = 0, fmt = IMPORT_AUTO, known;
	struct client_options o;

	memset(&r, 0, sizeof(r));
	options_init(&o, "CULPRIT_TOKEN");
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'p': r.cfg.per_rank = true; break;
		case 'q': r.quiet = true; break;
		case 'f':
			if ((fmt = import_format_parse(optarg)) < 0) {
				fprintf(stderr, "culprit replay: unknown format \"%s\"\n", optarg);
				return 2;
			}
			break;
		case 'm': iopt.meta = optarg; break;
		case 'j': iopt.job = optarg; break;
		case 'h': usage(stdout); return 0;
		default:
			if ((known = options_take(&o, c, optarg, "replay")) <= 0) {
				if (!known)
					usage(stderr);
				return 2;
			}
		}
	}
	options_to_fanout(&o, &r.cfg);
	if (!r.cfg.server || optind >= argc) {
		usage(stderr);
		return 2;
	}
	r.t0 = r.last_progress = clock_mono_s();
	if (!r.quiet)
		r.cfg.progress_prefix = "replay: waiting for acknowledgements";
	/* every format culprit diagnose takes, detected per file (import.h) */
	char **paths = NULL;
	size_t npaths = 0;
	if (import_expand((const char *const *)argv + optind, (size_t)(argc - optind), &iopt, &paths, &npaths, err,
			  sizeof(err)) < 0 ||
	    import_read((enum import_format)fmt, (const char *const *)paths, npaths, &iopt, &h, err, sizeof(err)) < 0) {
		fprintf(stderr, "culprit replay: %s\n", err);
		bad_input = 1;
	}
	free(paths);
	if (r.events && !r.quiet)
		fprintf(stderr,
			"replay: %llu out-of-band event lines not sent (the agent protocol carries no events; "
			"post them to culpritd's REST API)\n",
			(unsigned long long)r.events);
	for (size_t i = 0; i < r.n_jobs; i++) {
		struct fanout_stats st;
		double secs;
		char job[160];

		snprintf(job, sizeof(job), "%s", fanout_job_name(r.jobs[i]));
		if (fanout_close(r.jobs[i],
				 bad_input         ? 10000
				 : o.timeout_s < 0 ? -1
						   : (int)(o.timeout_s * 1000),
				 &st) < 0)
			rc = 1;
		if (st.refusal[0])
			fprintf(stderr, "culprit replay: %s\n", st.refusal);
		secs = clock_mono_s() - r.t0;
		if (!r.quiet || rc)
			fprintf(stderr,
				"replay: job %s: %llu records from %llu agents in %.1f s (%.0f/s); %llu/%llu batches "
				"acknowledged, %llu rejected (%llu records), %llu resent after reconnects\n",
				job, (unsigned long long)st.records, (unsigned long long)st.agents, secs,
				secs > 0 ? (double)st.records / secs : 0.0, (unsigned long long)st.acked_batches,
				(unsigned long long)st.sealed_batches, (unsigned long long)st.rejected_batches,
				(unsigned long long)st.rejected_records, (unsigned long long)st.resent_batches);
	}
	if (bad_input)
		return 2;
	if (rc)
		fprintf(stderr, "culprit replay: not every record was acknowledged by \"%s\"\n", r.cfg.server);
	return rc;
}
