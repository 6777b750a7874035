/* window.c: see window.h. */
#include "window.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>

#include "hugemem.h"

static void fail(char *err, size_t err_size, const char *what, PGconn *conn)
{
	snprintf(err, err_size, "could not read the job's %s: %s", what, PQerrorMessage(conn));
	err[strcspn(err, "\n")] = '\0';
}

/* The index of the database's name id in ids (ascending), or n when it is not there. */
static size_t name_index(const int32_t *ids, size_t n, int64_t id)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (ids[mid] < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && ids[lo] == id ? lo : n;
}

/* The integers of an array in PostgreSQL's text output ("{{1,NULL},{3,4}}", any depth), in
 * order, a NULL as has[i] = 0; with the elements of its first dimension in *outer. The count of
 * integers (at most cap are stored), or -1 when the text is not such an array. */
static long array_ints(const char *t, int64_t *v, uint8_t *has, size_t cap, size_t *outer)
{
	size_t n = 0, depth = 0;

	*outer = 0;
	if (*t != '{')
		return -1;
	for (; *t; t++) {
		if (*t == '{') {
			if (depth++ == 1)
				++*outer;
		} else if (*t == '}') {
			if (depth-- == 0)
				return -1;
		} else if (*t == ',') {
			continue;
		} else if (*t == '-' || (*t >= '0' && *t <= '9') || strncmp(t, "NULL", 4) == 0) {
			int null = *t == 'N', neg = *t == '-';
			const char *e = t + (null ? 4 : neg);
			uint64_t x = 0;

			for (; !null && *e >= '0' && *e <= '9' && e - t < 19 + neg; e++) /* an int8: 19 digits */
				x = x * 10 + (uint64_t)(*e - '0');
			if (depth == 0 || e == t + neg || (*e >= '0' && *e <= '9'))
				return -1;
			if (depth == 1)
				++*outer;
			if (n < cap) {
				v[n] = neg ? (int64_t)(0 - x) : (int64_t)x;
				has[n] = (uint8_t)!null;
			}
			n++;
			t = e - 1;
		} else {
			return -1;
		}
	}
	return depth == 0 ? (long)n : -1;
}

/* One row of steps (008_steps.sql: cells[rank][1 + phase][start, duration]), parsed. */
struct step_row {
	int64_t ts_us;
	uint32_t rank0, iter;
	size_t nr, ncol;                      /* ranks, columns (1 + phases stored) */
	size_t nranks, nnames, nkinds, ngrps; /* entries of the arrays below */
	int64_t *cells, *ranks, *names, *kinds, *grps;
	uint8_t *has;
};

#define STEP_MAX_RANKS 64  /* a row holds ranks within [rank0, rank0 + 64) */
#define STEP_MAX_COLS 1024 /* 1 + the phases of a set */

/* Row k of the steps query into *s (the buffers in it have room for a row); -1 when its
 * arrays are not what the writer stores. */
static int step_parse(const PGresult *res, int k, struct step_row *s)
{
	size_t o, cap = STEP_MAX_RANKS * STEP_MAX_COLS * 2;
	long n;
	uint8_t *has = s->has + cap;

	s->ts_us = strtoll(PQgetvalue(res, k, 0), NULL, 10);
	s->rank0 = (uint32_t)strtoul(PQgetvalue(res, k, 1), NULL, 10);
	s->iter = (uint32_t)strtoul(PQgetvalue(res, k, 2), NULL, 10);
	s->nranks = s->nnames = s->nkinds = s->ngrps = 0;
	/* the integer cells, or the bigint ones when a value did not fit */
	int col = PQgetisnull(res, k, 4) ? 5 : 4;
	n = PQgetisnull(res, k, col) ? -1 : array_ints(PQgetvalue(res, k, col), s->cells, s->has, cap, &o);
	if (n < 0 || (size_t)n > cap || o == 0 || o > STEP_MAX_RANKS || (size_t)n % (o * 2))
		return -1;
	s->nr = o;
	s->ncol = (size_t)n / (o * 2);
	if (!PQgetisnull(res, k, 3)) {
		n = array_ints(PQgetvalue(res, k, 3), s->ranks, has, STEP_MAX_RANKS, &o);
		if (n < 0 || n > STEP_MAX_RANKS)
			return -1;
		s->nranks = (size_t)n;
	}
	if (!PQgetisnull(res, k, 6)) { /* the set's names, kinds and groups */
		int64_t *dst[3] = {s->names, s->kinds, s->grps};
		size_t *cnt[3] = {&s->nnames, &s->nkinds, &s->ngrps};

		for (int a = 0; a < 3; a++) {
			n = PQgetisnull(res, k, 6 + a)
				    ? -1
				    : array_ints(PQgetvalue(res, k, 6 + a), dst[a], has, STEP_MAX_COLS, &o);
			if (n < 0 || n > STEP_MAX_COLS)
				return -1;
			*cnt[a] = (size_t)n;
		}
		if (s->nkinds != s->nnames || s->ngrps != s->nnames)
			return -1;
	}
	return 0;
}

