/* sim_stream.c: `culprit sim --server` (see sim_stream.h). The simulator (client/sim.h)
 * calls a sink per rank and iteration; the sink paces the records to accelerated time and
 * hands them to the job's fanout (client/fanout.h). */
#include "sim_stream.h"

#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fanout.h"
#include "options.h"
#include "sim.h"
#include "sim_capture.h"
#include "clock.h"

struct sim_stream {
	struct fanout_config cfg;
	struct fanout *f;
	struct sim_capture *capture; /* answers Command CAPTURE (client/sim_capture.c) */
	const char *const *names;
	size_t n_names;
	double speed;      /* simulated seconds per wall second; 0: no pacing */
	double step_s;     /* > 0: one iteration per step_s wall seconds, whatever its length */
	uint32_t iter0;    /* first iteration seen (step pacing) */
	int64_t sim_t0_us; /* first iteration start seen */
	double wall_t0;    /* wall clock then */
	double t0, last_progress;
	uint32_t last_iter, iters;
	uint64_t events;
	const char **pnames, **knames; /* scratch: names of one rank-iteration's records */
	size_t names_cap;
	bool quiet;
	char err[640];
};

static void progress(struct sim_stream *s, bool force)
{
	double now = clock_mono_s();
	char prefix[64];

	if (s->quiet || !s->f || (!force && now - s->last_progress < 1.0))
		return;
	s->last_progress = now;
	if (s->iters)
		snprintf(prefix, sizeof(prefix), "sim: iteration %u/%u", s->last_iter + 1, s->iters);
	else
		snprintf(prefix, sizeof(prefix), "sim: iteration %u", s->last_iter + 1);
	fanout_print_progress(s->f, prefix, now - s->t0);
}

static int on_job(void *ctx, const struct jsonl_job *j)
{
	struct sim_stream *s = ctx;
	struct fanout_job fj = fanout_job_of(j);

	if (s->f)
		return -1; /* one job per scenario */
	if (!(s->f = fanout_new(&s->cfg, &fj, s->err, sizeof(s->err))))
		return -1;
	if (!(s->capture = sim_capture_new(j->world))) {
		snprintf(s->err, sizeof(s->err), "out of memory");
		return -1;
	}
	if (!s->quiet)
		fprintf(stderr, "sim: job %s, %u ranks, streaming to %s as %s agents\n", j->job, j->world,
			s->cfg.server, s->cfg.per_rank ? "rank" : "node");
	return 0;
}

/* Sleeps until the simulated time start_us is due on the accelerated clock, or with
 * --step-seconds until iteration iter is due (real-time soaks: one step a second). */
static void pace(struct sim_stream *s, int64_t start_us, uint32_t iter)
{
	double due, now;

	if (s->speed <= 0 && s->step_s <= 0)
		return;
	if (!s->sim_t0_us) {
		s->sim_t0_us = start_us;
		s->iter0 = iter;
		s->wall_t0 = clock_mono_s();
		return;
	}
	if (s->step_s > 0)
		due = s->wall_t0 + (double)(iter - s->iter0) * s->step_s;
	else
		due = s->wall_t0 + (double)(start_us - s->sim_t0_us) / 1e6 / s->speed;
	now = clock_mono_s();
	if (due > now + 0.001) {
		struct timespec ts;
		double d = due - now;

		if (d > 60)
			d = 60; /* a clock jump in the scenario must not stall us for long */
		ts.tv_sec = (time_t)d;
		ts.tv_nsec = (long)((d - (double)ts.tv_sec) * 1e9);
		fanout_kick(s->f); /* what is due now goes out before we sleep */
		while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
			;
	}
}

static int on_rank_iter(void *ctx, const struct sim_rank_iter *ri)
{
	struct sim_stream *s = ctx;
	const char *why = NULL;

	if (!s->f) {
		snprintf(s->err, sizeof(s->err), "records before the job");
		return -1;
	}
	pace(s, ri->iter.start_us, ri->iter.iter);
	if (ri->iter.iter != s->last_iter) {
		s->last_iter = ri->iter.iter;
		progress(s, false);
	}
	if (ri->nphases > s->names_cap || ri->nkernels > s->names_cap) {
		size_t cap = ri->nphases > ri->nkernels ? ri->nphases : ri->nkernels;
		const char **p = realloc(s->pnames, cap * sizeof(*p)), **k;

		if (p)
			s->pnames = p;
		k = p ? realloc(s->knames, cap * sizeof(*k)) : NULL;
		if (!p || !k) {
			why = "out of memory";
			goto fail;
		}
		s->knames = k;
		s->names_cap = cap;
	}
	for (size_t i = 0; i < ri->nphases; i++) {
		if (ri->phases[i].name >= s->n_names) {
			why = "phase name index outside the simulator's names";
			goto fail;
		}
		s->pnames[i] = s->names[ri->phases[i].name];
	}
	for (size_t i = 0; i < ri->nkernels; i++) {
		if (ri->kernels[i].name >= s->n_names) {
			why = "kernel name index outside the simulator's names";
			goto fail;
		}
		s->knames[i] = s->names[ri->kernels[i].name];
	}
	if (fanout_rank_iter(s->f, &ri->iter, ri->phases, s->pnames, ri->nphases, ri->kernels, s->knames,
			     ri->kernel_durs, ri->kernel_ndurs, ri->nkernels, &why) < 0 ||
	    sim_capture_rank_iter(s->capture, s->f, ri, s->names, &why) < 0)
		goto fail;
	return 0;
fail:
	snprintf(s->err, sizeof(s->err), "rank %u iteration %u: %s", ri->iter.rank, ri->iter.iter, why);
	return -1;
}

