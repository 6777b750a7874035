/* console.h: the web console (docs/console.md): the static HTML, CSS and JavaScript of
 * console/ served at "/" and under "/console/". The files are read whole at start-up (at most
 * CONSOLE_BYTES_MAX in all) and answered from memory; the pages read everything through the
 * REST API with the user's token, so the files themselves are served without one (they hold
 * no data). Every answer carries a Content-Security-Policy that allows scripts, styles and
 * requests from culpritd's own origin only, and no inline script. Event loop only. */
#ifndef CULPRIT_CONSOLE_H
#define CULPRIT_CONSOLE_H

#include "attrs.h"

struct server;
struct evhttp_request;

#define CONSOLE_FILES_MAX 32
#define CONSOLE_BYTES_MAX (1024 * 1024)

/* Finds the console's directory (common/share.h: $CULPRIT_CONSOLE_DIR, the checkout's
 * console/ for a binary of the build tree, else the installed share/culprit/console) and
 * reads it. Without one culpritd runs on, "/" answers 404, and the log says why. 0, or -1
 * out of memory. */
MUST_CHECK int console_load(struct server *s);
void console_free(struct server *s);
/* 1 when path is one of the console's ("/", "/console/..."). */
int console_path(const char *path);
/* Answers a request for a console path (GET and HEAD; 304 for a matching If-None-Match). */
void console_serve(struct server *s, struct evhttp_request *req, const char *path);

/* The header every console answer carries. */
#define CONSOLE_CSP                                                                                                 \
	"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; connect-src 'self'; " \
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

#endif
