/* incidents.h: the incidents a previous culpritd left open, read back at start-up so that
 * the same incident continues (same key: no second "firing") and resolves through the
 * alert outbox when its fault ends. */
#ifndef CULPRIT_STORAGE_INCIDENTS_H
#define CULPRIT_STORAGE_INCIDENTS_H

#include <stddef.h>
#include <stdint.h>
#include "attrs.h"

/* One open incident as stored (strings valid during the callback only). */
struct storage_open_incident {
	const char *job;
	const char *key;
	const char *category;
	const char *summary;
	uint32_t updates;
	int64_t opened_us, changed_us;
	const char *alert;       /* the Alertmanager alert of its state (JSON), or NULL */
	const char *report_json; /* its latest report of its category (JSON), or NULL */
};

/* Synchronous (start-up, before the event loop runs): calls cb for every incident in state
 * 'open', oldest first. Returns how many, or -1 with a message in err. */
MUST_CHECK int storage_open_incidents_load(const char *dsn, void (*cb)(const struct storage_open_incident *inc, void *arg),
				void *arg, char *err, size_t err_size);

/* The same statement on a connection of the caller's, for one job (NULL: every job), and
 * one of its rows (strings valid while r is). */
struct pg_conn;
struct pg_result;
struct pg_result *storage_open_incidents_query(struct pg_conn *c, const char *job);
void storage_open_incident_row(const struct pg_result *r, int i, struct storage_open_incident *inc);

#endif
