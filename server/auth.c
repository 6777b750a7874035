/* auth.c: tokens of agents and REST callers (see auth.h). */
#include "auth.h"

#include <ctype.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "clock.h"
#include "config.h"
#include "log.h"
#include "reply.h"
#include "server.h"
#include "strmap.h"
#include "tls.h"

#define DIGEST SHA256_DIGEST_LENGTH
#define MAX_TOKEN 4096
#define MAX_JOB 127
#define MAX_JOB_TOKENS_FILE (16u << 20) /* bytes: a million jobs fit */

#define MAX_KEYS 4 /* tokens of one guard: the new and the old ones during a rotation */

struct guard {
	int n; /* tokens set; 0: the guard is open */
	uint8_t d[MAX_KEYS][DIGEST];
};

#define MAX_OPERATORS 256

struct operator_token {
	char name[MAX_JOB + 1];
	uint8_t d[DIGEST];
};

struct auth {
	struct guard agent;         /* agent_token */
	struct operator_token *ops; /* operator_tokens_file */
	int n_ops;
	struct strmap jobs;        /* job -> struct guard from job_tokens_file */
	struct guard read, write;  /* http_read_token, http_write_token */
	char job_tokens_file[512]; /* for the summary */
};

static void digest(const char *s, uint8_t out[DIGEST]) { SHA256((const unsigned char *)s, strlen(s), out); }

static bool digest_equal(const uint8_t a[DIGEST], const uint8_t b[DIGEST]) { return CRYPTO_memcmp(a, b, DIGEST) == 0; }

/* got is one of g's tokens. Every slot is compared, set or not: the time says nothing of
 * which token matched. */
static bool guard_match(const struct guard *g, const uint8_t got[DIGEST])
{
	bool ok = false;

	for (int i = 0; i < MAX_KEYS; i++)
		ok |= digest_equal(got, g->d[i]) & (i < g->n);
	return ok;
}

static int guard_add(struct guard *g, const char *token)
{
	if (g->n == MAX_KEYS)
		return -1;
	digest(token, g->d[g->n++]);
	return 0;
}

bool auth_token_equal(const char *a, const char *b)
{
	uint8_t da[DIGEST], db[DIGEST];

	digest(a, da);
	digest(b, db);
	return digest_equal(da, db);
}

bool auth_token_valid(const char *token)
{
	size_t n = strlen(token);

	if (n == 0 || n > MAX_TOKEN)
		return false;
	for (; *token; token++)
		if ((unsigned char)*token <= 0x20 || (unsigned char)*token >= 0x7f)
			return false;
	return true;
}

/* value: empty, or 1 to MAX_KEYS tokens separated by commas (any of them accepted). */
static int set_guard(struct guard *g, const char *name, const char *value, char *err, size_t err_size)
{
	char token[MAX_TOKEN + 1];
	int rc = 0;

	memset(g, 0, sizeof(*g));
	for (const char *p = value ? value : ""; *p && rc == 0; p += *p == ',') {
		size_t n = strcspn(p, ",");

		rc = -1;
		if (n == 0 || n > MAX_TOKEN)
			break;
		memcpy(token, p, n);
		token[n] = '\0';
		p += n;
		rc = auth_token_valid(token) ? guard_add(g, token) : -1;
		if (rc == 0 && *p == ',' && !p[1])
			rc = -1; /* a trailing comma */
	}
	OPENSSL_cleanse(token, sizeof(token));
	if (rc < 0) {
		memset(g, 0, sizeof(*g));
		config_fail(
			err, err_size,
			"invalid value for setting \"%s\": a token is 1 to %d visible ASCII characters without spaces "
			"or commas; up to %d tokens separated by commas",
			name, MAX_TOKEN, MAX_KEYS);
	}
	return rc;
}

int auth_parse_job_tokens(const char *text, int (*fn)(void *arg, const char *job, const char *token), void *arg,
			  char *err, size_t err_size)
{
	int lineno = 0;

	while (*text) {
		const char *end = strchr(text, '\n');
		size_t n = end ? (size_t)(end - text) : strlen(text);
		char line[MAX_JOB + MAX_TOKEN + 64], *p, *job, *token, *extra;

		lineno++;
		if (n >= sizeof(line)) {
			config_fail(err, err_size, "line %d: too long", lineno);
			return -1;
		}
		memcpy(line, text, n);
		line[n] = '\0';
		text += n + (end ? 1 : 0);
		if ((p = strchr(line, '#')))
			*p = '\0';
		job = strtok_r(line, " \t\r", &p);
		if (!job)
			continue;
		token = strtok_r(NULL, " \t\r", &p);
		extra = strtok_r(NULL, " \t\r", &p);
		if (!token || extra) {
			config_fail(err, err_size, "line %d: expected \"JOB TOKEN\"", lineno);
			return -1;
		}
		if (strlen(job) > MAX_JOB) {
			config_fail(err, err_size, "line %d: a job name has at most %d bytes", lineno, MAX_JOB);
			return -1;
		}
		if (!auth_token_valid(token)) {
			/* the token itself is not repeated in the message */
			config_fail(err, err_size,
				    "line %d: the token of job \"%s\" is not 1 to %d visible ASCII characters", lineno,
				    job, MAX_TOKEN);
			return -1;
		}
		if (fn(arg, job, token) < 0) {
			config_fail(err, err_size, "line %d: job \"%s\" listed more than %d times, or out of memory",
				    lineno, job, MAX_KEYS);
			return -1;
		}
	}
	return 0;
}

