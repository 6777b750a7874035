/* benchstore.c: see benchstore.h. */
#include "benchstore.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "benchutil.h"

struct sink {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int wakes;
};

static void wake(void *arg)
{
	struct sink *s = arg;
	pthread_mutex_lock(&s->mu);
	s->wakes++;
	pthread_cond_signal(&s->cv);
	pthread_mutex_unlock(&s->mu);
}

static void wait_wake(struct sink *s)
{
	pthread_mutex_lock(&s->mu);
	while (s->wakes == 0)
		pthread_cond_wait(&s->cv, &s->mu);
	s->wakes = 0;
	pthread_mutex_unlock(&s->mu);
}

/* the done items the writer has: how many; exits on a failed one */
static size_t take_done(struct storage_writer *w)
{
	struct storage_done d[256];
	size_t k, got = 0;
	while ((k = storage_writer_take_done(w, d, 256)) > 0) {
		for (size_t i = 0; i < k; i++)
			if (d[i].failed) {
				fprintf(stderr, "bench: a batch failed\n");
				exit(1);
			}
		got += k;
	}
	return got;
}

double bench_store(struct storage_writer_config cfg, size_t n, struct storage_op *(*make)(size_t i, void *arg),
		   void *arg, struct storage_writer_stats *st)
{
	struct sink s = {.wakes = 0};
	pthread_mutex_init(&s.mu, NULL);
	pthread_cond_init(&s.cv, NULL);
	cfg.wake = wake;
	cfg.wake_arg = &s;
	struct storage_writer *w = storage_writer_start(&cfg);
	if (!w) {
		fprintf(stderr, "bench: storage_writer_start failed\n");
		exit(1);
	}
	size_t done = 0;
	double t0 = now_s();
	for (size_t i = 0; i < n; i++) {
		struct storage_op *op = make(i, arg);
		while (storage_writer_submit(w, op) < 0) {
			wait_wake(&s);
			done += take_done(w);
		}
	}
	while ((done += take_done(w)) < n)
		wait_wake(&s);
	double dt = now_s() - t0;
	if (st)
		storage_writer_stats(w, st);
	storage_writer_stop(w, 10000);
	pthread_cond_destroy(&s.cv);
	pthread_mutex_destroy(&s.mu);
	return dt;
}
