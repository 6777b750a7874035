/* report_check.c: see report_check.h. */
#include "report_check.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

static const char *const categories[] = {
	"none",
	"compute_degradation",
	"communication_degradation",
	"kernel_stall",
	"host_delay",
	"hang",
	"stage_imbalance",
	"load_imbalance",
	NULL,
};

/* "nan" or "inf" as a word of their own, any case ("-nan", "inf)", not "info") */
static int has_nonfinite(const char *s)
{
	for (const char *p = s; *p; p++) {
		if (p != s && isalnum((unsigned char)p[-1]))
			continue;
		if ((strncasecmp(p, "nan", 3) == 0 || strncasecmp(p, "inf", 3) == 0) && !isalpha((unsigned char)p[3]))
			return 1;
	}
	return 0;
}

const char *report_check(const struct report *r, uint32_t world)
{
	const char *why = NULL;
	int known = 0;
	for (int i = 0; categories[i]; i++)
		known |= r->category && strcmp(r->category, categories[i]) == 0;
	if (!known)
		return "unknown category";
	size_t nc = 0;
	for (size_t i = 0; i < r->nsuspects; i++) {
		if (r->suspects[i].rank >= world)
			return "suspect rank outside the job";
		nc += r->suspects[i].role == REPORT_CULPRIT;
	}
	if (nc > r->culprits_total)
		return "more culprits listed than counted";
	json_t *o = report_to_json(r);
	if (!o)
		return "report_to_json failed";
	char *s = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	json_error_t err;
	json_t *back = s ? json_loads(s, 0, &err) : NULL;
	if (!s)
		why = "json_dumps failed";
	else if (!back)
		why = "the JSON does not parse back";
	else if (has_nonfinite(s))
		why = "NaN or inf in the JSON";
	json_decref(back);
	free(s);
	char *t = why ? NULL : report_to_text(r);
	if (!why && !t)
		why = "report_to_text failed";
	else if (!why && has_nonfinite(t))
		why = "nan or inf in the text";
	free(t);
	return why;
}
