/* auth_limit.h: what a wrong token costs (docs/operations.md, "Tokens"): each IP address has
 * a budget of failed token checks, agents' Hellos and REST requests together, of
 * auth_failures_per_addr a minute: that many at once, then one every 60 / N s. An address
 * over its budget is not checked at all until the budget allows another try: its Hello is
 * refused ("too many failed token checks from this address; retry in N s") and its REST
 * request answered 429 with Retry-After, counted in culprit_auth_limited_total. A right
 * token costs nothing, and neither does a request that presents none.
 *
 * One deadline per address (the generic cell rate algorithm: the time at which its budget is
 * whole again), forgotten once reached. At most AUTH_LIMIT_ADDRS addresses are followed at
 * once; past that the failures of new addresses are not counted (counted in untracked). Event
 * loop only. */
#ifndef CULPRIT_AUTH_LIMIT_H
#define CULPRIT_AUTH_LIMIT_H

#include <stdint.h>

#include "strmap.h"

#define AUTH_LIMIT_ADDRS 65536

struct auth_limit {
	struct strmap whole_at; /* address -> monotonic ms at which its budget is whole again */
	uint64_t untracked;     /* failures not counted: AUTH_LIMIT_ADDRS addresses followed */
};

/* 0 when addr may have a token checked now, else the milliseconds until it may. */
int64_t auth_limit_wait_ms(const struct auth_limit *l, const char *addr, int64_t per_minute, int64_t now_ms);
/* A failed token check from addr. */
void auth_limit_failed(struct auth_limit *l, const char *addr, int64_t per_minute, int64_t now_ms);
void auth_limit_free(struct auth_limit *l);

#endif
