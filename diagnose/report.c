/* report.c: report model, its JSON (docs/report.md) and text. */
#include "report.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "l3.h"
#include "record.h"

void report_init(struct report *r)
{
	memset(r, 0, sizeof(*r));
	r->category = "none";
	r->stage = -1;
	r->baseline_ms = r->window_ms = NAN;
	for (size_t i = 0; i < REPORT_MAX_FINDINGS; i++)
		r->findings[i].stage = r->findings[i].ambiguous_stage = -1;
}

void report_free(struct report *r)
{
	for (size_t i = 0; i < r->nfindings; i++)
		free(r->findings[i].suspects);
	free(r->suspects);
	free(r->events);
	free(r->windows);
	report_init(r);
}

void report_window_of(const struct report *r, struct report_window *w)
{
	memset(w, 0, sizeof(*w));
	w->first_iter = r->first_iter;
	w->last_iter = r->last_iter;
	w->baseline_ms = r->baseline_ms;
	w->window_ms = r->window_ms;
	w->lost_ms = r->lost_ms;
	w->onset = r->onset;
	w->category = r->category;
	snprintf(w->summary, sizeof(w->summary), "%s", r->summary);
	for (size_t i = 0; i < r->nsuspects && w->nranks < REPORT_WINDOW_RANKS; i++)
		if (r->suspects[i].role == REPORT_CULPRIT)
			w->ranks[w->nranks++] = r->suspects[i].rank;
	w->culprits_total = r->culprits_total;
}

static json_t *num(double v, double scale)
{
	if (!isfinite(v))
		return json_null();
	return json_real(round(v * scale) / scale);
}

static json_t *integer_ms(double v)
{
	if (!isfinite(v))
		return json_null();
	return json_integer((json_int_t)llround(v));
}

static json_t *suspect_json(const struct report_suspect *s)
{
	json_t *ev = json_array(), *ks = json_array();
	for (size_t e = 0; e < s->nev; e++) {
		const struct report_evidence *x = &s->ev[e];
		json_t *je =
			json_pack("{s:s,s:s,s:o,s:o,s:o,s:o,s:o}", "phase", x->phase, "kind", record_kind_name(x->kind),
				  "ratio", num(x->ratio, 100), "z", num(x->z, 10), "group_cv", num(x->group_cv, 100),
				  "value_ms", num(x->value_ms, 10), "peer_ms", num(x->peer_ms, 10));
		if (je)
			json_object_set_new(je, "own_ratio", num(x->own_ratio, 100));
		if (je && x->fallback)
			json_object_set_new(je, "fallback", json_string("own_history"));
		if (je)
			json_object_set_new(je, "basis",
					    json_string(x->fallback                   ? "own_history"
							: x->by_stage                 ? "stage"
							: x->kind == RECORD_KIND_COMM ? "collective"
										      : "role_group"));
		json_array_append_new(ev, je);
	}
	for (size_t k = 0; k < s->nk; k++) {
		const struct report_kernel *x = &s->k[k];
		json_array_append_new(ks, json_pack("{s:s,s:s,s:o,s:o,s:o}", "name", x->name, "kind",
						    record_kind_name(x->kind), "ratio", num(x->ratio, 100), "ks",
						    num(x->ks, 100), "max_ratio", num(x->max_ratio, 10)));
	}
	json_t *js =
		json_pack("{s:i,s:s,s:{s:i,s:i,s:i,s:i,s:i},s:s,s:o,s:s,s:o,s:o}", "rank", (json_int_t)s->rank, "host",
			  s->host, "coords", "tp", (json_int_t)s->coords.tp, "cp", (json_int_t)s->coords.cp, "ep",
			  (json_int_t)s->coords.ep, "dp", (json_int_t)s->coords.dp, "pp", (json_int_t)s->coords.pp,
			  "role", s->role == REPORT_CULPRIT ? "culprit" : "late_arriver", "score", num(s->score, 100),
			  "level", s->level ? s->level : "L2", "evidence", ev, "kernels", ks);
	if (js && s->role == REPORT_LATE_ARRIVER)
		json_object_set_new(js, "consistent_with_culprits", json_boolean(s->consistent));
	if (js && !s->host_known) /* "host" is the rank order's node-N, not a machine's name */
		json_object_set_new(js, "host_reported", json_false());
	return js;
}

static json_t *suspects_json(const struct report_suspect *su, size_t n)
{
	json_t *a = json_array();
	for (size_t i = 0; a && i < n; i++)
		json_array_append_new(a, suspect_json(&su[i]));
	return a;
}

/* growable string with a sticky failure flag */
struct sbuf {
	char *p;
	size_t len, cap;
	int failed;
};

