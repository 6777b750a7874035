/* record.c: names of record kinds and groups; kernel quantiles the wire left out. */
#include "record.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>
#include <strings.h>

#include "sketch.h"

static const char *const kind_names[RECORD_KIND_COUNT] = {"compute", "comm", "host", "mixed"};
static const char *const group_names[RECORD_GROUP_COUNT] = {"", "tp", "cp", "ep", "dp", "pp"};

const char *record_kind_name(enum record_kind kind)
{
	return (unsigned)kind < RECORD_KIND_COUNT ? kind_names[kind] : "unknown";
}

const char *record_group_name(enum record_group group)
{
	return (unsigned)group < RECORD_GROUP_COUNT ? group_names[group] : "unknown";
}

/* a byte loop, not strcmp: these run once per record of a file, on words of a few bytes,
 * where a call to strcmp cost more than the comparing (4% of `culprit diagnose`) */
static bool same(const char *a, const char *b)
{
	while (*a && *a == *b)
		a++, b++;
	return *a == *b;
}

int record_kind_parse(const char *s)
{
	for (int i = 0; i < RECORD_KIND_COUNT; i++)
		if (same(s, kind_names[i]))
			return i;
	return -1;
}

int record_group_parse(const char *s)
{
	for (int i = 0; i < RECORD_GROUP_COUNT; i++)
		if (same(s, group_names[i]))
			return i;
	return same(s, "none") ? RECORD_GROUP_NONE : -1;
}

int record_kernel_quantiles(struct record_kernel *k, struct sketch *scratch)
{
	bool has = k->sketch && k->sketch_len;
	if (has && sketch_deserialize(scratch, k->sketch, k->sketch_len) == 0) {
		sketch_set_summary(scratch, (double)k->min_us, (double)k->max_us, (double)k->sum_us);
		k->p50_us = llround(sketch_quantile(scratch, 0.5));
		k->p99_us = llround(sketch_quantile(scratch, 0.99));
		return 0;
	}
	/* the lower median of n <= 3 values: the smallest for 1 or 2, the middle one for 3;
	 * past 3 values without a sketch only the mean is known */
	if (k->count <= 2)
		k->p50_us = k->min_us;
	else if (k->count == 3)
		k->p50_us = k->sum_us - k->min_us - k->max_us;
	else
		k->p50_us = k->sum_us / k->count;
	if (k->p50_us < k->min_us || k->p50_us > k->max_us)
		k->p50_us = k->min_us;
	k->p99_us = k->max_us;
	return has ? -1 : 0;
}

enum record_kind record_kernel_kind_of(const char *name)
{
	for (const char *q = name; *q; q++)
		if (strncasecmp(q, "nccl", 4) == 0)
			return RECORD_KIND_COMM;
	return RECORD_KIND_COMPUTE;
}
