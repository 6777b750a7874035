/* trace_cmd.c: `culprit trace` and `culprit capture`, the L5 deep dive from the command line:
 * thin HTTP clients (libcurl) of GET /api/v1/jobs/{job}/trace and POST .../capture. */
#include "trace_cmd.h"

#include <curl/curl.h>
#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "options.h"

/* libcurl, loaded by the two commands that use it: every other `culprit` command starts
 * without it and the 27 libraries it needs (about 450 page faults, 11-14 ms of each run in
 * the VMs culprit is measured on, 5% of `culprit diagnose` of a 260 MB file). */
static struct {
	CURLcode (*global_init)(long flags);
	void (*global_cleanup)(void);
	CURL *(*init)(void);
	CURLcode (*setopt)(CURL *c, CURLoption opt, ...);
	CURLcode (*perform)(CURL *c);
	const char *(*strerror)(CURLcode rc);
	CURLcode (*getinfo)(CURL *c, CURLINFO info, ...);
	void (*cleanup)(CURL *c);
	char *(*escape)(CURL *c, const char *s, int len);
	void (*free)(void *p);
	struct curl_slist *(*slist_append)(struct curl_slist *l, const char *s);
	void (*slist_free_all)(struct curl_slist *l);
} cu;

/* loads libcurl and initializes it: 0, or -1 with a message */
static int curl_load(const char *cmd)
{
	static const char *const names[] = {
		"curl_global_init", "curl_global_cleanup", "curl_easy_init",	"curl_easy_setopt",
		"curl_easy_perform", "curl_easy_strerror", "curl_easy_getinfo", "curl_easy_cleanup",
		"curl_easy_escape", "curl_free",	     "curl_slist_append", "curl_slist_free_all",
	};
	void *slot[sizeof(names) / sizeof(names[0])];
	_Static_assert(sizeof(slot) == sizeof(cu), "a name for every function of cu, in its order");
	void *h = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "culprit %s: cannot load libcurl: %s\n", cmd, dlerror());
		return -1;
	}
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!(slot[i] = dlsym(h, names[i]))) {
			fprintf(stderr, "culprit %s: libcurl has no %s\n", cmd, names[i]);
			return -1;
		}
	memcpy(&cu, slot, sizeof(cu)); /* object to function pointers, as POSIX dlsym allows */
	if (cu.global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
		fprintf(stderr, "culprit %s: libcurl did not start\n", cmd);
		return -1;
	}
	return 0;
}

struct body {
	char *p;
	size_t len;
	FILE *f; /* when set, the answer goes here instead */
	int failed;
};

static size_t on_data(char *data, size_t size, size_t n, void *arg)
{
	struct body *b = arg;
	size_t len = size * n;

	if (b->f) {
		if (fwrite(data, 1, len, b->f) != len) {
			b->failed = 1;
			return 0;
		}
		return len;
	}
	char *np = realloc(b->p, b->len + len + 1);
	if (!np) {
		b->failed = 1;
		return 0;
	}
	b->p = np;
	memcpy(b->p + b->len, data, len);
	b->len += len;
	b->p[b->len] = '\0';
	return len;
}

/* "HOST:PORT" or a URL; the base without a trailing slash. */
static void base_url(const char *server, char *out, size_t size)
{
	size_t n;

	if (strncmp(server, "http://", 7) == 0 || strncmp(server, "https://", 8) == 0)
		snprintf(out, size, "%s", server);
	else
		snprintf(out, size, "http://%s", server);
	n = strlen(out);
	while (n > 0 && out[n - 1] == '/')
		out[--n] = '\0';
}

