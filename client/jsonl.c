/* jsonl.c: interchange JSONL reader (plain or gzip through zlib) and writer. */
#include "jsonl.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

/* --- reading --- */

static int get_u32(json_t *o, const char *key, int required, uint32_t def, uint32_t *out,
		   const char **why)
{
	json_t *v = json_object_get(o, key);
	if (!v) {
		if (required) {
			*why = key;
			return -2;
		}
		*out = def;
		return 0;
	}
	if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > UINT32_MAX) {
		*why = key;
		return -3;
	}
	*out = (uint32_t)json_integer_value(v);
	return 0;
}

static int get_i64(json_t *o, const char *key, int required, int64_t def, int64_t *out,
		   const char **why)
{
	json_t *v = json_object_get(o, key);
	if (!v || json_is_null(v)) {
		if (required) {
			*why = key;
			return -2;
		}
		*out = def;
		return 0;
	}
	if (json_is_integer(v))
		*out = (int64_t)json_integer_value(v);
	else if (json_is_real(v))
		*out = (int64_t)json_real_value(v);
	else {
		*why = key;
		return -3;
	}
	return 0;
}

static const char *get_str(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);
	return json_is_string(v) ? json_string_value(v) : NULL;
}

/* field problems: -2 missing, -3 wrong type */
static void field_msg(char *buf, size_t len, int rc, const char *key)
{
	snprintf(buf, len, "%s field \"%s\"", rc == -2 ? "missing" : "invalid", key);
}