static int add_job(void *arg, const char *job, const char *token)
{
	struct auth *a = arg;
	struct guard *g = strmap_get(&a->jobs, job);

	if (g)
		return guard_add(g, token);
	g = calloc(1, sizeof(*g));
	if (!g)
		return -1;
	guard_add(g, token);
	if (strmap_put(&a->jobs, job, g) < 0) {
		free(g);
		return -1;
	}
	return 0;
}

static char *read_file(const char *path, char *err, size_t err_size)
{
	FILE *f = fopen(path, "r");
	char *buf;
	size_t len = 0;

	if (!f) {
		config_fail(err, err_size, "could not open \"%s\": %s", path, strerror(errno));
		return NULL;
	}
	buf = malloc(MAX_JOB_TOKENS_FILE + 1);
	if (!buf) {
		fclose(f);
		config_fail(err, err_size, "out of memory");
		return NULL;
	}
	len = fread(buf, 1, MAX_JOB_TOKENS_FILE + 1, f);
	if (ferror(f) || len > MAX_JOB_TOKENS_FILE || memchr(buf, '\0', len)) {
		config_fail(err, err_size, "could not read \"%s\": %s", path,
			    ferror(f)                   ? strerror(errno)
			    : len > MAX_JOB_TOKENS_FILE ? "larger than 16 MiB"
							: "contains a NUL byte");
		fclose(f);
		free(buf);
		return NULL;
	}
	fclose(f);
	buf[len] = '\0';
	return buf;
}

static void free_value(const char *key, void *value, void *arg)
{
	(void)key;
	(void)arg;
	free(value);
}

static int add_operator(void *arg, const char *name, const char *token)
{
	struct auth *a = arg;

	if (a->n_ops == MAX_OPERATORS)
		return -1;
	if (!a->ops && !(a->ops = calloc(MAX_OPERATORS, sizeof(*a->ops))))
		return -1;
	snprintf(a->ops[a->n_ops].name, sizeof(a->ops[a->n_ops].name), "%s", name);
	digest(token, a->ops[a->n_ops++].d);
	return 0;
}

/* Reads a "NAME TOKEN" file into a through add; 0, or -1 with the setting named in err. */
static int load_tokens_file(struct auth *a, const char *setting, const char *path,
			    int (*add)(void *arg, const char *name, const char *token), char *err, size_t err_size)
{
	char msg[512], *text = read_file(path, msg, sizeof(msg));
	int rc;

	if (!text) {
		config_fail(err, err_size, "setting \"%s\": %s", setting, msg);
		return -1;
	}
	rc = auth_parse_job_tokens(text, add, a, msg, sizeof(msg));
	if (rc < 0)
		config_fail(err, err_size, "setting \"%s\": \"%s\", %s", setting, path, msg);
	OPENSSL_cleanse(text, strlen(text));
	free(text);
	return rc;
}

void auth_free(struct auth *a)
{
	if (!a)
		return;
	if (a->ops) {
		OPENSSL_cleanse(a->ops, MAX_OPERATORS * sizeof(*a->ops));
		free(a->ops);
	}
	strmap_each(&a->jobs, free_value, NULL);
	strmap_free(&a->jobs);
	OPENSSL_cleanse(a, sizeof(*a));
	free(a);
}

struct auth *auth_new(const struct config *cfg, char *err, size_t err_size)
{
	struct auth *a = calloc(1, sizeof(*a));

	if (!a) {
		config_fail(err, err_size, "out of memory");
		return NULL;
	}
	if (set_guard(&a->agent, "agent_token", cfg->agent_token, err, err_size) < 0 ||
	    set_guard(&a->read, "http_read_token", cfg->http_read_token, err, err_size) < 0 ||
	    set_guard(&a->write, "http_write_token", cfg->http_write_token, err, err_size) < 0)
		goto fail;
	if (a->read.n && !a->write.n) {
		/* otherwise reads would be guarded and writes open */
		config_fail(err, err_size, "setting \"http_read_token\" needs \"http_write_token\" to be set too");
		goto fail;
	}
	bool shared = false;

