/* heatmap.c: see heatmap.h. */
#include "heatmap.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "pgbuf.h"

int heatmap_data_alloc(struct heatmap_data *d, uint32_t world, uint32_t n_iters, int same)
{
	size_t cells = (size_t)world * n_iters;

	d->world = world;
	d->n_iters = n_iters;
	d->step = malloc((cells ? cells : 1) * sizeof(uint32_t));
	d->value = same ? d->step : malloc((cells ? cells : 1) * sizeof(uint32_t));
	d->role = calloc(world ? world : 1, sizeof(uint32_t));
	d->key = calloc(world ? world : 1, sizeof(uint32_t));
	d->host = calloc(world ? world : 1, sizeof(uint32_t));
	if (!d->step || !d->value || !d->role || !d->key || !d->host)
		return -1;
	for (size_t i = 0; i < cells; i++)
		d->step[i] = d->value[i] = HEATMAP_NONE;
	return 0;
}

static int push_name(char ***arr, uint32_t *n, const char *name)
{
	char **grown;

	if ((*n & (*n - 1)) == 0) { /* at 0, 1, 2, 4, ...: double */
		grown = realloc(*arr, (*n ? 2 * *n : 1) * sizeof(char *));
		if (!grown)
			return -1;
		*arr = grown;
	}
	if (!((*arr)[*n] = strdup(name)))
		return -1;
	(*n)++;
	return 0;
}

uint32_t heatmap_add_host(struct heatmap_data *d, const char *name)
{
	return push_name(&d->hosts, &d->n_hosts, name) < 0 ? UINT32_MAX : d->n_hosts - 1;
}

int heatmap_add_phase(struct heatmap_data *d, const char *name) { return push_name(&d->phases, &d->n_phases, name); }

int heatmap_add_culprit(struct heatmap_data *d, uint32_t rank)
{
	uint32_t *grown = realloc(d->culprits, (d->n_culprits + 1) * sizeof(uint32_t));

	if (!grown)
		return -1;
	d->culprits = grown;
	d->culprits[d->n_culprits++] = rank;
	return 0;
}

void heatmap_data_free(struct heatmap_data *d)
{
	if (d->value != d->step)
		free(d->value);
	free(d->step);
	free(d->role);
	free(d->key);
	free(d->host);
	for (uint32_t i = 0; i < d->n_hosts; i++)
		free(d->hosts[i]);
	free(d->hosts);
	for (uint32_t i = 0; i < d->n_phases; i++)
		free(d->phases[i]);
	free(d->phases);
	free(d->culprits);
	memset(d, 0, sizeof(*d));
}

int heatmap_group_parse(const char *s)
{
	static const char *const names[] = {"node", "stage", "dp"};

	for (int i = 0; i < 3; i++)
		if (strcmp(s, names[i]) == 0)
			return i;
	return -1;
}

const char *heatmap_group_name(enum heatmap_group g)
{
	return g == HEATMAP_BY_STAGE ? "stage" : g == HEATMAP_BY_DP ? "dp" : "node";
}

/* ---- medians ---- */

/* The median of v[0..n) (reordered), NAN for n == 0: Wirth's selection. */
static double median(uint32_t *v, size_t n)
{
	ptrdiff_t l = 0, m = (ptrdiff_t)n - 1, k = (ptrdiff_t)(n / 2);

	if (n == 0)
		return NAN;
	while (l < m) {
		uint32_t x = v[k], t;
		ptrdiff_t i = l, j = m;

		do {
			while (v[i] < x)
				i++;
			while (x < v[j])
				j--;
			if (i <= j) {
				t = v[i], v[i] = v[j], v[j] = t;
				i++, j--;
			}
		} while (i <= j);
		if (j < k)
			l = i;
		if (k < i)
			m = j;
	}
	return v[k];
}

/* med[role * n_iters + i]: the median of the metric over the role group's ranks in iteration
 * i (NAN: none reported); step_max / step_med: over every rank. The values are copied per
 * iteration first (a rank's are contiguous, an iteration's are not), the metric's in role
 * group order. 0, or -1 out of memory. */
