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

int import_csv_read(const char *path, const struct import_options *opt, const struct jsonl_handler *h, char *err,
		    size_t errlen)
{
	gzFile f = gz_open_read(path, 1 << 17);
	if (!f) {
		snprintf(err, errlen, "%s: could not open", path);
		return -1;
	}
	char line[4096];
	char *fld[64];
	struct row *rows = NULL;
	size_t nr = 0, cap = 0;
	int rc = -1, cw = -1, ct = -1, cv = -1;
	uint64_t ln = 0;
	uint32_t maxw = 0;
	while (gzgets(f, line, sizeof(line))) {
		ln++;
		if (!strchr(line, '\n') && !gzeof(f)) {
			snprintf(err, errlen, "%s:%llu: line longer than %zu bytes", path, (unsigned long long)ln,
				 sizeof(line) - 1);
			goto out;
		}
		chomp(line);
		if (!line[0])
			continue;
		int n = split(line, fld, 64);
		if (n > 64)
			n = 64;
		if (cw < 0) { /* the header: the first line that is not blank */
			for (int i = 0; i < n; i++) {
				if (strcmp(fld[i], "worker") == 0)
					cw = i;
				else if (strcmp(fld[i], "time") == 0)
					ct = i;
				else if (strcmp(fld[i], "batch_time_norm") == 0 || strcmp(fld[i], "batch_time") == 0 ||
					 strcmp(fld[i], "dur_ms") == 0)
					cv = i;
			}
			const char *miss = cw < 0 ? "worker" : ct < 0 ? "time" : cv < 0 ? "batch_time_norm" : NULL;
			if (miss) {
				snprintf(err, errlen,
					 "%s:%llu: missing column \"%s\" (need worker, time, batch_time_norm)", path,
					 (unsigned long long)ln, miss);
				goto out;
			}
			continue;
		}
		int need = cw > ct ? cw : ct;
		if (cv > need)
			need = cv;
		if (n <= need) {
			snprintf(err, errlen, "%s:%llu: %d fields, expected at least %d", path, (unsigned long long)ln,
				 n, need + 1);
			goto out;
		}
		double w, t, v;
		if (parse_num(fld[cw], &w) < 0 || w < 0 || w >= 1000000 || w != (double)(uint32_t)w) {
			snprintf(err, errlen, "%s:%llu: worker \"%s\" is not a worker number", path,
				 (unsigned long long)ln, fld[cw]);
			goto out;
		}
		if (parse_num(fld[ct], &t) < 0 || t < 0 || t > 1e15) {
			snprintf(err, errlen, "%s:%llu: time \"%s\" is not an iteration number", path,
				 (unsigned long long)ln, fld[ct]);
			goto out;
		}
		if (parse_num(fld[cv], &v) < 0 || v < 0 || v > 1e12) {
			snprintf(err, errlen, "%s:%llu: \"%s\" is not a duration", path, (unsigned long long)ln,
				 fld[cv]);
			goto out;
		}
		if (nr == cap) {
			size_t c = cap ? cap * 2 : 1024;
			struct row *r = realloc(rows, c * sizeof(*r));
			if (!r) {
				snprintf(err, errlen, "%s: out of memory", path);
				goto out;
			}
			rows = r;
			cap = c;
		}
		rows[nr++] = (struct row){(int64_t)t, (uint32_t)w, v};
		if ((uint32_t)w > maxw)
			maxw = (uint32_t)w;
	}
	{
		int e;
		const char *m = gzerror(f, &e);
		if (e != Z_OK && e != Z_STREAM_END) {
			snprintf(err, errlen, "%s:%llu: could not read: %s", path, (unsigned long long)ln, m);
			goto out;
		}
	}
	if (cw < 0) {
		snprintf(err, errlen, "%s:%llu: empty file (no header)", path, (unsigned long long)ln);
		goto out;
	}
	if (!nr) {
		snprintf(err, errlen, "%s:%llu: no rows", path, (unsigned long long)ln);
		goto out;
	}
	qsort(rows, nr, sizeof(*rows), cmp_row);
	uint32_t world = maxw + 1;
	const char *why = NULL;
	struct jsonl_job job = {.job = opt && opt->job ? opt->job : "csv", .world = world, .tp = 1, .cp = 1, .pp = 1,
				.dp = world, .ep = 1, .gpus_per_node = 1, .order = "tp-cp-ep-dp-pp"};
	if (h->job && h->job(h->ctx, &job, &why) < 0)
		goto bad;
	for (uint32_t w = 0; w < world; w++) {
		char host[32];
		snprintf(host, sizeof(host), "worker-%u", w);
		if (h->host && h->host(h->ctx, w, host, &why) < 0)
			goto bad;
	}
	/* iterations: one per distinct time; every worker starts it together (the slowest
	 * worker of the previous one sets the pace) */
	/* the end of the last time every worker reported */
	size_t complete_end = 0;
	for (size_t i = 0; i < nr;) {
		size_t j = i;
		uint32_t n = 0;
		while (j < nr && rows[j].time == rows[i].time) {
			if (j == i || rows[j].worker != rows[j - 1].worker)
				n++;
			j++;
		}
		if (n == world)
			complete_end = j;
		i = j;
	}
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
		if (i >= complete_end)
			break; /* trailing times not every worker reported: the log's ragged end */
		int64_t step = (int64_t)(slowest * 1000.0 + 0.5);
		for (size_t k = i; k < j; k++) {
			if (k > i && rows[k].worker == rows[k - 1].worker)
				continue; /* a duplicate row */
			int64_t dur = (int64_t)(rows[k].value * 1000.0 + 0.5);
			/* synchronous data parallelism: every worker's step lasts as long as the
			 * slowest one's; its own batch time is compute, the rest waiting */
			struct record_iter it = {rows[k].worker, iter, clock_us, step};
			if (h->iter && h->iter(h->ctx, &it, &why) < 0)
				goto bad;
			struct record_phase ph = {rows[k].worker,    iter, 0,  RECORD_KIND_COMPUTE,
						  RECORD_GROUP_NONE, 0,    dur};
			if (h->phase && h->phase(h->ctx, &ph, "batch", &why) < 0)
				goto bad;
			struct record_phase pw = {rows[k].worker,  iter, 0,         RECORD_KIND_COMM,
						  RECORD_GROUP_DP, dur,  step - dur};
			if (h->phase && h->phase(h->ctx, &pw, "sync_wait", &why) < 0)
				goto bad;
		}
		clock_us += (int64_t)(slowest * 1000.0 + 0.5);
		iter++;
		i = j;
	}
	rc = 0;
	goto out;
bad:
	import_rejected(path, why, err, errlen);
out:
	free(rows);
	gzclose(f);
	return rc;
}
