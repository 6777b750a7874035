/* test_config.c: culpritd -t accepts a good configuration and refuses bad ones with a
 * message naming the setting and what is allowed (exit 2). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "harness.h"

/* Runs culpritd with args; returns the exit code, output in out. */
static int run(const char *args, char *out, size_t size)
{
	char cmd[2048];
	FILE *p;
	size_t n;
	int status;

	snprintf(cmd, sizeof(cmd), "%s %s 2>&1", CULPRITD_BIN, args);
	p = popen(cmd, "r");
	if (!p)
		exit(1);
	n = fread(out, 1, size - 1, p);
	out[n] = '\0';
	status = pclose(p);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static int failures;

static void expect(const char *args, int code, const char *needle)
{
	char out[8192];
	int rc = run(args, out, sizeof(out));

	if (rc != code || !strstr(out, needle)) {
		fprintf(stderr, "culpritd %s: exit %d (want %d), output lacks \"%s\":\n%s\n", args, rc, code, needle, out);
		failures++;
	}
}

int main(void)
{
	char dir[600], path[700], args[800];
	FILE *f;

	expect("-t", 0, "configuration is valid");
	expect("-t --max-frame 5", 2, "\"max_frame\": 5 is outside the allowed range 1024 .. 67108864");
	expect("-t --max-frame 4x", 2, "\"max_frame\": \"4x\" is not an integer");
	expect("-t --agent-listen nowhere", 2, "\"agent_listen\"");
	expect("-t --log-level loud", 2, "\"log_level\"");
	expect("-t --storage maybe", 2, "\"storage\": \"maybe\" is not true or false");
	expect("-t --max-frame 2048 --max-frame-before-hello 4096", 2, "must not exceed \"max_frame\"");
	expect("-t --max-input-buffer-bytes 8M", 2, "must be at least 4 times \"max_frame\"");
	expect("-t --frobnicate 1", 2, "unknown argument \"--frobnicate\"");
	expect("-t --max-frame 8M", 0, "max_frame = 8388608");

	h_tmpdir("config", dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/culpritd.conf", dir);
	f = fopen(path, "w");
	fprintf(f, "# a comment\nmax_connections = 100\nhttp_listen = \"127.0.0.1:9999\"\n");
	fclose(f);
	snprintf(args, sizeof(args), "--config %s -t", path);
	expect(args, 0, "max_connections = 100");
	snprintf(args, sizeof(args), "--config %s --max-connections 7 -t", path);
	expect(args, 0, "max_connections = 7"); /* flags override the file */
	f = fopen(path, "w");
	fprintf(f, "max_connections = 100\nretention_days = 0\n");
	fclose(f);
	snprintf(args, sizeof(args), "--config %s -t", path);
	expect(args, 2, "culpritd.conf:2: invalid value for setting \"retention_days\": 0 is outside the allowed range 1 .. 3650");
	f = fopen(path, "w");
	fprintf(f, "no equals sign here\n");
	fclose(f);
	expect(args, 2, "culpritd.conf:1: expected \"name = value\"");
	snprintf(args, sizeof(args), "--config %s/missing.conf -t", dir);
	expect(args, 2, "could not open configuration file");

	if (failures)
		return 1;
	printf("config: all cases as expected\n");
	return 0;
}
