/* alerts.h: what becomes of each report and incident change: stored (reports, incidents)
 * and, for a change, queued in the durable alert outbox for every configured target, in
 * one transaction; delivered off the event loop with retries. */
#ifndef CULPRIT_ALERTS_H
#define CULPRIT_ALERTS_H

#include "incident.h"
#include "report.h"

struct server;
struct job;

/* A finished diagnosis of job: r, its JSON text, and the incident change it caused
 * (INCIDENT_NONE: none). r is NULL for a change without a new report (resolved). */
void alerts_report(struct server *s, struct job *job, const struct report *r, const char *json,
		   enum incident_change change);

#endif
