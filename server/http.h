/* http.h: the REST API and health endpoints (libevent evhttp, jansson). */
#ifndef CULPRIT_HTTP_H
#define CULPRIT_HTTP_H

#include <stdio.h>
#include "attrs.h"

struct server;

/* Binds cfg.http_listen and registers every route. -1 with a log line on failure. */
MUST_CHECK int http_start(struct server *s);
/* Applies the reloadable limits (body, headers, timeout) after SIGHUP. */
void http_apply_limits(struct server *s);
void http_stop(struct server *s);
/* Every REST route, "METHOD /path" a line (GET stands for GET and HEAD): culpritd --routes. */
void http_routes_print(FILE *f);

#endif
