/* actions.h: what on-call should do about each finding of a report, and what not to do.
 *
 * Per category, from the evidence the report already holds: drain the node of compute
 * culprits (its ranks listed); check the NIC or switch port of a host slow in a collective
 * (the collective and the peers it slows); rebalance a heavy pipeline stage (its share of a
 * pipeline's compute and what a balanced split saves); inspect the data loader or host of a
 * rank that is late before its first phase; look at a stalling kernel on a rank (with a
 * `culprit capture` command line); for a hang, the ranks that stopped first and the phase
 * they were in. Each action carries its expected gain per iteration, the finding's what-if
 * lost time. Then what not to do: the events the diagnosis contradicts and the repair the
 * evidence rules out ("do not look at the network of node-1294: ...").
 *
 * Pure, like the rest of diagnose/: reads the report and the store, writes the findings'
 * actions[]. A report with a verdict but no finding (a hang, late arrivals on many nodes)
 * gets a finding for its verdict first, so that every fault has its actions. */
#ifndef CULPRIT_ACTIONS_H
#define CULPRIT_ACTIONS_H

#include "report.h"
#include "store.h"

/* culpritd's address when the caller does not say (the default http_listen) */
#define ACTIONS_DEFAULT_SERVER "127.0.0.1:7434"

/* Fill every finding's actions[]. server: culpritd's REST address for the command lines
 * (NULL: ACTIONS_DEFAULT_SERVER). Returns 0, -1 when out of memory (the report is then
 * as it was, without actions). */
int actions_build(struct report *r, const struct store *s, const char *server);

#endif
