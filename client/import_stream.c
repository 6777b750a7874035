/* import_stream.c: the streaming Chrome-trace event reader (yajl callbacks over gzread
 * chunks: memory stays bounded whatever the file size). */
#include "import_stream.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_parse.h>
#include <zlib.h>

#include "jsonl.h"
#include "readahead.h"

enum key {
	K_OTHER = 0,
	K_TRACEEVENTS,
	K_DIST,
	K_PH,
	K_CAT,
	K_NAME,
	K_TS,
	K_DUR,
	K_PID,
	K_TID,
	K_ARGS,
	K_STEP,
	K_RANK,
	K_WORLD,
};

#define MAX_DEPTH 64

struct sp {
	const struct import_stream_handler *h;
	int depth;
	int top;      /* 0 unknown, 1 map, 2 array */
	int ev_arr;   /* depth of the events array, 0 none yet */
	int ev_open;  /* inside it */
	int in_event; /* inside an event map (depth ev_arr + 1) */
	int in_dist;
	int64_t rank, world;
	unsigned char key[MAX_DEPTH + 2];
	struct import_stream_event ev;
	const char *why;
	uint64_t events;
};

static enum key classify(const unsigned char *k, size_t len, int where)
{
#define IS(s) (len == sizeof(s) - 1 && memcmp(k, s, len) == 0)
	switch (where) {
	case 0: /* top-level object */
		if (IS("traceEvents"))
			return K_TRACEEVENTS;
		if (IS("distributedInfo"))
			return K_DIST;
		break;
	case 1: /* event */
		if (IS("ph"))
			return K_PH;
		if (IS("cat"))
			return K_CAT;
		if (IS("name"))
			return K_NAME;
		if (IS("ts"))
			return K_TS;
		if (IS("dur"))
			return K_DUR;
		if (IS("pid"))
			return K_PID;
		if (IS("tid"))
			return K_TID;
		if (IS("args"))
			return K_ARGS;
		break;
	case 2: /* args */
		if (IS("step"))
			return K_STEP;
		if (IS("name"))
			return K_NAME;
		break;
	case 3: /* distributedInfo */
		if (IS("rank"))
			return K_RANK;
		if (IS("world_size"))
			return K_WORLD;
		break;
	}
	return K_OTHER;
#undef IS
}

/* where scalars at the current depth land: 1 event, 2 args, 3 dist, 0 nowhere */
static int scope(const struct sp *p)
{
	if (p->in_event && p->depth == p->ev_arr + 1)
		return 1;
	if (p->in_event && p->depth == p->ev_arr + 2 && p->key[p->ev_arr + 1] == K_ARGS)
		return 2;
	if (p->in_dist && p->depth == 2)
		return 3;
	return 0;
}

static void reset_event(struct import_stream_event *e)
{
	e->ph[0] = e->cat[0] = e->name[0] = e->arg_name[0] = 0;
	e->has_ts = e->has_dur = 0;
	e->ts = e->dur = 0;
	e->pid = e->tid = -1;
	e->step = -1;
}

static int cb_map_key(void *ctx, const unsigned char *k, size_t len)
{
	struct sp *p = ctx;
	int where = p->depth == 1 && p->top == 1 ? 0 : -1;
	int s = scope(p);
	if (s == 1)
		where = 1;
	else if (s == 2)
		where = 2;
	else if (s == 3)
		where = 3;
	p->key[p->depth] = where < 0 ? K_OTHER : (unsigned char)classify(k, len, where);
	return 1;
}

static int push(struct sp *p)
{
	if (p->depth >= MAX_DEPTH) {
		p->why = "nesting deeper than 64 levels";
		return 0;
	}
	p->depth++;
	p->key[p->depth] = K_OTHER;
	return 1;
}

/* a scalar or container in the events array itself must be an object */
static int check_element(struct sp *p, int is_map)
{
	if (p->ev_open && p->depth == p->ev_arr && !is_map) {
		p->why = "an element of traceEvents is not an object";
		return 0;
	}
	return 1;
}

