/* hooks.c: see hooks.h.
 *
 * The program is started with posix_spawn in a process group of its own (so that a timeout
 * kills whatever it started too), its standard input a pipe carrying the action's JSON, its
 * standard output and error one pipe read into a bounded buffer, every other descriptor
 * closed, signals at their defaults. The thread polls the two pipes, a pidfd of the child and
 * a wake pipe (hooks_stop) until the child exits or its deadline passes. */
#include "hooks.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "action_log.h"
#include "clock.h"
#include "log.h"
#include "queue.h"

extern char **environ;

#define RETRY_MIN_MS 1000

static const char *const result_names[HOOK_RESULTS] = {"ok", "failed", "timeout", "error", "dry_run"};

const char *hook_result_name(enum hook_result r) { return (unsigned)r < HOOK_RESULTS ? result_names[r] : "?"; }

struct item {
	struct queue_item qi;
	struct hook_run *r;
};

struct hooks {
	struct queue q;
	pthread_t thread;
	int wake[2]; /* hooks_stop writes a byte: the running attempt looks at the stop deadline */
	struct storage_action_log *db;
	_Atomic int64_t stop_at_ms; /* 0: running; else kill a running attempt at this clock_mono_ms() */
	_Atomic uint64_t attempts[HOOK_RESULTS], refused;
};

void hook_run_free(struct hook_run *r)
{
	if (!r)
		return;
	free(r->incident);
	free(r->job);
	free(r->kind);
	free(r->target);
	free(r->who);
	free(r->input);
	free(r->program);
	free(r);
}

/* What the program wrote, made safe for a text column and a log line: bytes outside printable
 * ASCII (but newline and tab) become '?'. */
static void clean(char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if ((s[i] < 0x20 && s[i] != '\n' && s[i] != '\t') || (unsigned char)s[i] >= 0x7f)
			s[i] = '?';
	s[n] = '\0';
}

static pid_t spawn(const char *program, int in_fd, int out_fd, char *err, size_t err_size)
{
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	sigset_t none, all;
	char *argv[] = {(char *)program, NULL};
	pid_t pid = -1;
	int rc;

	sigemptyset(&none);
	sigfillset(&all);
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, in_fd, 0);
	posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
	posix_spawn_file_actions_adddup2(&fa, out_fd, 2);
	posix_spawn_file_actions_addclosefrom_np(&fa, 3);
	posix_spawnattr_init(&at);
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
	posix_spawnattr_setpgroup(&at, 0);
	posix_spawnattr_setsigmask(&at, &none);
	posix_spawnattr_setsigdefault(&at, &all); /* culpritd ignores SIGPIPE: the hook must not */
	rc = posix_spawn(&pid, program, &fa, &at, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&at);
	if (rc != 0) {
		snprintf(err, err_size, "could not start \"%s\": %s", program, strerror(rc));
		return -1;
	}
	return pid;
}

/* One attempt: the result, the program's output in out (HOOKS_OUTPUT_MAX + 1 bytes) and its
 * exit status in *code (-1 when it did not exit by itself). */
static enum hook_result attempt(struct hooks *h, const struct hook_run *r, char *out, int *code)
{
	int in[2] = {-1, -1}, outp[2] = {-1, -1}, pidfd = -1, st = 0, exited = 0, killed = 0;
	const char *input = r->input ? r->input : "{}";
	size_t len = strlen(input), sent = 0, got = 0;
	int64_t deadline = clock_mono_ms() + (int64_t)r->timeout_s * 1000;
	pid_t pid;

