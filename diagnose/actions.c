/* actions.c: see actions.h. */
#include "actions.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "l2.h"
#include "record.h"
#include "cmp.h"

/* hosts of one finding, in the order of its suspects */
#define ACT_HOSTS 3

struct host_ranks {
	const char *host;
	const char *where; /* host, or "the unknown host" when no host record named it */
	const struct report_suspect *top; /* its highest-scored culprit */
	uint32_t ranks[REPORT_ACTION_RANKS];
	size_t n, total;
	double excess_ms; /* what its slowest rank adds to a step */
};

static struct report_action *add(struct report_finding *f, const char *kind, const char *target)
{
	if (f->nactions == REPORT_MAX_ACTIONS)
		return NULL;
	struct report_action *a = &f->actions[f->nactions++];
	memset(a, 0, sizeof(*a));
	a->kind = kind;
	snprintf(a->target, sizeof(a->target), "%s", target);
	a->stage = -1;
	a->gain_ms = NAN;
	return a;
}

static void text(struct report_action *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void text(struct report_action *a, const char *fmt, ...)
{
	size_t len = strlen(a->text);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(a->text + len, sizeof(a->text) - len, fmt, ap);
	va_end(ap);
}

/* "10352-10359, 10400" of sorted ranks, "and N more" past what the list holds */
static void ranks_words(const uint32_t *r, size_t n, size_t total, char *buf, size_t len)
{
	size_t used = 0;
	buf[0] = 0;
	for (size_t i = 0; i < n && used + 24 < len;) {
		size_t j = i;
		while (j + 1 < n && r[j + 1] == r[j] + 1)
			j++;
		int k = j > i ? snprintf(buf + used, len - used, "%s%u-%u", used ? ", " : "", r[i], r[j])
			      : snprintf(buf + used, len - used, "%s%u", used ? ", " : "", r[i]);
		used += k > 0 ? (size_t)k : 0;
		i = j + 1;
	}
	if (total > n && used + 24 < len)
		snprintf(buf + used, len - used, " and %zu more", total - n);
}

/* a "--ranks" list for culprit capture: the same runs without spaces */
static void ranks_arg(const uint32_t *r, size_t n, char *buf, size_t len)
{
	ranks_words(r, n, n, buf, len);
	size_t o = 0;
	for (size_t i = 0; buf[i]; i++)
		if (buf[i] != ' ')
			buf[o++] = buf[i];
	buf[o] = 0;
}

/* s as one shell word: as it is when it needs no quoting, else in single quotes */
static void shell_word(const char *s, char *buf, size_t len)
{
	if (s[0] && strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:/@%+=-") == strlen(s)) {
		snprintf(buf, len, "%s", s);
		return;
	}
	size_t o = 0;
	buf[o++] = '\'';
	for (; *s && o + 6 < len; s++) {
		if (*s == '\'') {
			memcpy(buf + o, "'\\''", 4);
			o += 4;
		} else {
			buf[o++] = *s;
		}
	}
	buf[o++] = '\'';
	buf[o] = 0;
}

static void set_ranks(struct report_action *a, const uint32_t *r, size_t n)
{
	a->nranks = n < REPORT_ACTION_RANKS ? n : REPORT_ACTION_RANKS;
	memcpy(a->ranks, r, a->nranks * sizeof(*r));
}

/* What the ranks run on, in the words of an action: the job's device, else GPUs when it
 * reported kernels (a GPU profile's), else either */
struct hardware {
	const char *unit, *units, *check;
};

static struct hardware hardware(const struct store *s)
{
	const char *d = store_device(s);
	if (strcmp(d, "cpu") == 0)
		return (struct hardware){"CPU", "CPUs", "check its CPUs and memory: throttling, other processes, NUMA placement"};
	if (strcmp(d, "gpu") == 0 || store_kernel_count(s))
		return (struct hardware){"GPU", "GPUs", "check or replace its GPUs"};
	return (struct hardware){"device", "hardware", "check or replace its hardware (GPUs or CPUs)"};
}

/* an action on one host's culprits; their ranks in words into rw. A host no record named
 * is "unknown host" as a target: the default name is the rank order's, not a machine's. */
static struct report_action *host_action(struct report_finding *f, const char *kind, const char *target,
					 const struct host_ranks *h, char *rw, size_t len)
{
	struct report_action *a = add(f, kind, target == h->host && h->where != h->host ? "unknown host" : target);
	if (a) {
		set_ranks(a, h->ranks, h->n);
		ranks_words(h->ranks, h->n, h->total, rw, len);
	}
	return a;
}

/* the culprits of f grouped by host (the first ACT_HOSTS hosts); returns how many */
static size_t by_host(const struct report_finding *f, struct host_ranks *h)
{
	size_t nh = 0;
	for (size_t i = 0; i < f->nsuspects; i++) {
		const struct report_suspect *su = &f->suspects[i];
		if (su->role != REPORT_CULPRIT)
			continue;
		size_t j = 0;
		while (j < nh && strcmp(h[j].host, su->host) != 0)
			j++;
		if (j == nh) {
			if (nh == ACT_HOSTS)
				continue;
			memset(&h[nh], 0, sizeof(h[nh]));
			h[nh].host = su->host;
			h[nh].where = su->host_known ? su->host : "the unknown host";
			h[nh].top = su;
			nh++;
		}
		if (h[j].n < REPORT_ACTION_RANKS)
			h[j].ranks[h[j].n++] = su->rank;
		h[j].total++;
		double ex = 0;
		for (size_t e = 0; e < su->nev; e++)
			if (isfinite(su->ev[e].peer_ms) && su->ev[e].value_ms > su->ev[e].peer_ms)
				ex += su->ev[e].value_ms - su->ev[e].peer_ms;
		if (ex > h[j].excess_ms)
			h[j].excess_ms = ex;
	}
	for (size_t j = 0; j < nh; j++)
		qsort(h[j].ranks, h[j].n, sizeof(uint32_t), cmp_u32);
	return nh;
}

/* what the finding costs a step, at most what the window lost against its baseline */
static double finding_lost(const struct report *r, const struct report_finding *f)
{
	double lost = isfinite(f->lost_ms) ? f->lost_ms : 0, gap = r->window_ms - r->baseline_ms;
	return isfinite(gap) && gap > 0 && lost > gap ? gap : lost;
}

/* What acting on host j alone gains: the step waits for the slowest host left. */
static double host_gain(const struct report *r, const struct report_finding *f, const struct host_ranks *h, size_t nh,
			size_t j)
{
	double lost = finding_lost(r, f), rest = 0;
	if (nh == 1 && f->culprits_total == h[0].total)
		return lost;
	for (size_t k = 0; k < nh; k++)
		if (k != j && h[k].excess_ms > rest)
			rest = h[k].excess_ms;
	if (f->culprits_total > f->nsuspects)
		return NAN; /* culprits not listed may be as slow: no figure for one host alone */
	return lost > rest ? lost - rest : 0;
}

static const char *basis(const struct report_evidence *e)
{
	return e->fallback                   ? "their own baseline (against the job's change)"
	       : e->by_stage                 ? "the pipeline stage"
	       : e->kind == RECORD_KIND_COMM ? "the other members of the collective"
					     : "the role group";
}

static void gain_words(struct report_action *a, const struct report *r, const struct report_finding *f, size_t nh)
{
	if (isfinite(a->gain_ms))
		text(a, "; expected gain about %.0f ms per iteration", a->gain_ms);
	else if (nh > 1)
		text(a, "; expected gain with the other hosts of the finding about %.0f ms per iteration",
		     finding_lost(r, f));
	if (isfinite(a->gain_ms) && nh > 1)
		text(a, " (%.0f with the other hosts)", finding_lost(r, f));
}

/* the phase slot of a phase name, or STORE_NO_SLOT */
static uint32_t slot_of(const struct store *s, const char *phase)
{
	int id = store_find_name(s, phase);
	for (uint32_t p = 0; id >= 0 && p < store_phase_count(s); p++)
		if (store_phase_name(s, p) == (uint32_t)id)
			return p;
	return STORE_NO_SLOT;
}

/* The members of rank's collective of phase slot p: how many run on other hosts than
 * host, the first of them in peers (sorted). */
static size_t collective_peers(const struct store *s, uint32_t rank, uint32_t p, const char *host, uint32_t *peers,
			       size_t cap, size_t *same_host)
{
	const struct topo *t = store_topo(s);
	enum topo_dim dim = l2_collective_dim(store_phase_group(s, p));
	uint32_t g = topo_collective_group(t, rank, dim);
	char h[REPORT_NAME_MAX];
	size_t n = 0;
	*same_host = 0;
	for (uint32_t q = 0; q < t->world; q++) {
		if (q == rank || topo_collective_group(t, q, dim) != g)
			continue;
		if (strcmp(store_host(s, q, h, sizeof(h)), host) == 0) {
			(*same_host)++;
			continue;
		}
		if (n < cap)
			peers[n] = q;
		n++;
	}
	return n;
}

/* events the diagnosis judged on the hosts of f */
static int on_hosts(const struct report_event *e, const struct host_ranks *h, size_t nh)
{
	for (size_t j = 0; j < nh; j++)
		if (strcmp(e->host, h[j].host) == 0)
			return 1;
	return 0;
}

static void consistent_events(const struct report *r, struct report_action *a, const char *host)
{
	for (size_t i = 0; a && i < r->nevents; i++)
		if (strcmp(r->events[i].verdict, "consistent") == 0 && strcmp(r->events[i].host, host) == 0)
			text(a, "; the %s event on %s agrees", r->events[i].kind, host);
}

static void compute_actions(const struct report *r, struct report_finding *f, const struct store *s)
{
	struct host_ranks h[ACT_HOSTS];
	size_t nh = by_host(f, h);
	char rw[160];
	struct hardware hw = hardware(s);
	for (size_t j = 0; j < nh; j++) {
		struct report_action *a = host_action(f, "drain_node", h[j].host, &h[j], rw, sizeof(rw));
		if (!a)
			return;
		if (h[j].where != h[j].host)
			text(a, "find the host of rank%s %s (the job reported no host names), then drain it (cordon it, "
				"move its work elsewhere, then %s):",
			     h[j].total == 1 ? "" : "s", rw, hw.check);
		else
			text(a, "drain %s (cordon it, move its work elsewhere, then %s): rank%s %s", h[j].host,
			     hw.check, h[j].total == 1 ? "" : "s", rw);
		const struct report_suspect *su = h[j].top;
		if (su->nev)
			text(a, " compute%s %s %.2fx %s", h[j].total == 1 ? "s" : "", su->ev[0].phase, su->ev[0].ratio,
			     basis(&su->ev[0]));
		for (size_t k = 0; k < su->nk; k++)
			if (su->k[k].kind == RECORD_KIND_COMPUTE && su->k[k].ratio > 1.3) {
				text(a, " (kernel %s %.2fx its peers' median)", su->k[k].name, su->k[k].ratio);
				break;
			}
		a->gain_ms = host_gain(r, f, h, nh, j);
		gain_words(a, r, f, nh);
		consistent_events(r, a, h[j].host);
	}
}

static void stall_actions(const struct report *r, struct report_finding *f, const char *server,
			  const struct store *s)
{
	struct hardware hw = hardware(s);
	struct host_ranks h[ACT_HOSTS];
	size_t nh = by_host(f, h);
	char rw[160], arg[160];
	for (size_t j = 0; j < nh; j++) {
		const struct report_suspect *su = h[j].top;
		const struct report_kernel *k = su->nk ? &su->k[0] : NULL;
		struct report_action *a =
			host_action(f, "inspect_kernel", k ? k->name : h[j].host, &h[j], rw, sizeof(rw));
		if (!a)
			return;
		ranks_arg(h[j].ranks, h[j].n, arg, sizeof(arg));
		if (k)
			text(a,
			     "look at kernel %s on rank%s %s (%s): isolated calls %.0fx the peers' p99, its median "
			     "%.2fx theirs; capture their kernels and open them in ui.perfetto.dev",
			     k->name, h[j].total == 1 ? "" : "s", rw, h[j].where, k->max_ratio, k->ratio);
		else
			text(a, "look at the kernels of rank%s %s (%s): capture them and open them in ui.perfetto.dev",
			     h[j].total == 1 ? "" : "s", rw, h[j].where);
		char job[2 * sizeof(r->job)], srv[160];
		shell_word(r->job, job, sizeof(job));
		shell_word(server, srv, sizeof(srv));
		snprintf(a->command, sizeof(a->command),
			 "culprit capture --server %s --job %s --ranks %s --iterations 3", srv, job, arg);
		a->gain_ms = host_gain(r, f, h, nh, j);
		gain_words(a, r, f, nh);
	}
	/* a stall is no slow GPU: its kernels' medians are normal */
	for (size_t j = 0; j < nh; j++) {
		const struct report_suspect *su = h[j].top;
		if (!su->nk)
			continue;
		struct report_action *a = add(f, "avoid", h[j].where == h[j].host ? h[j].host : "unknown host");
		if (!a)
			return;
		text(a,
		     "do not drain %s for a slow %s: kernel %s's median runs at %.2fx its peers'; only isolated "
		     "calls stall",
		     h[j].where, hw.unit, su->k[0].name, su->k[0].ratio);
		set_ranks(a, h[j].ranks, h[j].n);
	}
}

static void comm_actions(const struct report *r, struct report_finding *f, const struct store *s)
{
	struct host_ranks h[ACT_HOSTS];
	size_t nh = by_host(f, h);
	char rw[160], pw[160];
	struct hardware hw = hardware(s);
	for (size_t j = 0; j < nh; j++) {
		const struct report_suspect *su = h[j].top;
		const struct report_evidence *e = su->nev ? &su->ev[0] : NULL;
		uint32_t p = e ? slot_of(s, e->phase) : STORE_NO_SLOT;
		uint32_t peers[REPORT_ACTION_RANKS];
		size_t same = 0, np = p == STORE_NO_SLOT ? 0
							 : collective_peers(s, su->rank, p, h[j].host, peers,
									    REPORT_ACTION_RANKS, &same);
		struct report_action *a = host_action(f, "check_network", h[j].host, &h[j], rw, sizeof(rw));
		if (!a)
			return;
		if (p != STORE_NO_SLOT && np == 0)
			text(a, "check the %s of %s: its collective %s stays within the node",
			     strcmp(hw.unit, "GPU") == 0 ? "GPU interconnect (NVLink, NVSwitch)" : "interconnect inside the node",
			     h[j].where, e->phase);
		else
			text(a, "check the NIC and the switch port of %s (link errors, flaps, speed)", h[j].where);
		text(a, ": rank%s %s", h[j].total == 1 ? "" : "s", rw);
		if (e)
			text(a, " take%s %s %.2fx %s", h[j].total == 1 ? "s" : "", e->phase, e->ratio, basis(e));
		if (np) {
			ranks_words(peers, np < REPORT_ACTION_RANKS ? np : REPORT_ACTION_RANKS, np, pw, sizeof(pw));
			text(a, ", slowing %zu peer%s of that collective on other hosts (ranks %s)", np,
			     np == 1 ? "" : "s", pw);
		}
		a->gain_ms = host_gain(r, f, h, nh, j);
		gain_words(a, r, f, nh);
		consistent_events(r, a, h[j].host);
	}
	for (size_t j = 0; j < nh; j++) {
		const struct report_suspect *su = h[j].top;
		struct report_action *a = add(f, "avoid", h[j].where == h[j].host ? h[j].host : "unknown host");
		if (!a)
			return;
		set_ranks(a, h[j].ranks, h[j].n);
		const struct report_kernel *ck = NULL;
		for (size_t k = 0; k < su->nk && !ck; k++)
			if (su->k[k].kind == RECORD_KIND_COMPUTE)
				ck = &su->k[k];
		if (ck)
			text(a, "do not drain %s for its %s: its compute kernel %s runs at %.2fx its peers' median",
			     h[j].where, hw.units, ck->name, ck->ratio);
		else
			text(a,
			     "do not drain %s for its %s: none of its compute phases stands out against its "
			     "role group",
			     h[j].where, hw.units);
	}
}

static void stage_actions(const struct report *r, struct report_finding *f, const struct store *s)
{
	char target[16];
	snprintf(target, sizeof(target), "pp %d", f->stage);
	struct report_action *a = add(f, "rebalance_stage", target);
	if (!a)
		return;
	a->stage = f->stage;
	double S = store_topo(s)->pp, x = f->ratio, lost = finding_lost(r, f);
	text(a, "rebalance pipeline stage pp %d (move layers off it)", f->stage);
	if (x > 1 && S > 1)
		text(a,
		     ": its layers take %.0f%% of a pipeline's compute, %.2fx the median of the other stages "
		     "(a balanced split gives each of the %.0f stages %.0f%%)",
		     100 * x / (x + S - 1), x, S, 100 / S);
	/* balanced: each stage computes the mean; the step waits for the heaviest */
	a->gain_ms = S > 1 ? lost * (S - 1) / S : lost;
	text(a, "; a balanced split would save about %.0f ms per iteration", a->gain_ms);
	a = add(f, "avoid", target);
	if (a) {
		a->stage = f->stage;
		text(a,
		     "do not drain or replace the hosts of pp %d: every host of the stage is heavy alike; the "
		     "split of the layers, not a host, is at fault",
		     f->stage);
	}
}

static void host_actions(const struct report *r, struct report_finding *f, const struct store *s)
{
	struct host_ranks h[ACT_HOSTS];
	size_t nh = by_host(f, h);
	char rw[160];
	struct hardware hw = hardware(s);
	int late = 0;
	for (size_t j = 0; j < nh; j++) {
		const struct report_suspect *su = h[j].top;
		const struct report_evidence *e = su->nev ? &su->ev[0] : NULL;
		late |= e && e->kind == RECORD_KIND_COMM;
		struct report_action *a = host_action(f, "inspect_host", h[j].host, &h[j], rw, sizeof(rw));
		if (!a)
			return;
		text(a,
		     "inspect the data loader and the host of rank%s %s on %s (CPU load, I/O, loader workers, "
		     "memory)",
		     h[j].total == 1 ? "" : "s", rw, h[j].where);
		if (e && e->kind == RECORD_KIND_COMM)
			text(a,
			     ": it arrives last at %s (its wait there is %.2fx %s) while none of its own work "
			     "is longer",
			     e->phase, e->ratio, basis(e));
		else if (e)
			text(a, ": %s%s takes %.1f ms against %.1f ms %s",
			     strcmp(e->phase, STORE_LEAD_PHASE) == 0 ? "the gap before its first phase" : e->phase,
			     " (before forward)", e->value_ms, e->peer_ms,
			     e->fallback   ? "expected from its own baseline"
			     : e->by_stage ? "on its pipeline stage"
					   : "on its role group");
		a->gain_ms = host_gain(r, f, h, nh, j);
		gain_words(a, r, f, nh);
		consistent_events(r, a, h[j].host);
	}
	if (nh) {
		struct report_action *a = add(f, "avoid", h[0].where == h[0].host ? h[0].host : "unknown host");
		if (a) {
			set_ranks(a, h[0].ranks, h[0].n);
			text(a, "do not look at the %s or the network of %s: %s", hw.units, h[0].where,
			     late ? "no compute or communication phase of its ranks is longer than their peers'"
				  : "its compute and communication phases are no longer than their peers'");
		}
	}
}

/* late arrivals on many nodes: a cause they share */
static void spread_actions(const struct report *r, struct report_finding *f)
{
	uint32_t ranks[REPORT_ACTION_RANKS];
	size_t n = 0;
	for (size_t i = 0; i < r->nsuspects && n < REPORT_ACTION_RANKS; i++)
		if (r->suspects[i].role == REPORT_LATE_ARRIVER)
			ranks[n++] = r->suspects[i].rank;
	qsort(ranks, n, sizeof(*ranks), cmp_u32);
	struct report_action *a = add(f, "inspect_host", n ? r->suspects[0].host : "");
	if (!a)
		return;
	set_ranks(a, ranks, n);
	char rw[160];
	ranks_words(ranks, n, r->late_total, rw, sizeof(rw));
	text(a,
	     "inspect what the hosts of the %zu late ranks share (shared storage, the data pipeline, a "
	     "host setting rolled out to many nodes): ranks %s arrive late at collectives with no phase of "
	     "their own longer",
	     r->late_total, rw);
	a->gain_ms = finding_lost(r, f);
	text(a, "; expected gain about %.0f ms per iteration", a->gain_ms);
	a = add(f, "avoid", "");
	if (a)
		text(a, "do not drain single nodes: the late ranks are spread over more nodes than one node's "
			"or one link's fault covers");
}

/* Where a stopped rank was: the first phase (in the job's phase order) of the iteration
 * after its last that it did not report, when it reported some of that iteration; else
 * the same from the ranks that stopped after it (they wait for it in that collective). */
static uint32_t stopped_in(const struct store *s, const uint32_t *first, size_t nfirst)
{
	uint32_t P = store_phase_count(s), W = store_topo(s)->world;
	uint32_t votes[64] = {0};
	int lead = store_find_name(s, STORE_LEAD_PHASE);
	for (int pass = 0; pass < 2; pass++) {
		for (uint32_t i = 0; i < (pass ? W : nfirst); i++) {
			uint32_t r = pass ? i : first[i], it;
			int64_t end;
			if (!store_rank_last(s, r, &it, &end) || !store_has_iter(s, r, it + 1))
				continue;
			for (uint32_t p = 0; p < P && p < 64; p++) {
				if (lead >= 0 && store_phase_name(s, p) == (uint32_t)lead)
					continue;
				if (store_phase_dur(s, r, it + 1, p) == STORE_ABSENT) {
					votes[p]++;
					break;
				}
			}
		}
		uint32_t best = 0, bp = STORE_NO_SLOT;
		for (uint32_t p = 0; p < P && p < 64; p++)
			if (votes[p] > best) {
				best = votes[p];
				bp = p;
			}
		if (bp != STORE_NO_SLOT)
			return bp;
	}
	return STORE_NO_SLOT;
}

static void hang_actions(const struct report *r, struct report_finding *f, const struct store *s)
{
	uint32_t ranks[REPORT_ACTION_RANKS], all[64];
	size_t n = 0, nall = 0;
	for (size_t i = 0; i < f->nsuspects; i++) {
		if (n < REPORT_ACTION_RANKS)
			ranks[n++] = f->suspects[i].rank;
		if (nall < 64)
			all[nall++] = f->suspects[i].rank;
	}
	qsort(ranks, n, sizeof(*ranks), cmp_u32);
	uint32_t last = 0;
	int64_t end;
	if (n)
		store_rank_last(s, ranks[0], &last, &end);
	const char *where = !n ? "" : f->suspects[0].host_known ? f->suspects[0].host : "the unknown host";
	struct report_action *a = add(f, "investigate_hang", !n || f->suspects[0].host_known ? where : "unknown host");
	if (!a)
		return;
	set_ranks(a, ranks, n);
	char rw[160];
	ranks_words(ranks, n, f->culprits_total, rw, sizeof(rw));
	if (!n) {
		text(a, "every rank stopped at once: look at what they share (the storage a checkpoint writes "
			"to, the network fabric, the scheduler)");
		return;
	}
	text(a,
	     "dump the stacks of rank%s %s on %s (py-spy dump, or gdb on the process), which stopped "
	     "first, after iteration %u",
	     f->culprits_total == 1 ? "" : "s", rw, where, last);
	uint32_t p = stopped_in(s, all, nall);
	if (p != STORE_NO_SLOT)
		text(a, ", in %s (%s%s%s)", store_name(s, store_phase_name(s, p)),
		     record_kind_name(store_phase_kind(s, p)), store_phase_group(s, p) ? ", collective over " : "",
		     store_phase_group(s, p) ? record_group_name(store_phase_group(s, p)) : "");
	else
		text(a, "; the records do not say in which phase (none of iteration %u came in)", last + 1);
	text(a, "; the job makes no progress until they resume or are restarted");
	if (r->victims || f->culprits_total < store_topo(s)->world) {
		a = add(f, "avoid", f->suspects[0].host_known ? f->suspects[0].host : "unknown host");
		if (a)
			text(a, "do not chase the ranks that stopped later or still run: they wait for rank%s %s",
			     f->culprits_total == 1 ? "" : "s", rw);
	}
}

/* Work spread unevenly (one expert's tokens, sequence lengths): spread it; no host is at
 * fault, so nothing is drained */
static void load_actions(const struct report *r, struct report_finding *f, const struct store *s)
{
	struct host_ranks h[ACT_HOSTS];
	size_t nh = by_host(f, h);
	const struct report_suspect *su = f->nsuspects ? &f->suspects[0] : NULL;
	int expert = su && store_topo(s)->ep > 1;
	for (size_t i = 1; i < f->nsuspects && expert; i++)
		expert = f->suspects[i].coords.ep == su->coords.ep;
	char target[32];
	if (expert)
		snprintf(target, sizeof(target), "expert %u", su->coords.ep);
	else
		snprintf(target, sizeof(target), "data");
	struct report_action *a = add(f, "rebalance_load", target);
	if (!a)
		return;
	if (expert) {
		text(a,
		     "rebalance the tokens of expert index %u: in every expert-parallel group it gets more than the "
		     "others",
		     su->coords.ep);
		if (su->nev)
			text(a, " (its ranks compute %s %.2fx %s)", su->ev[0].phase, su->ev[0].ratio, basis(&su->ev[0]));
		text(a, "; raise the capacity factor or the router's load-balancing loss, and check the router for a "
			"collapse onto one expert");
	} else {
		text(a, "balance the work of each step across the data-parallel replicas (pack or bucket the "
			"sequences by length): a different replica is the slowest in every step, so no rank or host "
			"is");
	}
	a->gain_ms = finding_lost(r, f);
	text(a, "; expected gain about %.0f ms per iteration", a->gain_ms);
	if (!expert)
		return;
	a = nh ? add(f, "avoid", h[0].where) : NULL;
	if (a) {
		set_ranks(a, h[0].ranks, h[0].n);
		text(a,
		     "do not drain the hosts of these ranks: they are one expert index of every group, on %zu%s "
		     "hosts, which no fault of a node or a link lines up with",
		     nh, nh == ACT_HOSTS ? " or more" : "");
	}
}

/* A node that is exactly one stage: first, the move that tells a slow node from a heavy
 * stage; the actions of the finding's own reading follow */
static void ambiguous_action(struct report_finding *f)
{
	if (f->ambiguous_stage < 0)
		return;
	struct report_action first;
	memset(&first, 0, sizeof(first));
	first.kind = "move_stage";
	snprintf(first.target, sizeof(first.target), "pp %d", f->ambiguous_stage);
	first.stage = f->ambiguous_stage;
	first.gain_ms = NAN;
	text(&first,
	     "tell a slow node from a heavy stage: %s runs exactly pipeline stage pp %d, so the timings read "
	     "alike; move the stage onto other nodes (or swap %s for a spare): if the slowdown moves with the "
	     "stage, rebalance its layers; if it stays on %s, drain it",
	     f->ambiguous_host, f->ambiguous_stage, f->ambiguous_host, f->ambiguous_host);
	if (f->nactions == REPORT_MAX_ACTIONS)
		f->nactions--;
	memmove(f->actions + 1, f->actions, f->nactions * sizeof(*f->actions));
	f->actions[0] = first;
	f->nactions++;
}

/* The events the diagnosis contradicts: what not to repair, with its reason. Each goes to
 * the finding whose culprits run on its host, else to the verdict's. */
static void contradicted_events(struct report *r)
{
	for (size_t i = 0; i < r->nevents; i++) {
		const struct report_event *e = &r->events[i];
		if (strcmp(e->verdict, "contradicted") != 0)
			continue;
		struct report_finding *f = &r->findings[0];
		for (size_t k = 0; k < r->nfindings; k++) {
			struct host_ranks h[ACT_HOSTS];
			if (on_hosts(e, h, by_host(&r->findings[k], h))) {
				f = &r->findings[k];
				break;
			}
		}
		struct report_action *a = add(f, "avoid", e->host);
		if (a)
			text(a,
			     "do not repair what the %s on %s points at (%s): it does not explain the slowdown: "
			     "%s",
			     e->kind, e->host,
			     strcmp(f->category, "communication_degradation") == 0 ? "its processors or host"
										   : "its network, NIC or port",
			     e->reason);
	}
}

/* a finding for a verdict diagnose gave without one (a hang, spread late arrivals) */
static int verdict_finding(struct report *r)
{
	struct report_finding *f = &r->findings[0];
	memset(f, 0, sizeof(*f));
	f->ambiguous_stage = -1;
	f->category = r->category;
	f->stage = r->stage;
	snprintf(f->summary, sizeof(f->summary), "%s", r->summary);
	f->suspects = calloc(r->nsuspects ? r->nsuspects : 1, sizeof(*f->suspects));
	if (!f->suspects)
		return -1;
	for (size_t i = 0; i < r->nsuspects; i++)
		if (r->suspects[i].role == REPORT_CULPRIT)
			f->suspects[f->nsuspects++] = r->suspects[i];
	f->culprits_total = r->culprits_total;
	f->lost_ms = r->lost_ms;
	r->nfindings = 1;
	return 0;
}

int actions_build(struct report *r, const struct store *s, const char *server)
{
	if (!server || !server[0])
		server = ACTIONS_DEFAULT_SERVER;
	if (!r->nfindings && strcmp(r->category, "none") != 0 && verdict_finding(r) < 0)
		return -1;
	for (size_t i = 0; i < r->nfindings; i++) {
		struct report_finding *f = &r->findings[i];
		f->nactions = 0;
		if (strcmp(f->category, "compute_degradation") == 0)
			compute_actions(r, f, s);
		else if (strcmp(f->category, "kernel_stall") == 0)
			stall_actions(r, f, server, s);
		else if (strcmp(f->category, "communication_degradation") == 0)
			comm_actions(r, f, s);
		else if (strcmp(f->category, "stage_imbalance") == 0)
			stage_actions(r, f, s);
		else if (strcmp(f->category, "host_delay") == 0 && f->nsuspects)
			host_actions(r, f, s);
		else if (strcmp(f->category, "host_delay") == 0)
			spread_actions(r, f);
		else if (strcmp(f->category, "hang") == 0)
			hang_actions(r, f, s);
		else if (strcmp(f->category, "load_imbalance") == 0)
			load_actions(r, f, s);
		ambiguous_action(f);
	}
	if (r->nfindings)
		contradicted_events(r);
	return 0;
}