/* One request. The status, or -1 (message printed). The body goes to f, or to *text. */
static long request(const char *cmd, const struct client_options *cr, const char *url, const char *post, FILE *f,
		    char **text)
{
	CURL *c = cu.init();
	struct body b = {.f = f};
	struct curl_slist *hdr = NULL;
	char err[CURL_ERROR_SIZE] = "";
	long status = -1;
	CURLcode rc;

	if (!c) {
		fprintf(stderr, "culprit %s: could not start libcurl\n", cmd);
		return -1;
	}
	cu.setopt(c, CURLOPT_URL, url);
	cu.setopt(c, CURLOPT_WRITEFUNCTION, on_data);
	cu.setopt(c, CURLOPT_WRITEDATA, &b);
	cu.setopt(c, CURLOPT_ERRORBUFFER, err);
	cu.setopt(c, CURLOPT_CONNECTTIMEOUT, 10L);
	cu.setopt(c, CURLOPT_TIMEOUT, 120L);
	cu.setopt(c, CURLOPT_NOSIGNAL, 1L);
	if (cr->token && cr->token[0]) {
		char auth[1100];

		snprintf(auth, sizeof(auth), "Authorization: Bearer %s", cr->token);
		hdr = cu.slist_append(hdr, auth);
	}
	if (cr->ca)
		cu.setopt(c, CURLOPT_CAINFO, cr->ca);
	if (post) {
		hdr = cu.slist_append(hdr, "Content-Type: application/json");
		cu.setopt(c, CURLOPT_POSTFIELDS, post);
	}
	if (hdr)
		cu.setopt(c, CURLOPT_HTTPHEADER, hdr);
	rc = cu.perform(c);
	if (rc != CURLE_OK)
		fprintf(stderr, "culprit %s: %s: %s\n", cmd, url, err[0] ? err : cu.strerror(rc));
	else if (b.failed)
		fprintf(stderr, "culprit %s: could not store the answer: %s\n", cmd,
			f ? strerror(errno) : "out of memory");
	else
		cu.getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	cu.slist_free_all(hdr);
	cu.cleanup(c);
	if (text)
		*text = b.p;
	else
		free(b.p);
	return status;
}

static char *escape(const char *s)
{
	CURL *c = cu.init();
	char *e = c ? cu.escape(c, s, 0) : NULL;
	char *out = e ? strdup(e) : NULL;

	cu.free(e);
	if (c)
		cu.cleanup(c);
	return out;
}

static void trace_usage(FILE *f)
{
	fprintf(f, "usage: culprit trace --server URL --job JOB --ranks LIST [--from-iter N] [--to-iter M]\n"
		   "                     [--format perfetto|chrome] [--token T] [--ca FILE] (-o|--out) FILE\n"
		   "LIST is ranks and ranges, e.g. 10352-10359,10336. Without --from-iter/--to-iter the\n"
		   "last 10 iterations stored for those ranks. Open a perfetto file in https://ui.perfetto.dev.\n"
		   "--token: the REST read token (default: $CULPRIT_API_TOKEN); --ca: CA file for https.\n");
}

