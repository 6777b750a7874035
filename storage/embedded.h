/* embedded.h: culpritd's private PostgreSQL cluster under <data_dir>/pg.
 *
 *   <data_dir>/pg/data          the cluster (initdb on first start)
 *   <data_dir>/pg/.s.PGSQL.5432 its socket (listen_addresses = '': no TCP, unless listen is set)
 *   <data_dir>/pg/pg_hba.conf   its authentication rules, written at every start
 *   <data_dir>/pg/postgres.log  the server's log
 *   <data_dir>/pg/embedded.lock flock held while a culpritd uses the cluster
 *
 * Binaries come from `pg_config --bindir`, else the newest /usr/lib/postgresql/<v>/bin.
 * PostgreSQL refuses to run as root: when we are root, the cluster is owned by and the server
 * runs as the unprivileged user "postgres" (Debian's package creates it), which must be able
 * to reach data_dir. Authentication is "trust" for the superuser "culprit" on the private
 * socket, whose directory only the server's user (and root) can enter. With listen
 * ("HOST:PORT", embedded_listen) the server also listens on TCP there (the socket is then
 * named for PORT), where only the login "grafana" is let in, by password (SCRAM-SHA-256):
 * embedded_grant_grafana makes it a member of culprit_grafana, which may read the Grafana
 * views and nothing else (docs/grafana/grants.sql). 
 *
 * A server left running by a culpritd that died (no one holds the lock; it got SIGINT then and
 * may still be shutting down) is waited for (fast shutdown, bounded by start_timeout_ms), then
 * ours starts; a cluster used by another live culpritd is refused. A stale postmaster.pid
 * after a crash is left to PostgreSQL, except when its pid now belongs to a process that is
 * not postgres (then it is removed); the backends of a killed postmaster are waited for
 * (PostgreSQL refuses to start while they hold its shared memory). The server gets SIGINT
 * (fast shutdown) if culpritd dies, via PR_SET_PDEATHSIG, which follows the thread that
 * forked it: call embedded_start and embedded_supervise from the main thread. */
#ifndef CULPRIT_STORAGE_EMBEDDED_H
#define CULPRIT_STORAGE_EMBEDDED_H

#include <stddef.h>
#include <sys/types.h>
#include "attrs.h"

struct embedded;

struct embedded_config {
	const char *data_dir; /* required; created if missing */
	const char *bindir;   /* NULL: found as described above */
	const char *run_as;   /* user to run as when root; NULL: "postgres" */
	int start_timeout_ms; /* wait for readiness (crash recovery can be long); 0: 120000 */
	int fast;             /* tests: initdb --no-sync, fsync off */
	const char *listen;   /* "HOST:PORT" to listen on TCP too (only "grafana" let in); NULL or "": no TCP */
};

/* Starts (initialising when new, or adopting) the cluster under data_dir/pg and waits until
 * it accepts connections; creates the database "culprit" when missing. NULL on failure with
 * a message in err (with the tail of the server log when it helps). */
struct embedded *embedded_start(const struct embedded_config *cfg, char *err, size_t err_size);
/* libpq connection string of the database "culprit". */
const char *embedded_dsn(const struct embedded *e);
/* The postmaster's pid; 0 while none runs (between an exit and its restart). */
pid_t embedded_pid(const struct embedded *e);
/* After the migrations (the views exist): the group role culprit_grafana with SELECT on the
 * Grafana views, and the login "grafana" in it with this password (set again at every call).
 * 0, or -1 with PostgreSQL's message in err. Blocking (start-up). */
MUST_CHECK int embedded_grant_grafana(struct embedded *e, const char *password, char *err, size_t err_size);
/* Call about once a second from the main thread; never blocks. Notices the postmaster's exit
 * (killed, a PANIC, the OOM killer; logged) and starts it again: at once the first time, then
 * after 1 s, doubling up to 30 s while the cause lasts, back to at once when the cause is gone
 * (embedded_answered); a new one waits until the old one's backends are gone. Returns 1 when
 * it started the postmaster again, else 0. Readiness is not waited for: clients retry their
 * connections. */
int embedded_supervise(struct embedded *e);
/* The server answered a query at at_ms (clock_mono_ms(), e.g. a liveness check): when that
 * is after its postmaster started, whatever made it exit is gone, and the next restart is at
 * once again. */
void embedded_answered(struct embedded *e, long long at_ms);
/* Fast shutdown (SIGINT) and wait for the postmaster to exit; immediate shutdown (SIGQUIT)
 * after timeout_ms, SIGKILL 5 s later. Frees e. Returns 0 when the server exited after the
 * fast shutdown (or none ran), else -1. */
MUST_CHECK int embedded_stop(struct embedded *e, int timeout_ms);

#endif
