/* actions.c: see actions.h. */
#include "actions.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "hooks.h"
#include "log.h"
#include "server.h"
#include "strmap.h"

enum act_state { ACT_AWAITING, ACT_HANDED, ACT_REFUSED };

static const char *const state_names[] = {"awaiting_approval", "handed_to_hook", "refused_queue_full"};

struct act {
	int n;
	char kind[32];
	char target[REPORT_NAME_MAX];
	enum action_mode mode;
	enum act_state state;
	char who[128];
	char *input; /* the apply JSON (op, dry_run and requested_by set when handed over) */
};

struct incident_acts {
	char job[256];
	int n;
	struct act a[ACTIONS_PER_INCIDENT];
};

struct actions {
	struct hooks *hooks;
	struct strmap open; /* incident key -> struct incident_acts */
	uint64_t decided[ACTION_AUTO + 1];
	uint64_t approvals, expired, over_limit;
};

int actions_start(struct server *s)
{
	struct actions *a = calloc(1, sizeof(*a));

	if (!a || !(a->hooks = hooks_start(s->writer ? s->db_dsn : NULL))) {
		free(a);
		return -1;
	}
	s->actions = a;
	return 0;
}

static void incident_free(struct incident_acts *ia)
{
	for (int i = 0; i < ia->n; i++)
		free(ia->a[i].input);
	free(ia);
}

static void free_entry(const char *key, void *value, void *arg)
{
	(void)key;
	(void)arg;
	incident_free(value);
}

void actions_stop(struct server *s, int timeout_ms)
{
	struct actions *a = s->actions;

	if (!a)
		return;
	hooks_stop(a->hooks, timeout_ms);
	strmap_each(&a->open, free_entry, NULL);
	strmap_free(&a->open);
	free(a);
	s->actions = NULL;
}

/* The JSON a hook reads: the action, its incident, and what to do (docs/operations.md). */
static char *input_json(const char *job, const struct incident *inc, const struct report_action *ra, int n)
{
	json_t *ranks = json_array(), *root;
	char reason[400], *text;

	for (size_t i = 0; i < ra->nranks; i++)
		json_array_append_new(ranks, json_integer(ra->ranks[i]));
	snprintf(reason, sizeof(reason), "culprit incident %s: %s", inc->key, inc->category);
	root = json_pack("{s:s, s:b, s:s, s:s, s:s, s:s, s:s, s:{s:i, s:s, s:s, s:o, s:s}}", "op", "apply", "dry_run",
			 0, "incident", inc->key, "job", job, "category", inc->category, "summary", inc->summary,
			 "reason", reason, "action", "n", n, "kind", ra->kind, "target", ra->target, "ranks", ranks,
			 "text", ra->text);
	if (!root)
		return NULL;
	text = json_dumps(root, JSON_COMPACT);
	json_decref(root);
	return text;
}

/* Hands act (of incident key) to the hook runner: op, by who; record_only: the decision to
 * record instead of a run. 0, or -1 when refused (the queue is full or memory ran out). */
static int hand_over(struct actions *a, const struct server *s, const char *key, const char *job, const struct act *act,
		     const char *op, const char *who, const char *record_only)
{
	struct hook_run *r = calloc(1, sizeof(*r));
	json_t *in = act->input ? json_loads(act->input, 0, NULL) : NULL;

	if (in) {
		json_object_set_new(in, "op", json_string(op));
		json_object_set_new(in, "dry_run", json_boolean(act->mode == ACTION_DRY_RUN));
		json_object_set_new(in, "mode", json_string(config_action_mode_name(act->mode)));
		json_object_set_new(in, "requested_by", json_string(who));
	}
	if (r) {
		r->incident = strdup(key);
		r->job = strdup(job);
		r->kind = strdup(act->kind);
		r->target = strdup(act->target);
		r->who = strdup(who);
		r->input = in ? json_dumps(in, JSON_COMPACT) : NULL;
		r->program = strdup(s->cfg.action_hook);
		r->op = op;
		r->mode = config_action_mode_name(act->mode);
		r->record_only = record_only;
		r->n = act->n;
		r->timeout_s = (int)s->cfg.action_timeout_s;
		r->retries = (int)s->cfg.action_retries;
	}
	json_decref(in);
	if (!r || !r->incident || !r->job || !r->kind || !r->target || !r->who || !r->input || !r->program ||
	    hooks_submit(a->hooks, r) < 0) {
		log_error("action %d of incident %s (%s on %s): not handed to the hook runner: its queue is full (%d) "
			  "or memory ran out",
			  act->n, LOG_ESC(key), act->kind, LOG_ESC(act->target), HOOKS_QUEUE_MAX);
		hook_run_free(r);
		return -1;
	}
	return 0;
}