static int on_event(void *ctx, const char *host, const char *kind, int64_t ts_us, const char *source,
		    const char *detail)
{
	struct sim_stream *s = ctx;

	(void)ts_us, (void)source;
	s->events++;
	if (!s->quiet)
		fprintf(stderr, "sim: out-of-band event %s on %s (%s) not sent: the agent protocol carries no events\n",
			kind, host, detail ? detail : "");
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: culprit sim --scenario NAME [--seed N] [--iters N] [--kernels N] [--recover-at N] [--job NAME] "
		"--server HOST:PORT\n"
		"                   [--per-rank] [--speed X | --step-seconds S] [--token TOKEN] [--timeout SECONDS] "
		"[--linger SECONDS] [--quiet]\n"
		"                   [--tls] [--ca FILE]\n"
		"  --kernels N  kernel names per rank, 3 to %d (default 3)\n"
		"  --job NAME  the job's name (default sim-<scenario>)\n"
		"  --token T   the agent token sent in Hello (default: $CULPRIT_TOKEN)\n"
		"  --tls       TLS to the server, its certificate verified against the system's CAs\n"
		"  --ca FILE   ... against the CA certificates in FILE (implies --tls)\n"
		"  --speed X   simulated seconds per wall second (default 100; 0: as fast as culpritd takes it)\n"
		"  --step-seconds S  instead, one iteration every S wall seconds whatever its simulated length\n"
		"              (soaks: --step-seconds 1 --iters 3600 is an hour of one step a second)\n"
		"  --linger S  keep the agents connected S seconds after the last record, as the agents of a\n"
		"              hung job stay (heartbeats, no iterations)\n",
		SIM_MAX_KERNELS);
}

static int parse_num(const char *s, double lo, double hi, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end || v < lo || v > hi)
		return -1;
	*out = v;
	return 0;
}

/* The command line into s, opt, o and *linger_s: -1 to go on, else the exit status (0 after
 * --help, 2 on a usage error). */
static int parse_args(int argc, char **argv, struct sim_stream *s, struct sim_options *opt, struct client_options *o,
		      double *linger_s)
{
	static const struct option opts[] = {
		{"scenario", required_argument, NULL, 's'},
		{"seed", required_argument, NULL, 'S'},
		{"iters", required_argument, NULL, 'i'},
		{"recover-at", required_argument, NULL, 'R'},
		{"kernels", required_argument, NULL, 'k'},
		{"job", required_argument, NULL, 'J'},
		AGENT_OPTIONS,
		{"per-rank", no_argument, NULL, 'p'},
		{"speed", required_argument, NULL, 'x'},
		{"step-seconds", required_argument, NULL, 'P'},
		{"linger", required_argument, NULL, 'L'},
		{"quiet", no_argument, NULL, 'q'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	double v;
	int c, known;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 's': opt->scenario = optarg; break;
		case 'S': {
			char *end;

			errno = 0;
			opt->seed = strtoull(optarg, &end, 10);
			if (errno || end == optarg || *end || optarg[0] == '-') {
				fprintf(stderr, "culprit sim: invalid --seed \"%s\"\n", optarg);
				return 2;
			}
			break;
		}
		case 'i':
			if (parse_num(optarg, 1, 1000000, &v) < 0) {
				fprintf(stderr, "culprit sim: invalid --iters \"%s\"\n", optarg);
				return 2;
			}
			opt->iters = (uint32_t)v;
			break;
		case 'k':
			if (parse_num(optarg, 3, SIM_MAX_KERNELS, &v) < 0 || v != (uint32_t)v) {
				fprintf(stderr, "culprit sim: invalid --kernels \"%s\"\n", optarg);
				return 2;
			}
			opt->kernels = (uint32_t)v;
			break;
		case 'R': /* the fault ends at this iteration (alert tests: the incident resolves) */
			if (parse_num(optarg, 1, 1000000, &v) < 0) {
				fprintf(stderr, "culprit sim: invalid --recover-at \"%s\"\n", optarg);
				return 2;
			}
			opt->recover_at = (uint32_t)v;
			break;
		case 'J':
			if (!optarg[0] || strlen(optarg) > 127) {
				fprintf(stderr, "culprit sim: invalid --job \"%s\" (1-127 bytes)\n", optarg);
				return 2;
			}
			opt->job = optarg;
			break;
		case 'p': s->cfg.per_rank = true; break;
		case 'x':
			if (parse_num(optarg, 0, 1e9, &s->speed) < 0) {
				fprintf(stderr, "culprit sim: invalid --speed \"%s\"\n", optarg);
				return 2;
			}
			break;
		case 'P':
			if (parse_num(optarg, 0.001, 3600, &s->step_s) < 0) {
				fprintf(stderr, "culprit sim: invalid --step-seconds \"%s\"\n", optarg);
				return 2;
			}
			break;
		case 'L':
			if (parse_num(optarg, 0, 86400, linger_s) < 0) {
				fprintf(stderr, "culprit sim: invalid --linger \"%s\" (seconds)\n", optarg);
				return 2;
			}
			break;
		case 'q': s->quiet = true; break;
		case 'h': usage(stdout); return 0;
		default:
			if ((known = options_take(o, c, optarg, "sim")) <= 0) {
				if (!known)
					usage(stderr);
				return 2;
			}
		}
	}
	options_to_fanout(o, &s->cfg);
	if (!opt->scenario || !s->cfg.server || optind != argc) {
		if (!opt->scenario)
			fprintf(stderr, "culprit sim: --scenario NAME is missing\n");
		else if (optind != argc)
			fprintf(stderr, "culprit sim: unexpected argument \"%s\"\n", argv[optind]);
		usage(stderr);
		return 2;
	}
	return -1;
}

