/* migrate.h: numbered SQL migrations applied in order.
 *
 * Files NNN_description.sql (NNN: a positive decimal number, unique) in the migrations
 * directory are applied in numeric order, each in its own transaction, and recorded in the
 * table schema_migrations(version, name, applied). The whole run holds a session advisory
 * lock, so two culpritd starting at once against one database apply each file exactly once;
 * a second run applies nothing. Files must not contain transaction control. */
#ifndef CULPRIT_STORAGE_MIGRATE_H
#define CULPRIT_STORAGE_MIGRATE_H

#include <stddef.h>

#include <libpq-fe.h>
#include "attrs.h"

/* The migrations directory: $CULPRIT_MIGRATIONS_DIR; else, for a binary of the build tree,
 * the source tree's; else share/culprit/migrations beside the binary's bin/ (an installed
 * culpritd uses the installed migrations, never a checkout's); else the configured install
 * prefix's. */
const char *storage_migrations_dir(void);

/* Applies what is missing. dir NULL: storage_migrations_dir(). On success returns the number
 * of files applied (0 when up to date); on failure -1 with a message in err. */
MUST_CHECK int storage_migrate(const char *dsn, const char *dir, char *err, size_t err_size);
MUST_CHECK int storage_migrate_conn(PGconn *conn, const char *dir, char *err, size_t err_size);

#endif
