/* test_config.c: culpritd -t accepts a good configuration and refuses bad ones with a
 * message naming the setting and what is allowed (exit 2): a directory or unreadable file as
 * --config, a setting set twice (both lines named), an alert URL that is not http(s). What -t
 * prints holds none of the secrets put in. --name=value as well as --name value; --version
 * names the version, commit and build type; a busy HTTP port is refused with the reason. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

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
		fprintf(stderr, "culpritd %s: exit %d (want %d), output lacks \"%s\":\n%s\n", args, rc, code, needle,
			out);
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
	expect("-t --max-frame=8M", 0, "max_frame = 8388608");
	expect("-t --max-frame=4x", 2, "\"max_frame\": \"4x\" is not an integer");
	expect("-t --http-listen=127.0.0.1:1 --storage=false", 0, "http_listen = \"127.0.0.1:1\"");
	expect("-t --frobnicate=1", 2, "unknown argument \"--frobnicate=1\"");
	expect("--version", 0, "culpritd ");
	expect("--version", 0, " build)");
	expect("--version", 0, "(commit ");
	{
		/* a port already taken: culpritd says why it cannot listen */
		int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
		struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
		socklen_t len = sizeof(a);
		char busy[200];

		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 1) < 0 ||
		    getsockname(fd, (struct sockaddr *)&a, &len) < 0)
			exit(1);
		snprintf(busy, sizeof(busy), "--storage false --agent-listen 127.0.0.1:%d --http-listen 127.0.0.1:%d",
			 h_free_port(), ntohs(a.sin_port));
		expect(busy, 1, "could not listen for HTTP on 127.0.0.1:");
		expect(busy, 1, ": Address already in use");
		close(fd);
	}

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
	expect(args, 2,
	       "culpritd.conf:2: invalid value for setting \"retention_days\": 0 is outside the allowed range 1 .. "
	       "3650");
	f = fopen(path, "w");
	fprintf(f, "no equals sign here\n");
	fclose(f);
	expect(args, 2, "culpritd.conf:1: expected \"name = value\"");
	snprintf(args, sizeof(args), "--config %s/missing.conf -t", dir);
	expect(args, 2, "could not open configuration file");

	/* a directory opens but does not read: fatal, not a run on defaults */
	snprintf(args, sizeof(args), "--config %s -t", dir);
	expect(args, 2, "could not read configuration file");

	/* a setting twice: both lines named */
	f = fopen(path, "w");
	fprintf(f, "max_jobs = 3\n# comment\nhttp_listen = \"127.0.0.1:9999\"\nmax_jobs = 4\n");
	fclose(f);
	snprintf(args, sizeof(args), "--config %s -t", path);
	expect(args, 2, "culpritd.conf:4: setting \"max_jobs\" is set twice, on lines 1 and 4");

	/* alert targets speak http or https; the refusal does not echo the (maybe secret) URL */
	expect("-t --webhook-url ftp://hooks.example/in", 2, "\"webhook_url\": not an http:// or https:// URL");
	expect("-t --slack-url file:///SLACKSECRET", 2, "\"slack_url\": not an http:// or https:// URL");
	expect("-t --webhook-url https://hooks.example/in", 0, "webhook_url = \"https://hooks.example/in\"");

	/* -t shows no secret: tokens, keys, the Slack URL, passwords in the DSN and in URLs */
	{
		static const char *const secrets[] = {"DBPASS1",  "SLACKKEY2", "HOOKPASS3", "AMPASS4", "AGENTTOK5",
						      "READTOK6", "WRITETOK7", "HMACKEY8",  "PDKEY9",  "PUBPASS10"};
		char out[8192];

		f = fopen(path, "w");
		fprintf(f, "db = \"host=db user=culprit password=DBPASS1 dbname=culprit\"\n"
			   "slack_url = https://hooks.slack.com/services/T0/B0/SLACKKEY2\n"
			   "webhook_url = https://hook:HOOKPASS3@hooks.example/in\n"
			   "alertmanager_url = http://am:AMPASS4@am:9093\n"
			   "agent_token = AGENTTOK5\nhttp_read_token = READTOK6\nhttp_write_token = WRITETOK7\n"
			   "webhook_secret = HMACKEY8\npagerduty_routing_key = PDKEY9\n"
			   "public_url = https://ops:PUBPASS10@culprit.example\n");
		fclose(f);
		snprintf(args, sizeof(args), "--config %s -t", path);
		if (run(args, out, sizeof(out)) != 0 || !strstr(out, "configuration is valid") ||
		    !strstr(out, "webhook_url = \"https://hook:****@hooks.example/in\"") ||
		    !strstr(out, "slack_url = \"(set, not shown)\"")) {
			fprintf(stderr, "culpritd %s: not valid, or secrets not shown as masked:\n%s\n", args, out);
			failures++;
		}
		for (size_t i = 0; i < sizeof(secrets) / sizeof(secrets[0]); i++)
			if (strstr(out, secrets[i])) {
				fprintf(stderr, "culpritd -t shows the secret %s:\n%s\n", secrets[i], out);
				failures++;
			}
		/* a DSN in URI form on the command line */
		expect("-t --db postgresql://culprit:DBPASS11@db/culprit", 0,
		       "db = \"postgresql://culprit:****@db/culprit\"");
	}

	if (failures)
		return 1;
	printf("config: all cases as expected\n");
	return 0;
}
