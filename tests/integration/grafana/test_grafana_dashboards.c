/* test_grafana_dashboards.c: every query of the Grafana dashboards in docs/grafana/dashboards/
 * run against a real case5 database, the way Grafana's PostgreSQL data source would run it.
 *
 * culpritd (which applies the migrations, 005_grafana_views.sql among them) gets the seed's
 * incident streamed by `culprit sim --scenario case5 --iters 12` (12,960 ranks, the fault on
 * node-1294 from iteration 4) and the out-of-band "port down" on node-1294. Then every
 * panel's rawSql, every annotation query and every query variable is read out of the JSON,
 * its template variables ($job, $phase, $node, $topk, $__interval: the panel's min interval or
 * 1m) and macros ($__timeFilter,
 * $__timeFrom, $__timeTo, $__timeGroup, $__timeGroupAlias, $__time) are replaced by concrete
 * SQL, and it is run: each must succeed with rows. A macro or variable this test does not know
 * fails it, as does a panel the checks below expect and cannot find. What the panels must
 * show: node-1294 on top of the mlp heat map (with no more rows than the top K), its 8 ranks
 * in the drill-down, the iteration time tripling, node-1294's culprits first among the
 * suspects, the incident and the port-down event ("contradicted") as annotations. The time
 * filters must prune the daily partitions (EXPLAIN). Every query also runs with a job name
 * holding a quote ("o'brien"): it must be valid SQL (no rows).
 *
 * Each dashboard's JSON model must also import through Grafana's UI as exported dashboards
 * do: `__inputs` names its data source (its pluginId, used as "${DS_...}"), a "datasource"
 * variable of that plugin selects it, and every data source reference in the model (panels,
 * targets, annotations, variables) is that variable, none a hard-coded uid; panel ids are
 * unique. The Prometheus dashboard of culpritd itself (culprit-culpritd.json) has no SQL:
 * every metric its expressions name must be on the /metrics page of this culpritd. */
#include <dirent.h>
#include <jansson.h>
#include <libpq-fe.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "apitest.h"

#define JOB "sim-case5"
#define ITERS 12
#define TOPK "16"

static struct h_proc proc;
static PGconn *db;
static char t_from[64], t_to[64];
static int range_days; /* the UTC days the range touches */

/* ---- Grafana's interpolation, as far as the dashboards use it -------------------------- */

struct buf {
	char *s;
	size_t n, cap;
};

static void put(struct buf *b, const char *s, size_t n)
{
	if (b->n + n + 1 > b->cap) {
		b->cap = (b->n + n + 1) * 2;
		b->s = realloc(b->s, b->cap);
		H_CHECK(b->s != NULL, &proc);
	}
	memcpy(b->s + b->n, s, n);
	b->n += n;
	b->s[b->n] = '\0';
}

static void puts_(struct buf *b, const char *s) { put(b, s, strlen(s)); }

/* $__interval of the query being expanded: the panel's min interval ("interval") when it has
 * one, else what Grafana would choose for a ~16-minute range on a wide panel (the data
 * source's timeInterval, 30s, rounded up: 1m). */
static char interval[16] = "1m", interval_ms[24] = "60000";
static const char *job_value; /* NULL: JOB */

static const char *var_value(const char *name)
{
	static const struct {
		const char *name, *value;
	} vars[] = {
		{"job", JOB},
		{"phase", "mlp"},
		{"node", "node-1294"},
		{"topk", TOPK},
	};

	if (job_value && strcmp(name, "job") == 0)
		return job_value;
	if (strcmp(name, "__interval") == 0)
		return interval;
	if (strcmp(name, "__interval_ms") == 0)
		return interval_ms;

	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
		if (strcmp(vars[i].name, name) == 0)
			return vars[i].value;
	return NULL;
}

/* Template variables: $name and ${name}, put in as Grafana does for a single-valued variable
 * in SQL: raw (a quote in the value ends the SQL string); ${name:sqlstring}: quoted, with its
 * single quotes doubled. Another ${name:format} fails. Macros ($__time...) are left for
 * expand_macros(). */