static int handle_line(json_t *o, const struct jsonl_handler *h, char *msg, size_t msglen)
{
	const char *why = NULL;
	int rc = 0;
	const char *type = get_str(o, "type");
	if (!type) {
		snprintf(msg, msglen, "missing field \"type\"");
		return -1;
	}
#define U32(key, req, def, dst)                                          \
	do {                                                             \
		if ((rc = get_u32(o, key, req, def, dst, &why)) < 0) {   \
			field_msg(msg, msglen, rc, why);                 \
			return -1;                                       \
		}                                                        \
	} while (0)
#define I64(key, req, def, dst)                                          \
	do {                                                             \
		if ((rc = get_i64(o, key, req, def, dst, &why)) < 0) {   \
			field_msg(msg, msglen, rc, why);                 \
			return -1;                                       \
		}                                                        \
	} while (0)
	if (strcmp(type, "job") == 0) {
		struct jsonl_job j;
		memset(&j, 0, sizeof(j));
		j.job = get_str(o, "job");
		j.order = get_str(o, "order");
		U32("world", 1, 0, &j.world);
		U32("tp", 0, 1, &j.tp);
		U32("cp", 0, 1, &j.cp);
		U32("pp", 0, 1, &j.pp);
		U32("dp", 0, 0, &j.dp);
		U32("ep", 0, 1, &j.ep);
		U32("gpus_per_node", 0, 8, &j.gpus_per_node);
		if (!j.dp && j.tp && j.cp && j.pp)
			j.dp = j.world / (j.tp * j.cp * j.pp);
		if (h->job && h->job(h->ctx, &j, &why) < 0)
			goto handler;
	} else if (strcmp(type, "host") == 0) {
		uint32_t rank;
		U32("rank", 1, 0, &rank);
		const char *host = get_str(o, "host");
		if (!host) {
			snprintf(msg, msglen, "missing field \"host\"");
			return -1;
		}
		if (h->host && h->host(h->ctx, rank, host, &why) < 0)
			goto handler;
	} else if (strcmp(type, "iter") == 0) {
		struct record_iter r;
		U32("rank", 1, 0, &r.rank);
		U32("iter", 1, 0, &r.iter);
		I64("start_us", 0, 0, &r.start_us);
		I64("dur_us", 1, 0, &r.dur_us);
		if (r.dur_us < 0) {
			snprintf(msg, msglen, "negative dur_us");
			return -1;
		}
		if (h->iter && h->iter(h->ctx, &r, &why) < 0)
			goto handler;
	} else if (strcmp(type, "phase") == 0) {
		struct record_phase r;
		memset(&r, 0, sizeof(r));
		U32("rank", 1, 0, &r.rank);
		U32("iter", 1, 0, &r.iter);
		I64("start_us", 0, RECORD_NO_START, &r.start_us);
		I64("dur_us", 1, 0, &r.dur_us);
		const char *name = get_str(o, "name"), *kind = get_str(o, "kind");
		const char *group = get_str(o, "group");
		if (!name || !kind) {
			snprintf(msg, msglen, "missing field \"%s\"", name ? "kind" : "name");
			return -1;
		}
		int k = record_kind_parse(kind), g = group ? record_group_parse(group) : 0;
		if (k < 0 || g < 0) {
			snprintf(msg, msglen, "unknown %s \"%s\"", k < 0 ? "kind" : "group", k < 0 ? kind : group);
			return -1;
		}
		r.kind = (uint8_t)k;
		r.group = (uint8_t)g;
		if (h->phase && h->phase(h->ctx, &r, name, &why) < 0)
			goto handler;
	} else if (strcmp(type, "kernel") == 0) {
		struct record_kernel r;
		memset(&r, 0, sizeof(r));
		U32("rank", 1, 0, &r.rank);
		U32("iter", 1, 0, &r.iter);
		U32("count", 0, 0, &r.count);
		const char *name = get_str(o, "name"), *kind = get_str(o, "kind");
		if (!name || !kind) {
			snprintf(msg, msglen, "missing field \"%s\"", name ? "kind" : "name");
			return -1;
		}
		int k = record_kind_parse(kind);
		if (k < 0) {
			snprintf(msg, msglen, "unknown kind \"%s\"", kind);
			return -1;
		}
		r.kind = (uint8_t)k;
		json_t *d = json_object_get(o, "durs_us");
		int64_t small[64], *durs = small;
		size_t nd = 0;
		if (d) {
			if (!json_is_array(d)) {
				snprintf(msg, msglen, "invalid field \"durs_us\"");
				return -1;
			}
			nd = json_array_size(d);
			if (nd > 64 && !(durs = malloc(nd * sizeof(*durs)))) {
				snprintf(msg, msglen, "out of memory");
				return -1;
			}
			for (size_t i = 0; i < nd; i++) {
				json_t *x = json_array_get(d, i);
				if (!json_is_number(x)) {
					if (durs != small)
						free(durs);
					snprintf(msg, msglen, "invalid field \"durs_us\"");
					return -1;
				}
				durs[i] = (int64_t)json_number_value(x);
			}
			if (!r.count)
				r.count = (uint32_t)nd;
		} else {
			I64("sum_us", 0, 0, &r.sum_us);
			I64("min_us", 1, 0, &r.min_us);
			I64("max_us", 1, 0, &r.max_us);
			I64("p50_us", 1, 0, &r.p50_us);
			I64("p99_us", 0, r.max_us, &r.p99_us);
		}
		int bad = h->kernel && h->kernel(h->ctx, &r, name, nd ? durs : NULL, nd, &why) < 0;
		if (durs != small)
			free(durs);
		if (bad)
			goto handler;
	} else if (strcmp(type, "event") == 0) {
		int64_t ts;
		I64("ts_us", 0, 0, &ts);
		const char *host = get_str(o, "host"), *kind = get_str(o, "kind");
		if (!host || !kind) {
			snprintf(msg, msglen, "missing field \"%s\"", host ? "kind" : "host");
			return -1;
		}
		if (h->event && h->event(h->ctx, host, kind, ts, get_str(o, "source"), get_str(o, "detail"), &why) < 0)
			goto handler;
	}
	/* unknown types are ignored (forward compatibility) */
	return 0;
handler:
	snprintf(msg, msglen, "%s", why ? why : "rejected");
	return -1;
#undef U32
#undef I64
}

