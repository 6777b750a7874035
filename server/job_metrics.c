/* job_metrics.c: see job_metrics.h. */
#include "job_metrics.h"

#include <inttypes.h>
#include <math.h>

#include "engine.h"
#include "jobs.h"
#include "server.h"

struct pass {
	FILE *out;
	int open_incidents; /* this pass writes the jobs with (1) or without (0) an open incident */
	int64_t room;       /* jobs still to write */
	uint64_t omitted;
	const char *metric; /* the metric this pass writes */
};

/* A label value in Prometheus' text format: backslash, double quote and newline escaped. */
static void label(FILE *out, const char *v)
{
	for (; *v; v++) {
		if (*v == '\\' || *v == '"')
			fputc('\\', out);
		if (*v == '\n')
			fputs("\\n", out);
		else
			fputc(*v, out);
	}
}

/* The job's value of metric, or NaN when it has none (no iteration yet, no baseline). */
static double value(const struct job *job, const char *metric)
{
	const struct l1 *l = engine_l1(job->engine);
	double base = l1_baseline(l);

	if (metric[0] == 's') /* step: the latest iteration L1 saw */
		return l->nall ? l->all_ms[(l->apos + L1_HISTORY_MAX - 1) % L1_HISTORY_MAX] / 1000.0 : NAN;
	if (metric[0] == 'b')
		return isnan(base) ? NAN : (l->open ? l->baseline_ms : base) / 1000.0;
	if (metric[0] == 'i')
		return job->incident.open ? 1 : 0;
	/* lost: the open window's iterations over its frozen baseline */
	return l->open && l->window_n ? fmax(0.0, l->window_sum_ms - l->window_n * l->baseline_ms) / 1000.0 : 0;
}

static void one(const char *key, void *v, void *arg)
{
	const struct job *job = v;
	struct pass *p = arg;
	double x;

	(void)key;
	if ((job->incident.open != 0) != p->open_incidents)
		return;
	if (p->room <= 0) {
		p->omitted++;
		return;
	}
	p->room--;
	if (isnan(x = value(job, p->metric)))
		return;
	fprintf(p->out, "culprit_job_%s{job_name=\"",
		p->metric[0] == 's'   ? "step_seconds"
		: p->metric[0] == 'b' ? "baseline_step_seconds"
		: p->metric[0] == 'i' ? "incident_open"
				      : "time_lost_seconds");
	label(p->out, job->name);
	fprintf(p->out, "\"} %.6g\n", x);
}

void job_metrics_render(struct server *s, FILE *out)
{
	static const char *const metrics[][3] = {
		{"step", "culprit_job_step_seconds", "The job's latest completed iteration (step), in seconds."},
		{"baseline", "culprit_job_baseline_step_seconds",
		 "The job's baseline step time (frozen while an anomalous window is open), in seconds."},
		{"incident", "culprit_job_incident_open", "1 while the job has an open incident, else 0."},
		{"lost", "culprit_job_time_lost_seconds",
		 "Seconds the job's open anomalous window lost against its baseline (0 when none is open)."},
	};
	uint64_t omitted = 0;

	for (size_t m = 0; m < sizeof(metrics) / sizeof(metrics[0]); m++) {
		struct pass p = {.out = out, .room = s->cfg.metrics_max_jobs, .metric = metrics[m][0]};

		fprintf(out, "# HELP %s %s\n# TYPE %s gauge\n", metrics[m][1], metrics[m][2], metrics[m][1]);
		p.open_incidents = 1;
		strmap_each(&s->jobs, one, &p);
		p.open_incidents = 0;
		strmap_each(&s->jobs, one, &p);
		omitted += p.omitted;
	}
	s->m.job_series_omitted += omitted;
	fprintf(out,
		"# HELP culprit_job_series_omitted_total Per-job series left out of scrapes, summed over scrapes "
		"(more live jobs than metrics_max_jobs).\n"
		"# TYPE culprit_job_series_omitted_total counter\nculprit_job_series_omitted_total %" PRIu64 "\n",
		s->m.job_series_omitted);
}