/* cell [r][c][i] of a parsed row (r, c from 0), or has = 0 */
static int step_cell(const struct step_row *s, size_t r, size_t c, int i, int64_t *v)
{
	size_t at = (r * s->ncol + c) * 2 + (size_t)i;

	if (c >= s->ncol || !s->has[at])
		return 0;
	*v = s->cells[at];
	return 1;
}

/* The iteration and phase records of a parsed row, as the iterations and phases views give
 * them: counted (it, ph NULL), or stored. */
static void step_records(const struct step_row *s, const int32_t *ids, size_t nn, struct record_iter *it, size_t *ni,
			 struct record_phase *ph, size_t *np)
{
	for (size_t r = 0; r < s->nr; r++) {
		uint32_t rank = r < s->nranks ? (uint32_t)s->ranks[r] : s->rank0 + (uint32_t)r;
		int64_t off = 0, dur, start;

		step_cell(s, r, 0, 0, &off);
		if (step_cell(s, r, 0, 1, &dur)) {
			if (it)
				it[*ni] = (struct record_iter){
					.rank = rank, .iter = s->iter, .start_us = s->ts_us + off, .dur_us = dur};
			++*ni;
		}
		for (size_t p = 0; p < s->nnames; p++) {
			if (!step_cell(s, r, p + 1, 1, &dur))
				continue;
			if (ph) {
				size_t name = name_index(ids, nn, s->names[p]);

				if (name == nn)
					continue; /* not in the job's dictionary: cannot be */
				ph[*np] = (struct record_phase){
					.rank = rank,
					.iter = s->iter,
					.name = (uint32_t)name,
					.kind = (uint8_t)s->kinds[p],
					.group = (uint8_t)s->grps[p],
					.start_us = step_cell(s, r, p + 1, 0, &start) ? start : RECORD_NO_START,
					.dur_us = dur};
			}
			++*np;
		}
	}
}

/* The kernel summaries read, before the window's allocation: the records (name: the
 * database's id; sketch NULL), their sketches one after another in sk. */
struct kernel_rows {
	struct record_kernel *rec;
	size_t n, cap;
	uint8_t *sk;
	size_t sk_len, sk_cap;
};

static uint32_t be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* One row of COPY's binary format (its 11 fields) appended to kr: 1, 0 at the trailer, -1 when
 * it is not such a row or out of memory. */
