/* event_body.c: see event_body.h. */
#include "event_body.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text.h"

/* a string field: 0 absent (or null), 1 present, -1 invalid (err written) */
static int field(json_t *o, size_t i, const char *name, size_t max, int required, const char **out, char *err,
		 size_t err_size)
{
	json_t *v = json_object_get(o, name);

	*out = NULL;
	if (!v || json_is_null(v)) {
		if (!required)
			return 0;
		snprintf(err, err_size, "event %zu: \"%s\" is required", i, name);
		return -1;
	}
	if (!json_is_string(v) || text_check(json_string_value(v), json_string_length(v), required ? 1 : 0, max)) {
		snprintf(err, err_size,
			 "event %zu: \"%s\" must be a string of %s1-%zu bytes of UTF-8 without control characters", i,
			 name, required ? "" : "0 or ", max);
		return -1;
	}
	*out = json_string_value(v);
	return 1;
}

static int one(json_t *o, size_t i, int64_t now_us, struct event_in *e, char *err, size_t err_size)
{
	json_t *ts;

	if (!json_is_object(o)) {
		snprintf(err, err_size, "event %zu is not a JSON object", i);
		return -1;
	}
	if (field(o, i, "host", EVENT_HOST_MAX, 1, &e->host, err, err_size) < 0 ||
	    field(o, i, "kind", EVENT_KIND_MAX, 1, &e->kind, err, err_size) < 0 ||
	    field(o, i, "source", EVENT_SOURCE_MAX, 0, &e->source, err, err_size) < 0 ||
	    field(o, i, "detail", EVENT_DETAIL_MAX, 0, &e->detail, err, err_size) < 0 ||
	    field(o, i, "job", EVENT_JOB_MAX, 0, &e->job, err, err_size) < 0)
		return -1;
	ts = json_object_get(o, "ts_us");
	if (ts && !json_is_null(ts)) {
		if (!json_is_integer(ts) || json_integer_value(ts) <= 0 || json_integer_value(ts) > EVENT_TS_MAX) {
			snprintf(err, err_size, "event %zu: \"ts_us\" must be a positive integer (epoch microseconds)",
				 i);
			return -1;
		}
		e->ts_us = json_integer_value(ts);
	} else {
		e->ts_us = now_us;
	}
	if (!e->source)
		e->source = "api";
	if (!e->detail)
		e->detail = "";
	return 0;
}

int event_body_parse(const char *body, size_t len, int64_t now_us, struct event_body *out, char *err, size_t err_size)
{
	json_error_t jerr;
	size_t n;

	memset(out, 0, sizeof(*out));
	if (len == 0) {
		snprintf(err, err_size, "the body is empty: one event object or an array of them");
		return 400;
	}
	out->root = json_loadb(body, len, 0, &jerr);
	if (!out->root) {
		/* jansson's text may quote the body's bytes: not when they are not text themselves */
		snprintf(err, err_size, "the body is not JSON in UTF-8: line %d, column %d: %s", jerr.line, jerr.column,
			 text_check_str(jerr.text, 0, sizeof(jerr.text)) ? "not UTF-8 text" : jerr.text);
		return 400;
	}
	n = json_is_array(out->root) ? json_array_size(out->root) : 1;
	if (n == 0 || n > EVENT_BODY_MAX) {
		snprintf(err, err_size, "between 1 and %d events per request, not %zu", EVENT_BODY_MAX, n);
		event_body_free(out);
		return n ? 413 : 400;
	}
	out->ev = calloc(n, sizeof(*out->ev));
	if (!out->ev) {
		snprintf(err, err_size, "out of memory");
		event_body_free(out);
		return 500;
	}
	out->n = n;
	for (size_t i = 0; i < n; i++)
		if (one(json_is_array(out->root) ? json_array_get(out->root, i) : out->root, i, now_us, &out->ev[i],
			err, err_size) < 0) {
			event_body_free(out);
			return 400;
		}
	return 0;
}

void event_body_free(struct event_body *b)
{
	json_decref(b->root);
	free(b->ev);
	memset(b, 0, sizeof(*b));
}
