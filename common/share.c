/* share.c: see share.h. */
#include "share.h"

#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static bool is_dir(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

const char *share_dir(const char *env, const char *build_dir, const char *source_dir, const char *install_prefix,
		      const char *sub, char *buf, size_t size)
{
	const char *value = env ? getenv(env) : NULL;
	char exe[PATH_MAX], *slash = NULL;
	ssize_t n;

	if (value && value[0])
		return value;
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n > 0) {
		size_t b = strlen(build_dir);

		exe[n] = '\0';
		if (b && strncmp(exe, build_dir, b) == 0 && exe[b] == '/' && is_dir(source_dir)) {
			snprintf(buf, size, "%s", source_dir);
			return buf;
		}
		for (int up = 0; up < 2 && (slash = strrchr(exe, '/')); up++)
			*slash = '\0';
		if (slash && (size_t)snprintf(buf, size, "%s/share/culprit/%s", exe, sub) < size && is_dir(buf))
			return buf;
	}
	snprintf(buf, size, "%s/share/culprit/%s", install_prefix, sub);
	return buf;
}
