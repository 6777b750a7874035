/* fuzz_diagnose.c: libFuzzer driver for the whole diagnosis. The input describes a job —
 * topology (tp, cp, pp, dp, ep, order, GPUs per node), store and engine settings, phase and
 * kernel names with their kinds, groups, durations and counts, kernel sketches given as
 * samples, as wire bytes or as a summary only, faults (a rank or a phase slowed, records
 * missing, zero, huge or negative durations), events — and jitter from its remaining
 * bytes. The records go into a window store through the engine as culpritd feeds it; every
 * diagnosis that comes due runs as culpritd runs it (diagnose_run on the window in place, the
 * hang check), and the end of input as `culprit diagnose` ends it (engine_finish). Every
 * report must pass report_check. Sizes are bounded (256 ranks, 512 for the widest grid of
 * tp 8 x cp 2 x pp 8 x ep 4; 40 iterations; 8,000 records) so that an execution takes
 * milliseconds.
 *   CC=clang cmake -S . -B build/fuzz -DCULPRIT_FUZZ=ON && cmake --build build/fuzz --target fuzz_diagnose
 *   build/fuzz/tests/fuzz/fuzz_diagnose -max_total_time=60 tests/fuzz/corpus/diagnose */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "engine.h"
#include "report_check.h"

/* fuzz_diagnose_small (the long run) builds with smaller bounds: FUZZ_SMALL */
#ifdef FUZZ_SMALL
#define MAX_WORLD 16
#define MAX_ITERS 12
#define MAX_RECORDS 400
#else
#define MAX_WORLD 256
#define MAX_ITERS 40
#define MAX_RECORDS 8000
#endif
#define MAX_PHASES 8
#define MAX_KERNELS 40
#define MAX_FAULTS 4
#define SAMPLES 4

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct input {
	const uint8_t *p;
	size_t n, i;
};

/* the next byte, 0 once the input is used up */
static uint32_t u8(struct input *in) { return in->i < in->n ? in->p[in->i++] : 0; }

static uint32_t u16(struct input *in)
{
	uint32_t hi = u8(in);
	return hi << 8 | u8(in);
}

/* jitter: cycles over the bytes left after the description, 0 when there are none */
struct noise {
	const uint8_t *p;
	size_t n, i;
};

static int64_t jitter(struct noise *z, int64_t base)
{
	if (!z->n)
		return 0;
	int v = (int)z->p[z->i++ % z->n] - 128;
	return base / 2048 * v; /* about ±6% */
}

enum { F_SLOW_RANK, F_SLOW_PHASE, F_SLOW_KERNEL, F_MISSING, F_ZERO, F_HUGE, F_NEGATIVE, F_COUNT };

struct fault {
	uint32_t kind, rank, ranks, from, what, factor;
};

struct job {
	struct topo t;
	uint32_t iters, nph, nk;
	uint32_t ph_name[MAX_PHASES], k_name[MAX_KERNELS];
	uint8_t ph_kind[MAX_PHASES], ph_group[MAX_PHASES], k_kind[MAX_KERNELS], k_mode[MAX_KERNELS];
	int64_t ph_us[MAX_PHASES], k_us[MAX_KERNELS];
	uint32_t k_count[MAX_KERNELS];
	uint8_t k_wire[MAX_KERNELS][24];
	uint32_t k_wire_len[MAX_KERNELS];
	struct fault f[MAX_FAULTS];
	uint32_t nf;
	int reverse;
};

static void check(const struct report *r, uint32_t world, const char *where)
{
	const char *why = report_check(r, world);
	if (why) {
		char *t = report_to_text(r);
		fprintf(stderr, "fuzz_diagnose: %s: %s\n%s\n", where, why, t ? t : "");
		__builtin_trap();
	}
}

/* the duration of (rank, iter, what) after the faults that hit it; *skip when missing */
static int64_t faulted(const struct job *j, uint32_t kind_lo, uint32_t rank, uint32_t it, uint32_t what, int64_t d,
		       int *skip)
{
	for (uint32_t i = 0; i < j->nf; i++) {
		const struct fault *f = &j->f[i];
		if (it < f->from || rank < f->rank || rank >= f->rank + f->ranks)
			continue;
		if (f->kind == F_MISSING)
			*skip = 1;
		else if ((f->kind == F_SLOW_RANK || (f->kind == kind_lo && f->what == what)) && d < INT64_MAX / 256 &&
			 d > -INT64_MAX / 256)
			d = d * f->factor / 16;
		else if (f->kind == F_ZERO && f->what == what)
			d = 0;
		else if (f->kind == F_HUGE && f->what == what)
			d = INT64_MAX / 4;
		else if (f->kind == F_NEGATIVE && f->what == what)
			d = -d - 1;
	}
	return d;
}