static int medians(const struct heatmap_data *d, float *med, float *step_max, float *step_med)
{
	size_t W = d->world, I = d->n_iters;
	uint32_t *count = calloc(d->n_roles + 2, sizeof(uint32_t)), *at = calloc(d->n_roles + 2, sizeof(uint32_t));
	uint32_t *tv = malloc(W * I * sizeof(uint32_t) + 1), *ts = malloc(W * I * sizeof(uint32_t) + 1);
	int rc = -1;

	if (!count || !at || !tv || !ts)
		goto out;
	for (size_t r = 0; r < W; r++)
		count[d->role[r] + 1]++;
	for (uint32_t g = 0; g < d->n_roles; g++)
		count[g + 1] += count[g];
	memcpy(at, count, (d->n_roles + 1) * sizeof(uint32_t));
	for (size_t r = 0; r < W; r++) {
		size_t k = at[d->role[r]]++;

		for (size_t i = 0; i < I; i++) {
			tv[i * W + k] = d->value[r * I + i];
			ts[i * W + r] = d->step[r * I + i];
		}
	}
	for (size_t i = 0; i < I; i++) {
		uint32_t *v = tv + i * W, *st = ts + i * W, mx = 0;
		size_t n = 0;

		for (uint32_t g = 0; g < d->n_roles; g++) {
			size_t m = 0;

			for (uint32_t k = count[g]; k < count[g + 1]; k++) /* the reported ones to the front */
				if (v[k] != HEATMAP_NONE)
					v[count[g] + m++] = v[k];
			med[(size_t)g * I + i] = (float)(median(v + count[g], m) / 1000.0);
		}
		for (size_t r = 0; r < W; r++)
			if (st[r] != HEATMAP_NONE) {
				mx = st[r] > mx ? st[r] : mx;
				st[n++] = st[r];
			}
		step_max[i] = n ? (float)(mx / 1000.0) : NAN;
		step_med[i] = (float)(median(st, n) / 1000.0);
	}
	rc = 0;
out:
	free(count);
	free(at);
	free(tv);
	free(ts);
	return rc;
}

/* The byte of value v (us) against the log2 of its group's median (us; NAN: none). */
static uint8_t code_of(uint32_t v, float lmed)
{
	float x;

	if (v == HEATMAP_NONE || v == 0 || isnan(lmed))
		return 0;
	x = 1.5f +
	    (log2f((float)v) - lmed - (float)HEATMAP_LOG2_LO) * (254.0f / (float)(HEATMAP_LOG2_HI - HEATMAP_LOG2_LO));
	return x < 1 ? 1 : x >= 256 ? 255 : (uint8_t)x;
}

/* ---- the rows ---- */

/* qsort has no argument for the comparator, and several query workers may encode at once */
static _Thread_local const struct heatmap_data *sort_data;

static int cmp_rank(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	const struct heatmap_data *d = sort_data;

	if (d->key[x] != d->key[y])
		return d->key[x] < d->key[y] ? -1 : 1;
	if (d->host[x] != d->host[y])
		return d->host[x] < d->host[y] ? -1 : 1;
	return (x > y) - (x < y);
}

/* ranks in shown order: by group, host, rank */
static uint32_t *shown_order(const struct heatmap_data *d)
{
	uint32_t *order = malloc(d->world * sizeof(uint32_t) + 1);

	if (!order)
		return NULL;
	for (uint32_t r = 0; r < d->world; r++)
		order[r] = r;
	sort_data = d;
	qsort(order, d->world, sizeof(uint32_t), cmp_rank);
	sort_data = NULL;
	return order;
}

static void pad4(struct pgbuf *b)
{
	static const char zeros[4];

	pgbuf_put(b, zeros, (4 - b->len % 4) % 4);
}

static void put_index(struct pgbuf *b, uint32_t v, int wide)
{
	uint16_t s = (uint16_t)v;

	if (wide)
		pgbuf_put(b, &v, 4);
	else
		pgbuf_put(b, &s, 2);
}

