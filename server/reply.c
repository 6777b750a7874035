/* reply.c: see reply.h. */
#include "reply.h"

#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void reply_send(struct evhttp_request *req, int status)
{
	struct evbuffer *out = evhttp_request_get_output_buffer(req);

	/* HEAD: GET's headers, Content-Length included, and no body (evhttp would send one) */
	if (evhttp_request_get_command(req) == EVHTTP_REQ_HEAD) {
		struct evkeyvalq *h = evhttp_request_get_output_headers(req);
		char len[32];

		snprintf(len, sizeof(len), "%zu", evbuffer_get_length(out));
		evhttp_remove_header(h, "Content-Length");
		evhttp_add_header(h, "Content-Length", len);
		evbuffer_drain(out, evbuffer_get_length(out));
	}
	evhttp_send_reply(req, status, NULL, NULL);
}

void reply_text(struct evhttp_request *req, int status, const char *json, size_t len)
{
	struct evkeyvalq *h = evhttp_request_get_output_headers(req);

	evhttp_add_header(h, "Content-Type", "application/json");
	evbuffer_add(evhttp_request_get_output_buffer(req), json, len);
	evbuffer_add(evhttp_request_get_output_buffer(req), "\n", 1);
	reply_send(req, status);
}

void reply_json(struct evhttp_request *req, int status, json_t *body)
{
	char *text = body ? json_dumps(body, JSON_COMPACT | JSON_REAL_PRECISION(10)) : NULL;

	json_decref(body);
	if (!text) {
		static const char oom[] = "{\"error\":\"internal error\",\"detail\":\"out of memory\"}";

		reply_text(req, 500, oom, sizeof(oom) - 1);
		return;
	}
	reply_text(req, status, text, strlen(text));
	free(text);
}

void reply_error(struct evhttp_request *req, int status, const char *error, const char *fmt, ...)
{
	char detail[512];
	va_list ap;
	json_t *body;

	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	body = json_pack("{s:s, s:s}", "error", error, "detail", detail);
	if (!body) {
		/* detail quotes the request (a path, a name) in bytes that are not UTF-8 */
		for (char *p = detail; *p; p++)
			if ((unsigned char)*p >= 0x80)
				*p = '?';
		body = json_pack("{s:s, s:s}", "error", error, "detail", detail);
	}
	reply_json(req, status, body);
}