	*code = -1;
	out[0] = '\0';
	if (pipe2(in, O_CLOEXEC) < 0 || pipe2(outp, O_CLOEXEC) < 0) {
		snprintf(out, HOOKS_OUTPUT_MAX, "could not make a pipe: %s", strerror(errno));
		goto error;
	}
	if ((pid = spawn(r->program, in[0], outp[1], out, HOOKS_OUTPUT_MAX)) < 0)
		goto error;
	close(in[0]);
	close(outp[1]);
	in[0] = outp[1] = -1;
	fcntl(in[1], F_SETFL, O_NONBLOCK);
	pidfd = pidfd_open(pid, 0);
	while (!exited || outp[0] >= 0) {
		struct pollfd fds[4];
		int n = 0, i_in = -1, i_out = -1, i_pid = -1;
		int64_t stop = atomic_load(&h->stop_at_ms), until = stop && stop < deadline ? stop : deadline;
		int64_t left = until - clock_mono_ms();

		if (left <= 0 && !killed) {
			kill(-pid, SIGKILL); /* the whole process group */
			killed = 1;
		}
		if (killed && exited)
			break;
		if (in[1] >= 0)
			fds[i_in = n++] = (struct pollfd){.fd = in[1], .events = POLLOUT};
		if (outp[0] >= 0)
			fds[i_out = n++] = (struct pollfd){.fd = outp[0], .events = POLLIN};
		if (!exited && pidfd >= 0)
			fds[i_pid = n++] = (struct pollfd){.fd = pidfd, .events = POLLIN};
		fds[n++] = (struct pollfd){.fd = h->wake[0], .events = POLLIN};
		if (poll(fds, (nfds_t)n, killed ? 100 : (int)(left > 1000 ? 1000 : left)) < 0 && errno != EINTR)
			break;
		if (i_in >= 0 && fds[i_in].revents) {
			ssize_t w = write(in[1], input + sent, len - sent);
			if (w > 0)
				sent += (size_t)w;
			if (sent == len || (w < 0 && errno != EAGAIN)) {
				close(in[1]);
				in[1] = -1;
			}
		}
		if (i_out >= 0 && fds[i_out].revents) {
			char buf[4096];
			ssize_t rd = read(outp[0], buf, sizeof(buf));
			if (rd > 0 && got < HOOKS_OUTPUT_MAX) {
				size_t k = (size_t)rd < HOOKS_OUTPUT_MAX - got ? (size_t)rd : HOOKS_OUTPUT_MAX - got;
				memcpy(out + got, buf, k);
				got += k;
			} else if (rd == 0 || (rd < 0 && errno != EAGAIN && errno != EINTR)) {
				close(outp[0]);
				outp[0] = -1;
			}
		}
		if (i_pid >= 0 && fds[i_pid].revents)
			exited = 1;
		if (fds[n - 1].revents) { /* hooks_stop: stop_at_ms is set, read at the loop's top */
			char b[16];
			if (read(h->wake[0], b, sizeof(b)) < 0) {
			}
		}
		if (pidfd < 0 && waitpid(pid, &st, WNOHANG) == pid) /* no pidfd: ask on each wake */
			exited = 2;
		if (exited && killed)
			break;
	}
	if (exited != 2)
		waitpid(pid, &st, 0);
	clean(out, got);
	if (in[1] >= 0)
		close(in[1]);
	if (outp[0] >= 0)
		close(outp[0]);
	if (pidfd >= 0)
		close(pidfd);
	if (killed)
		return HOOK_TIMEOUT;
	if (WIFEXITED(st))
		*code = WEXITSTATUS(st);
	if (*code != 0)
		return HOOK_FAILED;
	return strcmp(r->mode, "dry_run") == 0 ? HOOK_DRY_RUN : HOOK_OK;
error:
	for (int i = 0; i < 2; i++) {
		if (in[i] >= 0)
			close(in[i]);
		if (outp[i] >= 0)
			close(outp[i]);
	}
	return HOOK_ERROR;
}

static void record(struct hooks *h, const struct hook_run *r, int n, const char *result, int code, const char *out,
		   int64_t t0, int64_t t1)
{
	struct storage_action_row row = {.incident = r->incident,
					 .job = r->job,
					 .kind = r->kind,
					 .target = r->target,
					 .op = r->op,
					 .mode = r->mode,
					 .who = r->who,
					 .result = result,
					 .output = out,
					 .input = r->input,
					 .action_n = r->n,
					 .attempt = n,
					 .exit_code = code,
					 .started_us = t0,
					 .finished_us = t1};

	log_info("action %d of incident %s (%s %s on %s, %s, by %s): %s%s%s", r->n, LOG_ESC(r->incident), r->op,
		 r->kind, LOG_ESC(r->target), r->mode, LOG_ESC(r->who), result, out && out[0] ? ": " : "",
		 out && out[0] ? LOG_ESC(out) : "");
	if (h->db)
		IGNORE_RESULT(storage_action_log_record(h->db, &row)); /* a failure is logged, rate-limited */
}

