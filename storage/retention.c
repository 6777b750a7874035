/* retention.c: see retention.h. */
#include "retention.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <libpq-fe.h>

#include "log.h"

static void set_err(char *err, size_t err_size, const char *what, const char *msg)
{
	snprintf(err, err_size, "%s: %s", what, msg);
	err[strcspn(err, "\n")] = '\0';
}

int storage_retention_run(const char *dsn, int retention_days, int ahead_days, char *err, size_t err_size)
{
	if (retention_days < 1 || ahead_days < 0) {
		snprintf(err, err_size, "retention_days must be >= 1 and ahead_days >= 0");
		return -1;
	}
	PGconn *c = PQconnectdb(dsn);
	if (PQstatus(c) != CONNECTION_OK) {
		set_err(err, err_size, "could not connect to the database", PQerrorMessage(c));
		PQfinish(c);
		return -1;
	}
	PQclear(PQexec(c, "SET lock_timeout = '10s'"));
	char a[16], d[16];
	snprintf(a, sizeof a, "%d", ahead_days);
	snprintf(d, sizeof d, "%d", retention_days);
	const char *params[2] = {a, d};
	PGresult *r = PQexecParams(c, "SELECT action, target FROM culprit_maintain_partitions($1, $2)", 2, NULL, params,
				   NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		set_err(err, err_size, "could not maintain partitions", PQerrorMessage(c));
		PQclear(r);
		PQfinish(c);
		return -1;
	}
	int changed = 0, created = 0, dropped = 0;
	for (int i = 0; i < PQntuples(r); i++) {
		const char *action = PQgetvalue(r, i, 0);
		/* each partition at debug level, one line a run at info */
		log_debug("retention: %s %s", action, PQgetvalue(r, i, 1));
		created += strcmp(action, "created") == 0;
		dropped += strcmp(action, "dropped") == 0;
	}
	changed = created + dropped;
	if (changed)
		log_info("retention: %d partitions created, %d dropped (keeping %d days)", created, dropped,
			 retention_days);
	PQclear(r);
	/* captured raw kernels are few (bounded per capture) and not partitioned: deleted by age */
	r = PQexecParams(c, "DELETE FROM raw_kernels WHERE ts < now() - make_interval(days => $1::int)", 1, NULL,
			 params + 1, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_COMMAND_OK) {
		set_err(err, err_size, "could not delete old captured kernels", PQerrorMessage(c));
		PQclear(r);
		PQfinish(c);
		return -1;
	}
	if (atoi(PQcmdTuples(r)) > 0)
		log_info("retention: deleted %s captured kernels older than %d days", PQcmdTuples(r), retention_days);
	PQclear(r);
	PQfinish(c);
	return changed;
}

struct storage_retention {
	char *dsn;
	int ahead_days, interval_s;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int retention_days;  /* under mu */
	bool stopping, kick; /* under mu */
};

static void *retention_main(void *arg)
{
	struct storage_retention *r = arg;
	struct log_complaint failing = {0};
	pthread_mutex_lock(&r->mu);
	while (!r->stopping) {
		int days = r->retention_days;
		r->kick = false;
		pthread_mutex_unlock(&r->mu);
		char err[512];
		if (storage_retention_run(r->dsn, days, r->ahead_days, err, sizeof err) < 0)
			log_complain(&failing, LOG_ERROR, "retention: %s", err);
		else
			log_release(&failing, LOG_INFO, "retention: partition maintenance works again");
		pthread_mutex_lock(&r->mu);
		struct timespec until;
		clock_gettime(CLOCK_MONOTONIC, &until);
		until.tv_sec += r->interval_s;
		while (!r->stopping && !r->kick) {
			if (pthread_cond_timedwait(&r->cv, &r->mu, &until) != 0)
				break;
		}
	}
	pthread_mutex_unlock(&r->mu);
	return NULL;
}

struct storage_retention *storage_retention_start(const struct storage_retention_config *cfg)
{
	struct storage_retention *r = calloc(1, sizeof *r);
	if (!r)
		return NULL;
	r->dsn = strdup(cfg->dsn ? cfg->dsn : "");
	r->retention_days = cfg->retention_days >= 1 ? cfg->retention_days : 1;
	r->ahead_days = cfg->ahead_days > 0 ? cfg->ahead_days : 3;
	r->interval_s = cfg->interval_s > 0 ? cfg->interval_s : 3600;
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	bool ok = r->dsn && pthread_mutex_init(&r->mu, NULL) == 0 && pthread_cond_init(&r->cv, &ca) == 0;
	pthread_condattr_destroy(&ca);
	if (!ok || pthread_create(&r->thread, NULL, retention_main, r) != 0) {
		log_error("retention: could not start the retention thread");
		free(r->dsn);
		free(r);
		return NULL;
	}
	return r;
}

void storage_retention_set_days(struct storage_retention *r, int retention_days)
{
	pthread_mutex_lock(&r->mu);
	r->retention_days = retention_days >= 1 ? retention_days : 1;
	r->kick = true;
	pthread_cond_signal(&r->cv);
	pthread_mutex_unlock(&r->mu);
}

void storage_retention_stop(struct storage_retention *r)
{
	if (!r)
		return;
	pthread_mutex_lock(&r->mu);
	r->stopping = true;
	pthread_cond_signal(&r->cv);
	pthread_mutex_unlock(&r->mu);
	pthread_join(r->thread, NULL);
	pthread_cond_destroy(&r->cv);
	pthread_mutex_destroy(&r->mu);
	free(r->dsn);
	free(r);
}
