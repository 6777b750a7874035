/* dbhealth.c: see dbhealth.h. */
#include "dbhealth.h"

#include <stdio.h>

#include "clock.h"
#include "log.h"
#include "probe.h"
#include "server.h"
#include "writer.h"

#define PROBE_TIMEOUT_S 5 /* a connection or a "SELECT 1" of the liveness check */

int dbhealth_start(struct server *s)
{
	if (!s->writer)
		return 0;
	s->db.probe = storage_probe_start(s->db_dsn, PROBE_TIMEOUT_S);
	s->db.unconnected_since_ms = 0;
	return s->db.probe ? 0 : -1;
}

int64_t dbhealth_tick(struct server *s)
{
	struct storage_writer_stats st;
	int64_t now = clock_mono_ms(), stall_ms = s->cfg.db_stall_s * 1000, last_ok;
	char why[320], probe_err[256];
	bool down;

	if (!s->db.probe)
		return 0;
	last_ok = storage_probe_last_ok_ms(s->db.probe, probe_err, sizeof(probe_err));
	storage_writer_stats(s->writer, &st);
	if (st.connected)
		s->db.unconnected_since_ms = 0;
	else if (!s->db.unconnected_since_ms)
		s->db.unconnected_since_ms = now;
	if (now - last_ok >= stall_ms)
		snprintf(why, sizeof(why), "the liveness check got no answer for %lld s (%s)",
			 (long long)(now - last_ok) / 1000, probe_err[0] ? probe_err : "waiting");
	else if (st.busy_since_ms && now - st.busy_since_ms >= stall_ms)
		snprintf(why, sizeof(why), "the storage writer's transaction has not committed for %lld s",
			 (long long)(now - st.busy_since_ms) / 1000);
	else if (s->db.unconnected_since_ms && now - s->db.unconnected_since_ms >= stall_ms)
		snprintf(why, sizeof(why), "the storage writer has not been connected for %lld s",
			 (long long)(now - s->db.unconnected_since_ms) / 1000);
	else
		why[0] = '\0';
	down = why[0] != '\0';
	if (down && !s->db.down) {
		s->db.down_since_ms = now;
		log_warning("database: no progress for db_stall_s (%lld s): %s; culprit_database_up is 0 and /readyz "
			    "answers 503 until it answers again",
			    (long long)s->cfg.db_stall_s, why);
	} else if (!down && s->db.down) {
		log_info("database: making progress again after %lld s", (long long)(now - s->db.down_since_ms) / 1000);
	}
	s->db.down = down;
	return last_ok;
}

bool dbhealth_up(const struct server *s) { return s->db.probe && !s->db.down; }

void dbhealth_stop(struct server *s)
{
	storage_probe_stop(s->db.probe);
	s->db.probe = NULL;
}
