/* fuzz_config: libFuzzer driver for culpritd's configuration file parser (server/config.c:
 * config_load_file, then config_check and printing, the token guards built from it
 * (server/auth.c: auth_new), then the same text as a SIGHUP reload over the defaults) and for the job tokens file parser (server/auth.c:
 * auth_parse_job_tokens). The input goes through a memfd so the parser reads it by path as it
 * reads a real file. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "auth.h"
#include "config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int count_pair(void *arg, const char *job, const char *token)
{
	if (!job[0] || !auth_token_valid(token))
		__builtin_trap(); /* the parser hands over only what it checked */
	++*(int *)arg;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int fd = -1;
	static char path[64];
	static FILE *devnull;
	struct config cfg, reload;
	char err[1024] = "", *text;
	int pairs = 0;

	if (fd < 0) {
		fd = memfd_create("fuzz_config", 0);
		devnull = fopen("/dev/null", "w");
		if (fd < 0 || !devnull)
			abort();
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	}
	if (ftruncate(fd, 0) < 0 || pwrite(fd, data, size, 0) != (ssize_t)size)
		abort();

	config_defaults(&cfg);
	if (config_load_file(&cfg, path, false, err, sizeof(err)) == 0) {
		if (config_check(&cfg, err, sizeof(err)) < 0 && !err[0])
			__builtin_trap();
		config_print_values(&cfg, devnull);
		/* the token settings (lists of up to 4): guards built, or refused with a reason; no
		 * job tokens file (the input could name any path) */
		free(cfg.job_tokens_file);
		cfg.job_tokens_file = NULL;
		err[0] = '\0';
		struct auth *a = auth_new(&cfg, err, sizeof(err));
		if (!a && !err[0])
			__builtin_trap();
		auth_free(a);
		/* a reload of the same file over the defaults: fine, or refused with a reason */
		config_defaults(&reload);
		err[0] = '\0';
		if (config_load_file(&reload, path, true, err, sizeof(err)) < 0 && !err[0])
			__builtin_trap();
		config_free(&reload);
	} else if (!err[0]) {
		__builtin_trap();
	}
	config_free(&cfg);

	text = malloc(size + 1);
	if (!text)
		abort();
	memcpy(text, data, size);
	text[size] = '\0';
	err[0] = '\0';
	if (auth_parse_job_tokens(text, count_pair, &pairs, err, sizeof(err)) < 0 && !err[0])
		__builtin_trap();
	free(text);
	return 0;
}
