/* events.h (private to diagnose/): the verdict on each event of a job (a port down, an XID,
 * an OOM: store_add_event) against a diagnosis. An event is classed by its kind (network, GPU,
 * host, other) and judged "consistent", "contradicted" or "unrelated" with the report's
 * category and its culprits' hosts, with the reason in words (docs/method.md, "Out-of-band events"). */
#ifndef CULPRIT_DIAGNOSE_EVENTS_H
#define CULPRIT_DIAGNOSE_EVENTS_H

#include <stddef.h>
#include <stdint.h>

#include "report.h"
#include "store.h"

/* The wall-clock span of the anomalous window, when known: an event far outside it is unrelated. */
struct events_window {
	int has_span;
	int64_t start_us, end_us;
};

/* Fills rep->events from the store's events (rep's category and findings already set). role
 * (per rank of world: 2 and above a late arriver or victim; NULL: none known), the culprits,
 * and comm_kernel_ratio (the culprits' communication kernels against their peers', NAN when
 * unknown) tell which hosts are affected and how. Out of memory leaves rep->events empty. */
void events_judge(struct report *rep, const struct store *s, const uint8_t *role, uint32_t world,
		  const struct events_window *win, const uint32_t *culprits, size_t nc, double comm_kernel_ratio);

#endif
