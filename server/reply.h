/* reply.h: answering a REST request (the routes of http.c and routes.c, and auth's refusals).
 * Every answer is JSON, errors are {"error": ..., "detail": ...} with the matching status;
 * all go out through reply_send. Event loop only. */
#ifndef CULPRIT_REPLY_H
#define CULPRIT_REPLY_H

#include <jansson.h>
#include <stddef.h>

struct evhttp_request;

/* Sends req's answer as it is (HEAD gets GET's headers, Content-Length included, and no body). */
void reply_send(struct evhttp_request *req, int status);
/* JSON text (a newline is added). */
void reply_text(struct evhttp_request *req, int status, const char *json, size_t len);
/* Steals body; 500 when it cannot be written (out of memory). */
void reply_json(struct evhttp_request *req, int status, json_t *body);
/* {"error": error, "detail": the formatted text}; bytes of detail that are not UTF-8 (a
 * quoted path or name) are answered as '?'. */
void reply_error(struct evhttp_request *req, int status, const char *error, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

#endif
