/* incident.h: one job's incident, opened on an anomalous window (or a hang), updated as
 * its diagnosis changes, resolved on recovery. Pure bookkeeping: the caller stores and
 * announces each change.
 *
 * An incident's key is stable ("<job>/<first iteration>/<category>"): alerts use it as
 * their dedup key, so that a state change is delivered once whatever happens to culpritd. */
#ifndef CULPRIT_INCIDENT_H
#define CULPRIT_INCIDENT_H

#include <stdint.h>

#include "report.h"

enum incident_change {
	INCIDENT_NONE = 0,
	INCIDENT_FIRING,   /* opened */
	INCIDENT_UPDATED,  /* category or culprits changed */
	INCIDENT_RESOLVED, /* recovered */
};

struct incident {
	int open;
	char key[200];
	char category[32];
	char summary[512];
	char resolution[16];   /* when resolved: "recovered" or "ended" (its job ended) */
	char fingerprint[256]; /* category and culprit ranks: what makes an update worth saying */
	uint32_t first_iter;   /* iteration the window (or hang) began */
	uint32_t updates;      /* state changes so far (firing counts as 0) */
	int64_t opened_us, changed_us;
};

/* A new report for the job. window_open: L1 still sees the window. Returns the change. */
enum incident_change incident_report(struct incident *inc, const char *job, const struct report *r, int window_open,
				     int64_t now_us);
/* The window closed (or hung ranks came back): resolves an open incident ("recovered"). */
enum incident_change incident_recover(struct incident *inc, int64_t now_us);
/* The job ended (its agents left): resolves an open incident ("ended"). */
enum incident_change incident_end(struct incident *inc, int64_t now_us);
/* An incident a previous culpritd left open, as stored: key, category, summary, updates and
 * times, and the culprit ranks of its latest report (its fingerprint, so that the same
 * diagnosis is not announced as an update). The first iteration is read from the key. */
void incident_restore(struct incident *inc, const char *key, const char *category, const char *summary,
		      uint32_t updates, int64_t opened_us, int64_t changed_us, const uint32_t *culprits, size_t n);
const char *incident_change_name(enum incident_change c);

#endif
