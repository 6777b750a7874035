/* import_csv.c: per-worker iteration-time CSV (see import_csv.h). */
#include "import_csv.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "readahead.h"

struct row {
	int64_t time;
	uint32_t worker;
	double value;
};

static int cmp_row(const void *a, const void *b)
{
	const struct row *x = a, *y = b;
	if (x->time != y->time)
		return x->time < y->time ? -1 : 1;
	return x->worker < y->worker ? -1 : x->worker > y->worker;
}

/* splits line in place on commas (no quoting in these files); returns the field count */
static int split(char *line, char **f, int cap)
{
	int n = 0;
	char *p = line;
	for (;;) {
		if (n < cap)
			f[n] = p;
		n++;
		char *c = strchr(p, ',');
		if (!c)
			break;
		*c = 0;
		p = c + 1;
	}
	return n;
}

static void chomp(char *s)
{
	size_t l = strlen(s);
	while (l && (s[l - 1] == '\n' || s[l - 1] == '\r' || s[l - 1] == ' '))
		s[--l] = 0;
}

static int parse_num(const char *s, double *out)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	while (*end == ' ')
		end++;
	if (end == s || *end || errno)
		return -1;
	*out = v;
	return 0;
}

/* A read: the file's columns and its rows so far. */
struct csv {
	const char *path;
	char *err;
	size_t err_size;
	uint64_t ln; /* the line read last */
	int cw, ct, cv; /* the worker, time and duration columns; -1 before the header */
	struct row *rows;
	size_t nr, cap;
	uint32_t maxw;
};

/* The header: the columns of worker, time and batch time. */
static int read_header(struct csv *c, char **fld, int n)
{
	for (int i = 0; i < n; i++) {
		if (strcmp(fld[i], "worker") == 0)
			c->cw = i;
		else if (strcmp(fld[i], "time") == 0)
			c->ct = i;
		else if (strcmp(fld[i], "batch_time_norm") == 0 || strcmp(fld[i], "batch_time") == 0 ||
			 strcmp(fld[i], "dur_ms") == 0)
			c->cv = i;
	}
	const char *miss = c->cw < 0 ? "worker" : c->ct < 0 ? "time" : c->cv < 0 ? "batch_time_norm" : NULL;
	if (miss) {
		snprintf(c->err, c->err_size, "%s:%llu: missing column \"%s\" (need worker, time, batch_time_norm)",
			 c->path, (unsigned long long)c->ln, miss);
		return -1;
	}
	return 0;
}

/* A row after the header: its worker, time and duration checked and kept. */
static int read_row(struct csv *c, char **fld, int n)
{
	int need = c->cw > c->ct ? c->cw : c->ct;
	if (c->cv > need)
		need = c->cv;
	if (n <= need) {
		snprintf(c->err, c->err_size, "%s:%llu: %d fields, expected at least %d", c->path,
			 (unsigned long long)c->ln, n, need + 1);
		return -1;
	}
	double w, t, v;
	if (parse_num(fld[c->cw], &w) < 0 || w < 0 || w >= 1000000 || w != (double)(uint32_t)w) {
		snprintf(c->err, c->err_size, "%s:%llu: worker \"%s\" is not a worker number", c->path,
			 (unsigned long long)c->ln, fld[c->cw]);
		return -1;
	}
	if (parse_num(fld[c->ct], &t) < 0 || t < 0 || t > 1e15) {
		snprintf(c->err, c->err_size, "%s:%llu: time \"%s\" is not an iteration number", c->path,
			 (unsigned long long)c->ln, fld[c->ct]);
		return -1;
	}
	if (parse_num(fld[c->cv], &v) < 0 || v < 0 || v > 1e12) {
		snprintf(c->err, c->err_size, "%s:%llu: \"%s\" is not a duration", c->path, (unsigned long long)c->ln,
			 fld[c->cv]);
		return -1;
	}
	if (c->nr == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 1024;
		struct row *r = realloc(c->rows, cap * sizeof(*r));
		if (!r) {
			snprintf(c->err, c->err_size, "%s: out of memory", c->path);
			return -1;
		}
		c->rows = r;
		c->cap = cap;
	}
	c->rows[c->nr++] = (struct row){(int64_t)t, (uint32_t)w, v};
	if ((uint32_t)w > c->maxw)
		c->maxw = (uint32_t)w;
	return 0;
}

