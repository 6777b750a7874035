/* console.c: see console.h. */
#include "console.h"

#include <dirent.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "hash.h"
#include "log.h"
#include "reply.h"
#include "server.h"
#include "share.h"

struct console_file {
	char name[64];
	const char *type;
	char etag[24];
	char *body;
	size_t len;
};

struct console {
	char dir[PATH_MAX];
	struct console_file files[CONSOLE_FILES_MAX];
	size_t n, bytes;
};

static const struct {
	const char *ext, *type;
} types[] = {
	{".html", "text/html; charset=utf-8"},
	{".js", "text/javascript; charset=utf-8"},
	{".css", "text/css; charset=utf-8"},
	{".svg", "image/svg+xml"},
	{".png", "image/png"},
	{".txt", "text/plain; charset=utf-8"},
};

static const char *type_of(const char *name)
{
	size_t n = strlen(name);

	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		size_t e = strlen(types[i].ext);

		if (n > e && strcmp(name + n - e, types[i].ext) == 0)
			return types[i].type;
	}
	return NULL;
}

/* Reads dir/name into f; 0, 1 skipped (logged), -1 out of memory. */
static int read_file(struct console *c, struct console_file *f, const char *name)
{
	char path[PATH_MAX + 64];
	struct stat st;
	FILE *in;

	snprintf(path, sizeof(path), "%s/%s", c->dir, name);
	if (stat(path, &st) < 0 || !S_ISREG(st.st_mode))
		return 1;
	if (c->bytes + (size_t)st.st_size > CONSOLE_BYTES_MAX) {
		log_warning("console: \"%s\" is not served: the console's files are over %d bytes", path,
			    CONSOLE_BYTES_MAX);
		return 1;
	}
	f->body = malloc((size_t)st.st_size + 1);
	if (!f->body)
		return -1;
	in = fopen(path, "rb");
	if (!in || fread(f->body, 1, (size_t)st.st_size, in) != (size_t)st.st_size) {
		log_warning("console: could not read \"%s\": %s", path, strerror(errno));
		if (in)
			fclose(in);
		free(f->body);
		f->body = NULL;
		return 1;
	}
	fclose(in);
	f->len = (size_t)st.st_size;
	snprintf(f->name, sizeof(f->name), "%s", name);
	f->type = type_of(name);
	snprintf(f->etag, sizeof(f->etag), "\"%016llx\"", (unsigned long long)hash_bytes(f->body, f->len));
	c->bytes += f->len;
	return 0;
}

int console_load(struct server *s)
{
	static char buf[PATH_MAX];
	const char *dir = share_dir("CULPRIT_CONSOLE_DIR", CULPRIT_BUILD_DIR, CULPRIT_CONSOLE_SOURCE_DIR,
				    CULPRIT_INSTALL_PREFIX, "console", buf, sizeof(buf));
	struct console *c = calloc(1, sizeof(*c));
	struct dirent *e;
	DIR *d;

	if (!c)
		return -1;
	s->console = c;
	snprintf(c->dir, sizeof(c->dir), "%s", dir);
	d = opendir(dir);
	if (!d) {
		log_warning("console: no web console at \"%s\" (%s): \"/\" answers 404", dir, strerror(errno));
		return 0;
	}
	while ((e = readdir(d))) {
		int rc;

		if (e->d_name[0] == '.' || !type_of(e->d_name) || strlen(e->d_name) >= sizeof(c->files[0].name))
			continue;
		if (c->n == CONSOLE_FILES_MAX) {
			log_warning("console: more than %d files in \"%s\"; \"%s\" is not served", CONSOLE_FILES_MAX,
				    dir, e->d_name);
			continue;
		}
		rc = read_file(c, &c->files[c->n], e->d_name);
		if (rc < 0) {
			closedir(d);
			return -1;
		}
		c->n += rc == 0;
	}
	closedir(d);
	log_info("console: %zu files (%zu bytes) from \"%s\", served at /", c->n, c->bytes, dir);
	return 0;
}

void console_free(struct server *s)
{
	struct console *c = s->console;

	if (!c)
		return;
	for (size_t i = 0; i < c->n; i++)
		free(c->files[i].body);
	free(c);
	s->console = NULL;
}

int console_path(const char *path) { return strcmp(path, "/") == 0 || strncmp(path, "/console/", 9) == 0; }

static void security_headers(struct evkeyvalq *h)
{
	evhttp_add_header(h, "Content-Security-Policy", CONSOLE_CSP);
	evhttp_add_header(h, "X-Content-Type-Options", "nosniff");
	evhttp_add_header(h, "Referrer-Policy", "no-referrer");
	evhttp_add_header(h, "Cache-Control", "no-cache");
}

void console_serve(struct server *s, struct evhttp_request *req, const char *path)
{
	struct console *c = s->console;
	const char *name = strcmp(path, "/") == 0 ? "index.html" : path + 9;
	struct evkeyvalq *h = evhttp_request_get_output_headers(req);
	const char *match;
	size_t i = 0;

	security_headers(h);
	if (!(evhttp_request_get_command(req) & (EVHTTP_REQ_GET | EVHTTP_REQ_HEAD))) {
		evhttp_add_header(h, "Allow", "GET, HEAD");
		reply_error(req, 405, "method not allowed", "the console answers GET and HEAD only");
		return;
	}
	while (c && i < c->n && strcmp(c->files[i].name, name) != 0)
		i++;
	if (!c || i == c->n) {
		reply_error(req, 404, "not found", "%s",
			    c && c->n ? "no such console file" : "no web console installed");
		return;
	}
	evhttp_add_header(h, "ETag", c->files[i].etag);
	match = evhttp_find_header(evhttp_request_get_input_headers(req), "If-None-Match");
	if (match && strcmp(match, c->files[i].etag) == 0) {
		evhttp_send_reply(req, 304, "Not Modified", NULL);
		return;
	}
	evhttp_add_header(h, "Content-Type", c->files[i].type);
	evbuffer_add_reference(evhttp_request_get_output_buffer(req), c->files[i].body, c->files[i].len, NULL, NULL);
	reply_send(req, 200);
}