static char *expand_vars(const char *sql, const char *what)
{
	struct buf b = {0};

	for (const char *p = sql; *p;) {
		char name[64];
		size_t n = 0;
		const char *q = p + 1, *v;
		int quote = 0;

		if (*p != '$') {
			put(&b, p++, 1);
			continue;
		}
		if (*q == '{') {
			const char *end = strchr(q, '}'), *colon;

			H_CHECK(end && end - q - 1 < (long)sizeof(name), &proc);
			n = (size_t)(end - q - 1);
			memcpy(name, q + 1, n);
			name[n] = '\0';
			q = end + 1;
			if ((colon = strchr(name, ':'))) {
				H_CHECK(strcmp(colon, ":sqlstring") == 0, &proc);
				name[colon - name] = '\0';
				quote = 1;
			}
		} else {
			while ((q[n] >= 'a' && q[n] <= 'z') || (q[n] >= 'A' && q[n] <= 'Z') ||
			       (q[n] >= '0' && q[n] <= '9') || q[n] == '_') {
				H_CHECK(n + 1 < sizeof(name), &proc);
				name[n] = q[n];
				n++;
			}
			name[n] = '\0';
			q += n;
		}
		if (strncmp(name, "__time", 6) == 0) { /* a macro: later */
			put(&b, p, (size_t)(q - p));
			p = q;
			continue;
		}
		v = var_value(name);
		if (!v) {
			fprintf(stderr, "%s: unknown template variable \"$%s\" in:\n%s\n", what, name, sql);
			H_CHECK(0, &proc);
		}
		if (quote)
			puts_(&b, "'");
		for (; *v; v++)
			puts_(&b, quote && *v == '\'' ? "''" : (char[2]){*v, '\0'});
		if (quote)
			puts_(&b, "'");
		p = q;
	}
	return b.s ? b.s : strdup("");
}

/* Seconds of a Grafana interval ("30s", "1m", "1h", "1d", "500ms"). */
static double interval_s(const char *s, const char *what)
{
	char *end;
	double v = strtod(s, &end);

	while (*end == ' ')
		end++;
	if (strncmp(end, "ms", 2) == 0)
		return v / 1000;
	if (*end == 's')
		return v;
	if (*end == 'm')
		return v * 60;
	if (*end == 'h')
		return v * 3600;
	if (*end == 'd')
		return v * 86400;
	fprintf(stderr, "%s: bad interval \"%s\"\n", what, s);
	H_CHECK(0, &proc);
	return 0;
}

/* Splits the macro's arguments at every comma and trims spaces, as Grafana does (no nesting:
 * its regular expression ends the arguments at the first ')'). At most 3. */
static int split_args(char *s, char **args)
{
	int n = 0;

	args[n++] = s;
	for (char *p = s; *p; p++)
		if (*p == ',' && n < 3) {
			*p = '\0';
			args[n++] = p + 1;
		}
	for (int i = 0; i < n; i++) {
		char *e;

		while (*args[i] == ' ')
			args[i]++;
		e = args[i] + strlen(args[i]);
		while (e > args[i] && e[-1] == ' ')
			*--e = '\0';
	}
	return n;
}

/* Grafana's PostgreSQL macro engine (pkg/tsdb/grafana-postgresql-datasource/macros.go):
 * `\$([_a-zA-Z0-9]+)\(([^\)]*)\)`, arguments split at commas; $__timeGroup directly followed
 * by ',' becomes $__timeGroupAlias (its pre-5.3 compatibility); an interval argument may be
 * quoted. */
