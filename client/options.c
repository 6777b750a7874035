/* options.c: the flags of the commands that talk to culpritd (see options.h). */
#include "options.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

void options_init(struct client_options *o, const char *token_env)
{
	*o = (struct client_options){.token = getenv(token_env), .timeout_s = -1};
}

int options_take(struct client_options *o, int c, const char *arg, const char *cmd)
{
	char *end;
	double v;

	switch (c) {
	case OPT_SERVER: o->server = arg; return 1;
	case OPT_TOKEN: o->token = arg; return 1;
	case OPT_JOB: o->job = arg; return 1;
	case OPT_RANKS: o->ranks = arg; return 1;
	case OPT_CA:
		o->ca = arg;
		/* fallthrough */
	case OPT_TLS: o->tls = true; return 1;
	case OPT_TIMEOUT:
		errno = 0;
		v = strtod(arg, &end);
		if (errno || end == arg || *end || !(v >= 0 && v <= 86400 * 7)) {
			fprintf(stderr, "culprit %s: invalid --timeout \"%s\" (seconds)\n", cmd, arg);
			return -1;
		}
		o->timeout_s = v;
		return 1;
	}
	return 0;
}

void options_to_fanout(const struct client_options *o, struct fanout_config *cfg)
{
	cfg->server = o->server;
	cfg->token = o->token;
	cfg->tls = o->tls;
	cfg->tls_ca = o->ca;
}
