/* log.c: see log.h. */
#include "log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "clock.h"

static _Atomic int min_level = LOG_INFO;
static const char *const level_names[] = {"DEBUG", "INFO", "WARNING", "ERROR"};

void log_set_level(enum log_level level) { atomic_store(&min_level, (int)level); }

enum log_level log_get_level(void) { return (enum log_level)atomic_load(&min_level); }

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
			len = (size_t)snprintf(one, sizeof(one), "\\%c",
					       ch == '\n'   ? 'n'
					       : ch == '\t' ? 't'
					       : ch == '\r' ? 'r'
							    : ch);
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

/* stderr is the systemd journal: JOURNAL_STREAM ("<device>:<inode>") names stderr's file.
 * Checked at each line (a getenv and an fstat): stderr may be redirected meanwhile. */
static bool to_journal(void)
{
	const char *js = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;

	return js && sscanf(js, "%llu:%llu", &dev, &ino) == 2 && fstat(STDERR_FILENO, &st) == 0 &&
	       (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

/* One entry per line of the message, each with its own prefix: "<N>" (the syslog priority,
 * which journald reads, so that `journalctl -p warning` finds warnings) when stderr is the
 * journal, else the UTC time and the level. A line is cut at LOG_LINE_MAX bytes; a message
 * of many lines (a report) is not. All of it goes out in one write, whole between threads. */
__attribute__((format(printf, 2, 0))) static void log_vwrite(enum log_level level, const char *fmt, va_list ap)
{
	static const int priority[] = {7, 6, 4, 3}; /* debug, info, warning, err */
	char small[LOG_LINE_MAX], spare[2 * LOG_LINE_MAX], prefix[64], *msg = small, *out;
	size_t plen, cap, n = 0;
	struct timespec ts;
	struct tm tm;
	va_list aq;
	int len;

	va_copy(aq, ap);
	len = vsnprintf(small, sizeof(small), fmt, ap);
	if (len < 0)
		len = 0;
	if ((size_t)len >= sizeof(small)) {
		msg = malloc((size_t)len + 1);
		if (msg)
			vsnprintf(msg, (size_t)len + 1, fmt, aq);
		else
			msg = small, len = (int)sizeof(small) - 1; /* cut, but said */
	}
	va_end(aq);
	if (to_journal()) {
		plen = (size_t)snprintf(prefix, sizeof(prefix), "<%d>", priority[level]);
	} else {
		clock_gettime(CLOCK_REALTIME, &ts);
		gmtime_r(&ts.tv_sec, &tm);
		plen = strftime(prefix, sizeof(prefix), "%Y-%m-%d %H:%M:%S", &tm);
		plen += (size_t)snprintf(prefix + plen, sizeof(prefix) - plen, ".%03ld UTC %-7s ", ts.tv_nsec / 1000000,
					 level_names[level]);
	}
	/* every line its prefix and a newline; no line over LOG_LINE_MAX */
	cap = (size_t)len + 1;
	for (int i = 0; i < len; i++)
		cap += msg[i] == '\n';
	cap = cap * (plen + 1) + (size_t)len + 1;
	out = cap <= sizeof(spare) ? spare : malloc(cap);
	if (!out) { /* out of memory: the lines that fit */
		out = spare;
		cap = sizeof(spare);
	}
	for (const char *line = msg, *end = msg + len; line <= end;) {
		const char *nl = memchr(line, '\n', (size_t)(end - line));
		size_t ll = (size_t)((nl ? nl : end) - line);

		if (ll > LOG_LINE_MAX - plen - 1)
			ll = LOG_LINE_MAX - plen - 1;
		if (n + plen + ll + 1 > cap)
			break;
		memcpy(out + n, prefix, plen);
		memcpy(out + n + plen, line, ll);
		/* a last guard for what escaped log_escape: no terminal control reaches the log */
		for (size_t i = n + plen; i < n + plen + ll; i++)
			if (((unsigned char)out[i] < 0x20 && out[i] != '\t') || out[i] == 0x7f)
				out[i] = '?';
		n += plen + ll;
		out[n++] = '\n';
		if (!nl)
			break;
		line = nl + 1;
	}
	if (n && write(STDERR_FILENO, out, n) < 0)
		n = 0;
	if (out != spare)
		free(out);
	if (msg != small)
		free(msg);
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

void log_complain(struct log_complaint *c, enum log_level level, const char *fmt, ...)
{
	long long now = clock_mono_us();
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
	return clock_mono_us() - c->last_us >= ms * 1000;
}

bool log_limit_allow(struct log_limit *l)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	if (now.tv_sec != l->second) {
		if (l->suppressed)
			log_warning("%u more %s not logged", l->suppressed, l->what);
		l->second = now.tv_sec;
		l->logged = l->suppressed = 0;
	}
	if (l->logged < LOG_LIMIT_PER_SECOND) {
		l->logged++;
		return true;
	}
	l->suppressed++;
	return false;
}
