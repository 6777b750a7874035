/* notify.c: see notify.h. */
#include "notify.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int notify_send(const char *state)
{
	const char *path = getenv("NOTIFY_SOCKET");
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	size_t len = path ? strlen(path) : 0;
	socklen_t salen;
	ssize_t n;
	int fd, saved;

	if (len == 0)
		return 0;
	if ((path[0] != '/' && path[0] != '@') || len >= sizeof(sa.sun_path)) {
		errno = EINVAL;
		return -1;
	}
	memcpy(sa.sun_path, path, len);
	if (path[0] == '@')
		sa.sun_path[0] = '\0';
	salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len + (path[0] == '/'));
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	n = sendto(fd, state, strlen(state), MSG_NOSIGNAL | MSG_DONTWAIT, (struct sockaddr *)&sa, salen);
	saved = errno;
	close(fd);
	errno = saved;
	return n == (ssize_t)strlen(state) ? 1 : -1;
}

int64_t notify_watchdog_us(void)
{
	const char *us = getenv("WATCHDOG_USEC"), *pid = getenv("WATCHDOG_PID");
	char *end;
	long long v;

	if (!us || (pid && strtol(pid, NULL, 10) != (long)getpid()))
		return 0;
	errno = 0;
	v = strtoll(us, &end, 10);
	return errno || *end || v <= 0 ? 0 : (int64_t)v;
}
