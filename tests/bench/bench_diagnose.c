/* bench_diagnose: figures for the diagnosis engine (a program, not a test).
 *
 *   bench_diagnose [runs]
 *
 * 1. 12,960 ranks (case5's shape) x 16 phases x 3 kernels, ring of 64 iterations filled,
 *    a 32-iteration window after 32 baseline iterations, 8 slow ranks: the time of store
 *    ingest per record and of a full L1-L3 pass (diagnose_run, which is L2 + L3 +
 *    attribution; L1 is O(1) per iteration and timed separately), and of keeping the
 *    window's baseline past the ring when it opens (store_keep).
 * 2. The same at 100,000 ranks (TP=8 PP=10 DP=1250), and the window store's memory for
 *    100,000 ranks x 64 iterations x 16 phases.
 * 3. With a path (bench_diagnose RUNS FILE.jsonl[.gz]): only the offline path of `culprit
 *    diagnose` — read the interchange file into an engine, diagnose — in lines/s and peak RSS.
 * Medians of `runs` runs (default 5), one thread, in thread CPU time (the development
 * machine is shared, wall time there measures the neighbours too). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sys/resource.h>
#include <unistd.h>

#include "benchutil.h"
#include "diagnose.h"
#include "engine.h"
#include "jsonl.h"
#include "l1.h"
#include "store.h"

/* CPU time of this thread: on a shared machine wall time measures the neighbours too */
static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static uint64_t rng_state = 88172645463325252ull;
static double unit(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (double)(rng_state >> 11) / 9007199254740992.0;
}

#define NPHASES 16
#define NKERNELS 3

struct fill_stats {
	uint64_t records;
	double ms;
};

static struct fill_stats fill(struct store *s, uint32_t iters, uint32_t slow_lo, uint32_t slow_n, int kernels)
{
	const struct topo *t = store_topo(s);
	uint32_t ph[NPHASES], kn[NKERNELS];
	char name[32];
	for (int p = 0; p < NPHASES; p++) {
		snprintf(name, sizeof(name), "phase_%02d", p);
		ph[p] = (uint32_t)store_intern_name(s, p == 0 ? "mlp" : name);
	}
	const char *knames[NKERNELS] = {"sm90_gemm", "flash_attn_fwd", "nccl_all_to_all"};
	for (int k = 0; k < NKERNELS; k++)
		kn[k] = (uint32_t)store_intern_name(s, knames[k]);
	struct fill_stats fs = {0, 0};
	double t0 = now_ms();
	for (uint32_t it = 0; it < iters; it++) {
		int bad = it >= iters / 2;
		for (uint32_t r = 0; r < t->world; r++) {
			int culprit = bad && r >= slow_lo && r < slow_lo + slow_n;
			for (int p = 0; p < NPHASES; p++) {
				double ms = 1000 + 100 * p;
				ms *= 1 + 0.06 * (unit() - 0.5);
				if (culprit && p == 0)
					ms *= 5.7;
				if (bad && !culprit && p == NPHASES - 1)
					ms += 4000;
				struct record_phase rec = {r,
							   it,
							   ph[p],
							   p < 8 ? RECORD_KIND_COMPUTE : RECORD_KIND_COMM,
							   p < 8 ? RECORD_GROUP_NONE : RECORD_GROUP_DP,
							   0,
							   (int64_t)(ms * 1000)};
				store_add_phase(s, &rec);
				fs.records++;
			}
			if (kernels)
				for (int k = 0; k < NKERNELS; k++) {
					int64_t d[8];
					for (int j = 0; j < 8; j++)
						d[j] = (int64_t)((2000 + 500 * k) * (culprit && k == 0 ? 5.6 : 1) *
								 (1 + 0.06 * (unit() - 0.5)));
					struct record_kernel kr;
					memset(&kr, 0, sizeof(kr));
					kr.rank = r;
					kr.iter = it;
					kr.name = kn[k];
					kr.kind = k == 2 ? RECORD_KIND_COMM : RECORD_KIND_COMPUTE;
					kr.count = 96;
					store_add_kernel(s, &kr, d, 8);
					fs.records++;
				}
			struct record_iter ri = {r, it, (int64_t)it * 40000000, bad ? 60000000 : 30000000};
			store_add_iter(s, &ri);
			fs.records++;
		}
	}
	fs.ms = now_ms() - t0;
	return fs;
}