static void run(struct hooks *h, const struct hook_run *r)
{
	char out[HOOKS_OUTPUT_MAX + 1];
	int code, delay = RETRY_MIN_MS;

	if (r->record_only) {
		int64_t t = clock_wall_us();
		record(h, r, 0, r->record_only, -1, "", t, t);
		return;
	}
	for (int n = 1; n <= r->retries + 1; n++) {
		int64_t t0 = clock_wall_us();
		enum hook_result res = attempt(h, r, out, &code);

		atomic_fetch_add(&h->attempts[res], 1);
		record(h, r, n, hook_result_name(res), code, out, t0, clock_wall_us());
		if (res == HOOK_OK || res == HOOK_DRY_RUN || n == r->retries + 1)
			return;
		if (queue_wait_closed(&h->q, delay)) {
			log_warning("action %d of incident %s: not retried: culpritd is stopping", r->n,
				    LOG_ESC(r->incident));
			return;
		}
		delay *= 2;
	}
}

static void *thread_main(void *arg)
{
	struct hooks *h = arg;
	struct queue_item *it;

	while ((it = queue_take(&h->q, 0, true))) {
		struct item *i = queue_entry(it, struct item, qi);

		run(h, i->r);
		hook_run_free(i->r);
		free(i);
		queue_release(&h->q, 1, 1);
	}
	return NULL;
}

struct hooks *hooks_start(const char *dsn)
{
	struct hooks *h = calloc(1, sizeof(*h));

	if (!h)
		return NULL;
	h->wake[0] = h->wake[1] = -1;
	if (queue_init(&h->q, HOOKS_QUEUE_MAX, NULL, NULL) < 0) {
		free(h);
		return NULL;
	}
	if (pipe2(h->wake, O_CLOEXEC | O_NONBLOCK) < 0 || (dsn && !(h->db = storage_action_log_open(dsn))) ||
	    pthread_create(&h->thread, NULL, thread_main, h) != 0) {
		log_error("actions: could not start the hook runner: %s", strerror(errno));
		storage_action_log_close(h->db);
		if (h->wake[0] >= 0) {
			close(h->wake[0]);
			close(h->wake[1]);
		}
		queue_destroy(&h->q);
		free(h);
		return NULL;
	}
	return h;
}

int hooks_submit(struct hooks *h, struct hook_run *r)
{
	struct item *i;

	if (!h)
		return -1;
	if ((i = calloc(1, sizeof(*i)))) {
		i->r = r;
		if (queue_push(&h->q, &i->qi, 1) == 0)
			return 0;
		free(i);
	}
	atomic_fetch_add(&h->refused, 1);
	return -1;
}

void hooks_stop(struct hooks *h, int timeout_ms)
{
	struct queue_item *it;

	if (!h)
		return;
	atomic_store(&h->stop_at_ms, clock_mono_ms() + (timeout_ms > 0 ? timeout_ms : 1));
	queue_close(&h->q, false);
	if (write(h->wake[1], "x", 1) < 0) { /* the running attempt polls it: it looks at stop_at_ms */
	}
	pthread_join(h->thread, NULL);
	for (it = queue_drain(&h->q); it;) {
		struct item *i = queue_entry(it, struct item, qi);

		it = it->next;
		log_warning("action %d of incident %s (%s %s on %s): not run: culpritd stopped first", i->r->n,
			    LOG_ESC(i->r->incident), i->r->op, i->r->kind, LOG_ESC(i->r->target));
		hook_run_free(i->r);
		free(i);
	}
	close(h->wake[0]);
	close(h->wake[1]);
	storage_action_log_close(h->db);
	queue_destroy(&h->q);
	free(h);
}

void hooks_counts(struct hooks *h, uint64_t attempts[HOOK_RESULTS], uint64_t *refused, uint64_t *waiting)
{
	size_t items = 0;

	for (int i = 0; i < HOOK_RESULTS; i++)
		attempts[i] = h ? atomic_load(&h->attempts[i]) : 0;
	*refused = h ? atomic_load(&h->refused) : 0;
	if (h)
		queue_count(&h->q, NULL, &items);
	*waiting = items;
}