static int cb_start_map(void *ctx)
{
	struct sp *p = ctx;
	if (p->depth == 0)
		p->top = 1;
	int parent_key = p->key[p->depth];
	if (!check_element(p, 1) || !push(p))
		return 0;
	if (p->ev_open && p->depth == p->ev_arr + 1) {
		p->in_event = 1;
		reset_event(&p->ev);
	} else if (p->top == 1 && p->depth == 2 && parent_key == K_DIST) {
		p->in_dist = 1;
	} else if (p->in_event && p->depth == p->ev_arr + 2 && parent_key != K_ARGS) {
		/* a nested object in an event field we read is a wrong type */
		if (parent_key == K_TS || parent_key == K_DUR || parent_key == K_NAME || parent_key == K_PH) {
			p->why = "an event field has the wrong type (object)";
			return 0;
		}
	}
	return 1;
}

static int cb_end_map(void *ctx)
{
	struct sp *p = ctx;
	if (p->in_event && p->depth == p->ev_arr + 1) {
		p->in_event = 0;
		p->events++;
		if (p->h->event && p->h->event(p->h->ctx, &p->ev, &p->why) < 0)
			return 0;
	} else if (p->in_dist && p->depth == 2) {
		p->in_dist = 0;
		if (p->h->dist && p->h->dist(p->h->ctx, p->rank, p->world, &p->why) < 0)
			return 0;
	}
	p->depth--;
	return 1;
}

static int cb_start_array(void *ctx)
{
	struct sp *p = ctx;
	if (p->depth == 0)
		p->top = 2;
	int parent_key = p->key[p->depth];
	if (!check_element(p, 0) || !push(p))
		return 0;
	if (p->top == 2 && p->depth == 1)
		p->ev_arr = 1, p->ev_open = 1;
	else if (p->top == 1 && p->depth == 2 && parent_key == K_TRACEEVENTS && !p->ev_arr)
		p->ev_arr = 2, p->ev_open = 1;
	else if (p->in_event && p->depth == p->ev_arr + 2 &&
		 (parent_key == K_TS || parent_key == K_DUR || parent_key == K_NAME || parent_key == K_PH)) {
		p->why = "an event field has the wrong type (array)";
		return 0;
	}
	return 1;
}

static int cb_end_array(void *ctx)
{
	struct sp *p = ctx;
	if (p->ev_open && p->depth == p->ev_arr)
		p->ev_open = 0;
	p->depth--;
	return 1;
}

static int bad_type(struct sp *p, int s, int is_num)
{
	int k = p->key[p->depth];
	if (s == 1 && !is_num && (k == K_TS || k == K_DUR)) {
		p->why = k == K_TS ? "event field \"ts\" is not a number" : "event field \"dur\" is not a number";
		return 1;
	}
	if (s == 1 && is_num && (k == K_PH || k == K_NAME || k == K_CAT)) {
		p->why = "event field \"ph\", \"cat\" or \"name\" is not a string";
		return 1;
	}
	if (s == 2 && !is_num && k == K_STEP) {
		p->why = "event field \"args.step\" is not a number";
		return 1;
	}
	return 0;
}

static int cb_scalar_other(void *ctx)
{
	struct sp *p = ctx;
	if (!check_element(p, 0))
		return 0;
	int s = scope(p);
	if (s && bad_type(p, s, 0))
		return 0;
	return 1;
}

static int cb_bool(void *ctx, int b)
{
	(void)b;
	return cb_scalar_other(ctx);
}

static int cb_null(void *ctx) { return cb_scalar_other(ctx); }

static void copy_str(char *dst, size_t cap, const unsigned char *s, size_t len)
{
	if (len >= cap)
		len = cap - 1;
	memcpy(dst, s, len);
	dst[len] = 0;
}

static int cb_string(void *ctx, const unsigned char *s, size_t len)
{
	struct sp *p = ctx;
	if (!check_element(p, 0))
		return 0;
	int sc = scope(p);
	if (!sc)
		return 1;
	if (bad_type(p, sc, 0))
		return 0;
	int k = p->key[p->depth];
	if (sc == 1) {
		if (k == K_PH)
			copy_str(p->ev.ph, sizeof(p->ev.ph), s, len);
		else if (k == K_CAT)
			copy_str(p->ev.cat, sizeof(p->ev.cat), s, len);
		else if (k == K_NAME)
			copy_str(p->ev.name, sizeof(p->ev.name), s, len);
	} else if (sc == 2 && k == K_NAME) {
		copy_str(p->ev.arg_name, sizeof(p->ev.arg_name), s, len);
	}
	return 1;
}

