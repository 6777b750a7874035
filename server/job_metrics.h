/* job_metrics.h: a series per live job on /metrics (docs/operations.md, "Metrics", "Per job"):
 * its latest step time, its baseline, whether it has an open incident, and the time its open
 * anomalous window lost. At most metrics_max_jobs jobs (those with an open incident first);
 * the rest are left out, each series counted at each scrape
 * (culprit_job_series_omitted_total). A job's series go
 * when the job retires. Event loop only. */
#ifndef CULPRIT_JOB_METRICS_H
#define CULPRIT_JOB_METRICS_H

#include <stdio.h>

struct server;

void job_metrics_render(struct server *s, FILE *out);

#endif
