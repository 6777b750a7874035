/* rest.c: see rest.h. */
#include "rest.h"

#include <stddef.h>

/* One stored job (f: a row of jobs with a boolean column live) as the jobs pages show it: its
 * topology, its latest report's verdict and step time, its latest incident. */
#define JOB_SUMMARY                                                                                                    \
	"json_build_object('job', f.name, 'state', CASE WHEN f.live THEN 'live' ELSE 'ended' END,"                     \
	" 'topology', json_build_object('world', f.world, 'tp', f.tp, 'cp', f.cp, 'pp', f.pp, 'dp', f.dp, 'ep', f.ep," \
	"  'gpus_per_node', f.gpus_per_node, 'order', f.rank_order),"                                                  \
	" 'created', f.created, 'last_seen', greatest(f.updated, r.created),"                                          \
	" 'step_ms', r.json->'window'->'window_iter_ms', 'baseline_ms', r.json->'window'->'baseline_iter_ms',"         \
	" 'report', CASE WHEN r.id IS NOT NULL THEN json_build_object('id', r.id, 'created', r.created, 'category',"   \
	"  r.category, 'first_iter', r.first_iter, 'last_iter', r.last_iter, 'lost_ms_per_iter',"                      \
	"  r.json->'lost_ms_per_iter') END,"                                                                           \
	" 'incident', (SELECT json_build_object('key', i.key, 'state', i.state, 'category', i.category, 'summary',"    \
	"  i.summary, 'opened', i.opened, 'resolved', i.resolved, 'resolution', i.resolution) FROM incidents i"        \
	"  WHERE i.job_id = f.id ORDER BY i.id DESC LIMIT 1))"
#define LATEST_REPORT_OF_F                                                                          \
	"LEFT JOIN LATERAL (SELECT id, created, category, first_iter, last_iter, json FROM reports" \
	" WHERE job_id = f.id ORDER BY created DESC, id DESC LIMIT 1) r ON true"

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
		    "  'report_id', i.report_id, 'opened', i.opened, 'updated', i.updated, 'resolved', i.resolved,"
		    "  'resolution', i.resolution)"
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
	[STORAGE_REST_JOBS_PAGE] =
		{6,
		 "WITH f AS (SELECT j.*, j.name IN (SELECT json_array_elements_text($1::json)) AS live FROM jobs j"
		 " WHERE ($2::text IS NULL OR strpos(lower(j.name), lower($2)) > 0) AND ($6::text IS NULL OR NOT EXISTS"
		 "  (SELECT 1 FROM job_leases l WHERE l.job = j.name AND l.owner <> $6 AND l.expires_at > now()))),"
		 " g AS (SELECT * FROM f WHERE $3::text IS NULL OR f.live = ($3 = 'live')) "
		 "SELECT json_build_object('total', (SELECT count(*) FROM g), 'limit', $4::int, 'offset', $5::int,"
		 " 'jobs', coalesce((SELECT json_agg(x.o ORDER BY x.n) FROM (SELECT row_number() OVER"
		 "  (ORDER BY f.live DESC, greatest(f.updated, r.created) DESC NULLS LAST, f.name) AS n, " JOB_SUMMARY
		 "  AS o FROM g f " LATEST_REPORT_OF_F "  ORDER BY n LIMIT $4::int OFFSET $5::int) x), '[]'::json),"
		 " 'elsewhere', CASE WHEN $6::text IS NOT NULL THEN (SELECT coalesce(json_agg(json_build_object('name',"
		 "  job, 'instance', owner, 'api_url', api_url) ORDER BY job), '[]'::json) FROM job_leases"
		 "  WHERE owner <> $6 AND expires_at > now()) END)::text"},
	[STORAGE_REST_JOB_STORED] =
		{2, "SELECT json_build_object('owner_api_url', (SELECT api_url FROM job_leases WHERE job = $1 AND"
		    "  $2::text IS NOT NULL AND owner <> $2 AND expires_at > now()),"
		    " 'job', (SELECT " JOB_SUMMARY
		    " FROM (SELECT j.*, false AS live FROM jobs j WHERE j.name = $1) f " LATEST_REPORT_OF_F "))::text"},
	[STORAGE_REST_FLEET] =
		{2,
		 "WITH i AS (SELECT i.id, i.category, i.opened, i.report_id, j.name AS job FROM incidents i"
		 "  JOIN jobs j ON j.id = i.job_id WHERE i.opened >= now() - $1::int * interval '1 day'),"
		 " c AS (SELECT DISTINCT i.id, i.job, i.category, i.opened, s->>'host' AS host FROM i"
		 "  JOIN reports r ON r.id = i.report_id CROSS JOIN LATERAL jsonb_array_elements(CASE"
		 "  jsonb_typeof(r.json->'suspects') WHEN 'array' THEN r.json->'suspects' ELSE '[]' END) s"
		 "  WHERE s->>'role' = 'culprit' AND s->>'host' IS NOT NULL),"
		 " h AS (SELECT host, count(DISTINCT id) AS incidents, count(DISTINCT job) AS njobs,"
		 "  json_agg(DISTINCT job) AS jobs, json_agg(DISTINCT category) AS categories, max(opened) AS last"
		 "  FROM c GROUP BY host) "
		 "SELECT json_build_object('days', $1::int, 'incidents', (SELECT count(*) FROM i),"
		 " 'hosts', coalesce((SELECT json_agg(json_build_object('host', host, 'incidents', incidents,"
		 "  'jobs', jobs, 'categories', categories, 'last', last) ORDER BY incidents DESC, njobs DESC, last "
		 "DESC,"
		 "  host) FROM (SELECT * FROM h ORDER BY incidents DESC, njobs DESC, last DESC, host LIMIT $2::int) t),"
		 "  '[]'::json),"
		 " 'categories', coalesce((SELECT json_agg(json_build_object('day', d, 'category', category, "
		 "'incidents',"
		 "  n) ORDER BY d, category) FROM (SELECT date_trunc('day', opened AT TIME ZONE 'UTC')::date AS d,"
		 "  category, count(*) AS n FROM i GROUP BY 1, 2) t), '[]'::json))::text"},
};

const char *storage_rest_sql(enum storage_rest stmt, int *nparams)
{
	if ((unsigned)stmt >= STORAGE_REST_STATEMENTS)
		return NULL;
	*nparams = statements[stmt].nparams;
	return statements[stmt].sql;
}