static int kernel_row(const unsigned char *p, size_t len, struct kernel_rows *kr)
{
	static const int size[11] = {4, 4, 4, 2, 4, 8, 8, 8, 8, 8, -1}; /* -1: the sketch, any */
	int64_t v[10] = {0};
	const unsigned char *e = p + len, *sk = NULL;
	uint32_t sk_len = 0;

	if (len >= 2 && p[0] == 0xff && p[1] == 0xff)
		return 0;
	if (len < 2 || (p[0] << 8 | p[1]) != 11)
		return -1;
	p += 2;
	for (int f = 0; f < 11; f++) {
		if (e - p < 4)
			return -1;
		uint32_t n = be32(p);
		p += 4;
		if (n == 0xffffffffu) { /* NULL: only the sketch may be */
			if (f != 10)
				return -1;
			continue;
		}
		if ((size_t)(e - p) < n || (size[f] >= 0 && n != (uint32_t)size[f]))
			return -1;
		if (f == 10) {
			sk = p;
			sk_len = n;
		} else {
			uint64_t x = 0; /* the int2 and int4 fields are unsigned here (the casts below) */
			for (uint32_t i = 0; i < n; i++)
				x = x << 8 | p[i];
			v[f] = (int64_t)x;
		}
		p += n;
	}
	if (kr->n == kr->cap) {
		size_t cap = kr->cap ? kr->cap * 2 : 4096;
		struct record_kernel *r = realloc(kr->rec, cap * sizeof(*r));
		if (!r)
			return -1;
		kr->rec = r;
		kr->cap = cap;
	}
	if (kr->sk_len + sk_len > kr->sk_cap) {
		size_t cap = kr->sk_cap ? kr->sk_cap : 65536;
		while (cap < kr->sk_len + sk_len)
			cap *= 2;
		uint8_t *b = realloc(kr->sk, cap);
		if (!b)
			return -1;
		kr->sk = b;
		kr->sk_cap = cap;
	}
	if (sk_len)
		memcpy(kr->sk + kr->sk_len, sk, sk_len);
	kr->rec[kr->n++] = (struct record_kernel){.rank = (uint32_t)v[0],
						  .iter = (uint32_t)v[1],
						  .name = (uint32_t)v[2],
						  .kind = (uint8_t)v[3],
						  .count = (uint32_t)v[4],
						  .sum_us = v[5],
						  .min_us = v[6],
						  .max_us = v[7],
						  .p50_us = v[8],
						  .p99_us = v[9],
						  .sketch_len = sk_len}; /* its sketch after the rows' before */
	kr->sk_len += sk_len;
	return 1;
}

/* The job's kernel summaries from iteration first on into kr (ranks: at least the job's
 * ranks; since: a bound on ts, "" or " AND k.ts >= ..."), through COPY in its binary format:
 * a result of 544,320 rows took libpq 1.1 s of CPU and 330 MB (a PGresult holds every field
 * of every row), COPY a row at a time. The primary key (job_id, rank, iter, ...) is scanned
 * from (rank, first) on for each rank, so the job's history before the window is not read
 * (bench_window, the last 14 of 1,400 iterations: 0.62 s with a filter on iter alone, 0.19 s
 * so); a quarter slower when the window is all the job has. 0, or -1 with err set. */
static int kernels_read(PGconn *conn, const char *job, const char *first, uint32_t ranks, const char *since,
			struct kernel_rows *kr, char *err, size_t err_size)
{
	char *lit = PQescapeLiteral(conn, job, strlen(job)), *row = NULL;
	static const char header[] = "PGCOPY\n\377\r\n"; /* and a NUL: 11 bytes */
	char sql[2048];
	int rc = -1, n, body = 0;

	if (!lit) {
		fail(err, err_size, "kernels", conn);
		return -1;
	}
	n = snprintf(
		sql, sizeof(sql),
		"COPY (SELECT k.rank, k.iter, k.name_id, k.kind, k.count, k.sum_us, k.min_us, k.max_us, k.p50_us,"
		" k.p99_us, k.sketch FROM kernels k WHERE k.job_id = (SELECT id FROM jobs WHERE name = %s)"
		" AND k.rank = ANY (ARRAY(SELECT generate_series(0, greatest((SELECT world FROM jobs WHERE name = %s),"
		" %u) - 1))) AND k.iter >= %ld%s) TO STDOUT (FORMAT binary)",
		lit, lit, ranks, strtol(first, NULL, 10), since);
	PQfreemem(lit);
	if (n < 0 || (size_t)n >= sizeof(sql)) {
		snprintf(err, err_size, "could not read the job's kernels: the job's name is too long");
		return -1;
	}
	PGresult *res = PQexec(conn, sql);
	if (PQresultStatus(res) != PGRES_COPY_OUT) {
		fail(err, err_size, "kernels", conn);
		PQclear(res);
		return -1;
	}
	PQclear(res);
	snprintf(err, err_size, "could not read the job's kernels: not COPY's binary format");
	while ((n = PQgetCopyData(conn, &row, 0)) > 0) {
		const unsigned char *p = (const unsigned char *)row;
		size_t len = (size_t)n;

		if (!body) { /* the header, then its extension, before the first row */
			if (len < 19 || memcmp(p, header, sizeof(header)) != 0 || len < 19 + (size_t)be32(p + 15))
				break;
			len -= 19 + be32(p + 15);
			p += 19 + be32(p + 15);
			body = 1;
		}
		int got = len ? kernel_row(p, len, kr) : 1; /* the header may come alone */
		PQfreemem(row);
		row = NULL;
		if (got < 0)
			break;
		if (got == 0)
			rc = 0;
	}
	PQfreemem(row);
	if (n == -2)
		fail(err, err_size, "kernels", conn);
	while (n != -1 && (n = PQgetCopyData(conn, &row, 0)) != -1 && n != -2) /* the rest, unread */
		PQfreemem(row);
	while ((res = PQgetResult(conn))) {
		if (PQresultStatus(res) != PGRES_COMMAND_OK && rc == 0) {
			fail(err, err_size, "kernels", conn);
			rc = -1;
		}
		PQclear(res);
	}
	return rc;
}