/* After the last record: the agents linger when asked, then every record is acknowledged
 * (or the timeout passes) and the counts are told. The exit status. */
static int finish(struct sim_stream *s, const struct client_options *o, double linger_s)
{
	struct fanout_stats st;
	double secs;
	int rc;

	progress(s, true);
	if (linger_s > 0) {
		struct timespec ts = {(time_t)linger_s, (long)((linger_s - (double)(time_t)linger_s) * 1e9)};

		if (!s->quiet)
			fprintf(stderr, "sim: agents stay connected for %.0f s\n", linger_s);
		while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
			;
	}
	if (!s->quiet)
		fprintf(stderr, "sim: waiting for culpritd to acknowledge everything\n");
	rc = fanout_close(s->f, o->timeout_s < 0 ? -1 : (int)(o->timeout_s * 1000), &st);
	if (st.refusal[0])
		fprintf(stderr, "culprit sim: %s\n", st.refusal);
	secs = clock_mono_s() - s->t0;
	fprintf(stderr,
		"sim: %llu records from %llu agents in %.1f s (%.0f/s); %llu/%llu batches acknowledged, %llu rejected "
		"(%llu records), %llu resent after reconnects\n",
		(unsigned long long)st.records, (unsigned long long)st.agents, secs,
		secs > 0 ? (double)st.records / secs : 0.0, (unsigned long long)st.acked_batches,
		(unsigned long long)st.sealed_batches, (unsigned long long)st.rejected_batches,
		(unsigned long long)st.rejected_records, (unsigned long long)st.resent_batches);
	if (s->capture && sim_capture_sent(s->capture))
		fprintf(stderr, "sim: %llu raw kernels sent for on-demand captures\n",
			(unsigned long long)sim_capture_sent(s->capture));
	sim_capture_free(s->capture);
	if (rc < 0) {
		fprintf(stderr, "culprit sim: not every record was acknowledged by \"%s\"\n", s->cfg.server);
		return 1;
	}
	return 0;
}

int sim_stream_main(int argc, char **argv)
{
	struct sim_stream s;
	struct sim_options opt;
	struct sim_sink sink = {.ctx = &s, .job = on_job, .rank_iter = on_rank_iter, .event = on_event};
	double linger_s = 0;
	struct client_options o;
	int rc;
	char err[256];

	memset(&s, 0, sizeof(s));
	memset(&opt, 0, sizeof(opt));
	options_init(&o, "CULPRIT_TOKEN");
	/* a live job happens now (the server keeps recent days; an old date would be retention's) */
	opt.start_us = (int64_t)time(NULL) * 1000000;
	s.speed = 100;
	if ((rc = parse_args(argc, argv, &s, &opt, &o, &linger_s)) >= 0)
		return rc;
	s.names = sim_names(&s.n_names);
	s.iters = opt.iters;
	s.t0 = s.last_progress = clock_mono_s();
	rc = sim_run(&opt, &sink, err, sizeof(err));
	free(s.pnames);
	free(s.knames);
	if (rc < 0) {
		fprintf(stderr, "culprit sim: %s\n", s.err[0] ? s.err : err);
		if (s.f)
			fanout_abandon(s.f, 10000);
		sim_capture_free(s.capture);
		return s.f ? 1 : 2;
	}
	if (!s.f) {
		fprintf(stderr, "culprit sim: the scenario produced no job\n");
		return 1;
	}
	return finish(&s, &o, linger_s);
}