/* New actions of the report r for the incident: numbered, decided by their mode. */
static void take_actions(struct server *s, struct actions *a, const char *job, const struct incident *inc,
			 const struct report *r)
{
	struct incident_acts *ia = strmap_get(&a->open, inc->key);

	for (size_t f = 0; f < r->nfindings; f++)
		for (size_t k = 0; k < r->findings[f].nactions; k++) {
			const struct report_action *ra = &r->findings[f].actions[k];
			int mode = config_action_mode(s->cfg.action_modes, ra->kind), seen = 0;
			struct act *act;

			if (mode <= ACTION_OFF || strcmp(ra->kind, "avoid") == 0)
				continue;
			for (int i = 0; ia && i < ia->n; i++)
				seen |= !strcmp(ia->a[i].kind, ra->kind) && !strcmp(ia->a[i].target, ra->target);
			if (seen)
				continue;
			if (!ia) {
				if (!(ia = calloc(1, sizeof(*ia))) || strmap_put(&a->open, inc->key, ia) < 0) {
					free(ia);
					return;
				}
				snprintf(ia->job, sizeof(ia->job), "%s", job);
			}
			if (ia->n == ACTIONS_PER_INCIDENT) {
				a->over_limit++;
				continue;
			}
			act = &ia->a[ia->n];
			*act = (struct act){.n = ia->n, .mode = (enum action_mode)mode};
			snprintf(act->kind, sizeof(act->kind), "%s", ra->kind);
			snprintf(act->target, sizeof(act->target), "%s", ra->target);
			if (!(act->input = input_json(job, inc, ra, act->n)))
				continue;
			ia->n++;
			a->decided[mode]++;
			if (mode == ACTION_APPROVE) {
				act->state = ACT_AWAITING;
				hand_over(a, s, inc->key, job, act, "apply", "culpritd", "awaiting_approval");
				log_info("action %d of incident %s: %s on %s awaits an operator's approval (POST "
					 "/api/v1/incidents/{key}/actions/%d/approve)",
					 act->n, LOG_ESC(inc->key), act->kind, LOG_ESC(act->target), act->n);
				continue;
			}
			snprintf(act->who, sizeof(act->who), "culpritd");
			act->state = hand_over(a, s, inc->key, job, act, "apply", "culpritd", NULL) == 0 ? ACT_HANDED
													 : ACT_REFUSED;
		}
}

/* The incident resolved: resume what was handed over (action_resume_on_resolve), expire what
 * still awaits approval, and forget the incident. */
static void resolved(struct server *s, struct actions *a, const char *key)
{
	struct incident_acts *ia = strmap_del(&a->open, key);

	if (!ia)
		return;
	for (int i = 0; i < ia->n; i++) {
		struct act *act = &ia->a[i];

		if (act->state == ACT_AWAITING) {
			a->expired++;
			hand_over(a, s, key, ia->job, act, "apply", "culpritd", "expired");
		} else if (act->state == ACT_HANDED && s->cfg.action_resume_on_resolve) {
			hand_over(a, s, key, ia->job, act, "resume", act->who, NULL);
		}
	}
	incident_free(ia);
}

void actions_report(struct server *s, const char *job, const struct incident *inc, const struct report *r,
		    enum incident_change change)
{
	struct actions *a = s->actions;

	if (!a || change == INCIDENT_NONE)
		return;
	if (change == INCIDENT_RESOLVED)
		resolved(s, a, inc->key);
	else if (r)
		take_actions(s, a, job, inc, r);
}