static void sb_printf(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(struct sbuf *b, const char *fmt, ...)
{
	if (b->failed)
		return;
	for (;;) {
		va_list ap;
		va_start(ap, fmt);
		int n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, ap);
		va_end(ap);
		if (n < 0) {
			b->failed = 1;
			return;
		}
		if (b->p && b->len + (size_t)n < b->cap) {
			b->len += (size_t)n;
			return;
		}
		size_t cap = (b->cap ? b->cap * 2 : 1024) + (size_t)n;
		char *p = realloc(b->p, cap);
		if (!p) {
			b->failed = 1;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
}

static json_t *actions_json(const struct report_finding *f)
{
	json_t *a = json_array();
	for (size_t i = 0; a && i < f->nactions; i++) {
		const struct report_action *x = &f->actions[i];
		json_t *ranks = json_array();
		for (size_t k = 0; ranks && k < x->nranks; k++)
			json_array_append_new(ranks, json_integer(x->ranks[k]));
		json_t *ja = json_pack("{s:s,s:s,s:o,s:s,s:o}", "kind", x->kind, "target", x->target, "ranks",
				       ranks ? ranks : json_array(), "text", x->text, "expected_gain_ms_per_iter",
				       integer_ms(x->gain_ms));
		if (ja && x->stage >= 0)
			json_object_set_new(ja, "stage", json_integer(x->stage));
		if (ja && x->command[0])
			json_object_set_new(ja, "command", json_string(x->command));
		json_array_append_new(a, ja);
	}
	return a;
}

/* the actions of a finding, one line each */
static void actions_text(struct sbuf *b, const struct report_finding *f)
{
	for (size_t i = 0; i < f->nactions; i++) {
		const struct report_action *a = &f->actions[i];
		if (strcmp(a->kind, "avoid") == 0)
			sb_printf(b, "  not this: %s\n", a->text);
		else
			sb_printf(b, "  action: %s\n", a->text);
		if (a->command[0])
			sb_printf(b, "    %s\n", a->command);
	}
}

static json_t *window_json(const struct report_window *w)
{
	json_t *ranks = json_array();
	for (size_t i = 0; i < w->nranks; i++)
		json_array_append_new(ranks, json_integer(w->ranks[i]));
	json_t *o = json_pack("{s:i,s:i,s:o,s:o,s:s,s:s,s:o,s:i,s:o}", "first_iter", (json_int_t)w->first_iter,
			      "last_iter", (json_int_t)w->last_iter, "baseline_iter_ms", integer_ms(w->baseline_ms),
			      "window_iter_ms", integer_ms(w->window_ms), "category", w->category, "summary",
			      w->summary, "culprits", ranks, "culprits_total", (json_int_t)w->culprits_total,
			      "lost_ms_per_iter", integer_ms(isfinite(w->lost_ms) ? w->lost_ms : 0));
	if (o && w->onset)
		json_object_set_new(o, "onset", json_string(w->onset));
	return o;
}

json_t *report_to_json(const struct report *r)
{
	json_t *o = json_object();
	if (!o)
		return NULL;
	json_object_set_new(o, "job", json_string(r->job));
	if (r->has_window)
		json_object_set_new(o, "window",
				    json_pack("{s:i,s:i,s:o,s:o}", "first_iter", (json_int_t)r->first_iter, "last_iter",
					      (json_int_t)r->last_iter, "baseline_iter_ms", integer_ms(r->baseline_ms),
					      "window_iter_ms", integer_ms(r->window_ms)));
	else
		json_object_set_new(o, "window", json_null());
	if (r->has_window && r->onset) {
		json_object_set_new(json_object_get(o, "window"), "onset", json_string(r->onset));
		json_object_set_new(json_object_get(o, "window"), "detected_iter",
				    json_integer((json_int_t)r->detected_iter));
	}
	json_t *verdict = json_pack("{s:s,s:s}", "category", r->category, "summary", r->summary);
	if (verdict && r->stage >= 0)
		json_object_set_new(verdict, "stage", json_integer(r->stage));
	json_object_set_new(o, "verdict", verdict);

	json_t *sus = suspects_json(r->suspects, r->nsuspects);
	json_object_set_new(o, "suspects", sus);

	json_t *vp = json_array();
	for (size_t i = 0; i < r->nvictim_phases; i++)
		json_array_append_new(vp, json_string(r->victim_phases[i]));
	json_object_set_new(o, "victims", json_pack("{s:i,s:o}", "ranks", (json_int_t)r->victims, "phases", vp));
	json_object_set_new(o, "late_arrivers",
			    json_pack("{s:i,s:b}", "ranks", (json_int_t)r->late_total, "consistent_with_culprits",
				      r->late_consistent));
	json_object_set_new(o, "culprits_total", json_integer((json_int_t)r->culprits_total));

	json_t *evs = json_array();
	for (size_t i = 0; i < r->nevents; i++) {
		const struct report_event *e = &r->events[i];
		json_array_append_new(evs, json_pack("{s:s,s:s,s:s,s:s}", "host", e->host, "kind", e->kind, "verdict",
						     e->verdict, "reason", e->reason));
	}
	json_object_set_new(o, "events", evs);
	json_object_set_new(o, "lost_ms_per_iter", integer_ms(isfinite(r->lost_ms) ? r->lost_ms : 0));

	json_t *fs = json_array();
	for (size_t i = 0; i < r->nfindings; i++) {
		const struct report_finding *f = &r->findings[i];
		json_t *jf = json_pack("{s:s,s:s,s:o,s:i,s:o}", "category", f->category, "summary", f->summary,
				       "suspects", suspects_json(f->suspects, f->nsuspects), "culprits_total",
				       (json_int_t)f->culprits_total, "lost_ms_per_iter",
				       integer_ms(isfinite(f->lost_ms) ? f->lost_ms : 0));
		if (jf && f->stage >= 0)
			json_object_set_new(jf, "stage", json_integer(f->stage));
		if (jf && f->ambiguous_stage >= 0)
			json_object_set_new(jf, "ambiguous",
					    json_pack("{s:s,s:i,s:[s,s]}", "host", f->ambiguous_host, "stage",
						      (json_int_t)f->ambiguous_stage, "readings", "compute_degradation",
						      "stage_imbalance"));
		if (jf)
			json_object_set_new(jf, "actions", actions_json(f));
		json_array_append_new(fs, jf);
	}
	json_object_set_new(o, "findings", fs);
	json_t *as = json_array();
	for (size_t i = 0; i < r->nadvisories; i++) {
		const struct report_advisory *a = &r->advisories[i];
		json_t *ja = json_pack("{s:s,s:s,s:o,s:o}", "kind", a->kind, "summary", a->summary, "ratio",
				       num(a->ratio, 100), "cost_ms_per_iter", integer_ms(a->cost_ms));
		if (ja && a->stage >= 0)
			json_object_set_new(ja, "stage", json_integer(a->stage));
		if (ja && a->rank >= 0) {
			json_object_set_new(ja, "rank", json_integer(a->rank));
			json_object_set_new(ja, "host", json_string(a->host));
		}
		json_array_append_new(as, ja);
	}
	json_object_set_new(o, "advisories", as);
	if (r->nwindows) {
		/* every window of the input, the report's own last */
		json_t *ws = json_array();
		struct report_window own;
		for (size_t i = 0; i < r->nwindows; i++)
			json_array_append_new(ws, window_json(&r->windows[i]));
		report_window_of(r, &own);
		json_array_append_new(ws, window_json(&own));
		json_object_set_new(o, "windows", ws);
	}
	return o;
}

/* What an [L3] tag stands on: the slow kernel, the stalled one, or none slower (the
 * phase is slow, its kernels' medians are not) */
static void level_text(struct sbuf *b, const struct report_suspect *s)
{
	const char *level = s->level ? s->level : "L2";

	if (strcmp(level, "L3") != 0 || !s->nk) {
		sb_printf(b, "[%s]", level);
		return;
	}
	for (size_t k = 0; k < s->nk; k++) {
		const struct report_kernel *x = &s->k[k];
		if (l3_degraded(x->ratio, x->ks)) {
			sb_printf(b, "[L3: %s kernel %s %.2fx the peers' median]", record_kind_name(x->kind), x->name,
				  x->ratio);
			return;
		}
	}
	for (size_t k = 0; k < s->nk; k++) {
		const struct report_kernel *x = &s->k[k];
		if (l3_stall(x->ratio, x->ks, x->max_ratio)) {
			sb_printf(b, "[L3: %s kernel %s stalls, its slowest %.1fx the peers' p99]",
				  record_kind_name(x->kind), x->name, x->max_ratio);
			return;
		}
	}
	sb_printf(b, "[L3: kernels compared, none slower at the median]");
}

static void culprit_text(struct sbuf *b, const struct report_suspect *s)
{
	sb_printf(b, "  rank %u on %s (tp %u cp %u ep %u dp %u pp %u) score %.2f ", s->rank, s->host, s->coords.tp,
		  s->coords.cp, s->coords.ep, s->coords.dp, s->coords.pp, s->score);
	level_text(b, s);
	sb_printf(b, "\n");
	for (size_t e = 0; e < s->nev; e++) {
		const struct report_evidence *x = &s->ev[e];
		/* a group with no finite peer time (all zero, say) has no peers to quote */
		sb_printf(b, "      phase %-20s %-7s %8.1f ms vs ", x->phase, record_kind_name(x->kind),
			  isfinite(x->value_ms) ? x->value_ms : 0);
		if (isfinite(x->peer_ms))
			sb_printf(b, "%8.1f ms peers", x->peer_ms);
		else
			sb_printf(b, "unknown peers");
		if (isfinite(x->ratio))
			sb_printf(b, ", ratio %.2f", x->ratio);
		if (isfinite(x->z))
			sb_printf(b, ", z %.1f", x->z);
		if (isfinite(x->group_cv)) /* none when the peers are the rank's own past */
			sb_printf(b, ", group cv %.2f", x->group_cv);
		sb_printf(b, "%s\n", x->fallback ? " (own history)" : "");
	}
	for (size_t k = 0; k < s->nk; k++) {
		const struct report_kernel *x = &s->k[k];
		sb_printf(b, "      kernel %-19s %-7s median ratio %.2f, ks %.2f, max/peer p99 %.1f\n", x->name,
			  record_kind_name(x->kind), x->ratio, x->ks, x->max_ratio);
	}
}

/* how many late arrivers the text names (the report's first, the most delayed) */
#define TEXT_LATE_NAMED 8

/* The late arrivers on one line: their count and the first few. They only wait (on the
 * culprits, when the report says so): no score that would rank them above the culprits. */
static void late_text(struct sbuf *b, const struct report *r)
{
	size_t named = 0;

	if (!r->late_total)
		return;
	sb_printf(b, "%zu rank%s arrive%s late%s", r->late_total, r->late_total == 1 ? "" : "s",
		  r->late_total == 1 ? "s" : "",
		  r->late_consistent  ? " (waiting on the culprits)"
		  : r->culprits_total ? " (not all explained by the culprits)"
				      : "");
	for (size_t i = 0; i < r->nsuspects && named < TEXT_LATE_NAMED; i++) {
		const struct report_suspect *s = &r->suspects[i];
		if (s->role != REPORT_LATE_ARRIVER)
			continue;
		sb_printf(b, "%s%u", named ? ", " : ": ", s->rank);
		named++;
	}
	sb_printf(b, "%s\n", named < r->late_total ? ", ..." : "");
}

char *report_to_text(const struct report *r)
{
	struct sbuf b = {0};
	size_t culprits = 0;

	sb_printf(&b, "job %s: %s\n", r->job[0] ? r->job : "(unnamed)", r->category);
	sb_printf(&b, "  %s\n", r->summary);
	if (r->nfindings)
		actions_text(&b, &r->findings[0]);
	if (r->has_window && isfinite(r->baseline_ms))
		sb_printf(&b,
			  "window: iterations %u-%u, %.0f ms/iter against a baseline of %.0f ms; "
			  "about %.0f ms lost per iteration\n",
			  r->first_iter, r->last_iter, r->window_ms, r->baseline_ms,
			  isfinite(r->lost_ms) ? r->lost_ms : 0);
	else if (r->has_window)
		sb_printf(&b, "window: iterations %u-%u, %.0f ms/iter, no baseline before it\n", r->first_iter,
			  r->last_iter, r->window_ms);
	else
		sb_printf(&b, "window: none (no persistent regression of the iteration time)\n");
	if (r->stage >= 0)
		sb_printf(&b, "stage: pp %d\n", r->stage);
	if (r->culprits_total)
		sb_printf(&b, "culprits (%zu):\n", r->culprits_total);
	for (size_t i = 0; i < r->nsuspects; i++) {
		if (r->suspects[i].role != REPORT_CULPRIT)
			continue;
		culprit_text(&b, &r->suspects[i]);
		culprits++;
	}
	if (culprits < r->culprits_total)
		sb_printf(&b, "  (%zu more not listed)\n", r->culprits_total - culprits);
	late_text(&b, r);
	sb_printf(&b, "victims: %zu ranks waiting", r->victims);
	for (size_t i = 0; i < r->nvictim_phases; i++)
		sb_printf(&b, "%s%s", i ? ", " : " in ", r->victim_phases[i]);
	sb_printf(&b, "\n");
	for (size_t i = 1; i < r->nfindings; i++) {
		const struct report_finding *f = &r->findings[i];
		sb_printf(&b, "also: %s\n  %s\n", f->category, f->summary);
		actions_text(&b, f);
		for (size_t j = 0; j < f->nsuspects; j++)
			sb_printf(&b, "  rank %u on %s score %.2f\n", f->suspects[j].rank, f->suspects[j].host,
				  f->suspects[j].score);
	}
	for (size_t i = 0; i < r->nadvisories; i++)
		sb_printf(&b, "advisory (%s): %s\n", r->advisories[i].kind, r->advisories[i].summary);
	for (size_t i = 0; i < r->nevents; i++) {
		const struct report_event *e = &r->events[i];
		sb_printf(&b, "event %s on %s: %s (%s)\n", e->kind, e->host, e->verdict, e->reason);
	}
	if (b.failed) {
		free(b.p);
		return NULL;
	}
	return b.p;
}
