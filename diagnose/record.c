/* record.c: names of record kinds and groups. */
#include "record.h"

#include <string.h>

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

int record_kind_parse(const char *s)
{
	for (int i = 0; i < RECORD_KIND_COUNT; i++)
		if (strcmp(s, kind_names[i]) == 0)
			return i;
	return -1;
}

int record_group_parse(const char *s)
{
	if (strcmp(s, "none") == 0)
		return RECORD_GROUP_NONE;
	for (int i = 0; i < RECORD_GROUP_COUNT; i++)
		if (strcmp(s, group_names[i]) == 0)
			return i;
	return -1;
}