/* a JSON number as an integer; -1 (absent) when it is out of range or not finite */
static int64_t to_i64(double v) { return v >= -9.0e18 && v <= 9.0e18 ? (int64_t)v : -1; }

static int cb_number(void *ctx, const char *s, size_t len)
{
	struct sp *p = ctx;
	if (!check_element(p, 0))
		return 0;
	int sc = scope(p);
	if (!sc)
		return 1;
	if (bad_type(p, sc, 1))
		return 0;
	int k = p->key[p->depth];
	if (k == K_OTHER || (sc == 2 && k != K_STEP))
		return 1;
	char tmp[64];
	if (len >= sizeof(tmp))
		len = sizeof(tmp) - 1;
	memcpy(tmp, s, len);
	tmp[len] = 0;
	double v = strtod(tmp, NULL);
	if (sc == 1) {
		if (k == K_TS) {
			p->ev.ts = v;
			p->ev.has_ts = 1;
		} else if (k == K_DUR) {
			p->ev.dur = v;
			p->ev.has_dur = 1;
		} else if (k == K_PID) {
			p->ev.pid = to_i64(v);
		} else if (k == K_TID) {
			p->ev.tid = to_i64(v);
		}
	} else if (sc == 2) {
		p->ev.step = to_i64(v);
	} else if (sc == 3) {
		if (k == K_RANK)
			p->rank = to_i64(v);
		else if (k == K_WORLD)
			p->world = to_i64(v);
	}
	return 1;
}

static const yajl_callbacks callbacks = {
	cb_null,      cb_bool,    NULL,       NULL,           cb_number,    cb_string,
	cb_start_map, cb_map_key, cb_end_map, cb_start_array, cb_end_array,
};

int import_stream_events(const char *path, const struct import_stream_handler *h, uint64_t *bytes, char *err,
			 size_t errlen)
{
	gzFile f = gz_open_read(path, 1 << 17);
	if (!f) {
		snprintf(err, errlen, "%s: could not open", path);
		return -1;
	}
	struct sp *p = calloc(1, sizeof(*p));
	const size_t CH = 1 << 16;
	unsigned char *buf = malloc(CH);
	yajl_handle y = p && buf ? yajl_alloc(&callbacks, NULL, p) : NULL;
	int rc = -1;
	uint64_t base = 0;
	if (!y) {
		snprintf(err, errlen, "%s: out of memory", path);
		goto out;
	}
	p->h = h;
	p->rank = p->world = -1;
	for (;;) {
		int n = gzread(f, buf, (unsigned)CH);
		if (n < 0) {
			int e;
			const char *m = gzerror(f, &e);
			snprintf(err, errlen, "%s: byte %llu: bad gzip data: %s", path, (unsigned long long)base,
				 m ? m : "?");
			goto out;
		}
		if (n == 0) {
			int e;
			const char *m = gzerror(f, &e);
			if (e != Z_OK) {
				snprintf(err, errlen, "%s: byte %llu: truncated or bad gzip data: %s", path,
					 (unsigned long long)base, m ? m : "?");
				goto out;
			}
			break;
		}
		yajl_status st = yajl_parse(y, buf, (size_t)n);
		if (st != yajl_status_ok) {
			uint64_t pos = base + yajl_get_bytes_consumed(y);
			if (st == yajl_status_client_canceled) {
				snprintf(err, errlen, "%s: byte %llu: %s", path, (unsigned long long)pos,
					 p->why ? p->why : "rejected");
			} else {
				unsigned char *m = yajl_get_error(y, 0, buf, (size_t)n);
				char *nl = strchr((char *)m, '\n');
				if (nl)
					*nl = 0;
				snprintf(err, errlen, "%s: byte %llu: malformed JSON: %s", path,
					 (unsigned long long)pos, (char *)m);
				yajl_free_error(y, m);
			}
			goto out;
		}
		base += (uint64_t)n;
	}
	if (yajl_complete_parse(y) != yajl_status_ok || p->depth != 0 || p->top == 0) {
		snprintf(err, errlen, "%s: byte %llu: truncated JSON (the document does not end)", path,
			 (unsigned long long)base);
		goto out;
	}
	if (!p->ev_arr) {
		snprintf(err, errlen, "%s: no traceEvents array", path);
		goto out;
	}
	if (bytes)
		*bytes = base;
	rc = 0;
out:
	if (y)
		yajl_free(y);
	free(buf);
	free(p);
	gzclose(f);
	return rc;
}
