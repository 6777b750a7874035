/* routes.h: the /api/v1 routes (docs/api.md): one table of method, path and handler, above
 * every handler (api_jobs.c, api_events.c, api_trace.c, capture.c), which answer through
 * api.h and reply.h. routes.c parses the path (percent-decoded segments) and the query
 * string, checks the caller's token (auth.h) and calls the route's handler. Everything here
 * runs on the event loop. */
#ifndef CULPRIT_ROUTES_H
#define CULPRIT_ROUTES_H

#include <stdio.h>

struct server;
struct evhttp_request;

/* Routes a request whose path begins with /api/v1/ (http.c's fallback callback). */
void routes_dispatch(struct server *s, struct evhttp_request *req);
/* Its routes, "METHOD /api/v1/path" a line (culpritd --routes). */
void routes_print(FILE *f);

#endif
