/* rest.h: the SQL behind the REST API's reads of history and its events insert, run on the
 * query workers (query.h: each answers at most one row of one text column, the JSON that is
 * sent). The server names a statement; its text lives here. Parameters are text, NULL for
 * SQL NULL; each statement's are listed below in order ($1, $2, ...). */
#ifndef CULPRIT_STORAGE_REST_H
#define CULPRIT_STORAGE_REST_H

enum storage_rest {
	STORAGE_REST_REPORT_LATEST, /* job name: the newest stored report (report JSON with id, created) */
	STORAGE_REST_REPORT,        /* report id: that report */
	STORAGE_REST_REPORTS,       /* job name, before id (NULL: newest), limit: a page, newest first */
	STORAGE_REST_INCIDENTS,     /* job name, current incident (JSON), limit: newest first */
	STORAGE_REST_ITERATIONS,    /* job name, rank, from_iter, to_iter */
	STORAGE_REST_PHASES,        /* job name, phase name, from_iter, to_iter, from_rank, to_rank, limit */
	STORAGE_REST_EVENTS_INSERT, /* JSON array of {job, host, kind, ts_us, source, detail}: their ids */
	STORAGE_REST_EVENTS_LIST,   /* host, kind, since (epoch us or a timestamp), limit (NULL: any) */
	STORAGE_REST_JOB_OWNER, /* job name, this instance's id: {api_url} of the instance that owns it now, if another */
	STORAGE_REST_JOBS_ELSEWHERE, /* this instance's id: [{name, instance, api_url}] of the jobs other instances own now */
	/* live jobs (JSON array of names), name filter (substring, NULL: any), state ('live',
	 * 'ended', NULL: both), limit, offset, this instance's id (NULL: a single instance): a page
	 * of the stored jobs, live first, then by when last seen: {total, jobs, elsewhere} */
	STORAGE_REST_JOBS_PAGE,
	/* job name, this instance's id (NULL: a single instance): {owner_api_url} when another
	 * instance owns it now, else {job} the stored job as in a page of STORAGE_REST_JOBS_PAGE
	 * (job null when none is stored) */
	STORAGE_REST_JOB_STORED,
	/* days, limit: the hosts most often a culprit in the incidents opened in the last days,
	 * with their jobs and categories, and the incidents by day and category */
	STORAGE_REST_FLEET,
	STORAGE_REST_STATEMENTS
};

/* The statement's text and its number of parameters. */
const char *storage_rest_sql(enum storage_rest stmt, int *nparams);

#endif
