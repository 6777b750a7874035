/* alerts.c: see alerts.h. Storing reports and delivering alerts is being built (issue 6);
 * until then reports live in memory only (jobs.c keeps the latest). */
#include "alerts.h"

void alerts_report(struct server *s, struct job *job, const struct report *r, const char *json,
		   enum incident_change change)
{
	(void)s;
	(void)job;
	(void)r;
	(void)json;
	(void)change;
}
