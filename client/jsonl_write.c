/* jsonl_write.c: the interchange writer (jsonl.h): records as lines, through zlib when
 * gzipped. */
#include "jsonl.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

struct jsonl_writer {
	FILE *fp;
	gzFile gz;
	char buf[1 << 16];
	size_t len;
	int failed;
};

struct jsonl_writer *jsonl_writer_open(const char *path, int gz, char *err, size_t err_size)
{
	struct jsonl_writer *w = calloc(1, sizeof(*w));
	if (!w) {
		snprintf(err, err_size, "out of memory");
		return NULL;
	}
	if (gz)
		w->gz = gzopen(path, "wb3");
	else
		w->fp = strcmp(path, "-") == 0 ? stdout : fopen(path, "w");
	if (!w->gz && !w->fp) {
		snprintf(err, err_size, "could not open \"%s\": %s", path, strerror(errno));
		free(w);
		return NULL;
	}
	return w;
}

static void flush_buf(struct jsonl_writer *w)
{
	if (!w->len)
		return;
	if (w->gz) {
		if (gzwrite(w->gz, w->buf, (unsigned)w->len) != (int)w->len)
			w->failed = 1;
	} else if (fwrite(w->buf, 1, w->len, w->fp) != w->len) {
		w->failed = 1;
	}
	w->len = 0;
}

int jsonl_writer_close(struct jsonl_writer *w)
{
	flush_buf(w);
	int failed = w->failed;
	if (w->gz)
		failed |= gzclose(w->gz) != Z_OK;
	else if (w->fp == stdout)
		failed |= fflush(w->fp) != 0;
	else
		failed |= fclose(w->fp) != 0;
	free(w);
	return failed ? -1 : 0;
}

static void emit(struct jsonl_writer *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void emit(struct jsonl_writer *w, const char *fmt, ...)
{
	for (int tries = 0; tries < 2; tries++) {
		va_list ap;
		va_start(ap, fmt);
		int n = vsnprintf(w->buf + w->len, sizeof(w->buf) - w->len, fmt, ap);
		va_end(ap);
		if (n < 0) {
			w->failed = 1;
			return;
		}
		if (w->len + (size_t)n < sizeof(w->buf)) {
			w->len += (size_t)n;
			return;
		}
		flush_buf(w);
	}
	w->failed = 1; /* a line longer than the buffer */
}

/* JSON string body with escapes; s must be short (names, hosts) */
static const char *esc(const char *s, char *buf, size_t len)
{
	size_t o = 0;
	for (; s && *s && o + 7 < len; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\') {
			buf[o++] = '\\';
			buf[o++] = (char)c;
		} else if (c < 0x20) {
			o += (size_t)snprintf(buf + o, len - o, "\\u%04x", c);
		} else {
			buf[o++] = (char)c;
		}
	}
	buf[o] = 0;
	return buf;
}

void jsonl_write_job(struct jsonl_writer *w, const struct jsonl_job *j)
{
	char a[256], b[64];
	int cpu = j->device && strcmp(j->device, "cpu") == 0, gpu = j->device && strcmp(j->device, "gpu") == 0;
	emit(w,
	     "{\"type\":\"job\",\"job\":\"%s\",\"world\":%u,\"tp\":%u,\"cp\":%u,\"pp\":%u,\"dp\":%u,"
	     "\"ep\":%u,\"order\":\"%s\",\"gpus_per_node\":%u%s}\n",
	     esc(j->job, a, sizeof(a)), j->world, j->tp, j->cp, j->pp, j->dp, j->ep,
	     esc(j->order ? j->order : "tp-cp-ep-dp-pp", b, sizeof(b)), j->gpus_per_node,
	     cpu   ? ",\"device\":\"cpu\""
	     : gpu ? ",\"device\":\"gpu\""
		   : "");
}