static int is_culprit(const struct heatmap_data *d, uint32_t rank)
{
	for (uint32_t i = 0; i < d->n_culprits; i++)
		if (d->culprits[i] == rank)
			return 1;
	return 0;
}

static json_t *floats(const float *v, uint32_t n)
{
	json_t *a = json_array();

	for (uint32_t i = 0; i < n; i++)
		json_array_append_new(a, isnan(v[i]) ? json_null() : json_real(round(v[i] * 1000) / 1000));
	return a;
}

/* The label of an aggregated row of ranks order[a .. b]. */
static json_t *run_label(const struct heatmap_data *d, const uint32_t *order, uint32_t a, uint32_t b)
{
	char buf[600];
	uint32_t ka = d->key[order[a]], kb = d->key[order[b]];
	const char *what = d->group == HEATMAP_BY_STAGE ? "pp" : "dp";

	if (d->group == HEATMAP_BY_NODE) {
		const char *x = d->hosts[d->host[order[a]]], *y = d->hosts[d->host[order[b]]];

		if (ka == kb)
			snprintf(buf, sizeof(buf), "%.250s", x);
		else
			snprintf(buf, sizeof(buf), "%.250s \xe2\x80\xa6 %.250s", x, y);
	} else if (ka == kb) {
		snprintf(buf, sizeof(buf), "%s %u", what, ka);
	} else {
		snprintf(buf, sizeof(buf), "%s %u \xe2\x80\xa6 %u", what, ka, kb);
	}
	return json_string(buf);
}