int trace_cmd_main(int argc, char **argv)
{
	static const struct option opts[] = {
		REST_OPTIONS,
		{"from-iter", required_argument, NULL, 'f'},
		{"to-iter", required_argument, NULL, 't'},
		{"format", required_argument, NULL, 'F'},
		{"out", required_argument, NULL, 'o'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	struct client_options a;
	const char *from = NULL, *to = NULL, *format = "perfetto", *out = NULL;
	char base[512], url[2048], tmp[1100];
	char *ej = NULL, *er = NULL, *text = NULL;
	FILE *f;
	long status, size;
	int c;

	options_init(&a, "CULPRIT_API_TOKEN");
	optind = 1;
	while ((c = getopt_long(argc, argv, "ho:", opts, NULL)) != -1) {
		if (options_take(&a, c, optarg, "trace") > 0)
			continue;
		switch (c) {
		case 'f': from = optarg; break;
		case 't': to = optarg; break;
		case 'F': format = optarg; break;
		case 'o': out = optarg; break;
		case 'h': trace_usage(stdout); return 0;
		default: trace_usage(stderr); return 2;
		}
	}
	if (!a.server || !a.job || !a.ranks || !out || optind != argc ||
	    (strcmp(format, "perfetto") != 0 && strcmp(format, "chrome") != 0) ||
	    (from && strspn(from, "0123456789") != strlen(from)) || (to && strspn(to, "0123456789") != strlen(to))) {
		trace_usage(stderr);
		return 2;
	}
	if (curl_load("trace") < 0)
		return 1;
	base_url(a.server, base, sizeof(base));
	ej = escape(a.job);
	er = escape(a.ranks);
	if (!ej || !er) {
		fprintf(stderr, "culprit trace: out of memory\n");
		free(ej);
		free(er);
		return 1;
	}
	snprintf(url, sizeof(url), "%s/api/v1/jobs/%s/trace?ranks=%s&format=%s%s%s%s%s", base, ej, er, format,
		 from ? "&from_iter=" : "", from ? from : "", to ? "&to_iter=" : "", to ? to : "");
	free(ej);
	free(er);
	/* into FILE.part, renamed when the whole answer is there */
	snprintf(tmp, sizeof(tmp), "%s.part", out);
	f = fopen(tmp, "wb");
	if (!f) {
		fprintf(stderr, "culprit trace: could not open \"%s\": %s\n", tmp, strerror(errno));
		cu.global_cleanup();
		return 1;
	}
	status = request("trace", &a, url, NULL, f, NULL);
	size = ftell(f);
	if (fclose(f) != 0 && status == 200) {
		fprintf(stderr, "culprit trace: could not write \"%s\": %s\n", tmp, strerror(errno));
		status = -1;
	}
	if (status != 200) {
		if (status > 0) {
			f = fopen(tmp, "rb");
			if (f) {
				size_t n;

				text = calloc(1, 1025);
				n = text ? fread(text, 1, 1024, f) : 0;
				fclose(f);
				while (n > 0 && (text[n - 1] == '\n' || text[n - 1] == '\r'))
					n--;
				if (text)
					text[n] = '\0';
			}
			fprintf(stderr, "culprit trace: the server answered %ld: %s\n", status, text ? text : "");
			free(text);
		}
		remove(tmp);
		cu.global_cleanup();
		return 1;
	}
	if (rename(tmp, out) != 0) {
		fprintf(stderr, "culprit trace: could not rename \"%s\" to \"%s\": %s\n", tmp, out, strerror(errno));
		remove(tmp);
		cu.global_cleanup();
		return 1;
	}
	cu.global_cleanup();
	printf("culprit trace: wrote %s (%s, %ld bytes): open it in ui.perfetto.dev%s\n", out,
	       strcmp(format, "chrome") == 0 ? "Chrome JSON" : "Perfetto protobuf", size,
	       strcmp(format, "chrome") == 0 ? "; `culprit diagnose` reads it" : "");
	return 0;
}

static void capture_usage(FILE *f)
{
	fprintf(f, "usage: culprit capture --server URL --job JOB --ranks LIST --iterations N [--max-events M]\n"
		   "                       [--token T] [--ca FILE]\n"
		   "Asks the agents serving LIST (e.g. 10352-10359) for raw kernel events of their next N\n"
		   "iterations; prints culpritd's answer (the capture id, the agents that got it). Then\n"
		   "`culprit trace` shows the kernels. --token: the REST write token (default:\n"
		   "$CULPRIT_API_TOKEN); --ca: CA file for https.\n");
}

int capture_cmd_main(int argc, char **argv)
{
	static const struct option opts[] = {
		REST_OPTIONS,
		{"iterations", required_argument, NULL, 'i'},
		{"max-events", required_argument, NULL, 'm'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	struct client_options a;
	const char *iters = NULL, *max = NULL;
	char base[512], url[1024], body[512], *ej, *text = NULL;
	long status;
	int c;

	options_init(&a, "CULPRIT_API_TOKEN");
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (options_take(&a, c, optarg, "capture") > 0)
			continue;
		switch (c) {
		case 'i': iters = optarg; break;
		case 'm': max = optarg; break;
		case 'h': capture_usage(stdout); return 0;
		default: capture_usage(stderr); return 2;
		}
	}
	if (!a.server || !a.job || !a.ranks || !iters || optind != argc || !iters[0] ||
	    strspn(iters, "0123456789") != strlen(iters) || strlen(iters) > 9 ||
	    (max && (!max[0] || strspn(max, "0123456789") != strlen(max) || strlen(max) > 9)) ||
	    strspn(a.ranks, "0123456789,-") != strlen(a.ranks) || strlen(a.ranks) > 300) {
		capture_usage(stderr);
		return 2;
	}
	if (curl_load("capture") < 0)
		return 1;
	base_url(a.server, base, sizeof(base));
	if (!(ej = escape(a.job))) {
		fprintf(stderr, "culprit capture: out of memory\n");
		return 1;
	}
	snprintf(url, sizeof(url), "%s/api/v1/jobs/%s/capture", base, ej);
	free(ej);
	snprintf(body, sizeof(body), "{\"ranks\":\"%s\",\"iterations\":%s%s%s}", a.ranks, iters,
		 max ? ",\"max_events\":" : "", max ? max : "");
	status = request("capture", &a, url, body, NULL, &text);
	if (status > 0)
		printf("%s", text ? text : "");
	free(text);
	cu.global_cleanup();
	if (status != 202) {
		if (status > 0)
			fprintf(stderr, "culprit capture: the server answered %ld\n", status);
		return 1;
	}
	return 0;
}
