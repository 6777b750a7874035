/* log.h: leveled, printf-checked log lines on stderr, PostgreSQL style (lower case).
 *
 *   log_info("agent %s: hello from %s", peer, host);
 *
 * Each line: "2026-12-02 09:24:00.123 UTC LEVEL   message"; when stderr is the systemd
 * journal (JOURNAL_STREAM), "<N>message" with N the syslog priority (journald keeps the time).
 * A message of several lines is logged as lines of their own, each with its prefix, each cut
 * at LOG_LINE_MAX bytes. Thread-safe (one write per message).
 * Two rate limits: a repeating failure is logged once and its recovery once (struct
 * log_complaint); a failure that clients can repeat at will is logged a few times a second
 * (struct log_limit). */
#ifndef CULPRIT_LOG_H
#define CULPRIT_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

enum log_level { LOG_DEBUG = 0, LOG_INFO = 1, LOG_WARNING = 2, LOG_ERROR = 3 };

#define LOG_LINE_MAX 2048

void log_set_level(enum log_level level);
enum log_level log_get_level(void);
/* Parses "debug", "info", "warning", "error"; -1 when unknown. */
int log_level_parse(const char *s);

void log_write(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A string a client sent, made safe to log: bytes outside printable ASCII, '"' and '\\' are
 * written as \n, \t, \r, \", \\ or \xNN, so a client can neither forge log lines nor send
 * terminal escapes; cut to size - 1 bytes ("..." marks the cut). Returns buf. */
const char *log_escape(const char *s, char *buf, size_t size);
/* log_escape into a buffer that lives until the end of the enclosing statement's block:
 *   log_info("agent %s: goodbye: %s", c->peer, LOG_ESC(reason)); */
#define LOG_ESCAPE_MAX 512
#define LOG_ESC(s) log_escape((s), (char[LOG_ESCAPE_MAX]){0}, LOG_ESCAPE_MAX)

#define log_debug(...) log_write(LOG_DEBUG, __VA_ARGS__)
#define log_info(...) log_write(LOG_INFO, __VA_ARGS__)
#define log_warning(...) log_write(LOG_WARNING, __VA_ARGS__)
#define log_error(...) log_write(LOG_ERROR, __VA_ARGS__)

/* Rate-limited complaint about a failure that repeats (collectd's c_complain): logged the
 * first time and then at most once per interval that doubles up to a day; log_release logs
 * the recovery once. Zero-initialise. */
struct log_complaint {
	bool active;
	long long last_us;
	long long interval_us;
};
void log_complain(struct log_complaint *c, enum log_level level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void log_release(struct log_complaint *c, enum log_level level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* true when c's last logged complaint is at least ms old: a failure that comes and goes many
 * times a second (accept at the open-file limit) releases only after a quiet while, so the
 * complaint and its release are not logged on every flap */
bool log_complaint_quiet(const struct log_complaint *c, long long ms);

/* At most a few log lines a second for a failure that clients can repeat at will (refused
 * tokens, failed TLS handshakes): the first LOG_LIMIT_PER_SECOND of each second are logged,
 * the rest summed up in one line when the next second begins. Metrics count them all. One
 * thread only (the event loop). */
#define LOG_LIMIT_PER_SECOND 5

struct log_limit {
	time_t second;
	unsigned logged, suppressed;
	const char *what; /* "more WHAT not logged" */
};
/* true: log this one */
bool log_limit_allow(struct log_limit *l);

#endif