static char *expand_macros(const char *sql, const char *what)
{
	struct buf b = {0};

	for (const char *p = sql; *p;) {
		const char *m = strstr(p, "$__"), *q, *close;
		char name[32], argbuf[512], *args[3], out[1024];
		size_t n = 0;
		int nargs;

		if (!m) {
			puts_(&b, p);
			break;
		}
		put(&b, p, (size_t)(m - p));
		q = m + 1;
		while (n + 1 < sizeof(name) &&
		       ((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') || (*q >= '0' && *q <= '9') || *q == '_'))
			name[n++] = *q++;
		name[n] = '\0';
		close = *q == '(' ? strchr(q, ')') : NULL;
		if (!close) {
			fprintf(stderr, "%s: \"$%s\" is not a macro call in:\n%s\n", what, name, sql);
			H_CHECK(0, &proc);
		}
		H_CHECK((size_t)(close - q - 1) < sizeof(argbuf), &proc);
		memcpy(argbuf, q + 1, (size_t)(close - q - 1));
		argbuf[close - q - 1] = '\0';
		p = close + 1;
		if (strcmp(name, "__timeGroup") == 0 && *p == ',')
			snprintf(name, sizeof(name), "__timeGroupAlias");
		nargs = split_args(argbuf, args);
		if (strcmp(name, "__timeFilter") == 0 && *args[0])
			snprintf(out, sizeof(out), "%s BETWEEN '%s' AND '%s'", args[0], t_from, t_to);
		else if (strcmp(name, "__timeFrom") == 0)
			snprintf(out, sizeof(out), "'%s'", t_from);
		else if (strcmp(name, "__timeTo") == 0)
			snprintf(out, sizeof(out), "'%s'", t_to);
		else if (strcmp(name, "__time") == 0 && *args[0])
			snprintf(out, sizeof(out), "%s AS \"time\"", args[0]);
		else if ((strcmp(name, "__timeGroup") == 0 || strcmp(name, "__timeGroupAlias") == 0) && nargs >= 2) {
			char *iv = args[1];
			double s;

			if (*iv == '\'') /* Trim(args[1], "'") */
				iv++;
			if (*iv && iv[strlen(iv) - 1] == '\'')
				iv[strlen(iv) - 1] = '\0';
			s = interval_s(iv, what);
			snprintf(out, sizeof(out), "floor(extract(epoch from %s)/%g)*%g%s", args[0], s, s,
				 strcmp(name, "__timeGroupAlias") == 0 ? " AS \"time\"" : "");
		} else {
			fprintf(stderr, "%s: macro $%s(%s) is not known to this test:\n%s\n", what, name, argbuf, sql);
			H_CHECK(0, &proc);
		}
		puts_(&b, out);
	}
	return b.s ? b.s : strdup("");
}

/* ---- the queries of the dashboards ------------------------------------------------------ */

struct query {
	char key[128]; /* "<uid>/panel:<id>", "<uid>/anno:<name>", "<uid>/var:<name>" */
	char title[256];
	char *sql;       /* interpolated */
	char *sql_quote; /* the same with the job "o'brien" */
};

static struct query queries[64];
static size_t nqueries;

static double interval_s(const char *s, const char *what);

static void add_query(const char *uid, const char *kind, const char *id, const char *title, const char *raw,
		      const char *min_interval)
{
	struct query *q;
	char *v;

	snprintf(interval, sizeof(interval), "%s", min_interval ? min_interval : "1m");
	snprintf(interval_ms, sizeof(interval_ms), "%.0f", 1000 * interval_s(interval, uid));

	H_CHECK(nqueries < sizeof(queries) / sizeof(queries[0]), &proc);
	q = &queries[nqueries++];
	snprintf(q->key, sizeof(q->key), "%s/%s:%s", uid, kind, id);
	snprintf(q->title, sizeof(q->title), "%s", title ? title : "");
	v = expand_vars(raw, q->key);
	q->sql = expand_macros(v, q->key);
	free(v);
	job_value = "o'brien";
	v = expand_vars(raw, q->key);
	job_value = NULL;
	q->sql_quote = expand_macros(v, q->key);
	free(v);
}

/* Panels (rows may nest them), each target's rawSql. */
static void walk_panels(const char *uid, json_t *panels)
{
	size_t i;
	json_t *p;

	json_array_foreach(panels, i, p)
	{
		json_t *targets = json_object_get(p, "targets"), *t;
		size_t k;
		char id[32];

		snprintf(id, sizeof(id), "%lld", (long long)json_integer_value(json_object_get(p, "id")));
		json_array_foreach(targets, k, t)
		{
			const char *sql = json_string_value(json_object_get(t, "rawSql"));

			if (!sql) {
				fprintf(stderr, "%s panel %s: a target without rawSql\n", uid, id);
				H_CHECK(0, &proc);
			}
			add_query(uid, "panel", k ? "x" : id, json_string_value(json_object_get(p, "title")), sql,
				  json_string_value(json_object_get(p, "interval")));
		}
		walk_panels(uid, json_object_get(p, "panels"));
	}
}

static char *read_file(const char *path);
static char *metrics_page; /* culpritd's /metrics, for the Prometheus dashboard */
static int prometheus_dashboards;

/* Every "datasource" in the JSON value v is the dashboard's variable of plugin ds_type (or
 * Grafana's built-in one); counts them in *n. */
static void check_ds_refs(const char *uid, json_t *v, const char *ds_type, int *n)
{
	const char *key;
	json_t *x;
	size_t i;

	if (json_is_array(v))
		json_array_foreach(v, i, x) check_ds_refs(uid, x, ds_type, n);
	if (!json_is_object(v))
		return;
	json_object_foreach(v, key, x)
	{
		if (strcmp(key, "datasource") == 0 && json_is_object(x)) {
			const char *t = json_string_value(json_object_get(x, "type"));
			const char *u = json_string_value(json_object_get(x, "uid"));

			if (t && strcmp(t, "grafana") == 0)
				continue;
			if (!t || !u || strcmp(t, ds_type) != 0 || strcmp(u, "${datasource}") != 0) {
				fprintf(stderr,
					"%s: a data source reference {type %s, uid %s}, not {%s, ${datasource}}\n", uid,
					t ? t : "-", u ? u : "-", ds_type);
				H_CHECK(0, &proc);
			}
			(*n)++;
		} else if (strcmp(key, "datasource") == 0 && !json_is_null(x)) {
			fprintf(stderr, "%s: a data source reference that is not an object\n", uid);
			H_CHECK(0, &proc);
		} else {
			check_ds_refs(uid, x, ds_type, n);
		}
	}
}

/* Panel ids unique (rows may nest panels); the count of panels in *n. */
static void check_panel_ids(const char *uid, json_t *panels, int *seen, int *n)
{
	size_t i;
	json_t *p;

	json_array_foreach(panels, i, p)
	{
		json_int_t id = json_integer_value(json_object_get(p, "id"));

		if (id <= 0 || id >= 1000 || seen[id]++) {
			fprintf(stderr, "%s: panel id %lld missing or repeated\n", uid, (long long)id);
			H_CHECK(0, &proc);
		}
		H_CHECK(json_is_object(json_object_get(p, "gridPos")), &proc);
		(*n)++;
		check_panel_ids(uid, json_object_get(p, "panels"), seen, n);
	}
}

/* The model as Grafana's import needs it (see the top); returns the data source's plugin. */
static const char *check_model(const char *uid, json_t *d, const char *text)
{
	json_t *in = json_array_get(json_object_get(d, "__inputs"), 0), *x;
	const char *name = json_string_value(json_object_get(in, "name"));
	const char *plugin = json_string_value(json_object_get(in, "pluginId"));
	char ref[96];
	int var = 0, refs = 0, seen[1000] = {0}, panels = 0;
	size_t i;

	H_CHECK(json_array_size(json_object_get(d, "__inputs")) == 1 && name && plugin, &proc);
	H_CHECK(strcmp(json_string_value(json_object_get(in, "type")), "datasource") == 0, &proc);
	snprintf(ref, sizeof(ref), "${%s}", name);
	H_CHECK(strstr(text, ref) != NULL, &proc); /* the input is used: the variable's default */
	H_CHECK(json_string_value(json_object_get(d, "title")) &&
			json_integer_value(json_object_get(d, "schemaVersion")),
		&proc);
	json_array_foreach(json_object_get(json_object_get(d, "templating"), "list"), i, x)
	{
		const char *t = json_string_value(json_object_get(x, "type"));

		if (t && strcmp(t, "datasource") == 0) {
			H_CHECK(strcmp(json_string_value(json_object_get(x, "name")), "datasource") == 0, &proc);
			H_CHECK(strcmp(json_string_value(json_object_get(x, "query")), plugin) == 0, &proc);
			var++;
		}
	}
	H_CHECK(var == 1, &proc);
	check_ds_refs(uid, d, plugin, &refs);
	check_panel_ids(uid, json_object_get(d, "panels"), seen, &panels);
	if (refs < panels || panels < 3)
		fprintf(stderr, "%s: %d data source references for %d panels\n", uid, refs, panels);
	H_CHECK(refs >= panels && panels >= 3, &proc);
	fprintf(stderr, "%s: model ok (%s through ${datasource}: %d references, %d panels)\n", uid, plugin, refs,
		panels);
	return plugin;
}

/* Every metric a PromQL expression of the Prometheus dashboard names is on /metrics. */
static void check_promql(const char *uid, json_t *panels, int *exprs)
{
	size_t i, k;
	json_t *p, *t;

	json_array_foreach(panels, i, p)
	{
		json_array_foreach(json_object_get(p, "targets"), k, t)
		{
			const char *e = json_string_value(json_object_get(t, "expr"));

			H_CHECK(e != NULL, &proc);
			(*exprs)++;
			for (const char *s = e; (s = strpbrk(s, "cp"));) {
				size_t n = strspn(s, "abcdefghijklmnopqrstuvwxyz_");
				char name[128], line[140];

				if (n < sizeof(name) &&
				    (strncmp(s, "culprit_", 8) == 0 || strncmp(s, "process_", 8) == 0) &&
				    (s == e || !strchr("abcdefghijklmnopqrstuvwxyz_", s[-1]))) {
					memcpy(name, s, n);
					name[n] = '\0';
					snprintf(line, sizeof(line), "\n%s", name);
					if (!strstr(metrics_page, line)) {
						fprintf(stderr, "%s panel \"%s\": %s is not on culpritd's /metrics\n",
							uid, json_string_value(json_object_get(p, "title")), name);
						H_CHECK(0, &proc);
					}
				}
				s += n ? n : 1;
			}
		}
		check_promql(uid, json_object_get(p, "panels"), exprs);
	}
}

static void load_dashboard(const char *path)
{
	json_error_t err;
	json_t *d = json_load_file(path, 0, &err), *x;
	const char *uid;
	size_t i;

	if (!d) {
		fprintf(stderr, "%s:%d: %s\n", path, err.line, err.text);
		H_CHECK(0, &proc);
	}
	uid = json_string_value(json_object_get(d, "uid"));
	H_CHECK(uid && json_is_array(json_object_get(d, "panels")), &proc);
	char *text = read_file(path);
	const char *plugin = check_model(uid, d, text);
	free(text);
	if (strcmp(plugin, "prometheus") == 0) {
		int exprs = 0;

		check_promql(uid, json_object_get(d, "panels"), &exprs);
		fprintf(stderr, "read %s (%s): %d expressions, every metric on /metrics\n", path, uid, exprs);
		prometheus_dashboards++;
		json_decref(d);
		return;
	}
	H_CHECK(strcmp(plugin, "postgres") == 0, &proc);
	walk_panels(uid, json_object_get(d, "panels"));
	json_array_foreach(json_object_get(json_object_get(d, "annotations"), "list"), i, x)
	{
		const char *sql = json_string_value(json_object_get(json_object_get(x, "target"), "rawSql"));

		if (json_integer_value(json_object_get(x, "builtIn")) == 1)
			continue;
		H_CHECK(sql != NULL, &proc);
		add_query(uid, "anno", json_string_value(json_object_get(x, "name")), NULL, sql, NULL);
	}
	json_array_foreach(json_object_get(json_object_get(d, "templating"), "list"), i, x)
	{
		const char *type = json_string_value(json_object_get(x, "type"));

		if (type && strcmp(type, "query") == 0) {
			const char *sql = json_string_value(json_object_get(x, "query"));

			H_CHECK(sql != NULL, &proc);
			add_query(uid, "var", json_string_value(json_object_get(x, "name")), NULL, sql, NULL);
		}
	}
	fprintf(stderr, "read %s (%s)\n", path, uid);
	json_decref(d);
}

/* ---- checks ------------------------------------------------------------------------------ */

static int col(const PGresult *r, const char *name)
{
	int c = PQfnumber(r, name);

	if (c < 0)
		fprintf(stderr, "no column \"%s\" in the answer\n", name);
	H_CHECK(c >= 0, &proc);
	return c;
}

/* Heat map (long format time, metric, value): node-1294 has the highest value of all, at
 * most K nodes plus the median row, and node-1294 is far above the median. */
static void check_node_heat(const PGresult *r)
{
	int m = col(r, "metric"), v = col(r, "value");
	char seen[64][32];
	int nseen = 0, best = -1, median_row = 0;
	double med_max = 0;

	for (int i = 0; i < PQntuples(r); i++) {
		const char *metric = PQgetvalue(r, i, m);
		int k;

		for (k = 0; k < nseen && strcmp(seen[k], metric) != 0; k++)
			;
		if (k == nseen) {
			H_CHECK(nseen < 64, &proc);
			snprintf(seen[nseen++], sizeof(seen[0]), "%s", metric);
		}
		if (strcmp(metric, "(median node)") == 0) {
			median_row = 1;
			if (atof(PQgetvalue(r, i, v)) > med_max)
				med_max = atof(PQgetvalue(r, i, v));
		}
		if (best < 0 || atof(PQgetvalue(r, i, v)) > atof(PQgetvalue(r, best, v)))
			best = i;
	}
	fprintf(stderr, "  heat map: %d rows (nodes), hottest %s %.0f ms, median node at most %.0f ms\n", nseen,
		PQgetvalue(r, best, m), atof(PQgetvalue(r, best, v)), med_max);
	H_CHECK(strcmp(PQgetvalue(r, best, m), "node-1294") == 0, &proc);
	H_CHECK(nseen <= atoi(TOPK) + 1 && median_row, &proc);
	H_CHECK(atof(PQgetvalue(r, best, v)) > 4 * med_max, &proc);
}

/* Drill-down into node-1294: its 8 ranks, 10352-10359. */
static void check_rank_heat(const PGresult *r)
{
	int m = col(r, "metric");
	unsigned seen = 0;

	for (int i = 0; i < PQntuples(r); i++) {
		int rank = atoi(PQgetvalue(r, i, m) + strlen("rank "));

		H_CHECK(strncmp(PQgetvalue(r, i, m), "rank ", 5) == 0 && rank >= 10352 && rank <= 10359, &proc);
		seen |= 1u << (rank - 10352);
	}
	H_CHECK(seen == 0xff, &proc);
}

/* Per pipeline stage: 9 stages, pp 7 the hottest. */
static void check_stage_heat(const PGresult *r)
{
	int m = col(r, "metric"), v = col(r, "value"), best = 0;

	for (int i = 1; i < PQntuples(r); i++)
		if (atof(PQgetvalue(r, i, v)) > atof(PQgetvalue(r, best, v)))
			best = i;
	H_CHECK(strcmp(PQgetvalue(r, best, m), "pp 7") == 0, &proc);
}

/* Iteration time: every iteration, about 30 s before the fault and about 90 s after. */
static void check_iteration_time(const PGresult *r)
{
	int c = col(r, "slowest rank"), med = col(r, "median rank"), n = PQntuples(r);
	double first = atof(PQgetvalue(r, 0, c)), last = atof(PQgetvalue(r, n - 1, c));

	fprintf(stderr, "  iteration time: %d iterations, slowest rank %.0f ms first, %.0f ms last\n", n, first, last);
	H_CHECK(n == ITERS, &proc);
	H_CHECK(last > 2.5 * first && atof(PQgetvalue(r, n - 1, med)) <= last, &proc);
}

/* Top suspects: node-1294's culprits first, at most K rows, each rank once. */
static void check_suspects(const PGresult *r)
{
	int node = col(r, "node"), role = col(r, "role"), rank = col(r, "rank"), n = PQntuples(r);

	H_CHECK(n <= atoi(TOPK), &proc);
	for (int i = 0; i < n && i < 8; i++) {
		H_CHECK(strcmp(PQgetvalue(r, i, node), "node-1294") == 0, &proc);
		H_CHECK(strcmp(PQgetvalue(r, i, role), "culprit") == 0, &proc);
		for (int k = 0; k < i; k++)
			H_CHECK(strcmp(PQgetvalue(r, i, rank), PQgetvalue(r, k, rank)) != 0, &proc);
	}
	H_CHECK(n >= 8, &proc);
}

static void check_first_is_node1294(const PGresult *r)
{
	H_CHECK(strcmp(PQgetvalue(r, 0, 0), "node-1294") == 0, &proc);
}

static void check_phases(const PGresult *r)
{
	int mlp = 0;

	for (int i = 0; i < PQntuples(r); i++)
		mlp |= strcmp(PQgetvalue(r, i, 0), "mlp") == 0;
	H_CHECK(mlp, &proc);
}

static void check_incident(const PGresult *r)
{
	H_CHECK(strstr(PQgetvalue(r, 0, col(r, "tags")), "compute_degradation") != NULL, &proc);
	H_CHECK(strstr(PQgetvalue(r, 0, col(r, "text")), "node-1294") != NULL, &proc);
	/* a region: it ends after it starts */
	H_CHECK(strcmp(PQgetvalue(r, 0, col(r, "timeend")), PQgetvalue(r, 0, col(r, "time"))) > 0, &proc);
}

static void check_event(const PGresult *r)
{
	H_CHECK(strstr(PQgetvalue(r, 0, col(r, "text")), "port_down on node-1294") != NULL, &proc);
	H_CHECK(strstr(PQgetvalue(r, 0, col(r, "tags")), "contradicted") != NULL, &proc);
}

static const struct {
	const char *key;
	void (*check)(const PGresult *r);
} checks[] = {
	{"culprit-phases/panel:1", check_node_heat},
	{"culprit-phases/panel:2", check_rank_heat},
	{"culprit-phases/panel:3", check_stage_heat},
	{"culprit-phases/var:node", check_first_is_node1294},
	{"culprit-phases/var:phase", check_phases},
	{"culprit-job/panel:1", check_iteration_time},
	{"culprit-job/panel:2", check_suspects},
	{"culprit-job/panel:4", check_stage_heat},
	{"culprit-job/anno:culprit incidents", check_incident},
	{"culprit-job/anno:out-of-band events", check_event},
};
static int checks_seen[sizeof(checks) / sizeof(checks[0])];

/* The plan of sql scans at most max daily partitions of table and never its DEFAULT one.
 * analyze: EXPLAIN ANALYZE, counting only the scans executed (runtime pruning of a lateral
 * lookup), else EXPLAIN (pruning at plan time). */
static void check_pruned(const char *sql, const char *table, int analyze, int max)
{
	char *explain = malloc(strlen(sql) + 32), part[64], def[64];
	PGresult *r;
	int parts = 0, deflt = 0;

	H_CHECK(explain != NULL, &proc);
	sprintf(explain, "EXPLAIN %s%s", analyze ? "ANALYZE " : "", sql);
	r = PQexec(db, explain);
	H_CHECK(PQresultStatus(r) == PGRES_TUPLES_OK, &proc);
	snprintf(part, sizeof(part), " %s_p", table);
	snprintf(def, sizeof(def), " %s_default", table);
	for (int i = 0; i < PQntuples(r); i++) {
		const char *line = PQgetvalue(r, i, 0);

		if (analyze && strstr(line, "never executed"))
			continue;
		parts += strstr(line, part) != NULL;
		deflt += strstr(line, def) != NULL;
	}
	fprintf(stderr, "  plan: %d scan(s) of %s partitions, %d of its default\n", parts, table, deflt);
	H_CHECK(parts >= 1 && parts <= max && deflt == 0, &proc);
	PQclear(r);
	free(explain);
}

static void run_all(void)
{
	for (size_t i = 0; i < nqueries; i++) {
		struct query *q = &queries[i];
		int64_t t0 = h_now_ms();
		PGresult *r = PQexec(db, q->sql_quote);
		int64_t ms;

		/* a job name with a quote: valid SQL */
		if (PQresultStatus(r) != PGRES_TUPLES_OK) {
			fprintf(stderr, "%s (%s) with the job \"o'brien\" failed: %s\n%s\n", q->key, q->title,
				PQerrorMessage(db), q->sql_quote);
			H_CHECK(0, &proc);
		}
		PQclear(r);
		t0 = h_now_ms();
		r = PQexec(db, q->sql);
		ms = h_now_ms() - t0;

		if (PQresultStatus(r) != PGRES_TUPLES_OK) {
			fprintf(stderr, "%s (%s) failed: %s\n%s\n", q->key, q->title, PQerrorMessage(db), q->sql);
			H_CHECK(0, &proc);
		}
		fprintf(stderr, "ok: %s (%s): %d rows in %lld ms\n", q->key, q->title, PQntuples(r), (long long)ms);
		if (PQntuples(r) == 0) {
			fprintf(stderr, "%s returned no rows:\n%s\n", q->key, q->sql);
			H_CHECK(0, &proc);
		}
		for (size_t k = 0; k < sizeof(checks) / sizeof(checks[0]); k++)
			if (strcmp(checks[k].key, q->key) == 0) {
				checks[k].check(r);
				checks_seen[k] = 1;
			}
		/* the time filter prunes the daily partitions of steps (the table under the views
		 * phases and iterations): the heat maps scan the range's day(s), iteration time
		 * walks them and looks up each iteration within a day of it, so the days before and
		 * after too (at most 5 scans for a range within a day, 7 across midnight: a CI run
		 * at 23:53 found 6) */
		if (strcmp(q->key, "culprit-phases/panel:1") == 0 || strcmp(q->key, "culprit-phases/panel:2") == 0)
			check_pruned(q->sql, "steps", 0, 2);
		if (strcmp(q->key, "culprit-job/panel:1") == 0)
			check_pruned(q->sql, "steps", 1, 2 * range_days + 3);
		PQclear(r);
	}
	for (size_t k = 0; k < sizeof(checks) / sizeof(checks[0]); k++)
		if (!checks_seen[k]) {
			fprintf(stderr, "no query %s in the dashboards\n", checks[k].key);
			H_CHECK(0, &proc);
		}
}

/* ---- the database ------------------------------------------------------------------------ */

static char *sql_text(const char *q)
{
	PGresult *r = PQexec(db, q);
	char *v;

	if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1) {
		fprintf(stderr, "%s: %s", q, PQerrorMessage(db));
		H_CHECK(0, &proc);
	}
	v = strdup(PQgetisnull(r, 0, 0) ? "" : PQgetvalue(r, 0, 0));
	PQclear(r);
	return v;
}

static char *read_file(const char *path)
{
	FILE *f = fopen(path, "r");
	struct buf b = {0};
	char chunk[4096];
	size_t n;

	if (!f) {
		perror(path);
		H_CHECK(0, &proc);
	}
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
		put(&b, chunk, n);
	fclose(f);
	H_CHECK(b.s != NULL, &proc);
	return b.s;
}

/* `culprit sim` while it runs: a failing check exits, and must not leave it behind. */
static pid_t sim_pid;

static void kill_sim(void)
{
	if (sim_pid > 0) {
		kill(sim_pid, SIGKILL);
		waitpid(sim_pid, NULL, 0);
	}
}

static void fill(void)
{
	pid_t sim = api_sim_start(&proc, "case5", ITERS);
	json_t *j = NULL;
	char body[256];
	char *ts = NULL;

	sim_pid = sim;
	atexit(kill_sim);

	/* The port-down event, timed like the seed's: 10 s (of the job's clock) before the first
	 * slow iteration, 4. The stream runs 100 times faster than the job's clock, so the time is
	 * given, not left to the server's clock; posted once the job exists, so its diagnosis
	 * judges it. */
	for (int64_t deadline = h_now_ms() + 110000;; poll(NULL, 0, 50)) {
		H_CHECK(h_now_ms() < deadline, &proc);
		ts = sql_text("SELECT (extract(epoch FROM min(i.ts)) * 1e6)::bigint + 20000000 FROM iterations i"
			      " JOIN jobs j ON j.id = i.job_id WHERE j.name = '" JOB "' AND i.iter = 3");
		if (*ts)
			break;
		free(ts);
	}
	snprintf(body, sizeof(body),
		 "{\"host\":\"node-1294\",\"kind\":\"port_down\",\"source\":\"oob\",\"detail\":\"eth3\",\"ts_us\":%s}",
		 ts);
	free(ts);
	H_CHECK(api_call(&proc, "POST", "/api/v1/events", body, &j) == 202, &proc);
	json_decref(j);
	{
		int rc = api_sim_wait(sim, 170000); /* reaps it, whatever the outcome */

		sim_pid = 0;
		H_CHECK(rc == 0, &proc);
	}

	/* every iteration stored, and a report judging the event */
	for (int64_t deadline = h_now_ms() + 60000;; poll(NULL, 0, 200)) {
		char *n = sql_text("SELECT count(*) FROM iterations");
		char *v = sql_text("SELECT count(*) FROM reports WHERE json->'events' @> "
				   "'[{\"host\":\"node-1294\",\"kind\":\"port_down\"}]'");
		int done = atol(n) == 12960L * ITERS && atol(v) > 0;

		free(n);
		free(v);
		if (done)
			break;
		H_CHECK(h_now_ms() < deadline, &proc);
	}
}

int main(void)
{
	char dir[512], dsn[512], path[1024];
	const char *extra[3];
	const char *src = getenv("CULPRIT_SOURCE_DIR");
	char *from, *to, *grants;
	PGresult *r;
	DIR *dd;
	struct dirent *e;
	int64_t t0;

	if (!src || !*src)
		src = CULPRIT_SOURCE_DIR_DEFAULT;
	h_tmpdir("grafana", dir, sizeof(dir));
	h_db_create("culprit_grafana", dsn, sizeof(dsn));
	extra[0] = "--db";
	extra[1] = dsn;
	extra[2] = NULL;
	H_CHECK(h_culpritd_start(&proc, dir, extra) == 0, &proc);
	db = PQconnectdb(dsn);
	H_CHECK(PQstatus(db) == CONNECTION_OK, &proc);

	t0 = h_now_ms();
	fill();
	fprintf(stderr, "case5, %d iterations, streamed and stored in %lld ms\n", ITERS, (long long)(h_now_ms() - t0));
	PQclear(PQexec(db, "ANALYZE"));

	/* the dashboard's time range: the data, as Grafana formats it */
	from = sql_text("SELECT to_char((min(ts) - interval '1 minute') AT TIME ZONE 'UTC', "
			"'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"') FROM iterations");
	to = sql_text("SELECT to_char((max(ts) + interval '3 minutes') AT TIME ZONE 'UTC', "
		      "'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"') FROM iterations");
	snprintf(t_from, sizeof(t_from), "%s", from);
	snprintf(t_to, sizeof(t_to), "%s", to);
	free(from);
	free(to);
	range_days = strncmp(t_from, t_to, 10) == 0 ? 1 : 2; /* the range is minutes long */
	fprintf(stderr, "time range %s .. %s\n", t_from, t_to);

	/* Grafana's role: SELECT on the views only (docs/grafana/grants.sql), and no more */
	snprintf(path, sizeof(path), "%s/docs/grafana/grants.sql", src);
	grants = read_file(path);
	r = PQexec(db, grants);
	if (PQresultStatus(r) != PGRES_COMMAND_OK) {
		fprintf(stderr, "%s: %s", path, PQerrorMessage(db));
		H_CHECK(0, &proc);
	}
	PQclear(r);
	free(grants);
	PQclear(PQexec(db, "SET ROLE culprit_grafana"));
	r = PQexec(db, "SELECT 1 FROM phases LIMIT 1");
	H_CHECK(PQresultStatus(r) == PGRES_FATAL_ERROR, &proc); /* permission denied */
	PQclear(r);

	H_CHECK(h_http(proc.http_port, "GET", "/metrics", NULL, &metrics_page) == 200, &proc);
	snprintf(path, sizeof(path), "%s/docs/grafana/dashboards", src);
	dd = opendir(path);
	H_CHECK(dd != NULL, &proc);
	while ((e = readdir(dd))) {
		size_t n = strlen(e->d_name);
		char file[1400];

		if (n > 5 && strcmp(e->d_name + n - 5, ".json") == 0) {
			snprintf(file, sizeof(file), "%s/%s", path, e->d_name);
			load_dashboard(file);
		}
	}
	closedir(dd);
	H_CHECK(nqueries >= 10 && prometheus_dashboards == 1, &proc);
	free(metrics_page);
	run_all();

	for (size_t i = 0; i < nqueries; i++) {
		free(queries[i].sql);
		free(queries[i].sql_quote);
	}
	PQfinish(db);
	H_CHECK(h_proc_stop(&proc, SIGTERM, 60000) == 0, &proc);
	fprintf(stderr, "test_grafana_dashboards: ok (%zu queries)\n", nqueries);
	return 0;
}
