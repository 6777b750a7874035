/* auth.h: who may talk to culpritd (docs/operations.md, "Security").
 *
 * Agents present a token in Hello: a job listed in job_tokens_file must present that job's
 * token, any other job agent_token. REST callers present "Authorization: Bearer TOKEN":
 * http_read_token guards GET and HEAD (and /metrics), http_write_token every other method;
 * an operator's token (operator_tokens_file) passes both, and alone may approve an action.
 * A guard whose token is not set is open. Only SHA-256 digests of the tokens are kept, and
 * they are compared in constant time (CRYPTO_memcmp of equal-length digests, so neither the
 * content nor the length of a token leaks through timing). Tokens are never logged.
 *
 * A struct auth is built whole from a configuration (and the job tokens file it names) and
 * is immutable afterwards: SIGHUP builds a new one and swaps it in only when it is valid. */
#ifndef CULPRIT_AUTH_H
#define CULPRIT_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include "attrs.h"

struct config;
struct server;
struct evhttp_request;

#define AUTH_FAILED_REASON "authentication failed"

enum auth_http_result {
	AUTH_HTTP_OK,
	AUTH_HTTP_UNAUTHORIZED, /* 401: no token, or not one of the tokens */
	AUTH_HTTP_FORBIDDEN,    /* 403: the read token on a write request */
};

/* Builds the guards from cfg: hashes the tokens, reads cfg->job_tokens_file. NULL with a
 * message naming the setting (and line) in err. */
struct auth *auth_new(const struct config *cfg, char *err, size_t err_size);
void auth_free(struct auth *a);

/* Logs what is guarded, at warning level for what is open. */
void auth_log_summary(const struct auth *a);
/* No token of any kind is set: agents and the REST API are open to whoever reaches them. */
bool auth_open(const struct auth *a);

#define AUTH_DIGEST 32

/* true when an agent of job presenting token (NULL: none) may stream. */
bool auth_agent(const struct auth *a, const char *job, const char *token);
/* The same from the token's digest (auth_token_digest): a connection keeps the digest of the
 * token it came with, and SIGHUP asks again whether it still may stream. */
bool auth_agent_digest(const struct auth *a, const char *job, const unsigned char d[AUTH_DIGEST]);
void auth_token_digest(const char *token, unsigned char out[AUTH_DIGEST]);
/* Counts a Hello refused by auth_agent and logs peer, job and agent (never the token), at
 * most a few lines a second. */
void auth_agent_refused(struct server *s, const char *peer, const char *job, const char *agent);
/* The verdict on a REST request: write is any method but GET and HEAD; authorization is
 * the Authorization header's value or NULL. */
enum auth_http_result auth_http(const struct auth *a, bool write, const char *authorization);

/* true when authorization ("Bearer TOKEN") carries an operator's token (operator_tokens_file),
 * with the operator's name in who. Operators may approve actions, and pass the write guard. */
bool auth_operator(const struct auth *a, const char *authorization, char *who, size_t who_size);

/* For an evhttp callback: true when the request may proceed; otherwise answers 401 (with
 * WWW-Authenticate: Bearer) or 403, counts it in s->m, logs the peer, and returns false. */
bool auth_http_request(struct server *s, struct evhttp_request *req);

/* Equality of two NUL-terminated strings in time independent of their content and length
 * (compares their SHA-256 digests with CRYPTO_memcmp). */
bool auth_token_equal(const char *a, const char *b);

/* Checks a job tokens file's text ("JOB TOKEN" lines, '#' comments) and calls fn for each
 * pair. 0, or -1 with "line N: message" in err. For auth_new and its unit tests. */
MUST_CHECK int auth_parse_job_tokens(const char *text, int (*fn)(void *arg, const char *job, const char *token), void *arg,
			  char *err, size_t err_size);
/* A token must be 1 to 4096 visible ASCII bytes (no spaces: it travels in a header). */
bool auth_token_valid(const char *token);

#endif