int jsonl_read(const char *path, const struct jsonl_handler *h, uint64_t *lines, char *err,
	       size_t errlen)
{
	gzFile f = strcmp(path, "-") == 0 ? gzdopen(0, "rb") : gzopen(path, "rb");
	if (!f) {
		snprintf(err, errlen, "%s: could not open: %s", path, strerror(errno ? errno : ENOENT));
		return -1;
	}
	gzbuffer(f, 1 << 18);
	size_t cap = 1 << 16, len;
	char *buf = malloc(cap);
	uint64_t line = 0;
	int rc = 0;
	if (!buf) {
		gzclose(f);
		snprintf(err, errlen, "%s: out of memory", path);
		return -1;
	}
	for (;;) {
		len = 0;
		int eof = 0;
		for (;;) {
			if (!gzgets(f, buf + len, (int)(cap - len))) {
				eof = 1;
				break;
			}
			len += strlen(buf + len);
			if (len && buf[len - 1] == '\n')
				break;
			if (len + 1 >= cap) {
				char *nb = realloc(buf, cap * 2);
				if (!nb) {
					snprintf(err, errlen, "%s:%" PRIu64 ": line too long", path, line + 1);
					rc = -1;
					goto done;
				}
				buf = nb;
				cap *= 2;
			}
		}
		if (eof && len == 0) {
			int zerr;
			const char *zmsg = gzerror(f, &zerr);
			if (zerr != Z_OK && zerr != Z_STREAM_END) {
				snprintf(err, errlen, "%s:%" PRIu64 ": %s", path, line + 1, zmsg);
				rc = -1;
			}
			break;
		}
		line++;
		while (len && (buf[len - 1] == '\n' || buf[len - 1] == '\r'))
			buf[--len] = 0;
		size_t i = 0;
		while (i < len && (buf[i] == ' ' || buf[i] == '\t'))
			i++;
		if (i == len)
			continue;
		json_error_t jerr;
		json_t *o = json_loadb(buf + i, len - i, 0, &jerr);
		if (!o || !json_is_object(o)) {
			snprintf(err, errlen, "%s:%" PRIu64 ": malformed JSON: %s", path, line,
				 o ? "not an object" : jerr.text);
			json_decref(o);
			rc = -1;
			break;
		}
		char msg[200];
		if (handle_line(o, h, msg, sizeof(msg)) < 0) {
			snprintf(err, errlen, "%s:%" PRIu64 ": %s", path, line, msg);
			json_decref(o);
			rc = -1;
			break;
		}
		json_decref(o);
		if (eof)
			break;
	}
done:
	if (lines)
		*lines = line;
	free(buf);
	gzclose(f);
	return rc;
}

/* --- writing --- */

struct jsonl_writer {
	FILE *fp;
	gzFile gz;
	char buf[1 << 16];
	size_t len;
	int failed;
};