	for (int i = 0; i < a->read.n; i++)
		shared |= guard_match(&a->write, a->read.d[i]);
	if (shared) {
		config_fail(err, err_size, "settings \"http_read_token\" and \"http_write_token\" must differ");
		goto fail;
	}
	if (cfg->job_tokens_file && cfg->job_tokens_file[0]) {
		if (load_tokens_file(a, "job_tokens_file", cfg->job_tokens_file, add_job, err, err_size) < 0)
			goto fail;
		snprintf(a->job_tokens_file, sizeof(a->job_tokens_file), "%s", cfg->job_tokens_file);
	}
	if (cfg->operator_tokens_file && cfg->operator_tokens_file[0] &&
	    load_tokens_file(a, "operator_tokens_file", cfg->operator_tokens_file, add_operator, err, err_size) < 0)
		goto fail;
	return a;
fail:
	auth_free(a);
	return NULL;
}

bool auth_open(const struct auth *a)
{
	return !a->agent.n && a->jobs.len == 0 && !a->n_ops && !a->read.n && !a->write.n;
}

void auth_log_summary(const struct auth *a)
{
	if (!a->agent.n && a->jobs.len == 0)
		log_warning("agents are NOT authenticated: set agent_token or job_tokens_file (docs/operations.md, "
			    "\"Security\")");
	else
		log_info("agents authenticate: %s%s%zu job tokens%s%s%s", a->agent.n ? "a shared agent token" : "",
			 a->agent.n ? " and " : "", a->jobs.len, a->jobs.len ? " from \"" : "", a->job_tokens_file,
			 a->jobs.len ? "\"" : "");
	if (a->n_ops)
		log_info("REST API: %d operator tokens may approve actions", a->n_ops);
	if (!a->write.n)
		log_warning("the REST API is NOT authenticated: anyone who reaches http_listen may read and write; set "
			    "http_write_token (and http_read_token)");
	else if (!a->read.n)
		log_info("REST API: writes need http_write_token; reads are open (no http_read_token)");
	else
		log_info("REST API: reads need http_read_token or http_write_token, writes http_write_token");
}

_Static_assert(AUTH_DIGEST == DIGEST, "AUTH_DIGEST is SHA-256's");

void auth_token_digest(const char *token, unsigned char out[AUTH_DIGEST]) { digest(token ? token : "", out); }

bool auth_agent(const struct auth *a, const char *job, const char *token)
{
	uint8_t got[DIGEST];

	digest(token ? token : "", got);
	return auth_agent_digest(a, job, got);
}

bool auth_agent_digest(const struct auth *a, const char *job, const unsigned char got[AUTH_DIGEST])
{
	const struct guard *want = strmap_get(&a->jobs, job ? job : "");

	if (!want && !a->agent.n && a->jobs.len == 0)
		return true; /* open */
	/* the same work whether or not a shared token is set: an unknown job and a bad token
	 * look alike from outside */
	return guard_match(want ? want : &a->agent, got);
}

void auth_agent_refused(struct server *s, const char *peer, const char *job, const char *agent)
{
	static struct log_limit limit = {.what = "agent authentication failures"};

	s->m.agent_auth_failures++;
	if (log_limit_allow(&limit))
		log_warning("agent %s: job \"%s\" agent \"%s\": authentication failed", peer, LOG_ESC(job),
			    LOG_ESC(agent));
}

/* The token of "Bearer TOKEN" (scheme case-insensitive), or NULL. */
static const char *bearer(const char *authorization)
{
	if (!authorization || strncasecmp(authorization, "Bearer", 6) != 0 ||
	    (authorization[6] != ' ' && authorization[6] != '\t'))
		return NULL;
	authorization += 6;
	while (*authorization == ' ' || *authorization == '\t')
		authorization++;
	return *authorization ? authorization : NULL;
}

/* The operator whose token's digest is got, or -1. Every operator is compared. */
static int operator_match(const struct auth *a, const uint8_t got[DIGEST])
{
	int found = -1;

	for (int i = 0; i < a->n_ops; i++)
		if (digest_equal(got, a->ops[i].d))
			found = i;
	return found;
}

bool auth_operator(const struct auth *a, const char *authorization, char *who, size_t who_size)
{
	const char *token = bearer(authorization);
	uint8_t got[DIGEST];
	int i;

	if (!a || !token)
		return false;
	digest(token, got);
	if ((i = operator_match(a, got)) < 0)
		return false;
	snprintf(who, who_size, "%s", a->ops[i].name);
	return true;
}

