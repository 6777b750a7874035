/* connect.c: see connect.h. */
#include "connect.h"

#include <stdio.h>
#include <string.h>

#include <libpq-fe.h>

PGconn *storage_connect(const char *dsn, const char *application_name, int connect_timeout_s, char *err,
			size_t err_size)
{
	return storage_connect_opts(dsn, application_name, connect_timeout_s, NULL, err, err_size);
}

PGconn *storage_connect_opts(const char *dsn, const char *application_name, int connect_timeout_s,
			     const char *options, char *err, size_t err_size)
{
	char timeout[16];
	const char *kw[] = {"connect_timeout",  "application_name", "keepalives_idle", "keepalives_interval",
			    "keepalives_count", "tcp_user_timeout", "options",         "dbname",
			    NULL};
	const char *val[] = {timeout, application_name, "30", "10", "3", "60000", options ? options : "", dsn, NULL};
	PGconn *c;

	snprintf(timeout, sizeof timeout, "%d", connect_timeout_s);
	c = PQconnectdbParams(kw, val, 1);
	if (PQstatus(c) == CONNECTION_OK)
		return c;
	snprintf(err, err_size, "%s", PQerrorMessage(c));
	err[strcspn(err, "\n")] = '\0';
	PQfinish(c);
	return NULL;
}
