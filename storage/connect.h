/* connect.h: the one way culpritd's long-lived threads (the writer, the alert delivery
 * thread) connect to PostgreSQL: TCP keepalives and a TCP user timeout, so that a dead
 * server is noticed within about a minute instead of hanging a call, and an
 * application_name that says which thread it is. The DSN (dbname, expanded last) overrides
 * any of these. Blocking: never call it on the event loop. */
#ifndef CULPRIT_STORAGE_CONNECT_H
#define CULPRIT_STORAGE_CONNECT_H

#include <stddef.h>

struct pg_conn; /* libpq's PGconn */

/* A connection, or NULL with libpq's message (one line) in err. */
struct pg_conn *storage_connect(const char *dsn, const char *application_name, int connect_timeout_s, char *err,
				size_t err_size);
/* The same with the server options of the session (libpq's "options", e.g. "-c
 * statement_timeout=5000"; NULL: none). */
struct pg_conn *storage_connect_opts(const char *dsn, const char *application_name, int connect_timeout_s,
				     const char *options, char *err, size_t err_size);

#endif
