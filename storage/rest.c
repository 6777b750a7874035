/* rest.c: see rest.h. */
#include "rest.h"

#include <stddef.h>

static const struct {
	int nparams;
	const char *sql;
} statements[STORAGE_REST_STATEMENTS] = {
	[STORAGE_REST_REPORT_LATEST] =
		{1, "SELECT (r.json || jsonb_build_object('id', r.id, 'created', r.created))::text "
		    "FROM reports r JOIN jobs j ON j.id = r.job_id WHERE j.name = $1 ORDER BY r.id DESC LIMIT 1"},
	[STORAGE_REST_REPORT] = {1, "SELECT (json || jsonb_build_object('id', id, 'created', created))::text FROM "
				    "reports WHERE id = $1::bigint"},
	[STORAGE_REST_REPORTS] =
		{3, "SELECT json_build_object('job', j.name, 'reports', coalesce(x.list, '[]'::json), 'next_before', "
		    "x.next)::text "
		    "FROM jobs j LEFT JOIN LATERAL ("
		    " SELECT json_agg(json_build_object('id', r.id, 'created', r.created, 'first_iter', r.first_iter,"
		    "  'last_iter', r.last_iter, 'category', r.category, 'url', '/api/v1/reports/' || r.id, 'report', "
		    "r.json)"
		    "  ORDER BY r.id DESC) AS list,"
		    "  CASE WHEN count(*) = $3::int THEN min(r.id) END AS next"
		    " FROM (SELECT * FROM reports WHERE job_id = j.id AND ($2::bigint IS NULL OR id < $2::bigint)"
		    "  ORDER BY id DESC LIMIT $3::int) r) x ON true "
		    "WHERE j.name = $1"},
	[STORAGE_REST_INCIDENTS] =
		{3, "SELECT json_build_object('job', j.name, 'current', $2::json, 'incidents', coalesce((SELECT"
		    " json_agg(json_build_object('id', i.id, 'category', i.category, 'state', i.state, 'summary', "
		    "i.summary,"
		    "  'report_id', i.report_id, 'opened', i.opened, 'updated', i.updated, 'resolved', i.resolved)"
		    "  ORDER BY i.id DESC)"
		    " FROM (SELECT * FROM incidents WHERE job_id = j.id ORDER BY id DESC LIMIT $3::int) i), "
		    "'[]'::json))::text "
		    "FROM jobs j WHERE j.name = $1"},
	[STORAGE_REST_ITERATIONS] =
		{4, "SELECT json_build_object('job', j.name, 'rank', $2::int, 'from_iter', $3::int, 'to_iter', $4::int,"
		    " 'iterations', coalesce((SELECT json_agg(json_build_object('iter', i.iter,"
		    "  'start_us', (extract(epoch FROM i.ts) * 1000000)::bigint, 'dur_us', i.dur_us) ORDER BY i.iter)"
		    "  FROM iterations i WHERE i.job_id = j.id AND i.rank = $2::int"
		    "  AND i.rank0 BETWEEN $2::int - 63 AND $2::int AND i.iter BETWEEN $3::int AND $4::int),"
		    " '[]'::json))::text "
		    "FROM jobs j WHERE j.name = $1"},
	[STORAGE_REST_PHASES] =
		{7,
		 "SELECT json_build_object('job', j.name, 'name', $2::text, 'from_iter', $3::int, 'to_iter', $4::int,"
		 " 'from_rank', $5::int, 'to_rank', $6::int, 'limit', $7::int, 'cells', coalesce((SELECT"
		 "  json_agg(json_build_array(c.rank, c.iter, c.dur_us) ORDER BY c.rank, c.iter)"
		 "  FROM (SELECT p.rank, p.iter, p.dur_us FROM phases p WHERE p.job_id = j.id"
		 "   AND p.name_id = (SELECT n.name_id FROM names n WHERE n.job_id = j.id AND n.name = $2)"
		 "   AND p.rank BETWEEN $5::int AND $6::int AND p.rank0 BETWEEN $5::int - 63 AND $6::int AND p.iter "
		 "BETWEEN $3::int AND $4::int"
		 "   ORDER BY p.rank, p.iter LIMIT $7::int) c), '[]'::json))::text "
		 "FROM jobs j WHERE j.name = $1"},
	[STORAGE_REST_EVENTS_INSERT] =
		{1, "WITH ins AS (INSERT INTO events (job_id, host, kind, ts, source, detail)"
		    " SELECT (SELECT id FROM jobs WHERE name = e.job), e.host, e.kind,"
		    "  'epoch'::timestamptz + e.ts_us * interval '1 microsecond', e.source, e.detail"
		    " FROM json_to_recordset($1::json) AS e(job text, host text, kind text, ts_us bigint, source text, "
		    "detail text)"
		    " RETURNING id) "
		    "SELECT coalesce(json_agg(id ORDER BY id), '[]'::json)::text FROM ins"},
	[STORAGE_REST_EVENTS_LIST] =
		{4,
		 "SELECT json_build_object('events', coalesce(json_agg(json_build_object('id', e.id, 'host', e.host,"
		 " 'kind', e.kind, 'ts_us', (extract(epoch FROM e.ts) * 1000000)::bigint, 'source', e.source,"
		 " 'detail', e.detail, 'job', j.name, 'received', e.received) ORDER BY e.ts DESC, e.id DESC),"
		 " '[]'::json))::text "
		 "FROM (SELECT * FROM events WHERE ($1::text IS NULL OR host = $1) AND ($2::text IS NULL OR kind = $2)"
		 " AND ($3::text IS NULL OR ts >= CASE WHEN $3 ~ '^[0-9]{1,17}$'"
		 "  THEN 'epoch'::timestamptz + $3::bigint * interval '1 microsecond' ELSE $3::timestamptz END)"
		 " ORDER BY ts DESC, id DESC LIMIT $4::int) e LEFT JOIN jobs j ON j.id = e.job_id"},
	[STORAGE_REST_JOB_OWNER] = {2, "SELECT json_build_object('api_url', api_url)::text FROM job_leases"
				       " WHERE job = $1 AND owner <> $2 AND expires_at > now()"},
	[STORAGE_REST_JOBS_ELSEWHERE] =
		{1, "SELECT coalesce(json_agg(json_build_object('name', job, 'instance', owner, 'api_url', api_url)"
		    " ORDER BY job), '[]'::json)::text FROM job_leases WHERE owner <> $1 AND expires_at > now()"},
};

const char *storage_rest_sql(enum storage_rest stmt, int *nparams)
{
	if ((unsigned)stmt >= STORAGE_REST_STATEMENTS)
		return NULL;
	*nparams = statements[stmt].nparams;
	return statements[stmt].sql;
}