static int gzip_body(struct pgbuf *b)
{
	z_stream z;
	uLong bound;
	char *out;
	int rc;

	memset(&z, 0, sizeof(z));
	if (deflateInit2(&z, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		return -1;
	bound = deflateBound(&z, (uLong)b->len);
	out = malloc(bound);
	if (!out) {
		deflateEnd(&z);
		return -1;
	}
	z.next_in = (Bytef *)b->p;
	z.avail_in = (uInt)b->len;
	z.next_out = (Bytef *)out;
	z.avail_out = (uInt)bound;
	rc = deflate(&z, Z_FINISH);
	deflateEnd(&z);
	if (rc != Z_STREAM_END) {
		free(out);
		return -1;
	}
	free(b->p);
	b->p = out;
	b->len = b->cap = z.total_out;
	return 0;
}

/* An encoding's working state: the rows shown (ranks in order, or runs of groups when
 * aggregated), the hosts they name (renumbered), the role groups' medians. */
struct enc {
	const struct heatmap_data *d;
	uint32_t from, to, n_rank_rows, n_rows, per;
	uint32_t *order, *row_first, *row_n, *used, n_used;
	float *med, *lmed, *smax, *smed;
	int aggregated, wide;
};

/* The rows: a rank each, or runs of groups (per groups a row) when there are too many cells. */
static void make_rows(struct enc *x)
{
	const struct heatmap_data *d = x->d;

	x->aggregated = (uint64_t)x->n_rank_rows * d->n_iters > HEATMAP_CELLS_MAX;
	x->n_rows = 0;
	if (!x->aggregated) {
		for (uint32_t k = 0; k < x->n_rank_rows; k++)
			x->row_first[x->n_rows] = x->from + k, x->row_n[x->n_rows++] = 1;
		return;
	}
	uint32_t n_groups = 0;

	for (uint32_t k = x->from; k <= x->to; k++)
		n_groups += k == x->from || d->key[x->order[k]] != d->key[x->order[k - 1]];
	x->per = (n_groups + HEATMAP_ROWS_MAX - 1) / HEATMAP_ROWS_MAX;
	for (uint32_t k = x->from, g = 0; k <= x->to; k++) {
		if (k == x->from || d->key[x->order[k]] != d->key[x->order[k - 1]]) {
			if (g++ % x->per == 0) {
				x->row_first[x->n_rows] = k;
				x->row_n[x->n_rows++] = 0;
			}
		}
		x->row_n[x->n_rows - 1]++;
	}
}

/* The hosts the rows name, renumbered in order of their first row. */
static void number_hosts(struct enc *x)
{
	const struct heatmap_data *d = x->d;

	for (uint32_t h = 0; h < d->n_hosts; h++)
		x->used[h] = UINT32_MAX;
	for (uint32_t k = x->from; x->n_rank_rows && k <= x->to; k++)
		if (x->used[d->host[x->order[k]]] == UINT32_MAX)
			x->used[d->host[x->order[k]]] = x->n_used++;
	x->wide = x->n_used > 65535 || d->n_roles > 65535;
}

/* groups: [first row, rows, culprits, label]: the runs of one group (a row each when aggregated) */
static json_t *group_runs(const struct enc *x)
{
	const struct heatmap_data *d = x->d;
	json_t *groups = json_array();

	for (uint32_t k = x->from, row = 0; x->n_rank_rows && k <= x->to; row++) {
		uint32_t e = k, c = 0;
		json_t *label;

		if (x->aggregated)
			e = x->row_first[row] + x->row_n[row] - 1;
		else
			while (e + 1 <= x->to && d->key[x->order[e + 1]] == d->key[x->order[k]])
				e++;
		for (uint32_t r = k; r <= e; r++)
			c += is_culprit(d, x->order[r]);
		label = d->group == HEATMAP_BY_NODE && !x->aggregated ? json_null() : run_label(d, x->order, k, e);
		json_array_append_new(
			groups, json_pack("[i, i, i, o]", (json_int_t)k, (json_int_t)e - k + 1, (json_int_t)c, label));
		k = e + 1;
	}
	return groups;
}

/* The header: the map's description, its hosts, phases, culprits and groups. NULL out of memory. */
static json_t *heatmap_meta(const struct enc *x)
{
	const struct heatmap_data *d = x->d;
	json_t *hosts = json_array(), *phases = json_array(), *culprits = json_array();
	char **names = calloc(x->n_used + 1, sizeof(char *));

	if (!names) {
		json_decref(hosts), json_decref(phases), json_decref(culprits);
		return NULL;
	}
	for (uint32_t h = 0; h < d->n_hosts; h++)
		if (x->used[h] != UINT32_MAX)
			names[x->used[h]] = d->hosts[h];
	for (uint32_t h = 0; h < x->n_used; h++)
		json_array_append_new(hosts, json_string(names[h]));
	free(names);
	for (uint32_t p = 0; p < d->n_phases; p++)
		json_array_append_new(phases, json_string(d->phases[p]));
	for (uint32_t c = 0; c < d->n_culprits; c++)
		json_array_append_new(culprits, json_integer(d->culprits[c]));
	return json_pack("{s:s, s:s, s:s, s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:b, s:i, s:i, s:o, s:o, s:o, s:o, s:o, "
			 "s:o, s:{s:f, s:f}}",
			 "job", d->job, "metric", d->metric, "group", heatmap_group_name(d->group), "source",
			 d->source ? d->source : "memory", "world", (json_int_t)d->world, "first_iter",
			 (json_int_t)d->first_iter, "n_iters", (json_int_t)d->n_iters, "rows", (json_int_t)x->n_rows,
			 "row_offset", (json_int_t)x->from, "total_rows", (json_int_t)d->world, "aggregated",
			 x->aggregated, "index_bytes", x->wide ? 4 : 2, "n_roles", (json_int_t)d->n_roles, "hosts",
			 hosts, "phases", phases, "culprits", culprits, "groups", group_runs(x), "step_max_ms",
			 floats(x->smax, d->n_iters), "step_median_ms", floats(x->smed, d->n_iters), "scale", "log2_lo",
			 HEATMAP_LOG2_LO, "log2_hi", HEATMAP_LOG2_HI);
}

/* The binary part after the header: each row's first rank, the medians, each row's host and
 * role, then each row's cells (the worst code of its ranks). */
static void put_body(const struct enc *x, struct pgbuf *b)
{
	const struct heatmap_data *d = x->d;

	for (uint32_t row = 0; row < x->n_rows; row++)
		pgbuf_put(b, &x->order[x->row_first[row]], 4);
	pgbuf_put(b, x->med, (size_t)d->n_roles * d->n_iters * sizeof(float));
	for (uint32_t row = 0; row < x->n_rows; row++)
		put_index(b, x->used[d->host[x->order[x->row_first[row]]]], x->wide);
	pad4(b);
	for (uint32_t row = 0; row < x->n_rows; row++)
		put_index(b, d->role[x->order[x->row_first[row]]], x->wide);
	pad4(b);
	for (uint32_t row = 0; row < x->n_rows && !b->failed; row++) {
		uint8_t cells[HEATMAP_ITERS_MAX] = {0};

		for (uint32_t r = x->row_first[row]; r < x->row_first[row] + x->row_n[row]; r++) {
			const uint32_t *v = d->value + (size_t)x->order[r] * d->n_iters;
			const float *lm = x->lmed + (size_t)d->role[x->order[r]] * d->n_iters;

			for (uint32_t i = 0; i < d->n_iters; i++) {
				uint8_t c = code_of(v[i], lm[i]);

				cells[i] = c > cells[i] ? c : cells[i];
			}
		}
		pgbuf_put(b, cells, d->n_iters);
	}
}

char *heatmap_encode(const struct heatmap_data *d, size_t *len, int *gzipped)
{
	struct enc x = {.d = d, .from = 0, .to = d->world ? d->world - 1 : 0, .per = 1};
	json_t *meta = NULL;
	struct pgbuf b = {0};
	char *text = NULL;
	uint32_t tl;
	int ok = 0;

	*gzipped = 0;
	if (d->n_iters > HEATMAP_ITERS_MAX)
		return NULL;
	if (d->has_rows) {
		x.from = d->row_from < d->world ? d->row_from : d->world;
		x.to = d->row_to < d->world ? d->row_to : (d->world ? d->world - 1 : 0);
	}
	x.n_rank_rows = d->world && x.from <= x.to && x.from < d->world ? x.to - x.from + 1 : 0;
	x.order = shown_order(d);
	x.med = calloc((size_t)d->n_roles * d->n_iters + 1, sizeof(float));
	x.lmed = calloc((size_t)d->n_roles * d->n_iters + 1, sizeof(float));
	x.smax = calloc(d->n_iters + 1, sizeof(float));
	x.smed = calloc(d->n_iters + 1, sizeof(float));
	x.used = malloc((d->n_hosts + 1) * sizeof(uint32_t));
	x.row_first = malloc((x.n_rank_rows + 1) * sizeof(uint32_t));
	x.row_n = malloc((x.n_rank_rows + 1) * sizeof(uint32_t));
	if (!x.order || !x.med || !x.lmed || !x.smax || !x.smed || !x.used || !x.row_first || !x.row_n ||
	    medians(d, x.med, x.smax, x.smed) < 0)
		goto out;
	for (size_t g = 0; g < (size_t)d->n_roles * d->n_iters; g++) /* log2 of the medians in us */
		x.lmed[g] = x.med[g] > 0 ? log2f(x.med[g] * 1000.0f) : NAN;
	make_rows(&x);
	number_hosts(&x);
	meta = heatmap_meta(&x);
	text = meta ? json_dumps(meta, JSON_COMPACT | JSON_REAL_PRECISION(10)) : NULL;
	if (!text)
		goto out;
	tl = (uint32_t)strlen(text);
	pgbuf_put(&b, "CHM1", 4);
	pgbuf_put(&b, &tl, 4);
	pgbuf_put(&b, text, tl);
	pad4(&b);
	put_body(&x, &b);
	if (!b.failed && d->gzip && gzip_body(&b) == 0)
		*gzipped = 1;
	ok = !b.failed;
out:
	json_decref(meta);
	free(text);
	free(x.order);
	free(x.med);
	free(x.lmed);
	free(x.smax);
	free(x.smed);
	free(x.used);
	free(x.row_first);
	free(x.row_n);
	if (!ok) {
		free(b.p);
		return NULL;
	}
	*len = b.len;
	return b.p;
}