static int feed_rank(struct store *s, const struct job *j, struct noise *z, uint32_t r, uint32_t it, int64_t t0)
{
	int skip = 0;
	int64_t off = 0;
	for (uint32_t p = 0; p < j->nph; p++) {
		int64_t d = faulted(j, F_SLOW_PHASE, r, it, p, j->ph_us[p] + jitter(z, j->ph_us[p]), &skip);
		struct record_phase ph = {r, it, j->ph_name[p], j->ph_kind[p], j->ph_group[p], off, d};
		if (!skip && store_add_phase(s, &ph) < 0)
			return -1;
		off += d > 0 && d < INT64_MAX / 64 ? d : 0;
	}
	for (uint32_t k = 0; k < j->nk; k++) {
		int64_t base = faulted(j, F_SLOW_KERNEL, r, it, k, j->k_us[k], &skip), durs[SAMPLES];
		struct record_kernel kr = {
			.rank = r, .iter = it, .name = j->k_name[k], .kind = j->k_kind[k], .count = j->k_count[k]};
		kr.min_us = INT64_MAX;
		for (size_t i = 0; i < SAMPLES; i++) {
			durs[i] = base + jitter(z, base);
			kr.sum_us += durs[i] / SAMPLES;
			kr.min_us = durs[i] < kr.min_us ? durs[i] : kr.min_us;
			kr.max_us = durs[i] > kr.max_us ? durs[i] : kr.max_us;
		}
		kr.p50_us = durs[SAMPLES / 2];
		kr.p99_us = kr.max_us;
		if (j->k_mode[k] == 1) {
			kr.sketch = j->k_wire[k];
			kr.sketch_len = j->k_wire_len[k];
		}
		if (!skip &&
		    store_add_kernel(s, &kr, j->k_mode[k] == 0 ? durs : NULL, j->k_mode[k] == 0 ? SAMPLES : 0) < 0)
			return -1;
	}
	int64_t dur = off + jitter(z, off);
	struct record_iter ri = {r, it, t0 + jitter(z, 1000), faulted(j, F_COUNT, r, it, 0, dur, &skip)};
	return skip ? 0 : store_add_iter(s, &ri) < 0 ? -1 : 0;
}

