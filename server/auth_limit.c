/* auth_limit.c: see auth_limit.h. */
#include "auth_limit.h"

#define MINUTE_MS 60000

int64_t auth_limit_wait_ms(const struct auth_limit *l, const char *addr, int64_t per_minute, int64_t now_ms)
{
	const struct strmap_entry *e = strmap_find(&l->whole_at, addr);
	int64_t step = MINUTE_MS / per_minute;

	/* a budget of per_minute failures, each taking step ms to come back: one more fits
	 * when whole_at - now leaves room for it */
	if (!e || e->num - now_ms <= MINUTE_MS - step)
		return 0;
	return e->num - now_ms - (MINUTE_MS - step);
}

/* Forgets the addresses whose budget is whole again. */
static void sweep(struct auth_limit *l, int64_t now_ms)
{
	struct strmap keep = {0};

	for (size_t i = 0; i < l->whole_at.cap; i++) {
		const struct strmap_entry *e = &l->whole_at.slots[i];

		if (e->key && e->num > now_ms)
			IGNORE_RESULT(strmap_put_num(&keep, e->key, e->num)); /* out of memory: forgotten */
	}
	strmap_free(&l->whole_at);
	l->whole_at = keep;
}

void auth_limit_failed(struct auth_limit *l, const char *addr, int64_t per_minute, int64_t now_ms)
{
	struct strmap_entry *e = strmap_find(&l->whole_at, addr);
	int64_t step = MINUTE_MS / per_minute;

	if (!e && l->whole_at.len >= AUTH_LIMIT_ADDRS)
		sweep(l, now_ms);
	if (!e && (l->whole_at.len >= AUTH_LIMIT_ADDRS || strmap_put_num(&l->whole_at, addr, now_ms) < 0)) {
		l->untracked++;
		return;
	}
	e = strmap_find(&l->whole_at, addr);
	e->num = (e->num > now_ms ? e->num : now_ms) + step;
}

void auth_limit_free(struct auth_limit *l) { strmap_free(&l->whole_at); }