static void bench(const char *label, const struct topo *t, uint32_t slow_lo, int runs, int kernels)
{
	struct store_config cfg = {.ring_iters = 64, .max_phases = NPHASES};
	struct store *s = store_create(t, &cfg);
	if (!s) {
		fprintf(stderr, "out of memory\n");
		exit(1);
	}
	struct fill_stats fs = fill(s, 64, slow_lo, 8, kernels);
	printf("%s: %u ranks, %d phases%s, 64 iterations\n", label, t->world, NPHASES,
	       kernels ? ", 3 kernels (8 samples each)" : "");
	printf("  ingest: %llu records in %.0f ms = %.1f M records/s (%.0f ns/record)\n",
	       (unsigned long long)fs.records, fs.ms, fs.records / fs.ms / 1e3, fs.ms * 1e6 / fs.records);
	printf("  window store memory: %.1f MiB\n", store_memory(s) / 1048576.0);
	/* L1 over the completed iterations */
	struct l1 l1;
	l1_init(&l1, NULL);
	uint32_t it;
	double ms;
	double t0 = now_ms();
	store_flush(s);
	while (store_next_complete(s, &it, &ms))
		l1_update(&l1, it, ms);
	double l1_ms = now_ms() - t0;

	double *times = calloc((size_t)runs, sizeof(double));
	struct report rep;
	struct diagnose_input in;
	diagnose_input_from_l1(&in, &l1, 0);
	struct l2 keep = {0}; /* culpritd keeps a job's L2 memory between its diagnoses */
	in.l2_keep = &keep;
	for (int k = 0; k < runs; k++) {
		t0 = now_ms();
		if (diagnose_run(s, &in, NULL, &rep) < 0) {
			fprintf(stderr, "out of memory\n");
			exit(1);
		}
		times[k] = now_ms() - t0;
		if (k < runs - 1)
			report_free(&rep);
	}
	printf("  L1 (64 iterations): %.3f ms; window %u-%u\n", l1_ms, l1.first_iter, l1.last_iter);
	double *l2t = calloc((size_t)runs, sizeof(double));
	struct l2 l2 = {0}; /* kept between runs, as culpritd keeps it with the job */
	for (int k = 0; k < runs; k++) {
		t0 = now_ms();
		if (l2_run(&l2, s, in.first_iter, in.last_iter, in.first_iter - 8, in.first_iter - 1, NULL) < 0)
			exit(1);
		l2t[k] = now_ms() - t0;
	}
	l2_free(&l2);
	printf("  L2 alone (robust values of every rank and phase, group statistics): median %.1f ms\n",
	       median(l2t, runs));
	/* what a window opening costs the event loop: its baseline kept past the ring */
	for (int k = 0; k < runs; k++) {
		t0 = now_ms();
		if (store_keep(s, in.first_iter - STORE_KEEP_ITERS, in.first_iter - 1) < 0)
			exit(1);
		l2t[k] = now_ms() - t0;
	}
	printf("  baseline kept past the ring (store_keep, %d iterations): median %.1f ms\n", STORE_KEEP_ITERS,
	       median(l2t, runs));
	free(l2t);
	double t_min = times[0];
	for (int k = 1; k < runs; k++)
		t_min = times[k] < t_min ? times[k] : t_min;
	printf("  full L2+L3+attribution pass over the %u-iteration window: median %.1f ms of %d runs "
	       "(min %.1f)\n",
	       in.last_iter - in.first_iter + 1, median(times, runs), runs, t_min);
	printf("  verdict %s, %zu culprits (first %u), %zu late, %zu victims\n", rep.category, rep.culprits_total,
	       rep.nsuspects ? rep.suspects[0].rank : 0, rep.late_total, rep.victims);
	/* what culpritd holds for the job: its store and its kept L2 memory (the diagnosis reads
	 * the store in place; what comes meanwhile is held, a few batches: server/held.h) */
	printf("  RSS: %.0f MiB with the store (%.1f MiB) and the kept L2 memory (%.1f MiB), as culpritd "
	       "holds the job\n",
	       status_kib(getpid(), "VmRSS") / 1024.0, store_memory(s) / 1048576.0, keep.mem_size / 1048576.0);

	l2_free(&keep);
	report_free(&rep);
	free(times);
	store_destroy(s);
}