void jsonl_write_host(struct jsonl_writer *w, const char *job, uint32_t rank, const char *host)
{
	char a[256], b[256];
	emit(w, "{\"type\":\"host\",\"job\":\"%s\",\"rank\":%u,\"host\":\"%s\"}\n", esc(job, a, sizeof(a)), rank,
	     esc(host, b, sizeof(b)));
}

void jsonl_write_iter(struct jsonl_writer *w, const char *job, const struct record_iter *r)
{
	char a[256];
	emit(w,
	     "{\"type\":\"iter\",\"job\":\"%s\",\"rank\":%u,\"iter\":%u,\"start_us\":%" PRId64 ",\"dur_us\":%" PRId64
	     "}\n",
	     esc(job, a, sizeof(a)), r->rank, r->iter, r->start_us, r->dur_us);
}

void jsonl_write_phase(struct jsonl_writer *w, const char *job, const struct record_phase *r, const char *name)
{
	char a[256], b[256], st[48] = "";
	if (r->start_us != RECORD_NO_START)
		snprintf(st, sizeof(st), ",\"start_us\":%" PRId64, r->start_us);
	emit(w,
	     "{\"type\":\"phase\",\"job\":\"%s\",\"rank\":%u,\"iter\":%u,\"name\":\"%s\",\"kind\":\"%s\","
	     "\"group\":\"%s\"%s,\"dur_us\":%" PRId64 "}\n",
	     esc(job, a, sizeof(a)), r->rank, r->iter, esc(name, b, sizeof(b)), record_kind_name(r->kind),
	     record_group_name(r->group), st, r->dur_us);
}

void jsonl_write_kernel(struct jsonl_writer *w, const char *job, const struct record_kernel *r, const char *name,
			const int64_t *durs, size_t ndurs)
{
	char a[256], b[256], list[1024];
	size_t o = 0;
	if (durs && ndurs) {
		list[o++] = '[';
		for (size_t i = 0; i < ndurs && o + 24 < sizeof(list); i++)
			o += (size_t)snprintf(list + o, sizeof(list) - o, "%s%" PRId64, i ? "," : "", durs[i]);
		list[o++] = ']';
		list[o] = 0;
		emit(w,
		     "{\"type\":\"kernel\",\"job\":\"%s\",\"rank\":%u,\"iter\":%u,\"name\":\"%s\","
		     "\"kind\":\"%s\",\"count\":%u,\"durs_us\":%s}\n",
		     esc(job, a, sizeof(a)), r->rank, r->iter, esc(name, b, sizeof(b)), record_kind_name(r->kind),
		     r->count, list);
	} else {
		emit(w,
		     "{\"type\":\"kernel\",\"job\":\"%s\",\"rank\":%u,\"iter\":%u,\"name\":\"%s\","
		     "\"kind\":\"%s\",\"count\":%u,\"sum_us\":%" PRId64 ",\"min_us\":%" PRId64 ",\"max_us\":%" PRId64
		     ",\"p50_us\":%" PRId64 ",\"p99_us\":%" PRId64 "}\n",
		     esc(job, a, sizeof(a)), r->rank, r->iter, esc(name, b, sizeof(b)), record_kind_name(r->kind),
		     r->count, r->sum_us, r->min_us, r->max_us, r->p50_us, r->p99_us);
	}
}

void jsonl_write_event(struct jsonl_writer *w, const char *job, const char *host, const char *kind, int64_t ts_us,
		       const char *source, const char *detail)
{
	char a[256], b[256], c[256], d[256], e[512];
	emit(w,
	     "{\"type\":\"event\",\"job\":\"%s\",\"host\":\"%s\",\"kind\":\"%s\",\"ts_us\":%" PRId64
	     ",\"source\":\"%s\",\"detail\":\"%s\"}\n",
	     esc(job, a, sizeof(a)), esc(host, b, sizeof(b)), esc(kind, c, sizeof(c)), ts_us, esc(source, d, sizeof(d)),
	     esc(detail, e, sizeof(e)));
}