enum auth_http_result auth_http(const struct auth *a, bool write, const char *authorization)
{
	const char *token = bearer(authorization);
	uint8_t got[DIGEST];
	bool is_write, is_read;

	if (write ? !a->write.n : !a->read.n)
		return AUTH_HTTP_OK;
	if (!token)
		return AUTH_HTTP_UNAUTHORIZED;
	digest(token, got);
	is_write = guard_match(&a->write, got) | (operator_match(a, got) >= 0); /* both compared, always */
	is_read = guard_match(&a->read, got);
	if (is_write || (!write && is_read))
		return AUTH_HTTP_OK;
	return is_read ? AUTH_HTTP_FORBIDDEN : AUTH_HTTP_UNAUTHORIZED;
}

static const char *method_name(enum evhttp_cmd_type m)
{
	switch (m) {
	case EVHTTP_REQ_GET: return "GET";
	case EVHTTP_REQ_HEAD: return "HEAD";
	case EVHTTP_REQ_POST: return "POST";
	case EVHTTP_REQ_PUT: return "PUT";
	case EVHTTP_REQ_DELETE: return "DELETE";
	case EVHTTP_REQ_PATCH: return "PATCH";
	case EVHTTP_REQ_OPTIONS: return "OPTIONS";
	default: return "request";
	}
}

bool auth_http_request(struct server *s, struct evhttp_request *req)
{
	enum evhttp_cmd_type m = evhttp_request_get_command(req);
	bool write = m != EVHTTP_REQ_GET && m != EVHTTP_REQ_HEAD;
	const char *h = evhttp_find_header(evhttp_request_get_input_headers(req), "Authorization");
	enum auth_http_result r = s->auth ? auth_http(s->auth, write, h) : AUTH_HTTP_UNAUTHORIZED;
	struct evkeyvalq *out = evhttp_request_get_output_headers(req);
	struct evhttp_connection *conn = evhttp_request_get_connection(req);
	const char *detail, *error;
	char *peer = NULL;
	static struct log_limit limit = {.what = "refused REST requests"};
	uint16_t port = 0;

	if (!tls_request_ok(s, req)) {
		evhttp_send_error(req, 400, "TLS required");
		return false;
	}
	if (conn)
		evhttp_connection_get_peer(conn, &peer, &port);
	if (r != AUTH_HTTP_OK || h) {
		/* a token that must be checked: over its address's budget, not even that */
		int64_t wait_ms = auth_limit_wait_ms(&s->auth_limit, peer ? peer : "?", s->cfg.auth_failures_per_addr,
						     clock_mono_ms());

		if (wait_ms > 0) {
			char retry[32];
			static struct log_limit limited = {.what = "REST requests over auth_failures_per_addr"};

			s->m.auth_limited[1]++;
			if (log_limit_allow(&limited))
				log_info("http %s:%u: %s %s refused: over auth_failures_per_addr (%lld a minute)",
					 peer ? peer : "?", (unsigned)port, method_name(m),
					 LOG_ESC(evhttp_request_get_uri(req)), (long long)s->cfg.auth_failures_per_addr);
			snprintf(retry, sizeof(retry), "%lld", (long long)(wait_ms + 999) / 1000);
			evhttp_add_header(out, "Retry-After", retry);
			reply_error(req, 429, "too many requests",
				    "too many failed token checks from this address; retry in %s s", retry);
			return false;
		}
	}
	if (r == AUTH_HTTP_OK)
		return true;
	if (h && r == AUTH_HTTP_UNAUTHORIZED)
		auth_limit_failed(&s->auth_limit, peer ? peer : "?", s->cfg.auth_failures_per_addr, clock_mono_ms());
	if (r == AUTH_HTTP_FORBIDDEN) {
		s->m.http_auth_forbidden++;
		error = "forbidden";
		detail = "the read token does not allow this request; it needs the write token";
	} else {
		s->m.http_auth_failures++;
		error = "unauthorized";
		detail = h ? "the bearer token is not valid here" : "this request needs Authorization: Bearer TOKEN";
		evhttp_add_header(out, "WWW-Authenticate",
				  h ? "Bearer realm=\"culprit\", error=\"invalid_token\"" : "Bearer realm=\"culprit\"");
	}
	if (log_limit_allow(&limit))
		log_info("http %s:%u: %s %s refused: %s", peer ? peer : "?", (unsigned)port, method_name(m),
			 LOG_ESC(evhttp_request_get_uri(req)),
			 r == AUTH_HTTP_FORBIDDEN ? "read token on a write request"
			 : h                      ? "invalid token"
						  : "no token");
	reply_error(req, r == AUTH_HTTP_FORBIDDEN ? 403 : 401, error, "%s", detail);
	return false;
}