struct jsonl_writer *jsonl_writer_open(const char *path, int gz, char *err, size_t errlen)
{
	struct jsonl_writer *w = calloc(1, sizeof(*w));
	if (!w) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	if (gz)
		w->gz = gzopen(path, "wb3");
	else
		w->fp = strcmp(path, "-") == 0 ? stdout : fopen(path, "w");
	if (!w->gz && !w->fp) {
		snprintf(err, errlen, "could not open \"%s\": %s", path, strerror(errno));
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
	emit(w,
	     "{\"type\":\"job\",\"job\":\"%s\",\"world\":%u,\"tp\":%u,\"cp\":%u,\"pp\":%u,\"dp\":%u,"
	     "\"ep\":%u,\"order\":\"%s\",\"gpus_per_node\":%u}\n",
	     esc(j->job, a, sizeof(a)), j->world, j->tp, j->cp, j->pp, j->dp, j->ep,
	     esc(j->order ? j->order : "tp-cp-ep-dp-pp", b, sizeof(b)), j->gpus_per_node);
}

void jsonl_write_host(struct jsonl_writer *w, const char *job, uint32_t rank, const char *host)
{
	char a[256], b[256];
	emit(w, "{\"type\":\"host\",\"job\":\"%s\",\"rank\":%u,\"host\":\"%s\"}\n", esc(job, a, sizeof(a)),
	     rank, esc(host, b, sizeof(b)));
}

void jsonl_write_iter(struct jsonl_writer *w, const char *job, const struct record_iter *r)
{
	char a[256];
	emit(w, "{\"type\":\"iter\",\"job\":\"%s\",\"rank\":%u,\"iter\":%u,\"start_us\":%" PRId64
		",\"dur_us\":%" PRId64 "}\n",
	     esc(job, a, sizeof(a)), r->rank, r->iter, r->start_us, r->dur_us);
}

void jsonl_write_phase(struct jsonl_writer *w, const char *job, const struct record_phase *r,
		       const char *name)
{
	char a[256], b[256], st[48] = "";
	if (r->start_us != RECORD_NO_START)
		snprintf(st, sizeof(st), ",\"start_us\":%" PRId64, r->start_us);
	emit(w, "{\"type\":\"phase\",\"job\":\"%s\",\"rank\":%u,\"iter\":%u,\"name\":\"%s\",\"kind\":\"%s\","
		"\"group\":\"%s\"%s,\"dur_us\":%" PRId64 "}\n",
	     esc(job, a, sizeof(a)), r->rank, r->iter, esc(name, b, sizeof(b)), record_kind_name(r->kind),
	     record_group_name(r->group), st, r->dur_us);
}

void jsonl_write_kernel(struct jsonl_writer *w, const char *job, const struct record_kernel *r,
			const char *name, const int64_t *durs, size_t ndurs)
{
	char a[256], b[256], list[1024];
	size_t o = 0;
	if (durs && ndurs) {
		list[o++] = '[';
		for (size_t i = 0; i < ndurs && o + 24 < sizeof(list); i++)
			o += (size_t)snprintf(list + o, sizeof(list) - o, "%s%" PRId64, i ? "," : "", durs[i]);
		list[o++] = ']';
		list[o] = 0;
		emit(w, "{\"type\":\"kernel\",\"job\":\"%s\",\"rank\":%u,\"iter\":%u,\"name\":\"%s\","
			"\"kind\":\"%s\",\"count\":%u,\"durs_us\":%s}\n",
		     esc(job, a, sizeof(a)), r->rank, r->iter, esc(name, b, sizeof(b)),
		     record_kind_name(r->kind), r->count, list);
	} else {
		emit(w, "{\"type\":\"kernel\",\"job\":\"%s\",\"rank\":%u,\"iter\":%u,\"name\":\"%s\","
			"\"kind\":\"%s\",\"count\":%u,\"sum_us\":%" PRId64 ",\"min_us\":%" PRId64
			",\"max_us\":%" PRId64 ",\"p50_us\":%" PRId64 ",\"p99_us\":%" PRId64 "}\n",
		     esc(job, a, sizeof(a)), r->rank, r->iter, esc(name, b, sizeof(b)),
		     record_kind_name(r->kind), r->count, r->sum_us, r->min_us, r->max_us, r->p50_us,
		     r->p99_us);
	}
}

void jsonl_write_event(struct jsonl_writer *w, const char *job, const char *host, const char *kind,
		       int64_t ts_us, const char *source, const char *detail)
{
	char a[256], b[256], c[256], d[256], e[512];
	emit(w, "{\"type\":\"event\",\"job\":\"%s\",\"host\":\"%s\",\"kind\":\"%s\",\"ts_us\":%" PRId64
		",\"source\":\"%s\",\"detail\":\"%s\"}\n",
	     esc(job, a, sizeof(a)), esc(host, b, sizeof(b)), esc(kind, c, sizeof(c)), ts_us,
	     esc(source, d, sizeof(d)), esc(detail, e, sizeof(e)));
}