/* --- the offline path: JSONL into an engine --- */

struct offline {
	struct engine *e;
	struct store *s;
};

static int off_job(void *ctx, const struct jsonl_job *j, const char **why)
{
	struct offline *o = ctx;
	struct topo t;
	static char msg[128];
	if (o->e)
		return 0;
	if (topo_init(&t, j->world, j->tp, j->cp, j->pp, j->dp, j->ep, j->order, j->gpus_per_node, msg, sizeof(msg)) <
	    0) {
		*why = msg;
		return -1;
	}
	struct engine_config cfg;
	memset(&cfg, 0, sizeof(cfg));
	cfg.diagnose_on_close = 1;
	o->e = engine_create(&t, &cfg);
	o->s = o->e ? engine_store(o->e) : NULL;
	return o->e ? 0 : -1;
}

static int off_iter(void *ctx, const struct record_iter *r, const char **why)
{
	struct offline *o = ctx;
	(void)why;
	if (!o->s)
		return -1;
	store_add_iter(o->s, r);
	engine_poll(o->e);
	return 0;
}

static int off_phase(void *ctx, const struct record_phase *r, const char *name, const char **why)
{
	struct offline *o = ctx;
	(void)why;
	struct record_phase p = *r;
	p.name = (uint32_t)store_intern_name(o->s, name);
	store_add_phase(o->s, &p);
	return 0;
}

static int off_kernel(void *ctx, const struct record_kernel *r, const char *name, const int64_t *d, size_t n,
		      const char **why)
{
	struct offline *o = ctx;
	(void)why;
	struct record_kernel k = *r;
	k.name = (uint32_t)store_intern_name(o->s, name);
	store_add_kernel(o->s, &k, d, n);
	return 0;
}

static int off_event(void *ctx, const char *host, const char *kind, int64_t ts, const char *source, const char *detail,
		     const char **why)
{
	struct offline *o = ctx;
	(void)why;
	return store_add_event(o->s, host, kind, ts, source, detail);
}

static int bench_file(const char *path)
{
	struct offline o = {NULL, NULL};
	struct jsonl_handler h = {&o, off_job, NULL, off_iter, off_phase, off_kernel, off_event};
	char err[256];
	uint64_t lines = 0;
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	if (jsonl_read(path, &h, &lines, err, sizeof(err)) < 0 || !o.e) {
		fprintf(stderr, "%s\n", o.e ? err : "no job line");
		return 1;
	}
	struct report rep;
	engine_finish(o.e, &rep);
	clock_gettime(CLOCK_MONOTONIC, &b);
	double s = (double)(b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9;
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	printf("%s: %llu lines in %.2f s wall = %.0f lines/s, peak RSS %.1f MiB; verdict %s, %zu culprits\n", path,
	       (unsigned long long)lines, s, lines / s, ru.ru_maxrss / 1024.0, rep.category, rep.culprits_total);
	report_free(&rep);
	engine_destroy(o.e);
	return 0;
}

int main(int argc, char **argv)
{
	int runs = argc > 1 ? atoi(argv[1]) : 5;
	if (runs < 1)
		runs = 1;
	if (argc > 2 && strcmp(argv[2], "small") != 0)
		return bench_file(argv[2]);
	struct topo t;
	char err[128];
	if (topo_init(&t, 12960, 1, 1, 9, 1440, 32, NULL, 8, err, sizeof(err)) < 0) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	bench("case5 shape", &t, 10352, runs, 1);
	if (argc > 2 && strcmp(argv[2], "small") == 0)
		return 0;
	if (topo_init(&t, 100000, 8, 1, 10, 1250, 1, "tp-cp-dp-pp", 8, err, sizeof(err)) < 0) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	bench("100k ranks, no kernels", &t, 50000, runs, 0);
	bench("100k ranks, with kernels", &t, 50000, runs, 1);
	return 0;
}