int actions_approve(struct server *s, const char *key, int n, const char *who, char *msg, size_t msg_size)
{
	struct actions *a = s->actions;
	struct incident_acts *ia = a ? strmap_get(&a->open, key) : NULL;
	struct act *act;

	if (!ia || n < 0 || n >= ia->n) {
		snprintf(msg, msg_size, ia ? "incident %s has no action %d" : "no open incident %s here (with actions)",
			 key, n);
		return 404;
	}
	act = &ia->a[n];
	if (act->state != ACT_AWAITING) {
		snprintf(msg, msg_size, "action %d of incident %s is %s (mode %s), not awaiting approval", n, key,
			 state_names[act->state], config_action_mode_name(act->mode));
		return 409;
	}
	hand_over(a, s, key, ia->job, act, "apply", who, "approved");
	if (hand_over(a, s, key, ia->job, act, "apply", who, NULL) < 0) {
		snprintf(msg, msg_size, "the hook runner's queue is full (%d): try again", HOOKS_QUEUE_MAX);
		return 503;
	}
	act->state = ACT_HANDED;
	snprintf(act->who, sizeof(act->who), "%s", who);
	a->approvals++;
	log_info("action %d of incident %s: %s on %s approved by %s", n, LOG_ESC(key), act->kind, LOG_ESC(act->target),
		 LOG_ESC(who));
	snprintf(msg, msg_size, "%s on %s handed to the hook", act->kind, act->target);
	return 202;
}

json_t *actions_json(struct server *s, const char *key)
{
	struct incident_acts *ia = s->actions ? strmap_get(&s->actions->open, key) : NULL;
	json_t *arr;

	if (!ia)
		return NULL;
	arr = json_array();
	for (int i = 0; i < ia->n; i++) {
		const struct act *act = &ia->a[i];

		json_array_append_new(arr,
				      json_pack("{s:i, s:s, s:s, s:s, s:s, s:s?}", "n", act->n, "kind", act->kind,
						"target", act->target, "mode", config_action_mode_name(act->mode),
						"state", state_names[act->state], "by", act->who[0] ? act->who : NULL));
	}
	return json_pack("{s:s, s:s, s:o}", "incident", key, "job", ia->job, "actions", arr);
}

void actions_metrics(struct server *s, FILE *out)
{
	struct actions *a = s->actions;
	uint64_t att[HOOK_RESULTS], refused = 0, waiting = 0;

	if (!a)
		return;
	hooks_counts(a->hooks, att, &refused, &waiting);
	fprintf(out, "# HELP culprit_actions_total Incident actions taken on, by mode (action_modes).\n"
		     "# TYPE culprit_actions_total counter\n");
	for (int m = ACTION_DRY_RUN; m <= ACTION_AUTO; m++)
		fprintf(out, "culprit_actions_total{mode=\"%s\"} %" PRIu64 "\n", config_action_mode_name(m),
			a->decided[m]);
	fprintf(out, "# HELP culprit_action_attempts_total Runs of the action hook, by result.\n"
		     "# TYPE culprit_action_attempts_total counter\n");
	for (int r = 0; r < HOOK_RESULTS; r++)
		fprintf(out, "culprit_action_attempts_total{result=\"%s\"} %" PRIu64 "\n",
			hook_result_name((enum hook_result)r), att[r]);
	fprintf(out,
		"# HELP culprit_action_approvals_total Actions approved by an operator.\n"
		"# TYPE culprit_action_approvals_total counter\n"
		"culprit_action_approvals_total %" PRIu64 "\n"
		"# HELP culprit_action_expired_total Actions still awaiting approval when their incident resolved.\n"
		"# TYPE culprit_action_expired_total counter\n"
		"culprit_action_expired_total %" PRIu64 "\n"
		"# HELP culprit_action_refused_total Hook runs refused: the runner's queue was full.\n"
		"# TYPE culprit_action_refused_total counter\n"
		"culprit_action_refused_total %" PRIu64 "\n"
		"# HELP culprit_action_over_limit_total Actions of an incident beyond the first 16, not taken on.\n"
		"# TYPE culprit_action_over_limit_total counter\n"
		"culprit_action_over_limit_total %" PRIu64 "\n"
		"# HELP culprit_action_runs_waiting Hook runs queued or running.\n"
		"# TYPE culprit_action_runs_waiting gauge\n"
		"culprit_action_runs_waiting %" PRIu64 "\n",
		a->approvals, a->expired, refused, a->over_limit, waiting);
}
