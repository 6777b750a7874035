/* alerts.h: what becomes of each report and incident change: stored (reports, incidents)
 * and, for a change, queued in the durable alert outbox for every configured target, in
 * one transaction (a STORAGE_OP_REPORT through the storage writer); delivered off the event
 * loop with retries by the delivery thread (deliver.h). See docs/operations.md, "Alerts". */
#ifndef CULPRIT_ALERTS_H
#define CULPRIT_ALERTS_H

#include <jansson.h>

#include "incident.h"
#include "report.h"
#include "attrs.h"

struct server;

/* At most this many report ops wait on the loop for writer queue space; beyond, the newest
 * is dropped and counted (culprit_alert_ops_dropped_total). */
#define ALERTS_PENDING_MAX 256

/* Starts the delivery thread when storage is on and a target is configured (after the
 * writer). 0, or -1 on failure. */
MUST_CHECK int alerts_start(struct server *s);
/* Stops the delivery thread after its writer has committed what it could within timeout_ms. */
void alerts_stop(struct server *s, int timeout_ms);

/* A finished diagnosis of job (named job, its incident inc): r, its JSON text, and the
 * incident change it caused (INCIDENT_NONE: none). r is NULL for a change without a new report (resolved). Stores the
 * report (when r), the incident (when there is one) and, for a change, one outbox row per
 * target. Event loop only. */
void alerts_report(struct server *s, const char *job, const struct incident *inc, const struct report *r,
		   const char *json, enum incident_change change);
/* A job came back with an incident the previous culpritd left open: remember its
 * Alertmanager alert (to resolve it) and, from its latest report (parsed JSON, may be NULL),
 * the host and suspects its alerts name. Event loop only. */
void alerts_restore(struct server *s, const char *job, const char *alert_json, json_t *report);
/* The job is forgotten (jobs_retire): drops what alerts keep of it. Event loop only. */
void alerts_forget(struct server *s, const char *job);
/* Reports and incident changes not yet committed (waiting on the loop or in the writer's
 * queue): the drain at SIGTERM waits for 0. */
size_t alerts_uncommitted(struct server *s);
/* Retries ops that found the writer queue full and refreshes the delivery metrics. Call on
 * the writer's wake and the periodic tick. Event loop only. */
void alerts_tick(struct server *s);

#endif
