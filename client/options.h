/* options.h: the flags of the commands that talk to culpritd, in one table of codes and one
 * parser. Two sets, for the two ways of talking (getopt_long tables; getopt.h):
 * - AGENT_OPTIONS, as agents (replay, sim --server): --server HOST:PORT, --token T (the Hello's;
 *   default $CULPRIT_TOKEN), --tls, --ca FILE (implies --tls), --timeout SECONDS (0 to 7 days);
 * - REST_OPTIONS, over the REST API (trace, capture): --server URL, --job, --ranks, --token T
 *   (a bearer token; default $CULPRIT_API_TOKEN), --ca FILE (for an https URL).
 * The codes are above 255, clear of a command's own letters. Tokens default from the
 * environment to keep them out of ps. */
#ifndef CULPRIT_CLIENT_OPTIONS_H
#define CULPRIT_CLIENT_OPTIONS_H

#include <stdbool.h>

#include "fanout.h"

enum { OPT_SERVER = 256, OPT_TOKEN, OPT_TLS, OPT_CA, OPT_TIMEOUT, OPT_JOB, OPT_RANKS };

#define AGENT_OPTIONS                                                                                   \
	{"server", required_argument, NULL, OPT_SERVER}, {"token", required_argument, NULL, OPT_TOKEN}, \
		{"tls", no_argument, NULL, OPT_TLS}, {"ca", required_argument, NULL, OPT_CA},           \
	{                                                                                               \
		"timeout", required_argument, NULL, OPT_TIMEOUT                                         \
	}
#define REST_OPTIONS                                                                                          \
	{"server", required_argument, NULL, OPT_SERVER}, {"job", required_argument, NULL, OPT_JOB},           \
		{"ranks", required_argument, NULL, OPT_RANKS}, {"token", required_argument, NULL, OPT_TOKEN}, \
	{                                                                                                     \
		"ca", required_argument, NULL, OPT_CA                                                         \
	}

struct client_options {
	const char *server, *token, *ca, *job, *ranks;
	bool tls;         /* --tls or --ca */
	double timeout_s; /* -1: none */
};

/* Before the flags are read: nothing set, the token from the environment variable token_env. */
void options_init(struct client_options *o, const char *token_env);
/* getopt_long's code c with its argument: 1 when it is one of the flags above (stored in o), 0
 * when not, -1 for an invalid value (told on stderr, "culprit CMD: ..."). */
int options_take(struct client_options *o, int c, const char *arg, const char *cmd);
/* The agent flags into a fanout's configuration. */
void options_to_fanout(const struct client_options *o, struct fanout_config *cfg);

#endif