struct storage_window *storage_window_read(PGconn *conn, const char *job, uint32_t from_iter, uint32_t kernels_from,
					   uint32_t max_iters, char *err, size_t err_size)
{
	char from[16], max[16], first[16], kfirst[16];
	const char *params[3] = {job, from, max};
	PGresult *st, *nm = NULL;
	struct storage_window *w = NULL;
	struct kernel_rows kr = {0};
	struct step_row row;
	size_t cap = STEP_MAX_RANKS * STEP_MAX_COLS * 2;

	snprintf(from, sizeof(from), "%u", from_iter);
	snprintf(max, sizeof(max), "%u", max_iters);
	/* the first iteration read: the last max_iters from from_iter on (steps' iter is indexed) */
	st = PQexecParams(conn,
			  "SELECT greatest($2::int, coalesce(max(s.iter), 0) - $3::int + 1) FROM steps s"
			  " JOIN jobs j ON j.id = s.job_id WHERE j.name = $1",
			  3, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(st) != PGRES_TUPLES_OK || PQntuples(st) != 1) {
		fail(err, err_size, "iterations", conn);
		PQclear(st);
		return NULL;
	}
	snprintf(first, sizeof(first), "%s", PQgetvalue(st, 0, 0));
	PQclear(st);
	params[1] = first;
	/* the rows of steps as stored, unpacked here: the iterations and phases views take an
	 * array subscript per value in SQL and a result row per phase, about twice as slow */
	st = PQexecParams(conn,
			  "SELECT (extract(epoch FROM s.ts) * 1000000)::bigint, s.rank0, s.iter, s.ranks, s.cells,"
			  " s.wide_cells, ps.names, ps.kinds, ps.grps"
			  " FROM steps s JOIN jobs j ON j.id = s.job_id LEFT JOIN phase_sets ps ON ps.set_id = s.set_id"
			  " WHERE j.name = $1 AND s.iter >= $2::int",
			  2, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(st) != PGRES_TUPLES_OK) {
		fail(err, err_size, "steps", conn);
		goto out;
	}
	nm = PQexecParams(conn,
			  "SELECT n.name_id, n.name FROM names n JOIN jobs j ON j.id = n.job_id WHERE j.name = $1"
			  " ORDER BY n.name_id",
			  1, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(nm) != PGRES_TUPLES_OK) {
		fail(err, err_size, "names", conn);
		goto out;
	}
	/* the ranks of the window's steps (the job's when it has no world), and a day before its
	 * earliest step: the kernels' daily partitions before that are not looked at (each would
	 * cost a look-up per rank) */
	uint32_t ranks = 0;
	int64_t earliest = INT64_MAX;
	char since[96] = "";
	for (int k = 0; k < PQntuples(st); k++) {
		uint32_t last = (uint32_t)strtoul(PQgetvalue(st, k, 1), NULL, 10) + STEP_MAX_RANKS;
		int64_t ts = strtoll(PQgetvalue(st, k, 0), NULL, 10);
		ranks = last > ranks ? last : ranks;
		earliest = ts < earliest ? ts : earliest;
	}
	if (earliest != INT64_MAX)
		snprintf(since, sizeof(since), " AND k.ts >= 'epoch'::timestamptz + %lld * interval '1 microsecond'",
			 (long long)earliest - 86400000000LL);
	snprintf(kfirst, sizeof(kfirst), "%lu", strtoul(first, NULL, 10) > kernels_from ? strtoul(first, NULL, 10)
											: (unsigned long)kernels_from);
	if (kernels_read(conn, job, kfirst, ranks, since, &kr, err, err_size) < 0)
		goto out;
	/* one buffer for a row's arrays: its cells and their NULLs, then its ranks and set */
	int64_t *buf = malloc(cap * sizeof(int64_t) + (cap + STEP_MAX_COLS) +
			      (STEP_MAX_RANKS + 3 * STEP_MAX_COLS) * sizeof(int64_t));
	if (!buf) {
		snprintf(err, err_size, "out of memory");
		goto out;
	}
	row.cells = buf;
	row.ranks = buf + cap;
	row.names = row.ranks + STEP_MAX_RANKS;
	row.kinds = row.names + STEP_MAX_COLS;
	row.grps = row.kinds + STEP_MAX_COLS;
	row.has = (uint8_t *)(row.grps + STEP_MAX_COLS);
	size_t ns = (size_t)PQntuples(st), nk = kr.n, nn = (size_t)PQntuples(nm), ni = 0, np = 0, text = 0,
	       sketches = kr.sk_len;

	for (size_t k = 0; k < ns; k++) { /* counted first: one allocation */
		if (step_parse(st, (int)k, &row) < 0) {
			snprintf(err, err_size, "could not read the job's steps: row %zu is not as stored", k);
			free(buf);
			goto out;
		}
		step_records(&row, NULL, 0, NULL, &ni, NULL, &np);
	}
	for (size_t k = 0; k < nn; k++)
		text += (size_t)PQgetlength(nm, (int)k, 1) + 1;
	/* on large pages: a window of 14 iterations of 12,960 ranks is 95 MB */
	w = hugemem_alloc(sizeof(*w) + ni * sizeof(*w->iters) + np * sizeof(*w->phases) + nk * sizeof(*w->kernels) +
				  nn * (sizeof(char *) + sizeof(int32_t)) + text + sketches,
			  0);
	if (!w) {
		snprintf(err, err_size, "out of memory for a window of %zu iterations, %zu phases and %zu kernels", ni,
			 np, nk);
		free(buf);
		goto out;
	}
	memset(w, 0, sizeof(*w));
	w->iters = (struct record_iter *)(w + 1);
	w->phases = (struct record_phase *)(w->iters + ni);
	w->kernels = (struct record_kernel *)(w->phases + np);
	w->names = (char **)(w->kernels + nk);
	int32_t *ids = (int32_t *)(w->names + nn); /* the database's name ids, ascending */
	char *t = (char *)(ids + nn);
	uint8_t *sk = (uint8_t *)(t + text);

	for (size_t k = 0; k < nn; k++) {
		size_t len = (size_t)PQgetlength(nm, (int)k, 1);

		ids[k] = (int32_t)strtol(PQgetvalue(nm, (int)k, 0), NULL, 10);
		memcpy(t, PQgetvalue(nm, (int)k, 1), len + 1);
		w->names[k] = t;
		t += len + 1;
	}
	w->n_names = nn;
	for (size_t k = 0; k < ns; k++) {
		step_parse(st, (int)k, &row);
		step_records(&row, ids, nn, w->iters, &w->n_iters, w->phases, &w->n_phases);
	}
	free(buf);
	if (kr.sk_len)
		memcpy(sk, kr.sk, kr.sk_len);
	for (size_t k = 0; k < nk; k++) {
		struct record_kernel r = kr.rec[k];
		size_t name = name_index(ids, nn, r.name);

		r.sketch = r.sketch_len ? sk : NULL;
		sk += r.sketch_len;
		if (name == nn)
			continue; /* not in the job's dictionary: cannot be */
		r.name = (uint32_t)name;
		w->kernels[w->n_kernels++] = r;
	}
out:
	PQclear(st);
	PQclear(nm);
	free(kr.rec);
	free(kr.sk);
	return w;
}
