/* events.c: the verdicts on a job's events (see events.h). */
#include "events.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store.h"

enum ev_class { EV_OTHER, EV_NET, EV_GPU, EV_HOST };

static int has_word(const char *s, const char *w) { return strstr(s, w) != NULL; }

static enum ev_class classify_event(const char *kind)
{
	char k[64];
	size_t i = 0;
	for (; kind[i] && i + 1 < sizeof(k); i++)
		k[i] = (char)((kind[i] >= 'A' && kind[i] <= 'Z') ? kind[i] + 32 : kind[i]);
	k[i] = 0;
	static const char *const net[] = {"port",   "link", "nic",  "net",  "ib_",    "infiniband",
					  "switch", "eth",  "rdma", "roce", "nvlink", "cable"};
	static const char *const gpu[] = {"xid", "gpu", "ecc", "thermal", "throttl", "sm_", "hbm", "power"};
	static const char *const host[] = {"cpu", "oom", "disk", "memory", "kernel", "host", "io", "filesystem", "nfs"};
	for (size_t j = 0; j < sizeof(net) / sizeof(*net); j++)
		if (has_word(k, net[j]))
			return EV_NET;
	for (size_t j = 0; j < sizeof(gpu) / sizeof(*gpu); j++)
		if (has_word(k, gpu[j]))
			return EV_GPU;
	for (size_t j = 0; j < sizeof(host) / sizeof(*host); j++)
		if (has_word(k, host[j]))
			return EV_HOST;
	return EV_OTHER;
}

/* an event more than this before the window or after it is unrelated to it */
#define DIAG_EVENT_BEFORE_US (60LL * 60 * 1000000)
#define DIAG_EVENT_AFTER_US (10LL * 60 * 1000000)

void events_judge(struct report *rep, const struct store *s, const uint8_t *role, uint32_t world,
		  const struct events_window *win, const uint32_t *culprits, size_t nc, double comm_kernel_ratio)
{
	size_t ne = store_event_count(s);
	rep->events = ne ? calloc(ne, sizeof(*rep->events)) : NULL;
	if (!rep->events)
		return;
	rep->nevents = ne;
	char host[REPORT_NAME_MAX];
	for (size_t i = 0; i < ne; i++) {
		const struct store_event *e = store_event_at(s, i);
		struct report_event *o = &rep->events[i];
		snprintf(o->host, sizeof(o->host), "%s", e->host);
		snprintf(o->kind, sizeof(o->kind), "%s", e->kind);
		o->ts_us = e->ts_us;
		int on_culprit = 0, on_affected = 0;
		for (size_t c = 0; c < nc && !on_culprit; c++)
			on_culprit = strcmp(store_host(s, culprits[c], host, sizeof(host)), e->host) == 0;
		if (!on_culprit && role) {
			for (uint32_t r = 0; r < world && !on_affected; r++)
				if (role[r] >= 2 && strcmp(store_host(s, r, host, sizeof(host)), e->host) == 0)
					on_affected = 1;
		}
		enum ev_class cl = classify_event(e->kind);
		const char *cat = rep->category;
		/* a host of another finding's culprits is judged by that finding */
		for (size_t f = 1; f < rep->nfindings && !on_culprit; f++)
			for (size_t j = 0; j < rep->findings[f].nsuspects && !on_culprit; j++)
				if (strcmp(rep->findings[f].suspects[j].host, e->host) == 0) {
					on_culprit = 1;
					cat = rep->findings[f].category;
				}
		o->verdict = "unrelated";
		if (win->has_span && e->ts_us &&
		    (e->ts_us < win->start_us - DIAG_EVENT_BEFORE_US || e->ts_us > win->end_us + DIAG_EVENT_AFTER_US)) {
			snprintf(o->reason, sizeof(o->reason),
				 "the event is %s the anomalous window by more than %d minutes",
				 e->ts_us < win->start_us ? "before" : "after",
				 (int)((e->ts_us < win->start_us ? DIAG_EVENT_BEFORE_US : DIAG_EVENT_AFTER_US) /
				       60000000));
		} else if (strcmp(cat, "none") == 0) {
			snprintf(o->reason, sizeof(o->reason), "%s",
				 rep->has_window ? "no rank, stage or phase stands out in the window"
						 : "no anomalous window: iteration time is at its baseline");
		} else if (strcmp(cat, "hang") == 0) {
			if (on_culprit) {
				o->verdict = "consistent";
				snprintf(o->reason, sizeof(o->reason), "%s hosts ranks that stopped reporting",
					 e->host);
			} else {
				snprintf(o->reason, sizeof(o->reason), "no hung rank runs on %s", e->host);
			}
		} else if (strcmp(cat, "stage_imbalance") == 0) {
			snprintf(o->reason, sizeof(o->reason),
				 "a whole pipeline stage is heavier on every host, not one host's fault");
			if (cl == EV_NET)
				o->verdict = "contradicted";
		} else if (strcmp(cat, "compute_degradation") == 0 || strcmp(cat, "kernel_stall") == 0) {
			if (on_culprit && cl == EV_NET) {
				o->verdict = "contradicted";
				if (isfinite(comm_kernel_ratio))
					snprintf(o->reason, sizeof(o->reason),
						 "the slowdown on %s is in compute-only phases; its communication "
						 "kernels run at %.2fx their peers' median",
						 e->host, comm_kernel_ratio);
				else
					snprintf(o->reason, sizeof(o->reason),
						 "the slowdown on %s is in compute-only phases, not in communication",
						 e->host);
			} else if (on_culprit) {
				o->verdict = cl == EV_GPU || cl == EV_OTHER ? "consistent" : "unrelated";
				snprintf(o->reason, sizeof(o->reason), "%s hosts the culprit ranks, slow in compute",
					 e->host);
			} else if (on_affected && cl == EV_NET) {
				o->verdict = "contradicted";
				snprintf(o->reason, sizeof(o->reason),
					 "communication on %s only waits for the compute culprits", e->host);
			} else {
				snprintf(o->reason, sizeof(o->reason), "no culprit runs on %s", e->host);
			}
		} else if (strcmp(cat, "communication_degradation") == 0) {
			if (on_culprit) {
				o->verdict = cl == EV_NET || cl == EV_OTHER ? "consistent" : "contradicted";
				snprintf(o->reason, sizeof(o->reason),
					 "%s's ranks are slow in communication with normal compute", e->host);
			} else {
				snprintf(o->reason, sizeof(o->reason), "no culprit runs on %s", e->host);
			}
		} else if (strcmp(cat, "host_delay") == 0) {
			if (on_culprit) {
				o->verdict = cl == EV_HOST || cl == EV_OTHER ? "consistent" : "contradicted";
				snprintf(o->reason, sizeof(o->reason),
					 "%s's ranks arrive late with normal GPU compute and communication", e->host);
			} else {
				snprintf(o->reason, sizeof(o->reason), "no culprit runs on %s", e->host);
			}
		}
	}
}
