/* incident.c: see incident.h. */
#include "incident.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/* category and the set of culprit ranks (sorted: their order by score may change) */
static void fingerprint(const struct report *r, char *out, size_t size)
{
	uint32_t ranks[64];
	size_t n = 0, used = (size_t)snprintf(out, size, "%s", r->category);

	for (size_t i = 0; i < r->nsuspects && n < 64; i++)
		if (r->suspects[i].role == REPORT_CULPRIT)
			ranks[n++] = r->suspects[i].rank;
	qsort(ranks, n, sizeof(ranks[0]), cmp_u32);
	for (size_t i = 0; i < n && used + 12 < size; i++)
		used += (size_t)snprintf(out + used, size - used, ",%u", ranks[i]);
}

enum incident_change incident_report(struct incident *inc, const char *job, const struct report *r,
				     int window_open, int64_t now_us)
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

enum incident_change incident_recover(struct incident *inc, int64_t now_us)
{
	if (!inc->open)
		return INCIDENT_NONE;
	inc->open = 0;
	inc->updates++;
	inc->changed_us = now_us;
	return INCIDENT_RESOLVED;
}

const char *incident_change_name(enum incident_change c)
{
	switch (c) {
	case INCIDENT_FIRING:
		return "firing";
	case INCIDENT_UPDATED:
		return "updated";
	case INCIDENT_RESOLVED:
		return "resolved";
	case INCIDENT_NONE:
		break;
	}
	return "none";
}
