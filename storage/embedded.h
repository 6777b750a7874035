/* embedded.h: culpritd's private PostgreSQL cluster.
 *
 * Under <data_dir>/pg: initdb on first start, then started as a child process listening on
 * a Unix socket in that directory only (no TCP), reused on later starts, stopped cleanly.
 * As root, PostgreSQL runs as the unprivileged Debian user "postgres". Binaries come from
 * `pg_config --bindir` or the newest /usr/lib/postgresql/<version>/bin. */
#ifndef CULPRIT_STORAGE_EMBEDDED_H
#define CULPRIT_STORAGE_EMBEDDED_H

#include <stddef.h>

struct embedded;

/* Starts (initialising when new) the cluster under data_dir/pg and waits until it accepts
 * connections; creates the database "culprit" when missing. NULL with a message in err. */
struct embedded *embedded_start(const char *data_dir, char *err, size_t err_size);
/* The DSN of the running cluster's "culprit" database. */
const char *embedded_dsn(const struct embedded *e);
/* Fast shutdown; waits for the postmaster to exit (SIGKILL after a timeout). Frees e. */
void embedded_stop(struct embedded *e);

#endif
