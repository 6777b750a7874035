/* test_systemd.c: culpritd under a stand-in for systemd's Type=notify: with NOTIFY_SOCKET
 * naming a datagram socket of the test's and WATCHDOG_USEC 2 s, culpritd sends READY=1 once
 * it serves, WATCHDOG=1 at least every second from its loop, and STOPPING=1 on SIGTERM; the
 * same with an abstract socket ("@name"). */
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "harness.h"

static struct h_proc proc;

/* The next datagram within timeout_ms into buf ("" on timeout). */
static const char *next(int fd, char *buf, size_t size, int timeout_ms)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	ssize_t n;

	buf[0] = '\0';
	if (poll(&p, 1, timeout_ms) == 1 && (n = recv(fd, buf, size - 1, 0)) > 0)
		buf[n] = '\0';
	return buf;
}

static void run(const char *dir, const char *name)
{
	const char *extra[] = {"--storage", "false", NULL};
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_DGRAM, 0), watchdogs = 0;
	socklen_t len;
	char buf[512];
	int64_t t0;

	H_CHECK(fd >= 0, NULL);
	if (name[0] == '@') {
		snprintf(sa.sun_path + 1, sizeof(sa.sun_path) - 1, "%s", name + 1);
		len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(name));
	} else {
		snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", name);
		unlink(name);
		len = sizeof(sa);
	}
	H_CHECK(bind(fd, (struct sockaddr *)&sa, len) == 0, NULL);
	setenv("NOTIFY_SOCKET", name, 1);
	setenv("WATCHDOG_USEC", "2000000", 1);
	H_CHECK(h_culpritd_start(&proc, dir, extra) == 0, &proc);
	unsetenv("NOTIFY_SOCKET");
	unsetenv("WATCHDOG_USEC");

	H_CHECK(strstr(next(fd, buf, sizeof(buf), 10000), "READY=1") != NULL, &proc);
	/* the watchdog, fed from the loop's tick: three within 4 s */
	for (t0 = h_now_ms(); watchdogs < 3 && h_now_ms() - t0 < 4000;)
		watchdogs += strcmp(next(fd, buf, sizeof(buf), 2000), "WATCHDOG=1") == 0;
	H_CHECK(watchdogs == 3, &proc);
	kill(proc.pid, SIGTERM);
	for (t0 = h_now_ms(); !strstr(buf, "STOPPING=1") && h_now_ms() - t0 < 10000;)
		next(fd, buf, sizeof(buf), 1000);
	H_CHECK(strstr(buf, "STOPPING=1") != NULL, &proc);
	H_CHECK(h_proc_stop(&proc, 0, 30000) == 0, &proc); /* signal 0: it is stopping already */
	close(fd);
}

int main(void)
{
	char dir[600], path[700], abstract[64];

	h_tmpdir("systemd", dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/notify.sock", dir);
	run(dir, path);
	snprintf(abstract, sizeof(abstract), "@culprit-test-notify-%d", (int)getpid());
	run(dir, abstract);
	printf("ok\n");
	return 0;
}
