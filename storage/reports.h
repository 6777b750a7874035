/* reports.h (private to storage/): the statements of a STORAGE_OP_REPORT, run by the writer
 * inside its group's transaction. */
#ifndef CULPRIT_STORAGE_REPORTS_H
#define CULPRIT_STORAGE_REPORTS_H

#include <stdint.h>

#include <libpq-fe.h>

#include "op.h"

/* Inserts the report, upserts the incident, inserts the outbox rows. Returns NULL when all
 * succeeded, else the failed result (the caller classifies and clears it); *what names the
 * statement. */
PGresult *storage_report_write(PGconn *c, int32_t job_id, const struct storage_op *op, const char **what);

#endif