/* Every line of f: the header, then the rows. */
static int read_lines(struct csv *c, gzFile f)
{
	char line[4096];
	char *fld[64];

	while (gzgets(f, line, sizeof(line))) {
		c->ln++;
		if (!strchr(line, '\n') && !gzeof(f)) {
			snprintf(c->err, c->err_size, "%s:%llu: line longer than %zu bytes", c->path,
				 (unsigned long long)c->ln, sizeof(line) - 1);
			return -1;
		}
		chomp(line);
		if (!line[0])
			continue;
		int n = split(line, fld, 64);
		if (n > 64)
			n = 64;
		/* the header is the first line that is not blank */
		if ((c->cw < 0 ? read_header(c, fld, n) : read_row(c, fld, n)) < 0)
			return -1;
	}
	int e;
	const char *m = gzerror(f, &e);
	if (e != Z_OK && e != Z_STREAM_END) {
		snprintf(c->err, c->err_size, "%s:%llu: could not read: %s", c->path, (unsigned long long)c->ln, m);
		return -1;
	}
	if (c->cw < 0) {
		snprintf(c->err, c->err_size, "%s:%llu: empty file (no header)", c->path, (unsigned long long)c->ln);
		return -1;
	}
	if (!c->nr) {
		snprintf(c->err, c->err_size, "%s:%llu: no rows", c->path, (unsigned long long)c->ln);
		return -1;
	}
	return 0;
}

/* The end of the last time every worker reported. */
static size_t complete_end(const struct row *rows, size_t nr, uint32_t world)
{
	size_t end = 0;

	for (size_t i = 0; i < nr;) {
		size_t j = i;
		uint32_t n = 0;
		while (j < nr && rows[j].time == rows[i].time) {
			if (j == i || rows[j].worker != rows[j - 1].worker)
				n++;
			j++;
		}
		if (n == world)
			end = j;
		i = j;
	}
	return end;
}

/* The rows (sorted by time and worker) as records: one iteration per distinct time; every
 * worker starts it together (the slowest worker of the previous one sets the pace). */
static int emit(const struct csv *c, const struct import_options *opt, const struct jsonl_handler *h,
		const char **why)
{
	const struct row *rows = c->rows;
	size_t nr = c->nr;
	uint32_t world = c->maxw + 1;
	struct jsonl_job job = {.job = opt && opt->job ? opt->job : "csv", .world = world, .tp = 1, .cp = 1, .pp = 1,
				.dp = world, .ep = 1, .gpus_per_node = 1, .order = "tp-cp-ep-dp-pp"};
	if (h->job && h->job(h->ctx, &job, why) < 0)
		return -1;
	for (uint32_t w = 0; w < world; w++) {
		char host[32];
		snprintf(host, sizeof(host), "worker-%u", w);
		if (h->host && h->host(h->ctx, w, host, why) < 0)
			return -1;
	}
	size_t end = complete_end(rows, nr, world);
	uint32_t iter = 0;
	int64_t clock_us = 0;
	for (size_t i = 0; i < nr;) {
		size_t j = i;
		double slowest = 0;
		while (j < nr && rows[j].time == rows[i].time) {
			if (rows[j].value > slowest)
				slowest = rows[j].value;
			j++;
		}
		if (i >= end)
			break; /* trailing times not every worker reported: the log's ragged end */
		int64_t step = (int64_t)(slowest * 1000.0 + 0.5);
		for (size_t k = i; k < j; k++) {
			if (k > i && rows[k].worker == rows[k - 1].worker)
				continue; /* a duplicate row */
			int64_t dur = (int64_t)(rows[k].value * 1000.0 + 0.5);
			/* synchronous data parallelism: every worker's step lasts as long as the
			 * slowest one's; its own batch time is compute, the rest waiting */
			struct record_iter it = {rows[k].worker, iter, clock_us, step};
			if (h->iter && h->iter(h->ctx, &it, why) < 0)
				return -1;
			struct record_phase ph = {rows[k].worker,    iter, 0,  RECORD_KIND_COMPUTE,
						  RECORD_GROUP_NONE, 0,    dur};
			if (h->phase && h->phase(h->ctx, &ph, "batch", why) < 0)
				return -1;
			struct record_phase pw = {rows[k].worker,  iter, 0,         RECORD_KIND_COMM,
						  RECORD_GROUP_DP, dur,  step - dur};
			if (h->phase && h->phase(h->ctx, &pw, "sync_wait", why) < 0)
				return -1;
		}
		clock_us += (int64_t)(slowest * 1000.0 + 0.5);
		iter++;
		i = j;
	}
	return 0;
}

int import_csv_read(const char *path, const struct import_options *opt, const struct jsonl_handler *h, char *err,
		    size_t err_size)
{
	struct csv c = {.path = path, .err = err, .err_size = err_size, .cw = -1, .ct = -1, .cv = -1};
	const char *why = NULL;
	int rc = -1;
	gzFile f = gz_open_read(path, 1 << 17);

	if (!f) {
		snprintf(err, err_size, "%s: could not open: %s", path, strerror(errno));
		return -1;
	}
	if (read_lines(&c, f) == 0) {
		qsort(c.rows, c.nr, sizeof(*c.rows), cmp_row);
		rc = emit(&c, opt, h, &why);
		if (rc < 0)
			import_rejected(path, why, err, err_size);
	}
	free(c.rows);
	gzclose(f);
	return rc;
}
