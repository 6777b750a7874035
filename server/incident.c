/* incident.c: see incident.h. */
#include "incident.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cmp.h"

/* category and the set of culprit ranks (sorted: their order by score may change) */
static void fingerprint_of(const char *category, uint32_t *ranks, size_t n, char *out, size_t size)
{
	size_t used = (size_t)snprintf(out, size, "%s", category);

	qsort(ranks, n, sizeof(ranks[0]), cmp_u32);
	for (size_t i = 0; i < n && used + 12 < size; i++)
		used += (size_t)snprintf(out + used, size - used, ",%u", ranks[i]);
}

static void fingerprint(const struct report *r, char *out, size_t size)
{
	uint32_t ranks[64];
	size_t n = 0;

	for (size_t i = 0; i < r->nsuspects && n < 64; i++)
		if (r->suspects[i].role == REPORT_CULPRIT)
			ranks[n++] = r->suspects[i].rank;
	fingerprint_of(r->category, ranks, n, out, size);
}

void incident_restore(struct incident *inc, const char *key, const char *category, const char *summary,
		      uint32_t updates, int64_t opened_us, int64_t changed_us, const uint32_t *culprits, size_t n)
{
	uint32_t ranks[64];
	const char *last = strrchr(key, '/'), *p = last;

	memset(inc, 0, sizeof(*inc));
	inc->open = 1;
	snprintf(inc->key, sizeof(inc->key), "%s", key);
	snprintf(inc->category, sizeof(inc->category), "%s", category);
	snprintf(inc->summary, sizeof(inc->summary), "%s", summary);
	/* "<job>/<first iteration>/<category at opening>" */
	while (p && p > key && p[-1] != '/')
		p--;
	if (p && p > key && last)
		inc->first_iter = (uint32_t)strtoul(p, NULL, 10);
	inc->updates = updates;
	inc->opened_us = opened_us;
	inc->changed_us = changed_us;
	if (n > 64)
		n = 64;
	if (n)
		memcpy(ranks, culprits, n * sizeof(ranks[0]));
	fingerprint_of(category, ranks, n, inc->fingerprint, sizeof(inc->fingerprint));
}

enum incident_change incident_report(struct incident *inc, const char *job, const struct report *r, int window_open,
				     int64_t now_us)
{
	char fp[sizeof(inc->fingerprint)];

	if (!r->category || strcmp(r->category, "none") == 0 || !window_open)
		return INCIDENT_NONE;
	fingerprint(r, fp, sizeof(fp));
	if (!inc->open) {
		memset(inc, 0, sizeof(*inc));
		inc->open = 1;
		inc->first_iter = r->first_iter;
		snprintf(inc->key, sizeof(inc->key), "%s/%u/%s", job, r->first_iter, r->category);
		snprintf(inc->category, sizeof(inc->category), "%s", r->category);
		snprintf(inc->summary, sizeof(inc->summary), "%s", r->summary);
		snprintf(inc->fingerprint, sizeof(inc->fingerprint), "%s", fp);
		inc->opened_us = inc->changed_us = now_us;
		return INCIDENT_FIRING;
	}
	if (strcmp(fp, inc->fingerprint) == 0)
		return INCIDENT_NONE;
	snprintf(inc->category, sizeof(inc->category), "%s", r->category);
	snprintf(inc->summary, sizeof(inc->summary), "%s", r->summary);
	snprintf(inc->fingerprint, sizeof(inc->fingerprint), "%s", fp);
	inc->updates++;
	inc->changed_us = now_us;
	return INCIDENT_UPDATED;
}

static enum incident_change resolve(struct incident *inc, int64_t now_us, const char *why)
{
	if (!inc->open)
		return INCIDENT_NONE;
	inc->open = 0;
	inc->updates++;
	inc->changed_us = now_us;
	snprintf(inc->resolution, sizeof(inc->resolution), "%s", why);
	return INCIDENT_RESOLVED;
}

enum incident_change incident_recover(struct incident *inc, int64_t now_us)
{
	return resolve(inc, now_us, "recovered");
}

enum incident_change incident_end(struct incident *inc, int64_t now_us) { return resolve(inc, now_us, "ended"); }

const char *incident_change_name(enum incident_change c)
{
	switch (c) {
	case INCIDENT_FIRING: return "firing";
	case INCIDENT_UPDATED: return "updated";
	case INCIDENT_RESOLVED: return "resolved";
	case INCIDENT_NONE: break;
	}
	return "none";
}