static const char *const orders[] = {
	"tp-cp-ep-dp-pp", "tp-cp-dp-pp", "pp-dp-cp-tp", "tp-pp-cp-ep-dp", "", "dp-tp-pp-cp",
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct input in = {data, size, 0};
	static struct job j;
	memset(&j, 0, sizeof(j));
	uint32_t tp = 1u << (u8(&in) % 4), cp = 1 + u8(&in) % 2, pp = 1 + u8(&in) % 8;
	uint32_t ep = 1u << (u8(&in) % 3), per = tp * cp * pp * ep;
	uint32_t dp = ep * (1 + u8(&in) % (per < MAX_WORLD ? MAX_WORLD / per : 1));
	uint32_t order = u8(&in) % (sizeof(orders) / sizeof(*orders)), gpn = u8(&in) % 9;
	char err[128];
	if (topo_init(&j.t, tp * cp * pp * dp, tp, cp, pp, dp, ep, orders[order], gpn, err, sizeof(err)) < 0)
		return 0;

	struct engine_config cfg;
	memset(&cfg, 0, sizeof(cfg));
	uint32_t b = u8(&in);
	cfg.store.ring_iters = b & 1 ? 4 + u8(&in) % 61 : 0;
	cfg.store.max_phases = b & 2 ? 1 + u8(&in) % 16 : 0;
	cfg.store.max_kernels = b & 4 ? 256 : 0;
	cfg.store.kernel_block_iters = b & 8 ? 1 + u8(&in) % 8 : 0;
	cfg.store.live = !!(b & 16);
	cfg.due_iters = b & 32 ? 1 + u8(&in) % 8 : 0;
	cfg.diagnose_on_close = !!(b & 64);
	cfg.whole_input = !!(b & 128);
	struct engine *e = engine_create(&j.t, &cfg);
	if (!e)
		return 0;
	struct store *s = engine_store(e);
	store_set_job(s, "fuzz");

	j.iters = 1 + u8(&in) % MAX_ITERS;
	j.nph = u8(&in) % (MAX_PHASES + 1);
	j.nk = u8(&in) % (MAX_KERNELS + 1);
	j.reverse = u8(&in) & 1;
	char name[32];
	for (uint32_t p = 0; p < j.nph; p++) {
		snprintf(name, sizeof(name), "phase_%u", u8(&in) % 12); /* repeats share a name */
		j.ph_name[p] = (uint32_t)store_intern_name(s, name);
		j.ph_kind[p] = (uint8_t)(u8(&in) % RECORD_KIND_COUNT);
		j.ph_group[p] = (uint8_t)(u8(&in) % RECORD_GROUP_COUNT);
		j.ph_us[p] = 1 + (int64_t)u16(&in) * 16;
	}
	for (uint32_t k = 0; k < j.nk; k++) {
		b = u8(&in);
		snprintf(name, sizeof(name), b & 1 ? "nccl_%u" : "kernel_%u", u8(&in) % 48);
		j.k_name[k] = (uint32_t)store_intern_name(s, name);
		j.k_kind[k] = b & 2 ? RECORD_KIND_COMM : RECORD_KIND_COMPUTE;
		j.k_mode[k] = (uint8_t)(b >> 2 & 3);
		j.k_us[k] = (int64_t)u16(&in);
		j.k_count[k] = u8(&in);
		if (j.k_mode[k] == 1) { /* wire bytes, most of them behind a valid header */
			uint32_t n = 0, len = u8(&in) % 23;
			if (b & 64) {
				j.k_wire[k][n++] = 0xD5;
				j.k_wire[k][n++] = 2;
			}
			for (uint32_t i = 0; i < len; i++)
				j.k_wire[k][n++] = (uint8_t)u8(&in);
			j.k_wire_len[k] = n;
		}
	}
	j.nf = u8(&in) % (MAX_FAULTS + 1);
	for (uint32_t i = 0; i < j.nf; i++) {
		struct fault *f = &j.f[i];
		f->kind = u8(&in) % F_COUNT;
		f->rank = u16(&in) % j.t.world;
		f->ranks = 1 + u8(&in) % 16;
		f->from = u8(&in) % MAX_ITERS;
		f->what = u8(&in) % (MAX_KERNELS > MAX_PHASES ? MAX_KERNELS : MAX_PHASES);
		f->factor = u8(&in);
	}
	for (uint32_t i = 0, n = u8(&in) % 3; i < n; i++) {
		snprintf(name, sizeof(name), "node-%u", u8(&in) % 40);
		store_add_event(s, name, u8(&in) & 1 ? "port_down" : "xid_79",
				1767225600000000LL + (int64_t)u16(&in) * 100000, "oob", "eth0");
	}
	if (u8(&in) & 1)
		store_set_host(s, u16(&in) % j.t.world, "host\twith\"quotes\\");
	uint64_t per_iter = (uint64_t)j.t.world * (1 + j.nph + j.nk);
	if (per_iter * j.iters > MAX_RECORDS)
		j.iters = (uint32_t)(MAX_RECORDS / per_iter) ? (uint32_t)(MAX_RECORDS / per_iter) : 1;

	struct noise z = {data + in.i, size - in.i, 0};
	struct report rep;
	int64_t t = 1767225600000000LL, now = t;
	for (uint32_t it = 0; it < j.iters; it++) {
		for (uint32_t i = 0; i < j.t.world; i++) {
			uint32_t r = j.reverse ? j.t.world - 1 - i : i;
			if (feed_rank(s, &j, &z, r, it, t) < 0)
				goto out;
		}
		int64_t step = 1000;
		for (uint32_t p = 0; p < j.nph; p++)
			step += j.ph_us[p];
		t += step;
		now = t + step;
		int ev = engine_poll(e);
		if (ev & ENGINE_DUE) {
			/* as culpritd: the window read in place, with L1's window */
			struct diagnose_input din;
			diagnose_input_from_l1(&din, engine_l1(e), now);
			report_init(&rep);
			if (diagnose_run(s, &din, NULL, &rep) == 0)
				check(&rep, j.t.world, "diagnose_run");
			report_free(&rep);
		}
		uint32_t hung[8];
		engine_hung(e, now, hung, 8);
	}
	/* as `culprit diagnose` at the end of its input */
	report_init(&rep);
	if (engine_finish(e, &rep) == 0)
		check(&rep, j.t.world, "engine_finish");
	report_free(&rep);
out:
	engine_destroy(e);
	return 0;
}
