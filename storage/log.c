/* log.c: see log.h. */
#include "log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static _Atomic int min_level = LOG_INFO;
static const char *const level_names[] = {"DEBUG", "INFO", "WARNING", "ERROR"};

void log_set_level(enum log_level level)
{
	atomic_store(&min_level, (int)level);
}

enum log_level log_get_level(void)
{
	return (enum log_level)atomic_load(&min_level);
}

int log_level_parse(const char *s)
{
	static const char *const names[] = {"debug", "info", "warning", "error"};

	for (int i = 0; i < 4; i++)
		if (strcmp(s, names[i]) == 0)
			return i;
	return -1;
}

const char *log_escape(const char *s, char *buf, size_t size)
{
	size_t n = 0;

	if (size < 8) {
		if (size)
			buf[0] = '\0';
		return buf;
	}
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;
		char one[5];
		size_t len;

		if (ch == '\n' || ch == '\t' || ch == '\r' || ch == '"' || ch == '\\')
			len = (size_t)snprintf(one, sizeof(one), "\\%c", ch == '\n' ? 'n' : ch == '\t' ? 't' : ch == '\r' ? 'r' : ch);
		else if (ch < 0x20 || ch >= 0x7f)
			len = (size_t)snprintf(one, sizeof(one), "\\x%02x", ch);
		else
			one[0] = (char)ch, len = 1;
		if (n + len > size - 4) { /* room for "..." and the NUL */
			memcpy(buf + n, "...", 3);
			n += 3;
			break;
		}
		memcpy(buf + n, one, len);
		n += len;
	}
	buf[n] = '\0';
	return buf;
}

__attribute__((format(printf, 2, 0)))
static void log_vwrite(enum log_level level, const char *fmt, va_list ap)
{
	char line[2048];
	struct timespec ts;
	struct tm tm;
	int n;

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	n = (int)strftime(line, sizeof(line), "%Y-%m-%d %H:%M:%S", &tm);
	n += snprintf(line + n, sizeof(line) - (size_t)n, ".%03ld %-7s ", ts.tv_nsec / 1000000,
		      level_names[level]);
	n += vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	if (n > (int)sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	/* a last guard for what escaped log_escape: no terminal control reaches the log */
	for (int i = 0; i < n; i++)
		if (((unsigned char)line[i] < 0x20 && line[i] != '\n' && line[i] != '\t') || line[i] == 0x7f)
			line[i] = '?';
	line[n++] = '\n';
	/* one write per line keeps lines whole between threads */
	if (write(STDERR_FILENO, line, (size_t)n) < 0)
		return;
}

void log_write(enum log_level level, const char *fmt, ...)
{
	va_list ap;

	if ((int)level < atomic_load(&min_level))
		return;
	va_start(ap, fmt);
	log_vwrite(level, fmt, ap);
	va_end(ap);
}

static long long now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

void log_complain(struct log_complaint *c, enum log_level level, const char *fmt, ...)
{
	long long now = now_us();
	va_list ap;

	if (c->active && now - c->last_us < c->interval_us)
		return;
	c->interval_us = c->active ? c->interval_us * 2 : 10 * 1000000LL;
	if (c->interval_us > 86400 * 1000000LL)
		c->interval_us = 86400 * 1000000LL;
	c->active = true;
	c->last_us = now;
	if ((int)level < atomic_load(&min_level))
		return;
	va_start(ap, fmt);
	log_vwrite(level, fmt, ap);
	va_end(ap);
}

void log_release(struct log_complaint *c, enum log_level level, const char *fmt, ...)
{
	va_list ap;

	if (!c->active)
		return;
	c->active = false;
	c->interval_us = 0;
	if ((int)level < atomic_load(&min_level))
		return;
	va_start(ap, fmt);
	log_vwrite(level, fmt, ap);
	va_end(ap);
}

bool log_complaint_quiet(const struct log_complaint *c, long long ms)
{
	return now_us() - c->last_us >= ms * 1000;
}
