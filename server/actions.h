/* actions.h: what culpritd does about an open incident's actions (the report's
 * findings[].actions[]; docs/operations.md, "Actions"). Per kind, action_modes says off,
 * dry_run, approve or auto. When an incident fires or is updated, each action of a kind
 * that is not off (but "avoid") gets the next number n of its incident (0, 1, ...; at most
 * ACTIONS_PER_INCIDENT, the same kind and target once) and is, by its mode:
 *   dry_run  handed to the hook runner at once, which tells the hook not to act;
 *   auto     handed to the hook runner at once;
 *   approve  kept until an operator approves it (actions_approve), then handed over.
 * When the incident resolves, with action_resume_on_resolve, every action handed over is
 * handed over again with op "resume"; actions still awaiting approval expire. Everything
 * here runs on the event loop; the hook runs on the hook runner's thread (hooks.h). What
 * awaits approval is kept in memory only: it does not survive a restart. */
#ifndef CULPRIT_ACTIONS_H
#define CULPRIT_ACTIONS_H

#include <jansson.h>
#include <stddef.h>

#include "incident.h"
#include "report.h"
#include "attrs.h"

struct server;

#define ACTIONS_PER_INCIDENT 16

/* Starts the hook runner (always: action_modes may be turned on by SIGHUP). 0, or -1. */
MUST_CHECK int actions_start(struct server *s);
void actions_stop(struct server *s, int timeout_ms);
/* An incident change of job (r: its report, NULL for a change without one). */
void actions_report(struct server *s, const char *job, const struct incident *inc, const struct report *r,
		    enum incident_change change);
/* An operator (who) approves action n of the incident key: the HTTP status to answer (202
 * handed to the hook runner, 404 no such incident or action here, 409 not awaiting approval,
 * 503 the runner's queue is full) with a message in msg. */
int actions_approve(struct server *s, const char *key, int n, const char *who, char *msg, size_t msg_size);
/* The incident's actions as known here ({"incident", "actions": [{"n", "kind", "target",
 * "mode", "state", "by"}]}), or NULL when no open incident here has that key. */
json_t *actions_json(struct server *s, const char *key);
/* Its counters in Prometheus text format. */
void actions_metrics(struct server *s, FILE *out);

#endif
