/* import_common.c: what the format importers share (see import_common.h). */
#include "import_common.h"

#include <stdarg.h>
#include <stdio.h>

void import_warn(const struct import_options *opt, const char *fmt, ...)
{
	if (!opt || !opt->warn)
		return;
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	opt->warn(opt->warn_ctx, msg);
}

void import_warn_stderr(void *prefix, const char *msg)
{
	fprintf(stderr, "%s: warning: %s\n", (const char *)prefix, msg);
}

int import_rejected(const char *path, const char *why, char *err, size_t err_size)
{
	snprintf(err, err_size, "%s: %s", path, why ? why : "rejected");
	return -1;
}
