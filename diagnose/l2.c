/* l2.c: per-rank window medians, per-role-group CV, robust z and ratio. */
#include "l2.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "hugemem.h"
#include "record.h"
#include "stats.h"

void l2_config_default(struct l2_config *c)
{
	c->z_threshold = 6;
	c->ratio_high = 1.3;
	c->ratio_low = 0.8;
	c->min_delta_ms = 1;
	c->mad_floor_rel = 0.02;
	c->small_group = 4;
	c->subtle_z = 4;
	c->subtle_ratio = 1.1;
	c->comm_share = 0.05;
	c->step_share = 0.01;
	c->step_ms = NAN;
	c->window_mean = 0;
}

void l2_free(struct l2 *l)
{
	free(l->mem);
	memset(l, 0, sizeof(*l));
}

/* Median of a few values without branches on the data: each element's rank is counted
 * against all others (n^2 compares that vectorize) and the element(s) covering the middle
 * rank(s) are taken; ties are handled through the less / less-or-equal counts. */
static double median_small(const double *x, uint32_t n)
{
	uint32_t k1 = (n - 1) / 2, k2 = n / 2;
	double a = 0, b = 0;
	int fa = 0, fb = 0;
	for (uint32_t i = 0; i < n && !(fa && fb); i++) {
		double v = x[i];
		uint32_t lt = 0, le = 0;
		for (uint32_t j = 0; j < n; j++) {
			lt += x[j] < v;
			le += x[j] <= v;
		}
		if (!fa && lt <= k1 && k1 < le) {
			a = v;
			fa = 1;
		}
		if (!fb && lt <= k2 && k2 < le) {
			b = v;
			fb = 1;
		}
	}
	return (a + b) / 2;
}

#define L2_BLOCKS 8      /* median8_rows() is written for 8 */
#define L2_MAX_SPAN 4096 /* iterations in one window or baseline (the ring bounds it) */
#define L2_MAX_PHASES 256
#define L2_COLS 8 /* phases gathered into columns at once: a cache line of doubles */

/* The median of 8 values for each of n phases at once: m[b * n + p] is value b of phase p,
 * out[p] its median. An optimal 19-comparator sorting network (0,2 1,3 4,6 5,7 | 0,4 1,5
 * 2,6 3,7 | 0,1 2,3 4,5 6,7 | 2,4 3,5 | 1,4 3,6 | 1,2 3,4 5,6) cut down to what decides
 * values 3 and 4: the last layer only orders them, whose mean is the same either way, and
 * of a compare-exchange whose other output no later step reads only the min or the max is
 * taken (27 min/max instead of 38). Each step is a loop over the phases that vectorizes
 * (written as a < b ? a : b and a > b ? a : b, the semantics of minpd and maxpd; one phase
 * at a time, the network's values did not stay in registers and branched). */
static void median8_rows(double *m, uint32_t n, double *out)
{
#define ROW(a) (m + (size_t)(a)*n)
#define STEP(body)                                    \
	do {                                          \
		for (uint32_t p_ = 0; p_ < n; p_++) { \
			body;                         \
		}                                     \
	} while (0)
#define MIN_(x, y) ((x) < (y) ? (x) : (y))
#define MAX_(x, y) ((x) > (y) ? (x) : (y))
#define CE(a, b)                                                                                      \
	do {                                                                                          \
		double *restrict x_ = ROW(a), *restrict y_ = ROW(b);                                  \
		STEP(double lo_ = MIN_(x_[p_], y_[p_]); y_[p_] = MAX_(x_[p_], y_[p_]); x_[p_] = lo_); \
	} while (0)
#define LO(a, b) /* only the min, into a */                          \
	do {                                                         \
		double *restrict x_ = ROW(a), *restrict y_ = ROW(b); \
		STEP(x_[p_] = MIN_(x_[p_], y_[p_]));                 \
	} while (0)
#define HI(a, b) /* only the max, into b */                          \
	do {                                                         \
		double *restrict x_ = ROW(a), *restrict y_ = ROW(b); \
		STEP(y_[p_] = MAX_(x_[p_], y_[p_]));                 \
	} while (0)
	CE(0, 2);
	CE(1, 3);
	CE(4, 6);
	CE(5, 7);
	CE(0, 4);
	CE(1, 5);
	CE(2, 6);
	CE(3, 7);
	HI(0, 1); /* wire 0 is read no more */
	CE(2, 3);
	CE(4, 5);
	LO(6, 7); /* wire 7 neither */
	CE(2, 4);
	LO(3, 5); /* wire 5 is read only by the dropped (5,6) */
	HI(1, 4); /* wire 1 only by the dropped (1,2) */
	LO(3, 6); /* wire 6 only by (5,6) */
#undef HI
#undef LO
#undef CE
#undef MAX_
#undef MIN_
#undef STEP
#undef ROW
	for (uint32_t p = 0; p < n; p++)
		out[p] = (m[3 * (size_t)n + p] + m[4 * (size_t)n + p]) / 2;
}

/* The sums and counts of the present values of phases [0, P) over a block's rows (rows of
 * `phases` slots) into sum[p] and cnt[p]. Four phases to a vector register (GCC's vector
 * extension: the compiler did not vectorize the scalar loop and kept the sums in memory),
 * the phases past the last whole vector one at a time. Each duration is summed as two 32-bit
 * halves (lo: its low 16 bits, hi: the rest), which a block of up to L2_MAX_SPAN /
 * L2_BLOCKS = 512 rows cannot overflow: the sum is hi * 65536 + lo, exact, and exact as a
 * double (under 2^53). Returns the sum of cnt[0..P). */
typedef uint32_t l2_u32x4 __attribute__((vector_size(16)));
typedef double l2_f64x4 __attribute__((vector_size(32)));

static uint32_t block_sums(const uint32_t *const *rows, uint32_t nr, uint32_t P, uint32_t phases, double *sum,
			   uint32_t *cnt)
{
	uint32_t total = 0;
	const l2_u32x4 absent = {STORE_ABSENT, STORE_ABSENT, STORE_ABSENT, STORE_ABSENT};
	const l2_u32x4 low = {0xffff, 0xffff, 0xffff, 0xffff};
	uint32_t q = 0;
	for (; q + 4 <= phases && q < P; q += 4) {
		l2_u32x4 lo = {0}, hi = {0}, n = {0};
		for (uint32_t i = 0; i < nr; i++) {
			l2_u32x4 v, m;
			memcpy(&v, rows[i] + q, sizeof(v));
			m = (l2_u32x4)(v != absent); /* all ones where present */
			v &= m;
			lo += v & low;
			hi += v >> 16;
			n -= m;
		}
		l2_f64x4 d = __builtin_convertvector(hi, l2_f64x4) * 65536 + __builtin_convertvector(lo, l2_f64x4);
		if (q + 4 <= P) { /* whole vectors: a lane at a time stalled on store forwarding */
			memcpy(sum + q, &d, sizeof(d));
			memcpy(cnt + q, &n, sizeof(n));
			total += n[0] + n[1] + n[2] + n[3];
			continue;
		}
		for (int j = 0; j < 4 && q + j < P; j++) {
			sum[q + j] = d[j];
			cnt[q + j] = n[j];
			total += n[j];
		}
	}
	for (; q < P; q++) {
		uint64_t t = 0;
		uint32_t c = 0;
		for (uint32_t i = 0; i < nr; i++) {
			uint32_t v = rows[i][q], ok = v != STORE_ABSENT;
			t += ok ? v : 0;
			c += ok;
		}
		sum[q] = (double)t;
		cnt[q] = c;
		total += c;
	}
	return total;
}

static double mean_of(const double *x, uint32_t n)
{
	double t = 0;
	for (uint32_t i = 0; i < n; i++)
		t += x[i];
	return t / n;
}

/* A rank's robust value of each phase over [first, last] into out[rank * P + p] (ms): the
 * median of L2_BLOCKS block means (blocks of consecutive iterations; empty blocks are
 * skipped), or the plain median under L2_BLOCKS iterations; the mean of either with mean.
 * Up to 3 of 8 blocks may hold outliers (checkpoint stalls, eval steps) without moving it;
 * it costs O(n) + a sorting network instead of a selection per rank, phase and window (a
 * selection per rank and phase is about 4x slower). The usual rank, every value
 * present in blocks of equal length, takes all its phases at once: block sums, then the
 * medians of 8 (median8_rows), each over all phases; any other phase by phase. present[p]:
 * how many of the window's values of phase p are present. */
static void medians(const struct store *s, uint32_t first, uint32_t last, uint32_t P, int mean, double *out,
		    uint32_t *buf /* L2_BLOCKS * P, for n < L2_BLOCKS */, uint64_t *present /* P */)
{
	uint32_t world = store_topo(s)->world, n = last - first + 1;
	memset(present, 0, P * sizeof(*present));
	struct store_ring rv;
	store_ring_view(s, &rv);
	uint32_t slot[L2_MAX_SPAN];
	for (uint32_t k = 0; k < n; k++)
		slot[k] = (first + k) % rv.ring;
	uint32_t bstart[L2_BLOCKS + 1];
	for (uint32_t b = 0; b <= L2_BLOCKS; b++)
		bstart[b] = (uint32_t)((uint64_t)n * b / L2_BLOCKS);
	const uint32_t *rows[L2_MAX_SPAN / L2_BLOCKS + 1];
	int equal = n % L2_BLOCKS == 0; /* all blocks the same length */
	/* bsum[b * P + p], bcnt[b * P + p]: block b's sum and count of phase p */
	double bsum[L2_BLOCKS * L2_MAX_PHASES], med[L2_MAX_PHASES];
	uint32_t bcnt[L2_BLOCKS * L2_MAX_PHASES];
	double means[L2_MAX_PHASES * L2_BLOCKS], tmp[L2_MAX_SPAN < 64 ? 64 : L2_BLOCKS];
	for (uint32_t r = 0; r < world; r++) {
		size_t base = (size_t)r * rv.ring;
		if (n < L2_BLOCKS) {
			for (uint32_t k = 0; k < n; k++) {
				size_t cell = base + slot[k];
				const uint32_t *d = rv.tag[cell] == first + k + 1 ? rv.pdur + cell * rv.phases
										  : store_slot_phases(s, r, first + k);
				if (d)
					memcpy(buf + (size_t)k * P, d, P * sizeof(uint32_t));
				else
					memset(buf + (size_t)k * P, 0xff, P * sizeof(uint32_t));
			}
			for (uint32_t p = 0; p < P; p++) {
				uint32_t m = 0;
				for (uint32_t k = 0; k < n; k++)
					if (buf[(size_t)k * P + p] != STORE_ABSENT)
						tmp[m++] = buf[(size_t)k * P + p];
				present[p] += m;
				out[(size_t)r * P + p] =
					m ? (mean ? mean_of(tmp, m) : median_small(tmp, m)) / 1000.0 : NAN;
			}
			continue;
		}
		uint32_t missing = 0; /* values absent from the rank's blocks */
		for (uint32_t b = 0; b < L2_BLOCKS; b++) {
			uint32_t nr = 0;
			for (uint32_t k = bstart[b]; k < bstart[b + 1]; k++) {
				size_t cell = base + slot[k];
				/* the scan is memory bound: fetch the next rank's slot meanwhile */
				__builtin_prefetch(rv.pdur + (cell + rv.ring) * rv.phases);
				__builtin_prefetch(rv.tag + cell + rv.ring);
				if (rv.tag[cell] == first + k + 1)
					rows[nr++] = rv.pdur + cell * rv.phases;
				else if ((rows[nr] = store_slot_phases(s, r, first + k))) /* kept (store_keep) */
					nr++;
			}
			/* the count of present values comes back summed: reading bcnt[] just written
			 * a lane at a time stalled on store forwarding */
			uint32_t got = block_sums(rows, nr, P, rv.phases, bsum + (size_t)b * P, bcnt + (size_t)b * P);
			missing += (bstart[b + 1] - bstart[b]) * P - got;
		}
		if (!missing && equal && !mean) {
			/* equal blocks, every value present: the median of the block sums over the
			 * block length */
			median8_rows(bsum, P, med);
			for (uint32_t p = 0; p < P; p++) {
				out[(size_t)r * P + p] = med[p] / (1000.0 * bstart[1]);
				present[p] += n;
			}
			continue;
		}
		for (uint32_t b = 0; b < L2_BLOCKS; b++) {
			/* equal blocks with every value present: compare sums and divide once at
			 * the end; otherwise means (a block's sum scaled to its length, -1 when
			 * empty) */
			uint32_t bl = bstart[b + 1] - bstart[b];
			for (uint32_t p = 0; p < P; p++) {
				double sc = bsum[(size_t)b * P + p];
				uint32_t bc = bcnt[(size_t)b * P + p];
				if (bc != bl)
					sc = bc ? sc * bl / bc : -1;
				means[p * L2_BLOCKS + b] = sc;
				present[p] += bc;
			}
		}
		for (uint32_t p = 0; p < P; p++) {
			const double *mb = means + p * L2_BLOCKS;
			uint32_t full = 1;
			for (uint32_t b = 0; b < L2_BLOCKS; b++)
				full &= mb[b] >= 0;
			if (full && equal && !mean) {
				double col[L2_BLOCKS];
				memcpy(col, mb, sizeof(col));
				median8_rows(col, 1, &out[(size_t)r * P + p]);
				out[(size_t)r * P + p] /= 1000.0 * bstart[1];
				continue;
			}
			uint32_t m = 0;
			for (uint32_t b = 0; b < L2_BLOCKS; b++)
				if (mb[b] >= 0)
					tmp[m++] = mb[b] / (bstart[b + 1] - bstart[b]);
			out[(size_t)r * P + p] = m ? (mean ? mean_of(tmp, m) : median_small(tmp, m)) / 1000.0 : NAN;
		}
	}
}

/* In a one-shot store (`culprit diagnose`, whose diagnosis runs at the end while the other
 * core idles) the baseline's medians are taken on a thread of their own while the window's
 * are, from this many cells (ranks times phases) on. Not in culpritd, whose cores serve many
 * jobs: the thread costs more CPU than the wall time it saves. */
#define L2_THREAD_CELLS 16384

struct medians_job {
	const struct store *s;
	uint32_t first, last, P;
	double *out;
	uint32_t *buf;
	uint64_t *present;
};

static void *medians_thread(void *arg)
{
	struct medians_job *j = arg;
	medians(j->s, j->first, j->last, j->P, 0, j->out, j->buf, j->present);
	return NULL;
}

/* One comparison of a rank's value: robust z and ratio against a reference population
 * (median, MAD); ref_scale turns the reference into milliseconds (1 for durations, the
 * rank's baseline for own-change ratios). */
struct cmp {
	int ok;
	double z, ratio, ref_ms;
};

static void compare(struct cmp *k, double x, int ok, double med, double mad, double ref_scale, double floor)
{
	k->ok = ok && isfinite(x) && isfinite(med) && med > 0;
	if (!k->ok) {
		k->z = 0;
		k->ratio = 1;
		k->ref_ms = NAN;
		return;
	}
	k->z = stats_robust_z(x, med, mad, floor);
	k->ratio = x / med;
	k->ref_ms = med * ref_scale;
}

/* The flags of one cell from its three comparisons (role group, stage, own change against
 * the job's). High: one comparison past z_threshold and ratio_high; or, for faults under
 * ratio_high, two comparisons that agree past subtle_z and subtle_ratio. The z and ratio
 * kept are those of the comparison that decided (the role group's when none did). */
static void judge(struct l2 *l, size_t c, double v, double b, const struct cmp *k, double presence,
		  const struct l2_config *cfg)
{
	int by = -1, subtle = 0, low = -1;
	/* an excess under step_share of the step cannot be what slows the job (a phase of
	 * some iterations only, an eval step, adds its excess in those only) */
	double floor = cfg->step_ms > 0 && cfg->step_share * cfg->step_ms > cfg->min_delta_ms
			       ? cfg->step_share * cfg->step_ms
			       : cfg->min_delta_ms;
	if (presence > 0 && presence < 1)
		floor /= presence;
	for (int i = 0; i < 3; i++) {
		if (!k[i].ok)
			continue;
		double delta = v - k[i].ref_ms;
		if (k[i].z > cfg->z_threshold && k[i].ratio > cfg->ratio_high && delta > floor &&
		    (by < 0 || k[i].z > k[by].z))
			by = i;
		subtle += k[i].z > cfg->subtle_z && k[i].ratio > cfg->subtle_ratio && delta > floor;
		if (i < 2 && k[i].z < -cfg->z_threshold && k[i].ratio < cfg->ratio_low && -delta > cfg->min_delta_ms &&
		    (low < 0 || k[i].z < k[low].z))
			low = i;
	}
	/* the own change alone decides past z_threshold and subtle_ratio when the peers do
	 * not contradict it (no slower than it is, or none to compare with): a role group or
	 * a stage half slowed, or too small, cannot show a fault its rank's past shows */
	if (by < 0 && k[2].ok && k[2].z > cfg->z_threshold && k[2].ratio > cfg->subtle_ratio &&
	    v - k[2].ref_ms > floor && !(k[0].ok && k[0].ratio < 1) && !(k[1].ok && k[1].ratio < 1))
		by = 2;
	/* a rank no slower than its own past did not cause this window, however it compares
	 * with its peers (it was so before: a standing cost, an advisory's matter) */
	if (isfinite(b) && b > 0 && v < b * cfg->subtle_ratio)
		by = -1, subtle = 0;
	/* peers alone agreeing on a subtle excess are not enough for a phase new in the window
	 * (an eval pass of a few samples: its noise is not averaged out); with a baseline
	 * elsewhere in the job, the own change must be there to confirm (without any baseline,
	 * a whole trace offline, the peers are all there is) */
	if (l->has_base && !(isfinite(b) && b > 0))
		subtle = subtle >= 2 ? 1 : subtle;
	if (by < 0 && subtle >= 2)
		for (int i = 0; i < 3; i++)
			if (k[i].ok && k[i].z > cfg->subtle_z && k[i].ratio > cfg->subtle_ratio &&
			    (by < 0 || k[i].z > k[by].z))
				by = i;
	int hint = -1; /* the one comparison past the subtle cut, shown for a hint */
	for (int i = 0; i < 3 && by < 0 && subtle == 1; i++)
		if (k[i].ok && k[i].z > cfg->subtle_z && k[i].ratio > cfg->subtle_ratio)
			hint = i;
	int show = by >= 0 ? by : low >= 0 ? low : hint >= 0 ? hint : k[0].ok ? 0 : k[1].ok ? 1 : 2;
	l->z[c] = (float)k[show].z;
	l->ratio[c] = (float)k[show].ratio;
	if (by >= 0)
		l->flag[c] |= L2_HIGH;
	else if (subtle == 1)
		l->flag[c] |= L2_HINT;
	if (by < 0 && low >= 0)
		l->flag[c] |= L2_LOW;
	if (show == 1)
		l->flag[c] |= L2_BY_STAGE;
	if (show == 2)
		l->flag[c] |= L2_FALLBACK;
	if (isfinite(b) && v > b * cfg->ratio_high && v - b > cfg->min_delta_ms)
		l->flag[c] |= L2_SELF_HIGH;
}

/* A communication phase against its collective's members. Its duration is the wait for
 * the last member to arrive plus the transfer, so a ratio says little when the wait is long:
 * past z_threshold, a member is high when it spends comm_share of the job's step more than
 * the members' median (its ratio past ratio_high when the step is unknown), low when it
 * spends that share less or its ratio is under ratio_low; the
 * MAD is floored at a tenth of that share of the step when that is below the usual floor
 * (a long wait makes a share of the median large). */
/* A member past this z, subtle_ratio and step_share of the step is a hint, which counts
 * when every rank of its node has one in the same phase (a slow NIC; diagnose.c): for two
 * ranks or more at once, chance is below 1 in 500,000 */
#define L2_COMM_HINT_Z 3

static void judge_comm(struct l2 *l, size_t c, double v, double b, const struct cmp *k, size_t n,
		       const struct l2_config *cfg)
{
	double need = cfg->step_ms > 0 ? cfg->comm_share * cfg->step_ms : NAN;
	l->z[c] = (float)k->z;
	l->ratio[c] = (float)k->ratio;
	/* a pair (a send and its receive) says nothing alone: the longer one waited for the
	 * other or moved its data slower, the shorter one came last or faster */
	if (k->ok && n >= 3) {
		double d = v - k->ref_ms;
		/* a slow link must cost a share of the step; a late arrival may be small (it
		 * says who comes last, not what the job loses) */
		if (k->z > cfg->z_threshold && d > cfg->min_delta_ms &&
		    (isfinite(need) ? d > need : k->ratio > cfg->ratio_high))
			l->flag[c] |= L2_HIGH;
		else if (k->z > L2_COMM_HINT_Z && k->ratio > cfg->subtle_ratio && d > cfg->min_delta_ms &&
			 (!(cfg->step_ms > 0) || d > cfg->step_share * cfg->step_ms))
			l->flag[c] |= L2_HINT; /* counts when the whole node agrees (diagnose.c) */
		if (k->z < -cfg->z_threshold && -d > cfg->min_delta_ms && (-d > need || k->ratio < cfg->ratio_low))
			l->flag[c] |= L2_LOW;
	}
	/* a collective no longer than its own past did not cause this window: it was so
	 * before (a stage whose transfers always take longer) */
	if (isfinite(b) && b > 0 && v < b * cfg->subtle_ratio)
		l->flag[c] &= (uint8_t) ~(L2_HIGH | L2_HINT);
	if (isfinite(b) && v > b * cfg->ratio_high && v - b > cfg->min_delta_ms)
		l->flag[c] |= L2_SELF_HIGH;
}

enum topo_dim l2_collective_dim(uint8_t group)
{
	switch (group) {
	case RECORD_GROUP_TP: return TOPO_TP;
	case RECORD_GROUP_CP: return TOPO_CP;
	case RECORD_GROUP_EP: return TOPO_EP;
	case RECORD_GROUP_PP: return TOPO_PP;
	default: return TOPO_DP; /* dp, or a phase without a group: the role group */
	}
}

/* statistics of a phase over the ranks members[0..n) that hold it, from its column (col[rank]:
 * the phase's values, contiguous; xs, scratch: n doubles): with mean, sd and cv when full,
 * else only the median and MAD (stats_robust) */
static void members_stats(const double *col, const uint32_t *members, size_t n, double *xs, double *scratch, int full,
			  struct stats_group *out)
{
	size_t m = 0;
	for (size_t i = 0; i < n; i++) {
		double v = col[members[i]];
		if (isfinite(v))
			xs[m++] = v;
	}
	if (full)
		stats_group(xs, m, scratch, out);
	else
		stats_robust(xs, m, out);
}

/* The reference of n changes (xs, reordered; scratch: n doubles): the lower quartile, with
 * the spread of the lower half (doubled: a half's MAD about its median is half the whole's).
 * When half the ranks or more changed (a node of a small job), the median is one of them;
 * the lower quartile is not. Under 4 changes: their median and MAD. */
static void change_ref(double *xs, size_t n, double *scratch, double *ref, double *spread)
{
	if (n >= 4) {
		memcpy(scratch, xs, n * sizeof(double));
		stats_median_inplace(scratch, n); /* partitions: the lower half first */
		size_t h = n / 2;
		*ref = stats_median_inplace(scratch, h);
		*spread = 2 * stats_mad_inplace(scratch, h, *ref);
	} else {
		struct stats_group st;
		stats_group(xs, n, scratch, &st);
		*ref = st.median;
		*spread = st.mad;
	}
}

/* The ranks of each collective group along a dimension, counting-sorted once per pass and
 * dimension (a topology lookup per rank and communication phase was a fifth of L2) */
struct coll {
	uint32_t *group; /* [rank] its group */
	uint32_t *order; /* ranks by group; group g's are order[start[g] .. start[g + 1]) */
	uint32_t *start; /* [C + 2] */
	uint32_t count;
};

static uint32_t coll_count(const struct topo *t, enum topo_dim dim)
{
	uint32_t C = topo_collective_group_count(t, dim);
	return C > t->world ? t->world : C;
}

static void coll_build(struct coll *c, const struct topo *t, enum topo_dim dim)
{
	uint32_t W = t->world, C = c->count;
	memset(c->start, 0, (C + 2) * sizeof(*c->start));
	for (uint32_t r = 0; r < W; r++) {
		c->group[r] = topo_collective_group(t, r, dim);
		c->start[c->group[r] + 2]++;
	}
	for (uint32_t g = 0; g < C; g++)
		c->start[g + 2] += c->start[g + 1];
	for (uint32_t r = 0; r < W; r++)
		c->order[c->start[c->group[r] + 1]++] = r;
}

/* median and MAD of phase p over each collective group, into cst[group] */
static void collective_stats(const double *col, const struct coll *c, double *xs, double *scratch,
			     struct stats_group *cst)
{
	for (uint32_t g = 0; g < c->count; g++)
		members_stats(col, c->order + c->start[g], c->start[g + 1] - c->start[g], xs, scratch, 0, &cst[g]);
}

/* Carves n bytes (64-byte aligned) for *p out of the arena at *off; with base NULL only
 * counts. */
static void carve(void *p, char *base, size_t *off, size_t n)
{
	*(void **)p = base ? base + *off : NULL;
	*off += (n + 63) & ~(size_t)63;
}

/* One run's scratch arrays, carved from the arena with l2's own (layout), and the sizes
 * that fix their layout: the steps of l2_run share them through this. */
struct pass {
	uint32_t W, P, G, S;
	uint32_t dims;             /* the collective dimensions needed, as bits (comm_dims) */
	uint32_t *order, *gstart;  /* ranks by role group; group g's are order[gstart[g] .. gstart[g + 1]) */
	uint32_t *sorder, *sstart; /* ranks by pipeline stage, likewise */
	uint32_t *stage;           /* [rank] its stage */
	uint32_t *buf, *bbuf, *idx;
	double *xs, *scratch, *colsv, *colsb;
	uint64_t *cnt, *bcnt;
	struct stats_group *stage_st, *cst, *gst;
	struct coll coll[TOPO_DIM_COUNT];
};

/* The dimensions whose collective groups are needed, as bits: those of the communication
 * phases but DP, whose groups are the role groups. */
static uint32_t comm_dims(const struct store *s, uint32_t P)
{
	uint32_t dims = 0;
	for (uint32_t p = 0; p < P; p++) {
		enum topo_dim d = l2_collective_dim(store_phase_group(s, p));
		if (store_phase_kind(s, p) == RECORD_KIND_COMM && d != TOPO_DP)
			dims |= 1u << d;
	}
	return dims;
}

/* Carves every array of a run (l's results and the pass's scratch) from base, or with base NULL
 * only counts; returns the bytes used. */
static size_t carve_all(struct l2 *l, struct pass *ps, char *base)
{
	uint32_t W = ps->W, G = ps->G, S = ps->S;
	size_t PP = ps->P ? ps->P : 1, cells = (size_t)W * PP, off = 0;
	carve(&l->val, base, &off, cells * sizeof(double));
	carve(&l->base, base, &off, cells * sizeof(double));
	carve(&l->z, base, &off, cells * sizeof(float));
	carve(&l->ratio, base, &off, cells * sizeof(float));
	carve(&l->flag, base, &off, cells);
	carve(&l->group_cv, base, &off, (size_t)G * PP * sizeof(double));
	carve(&l->group_med, base, &off, (size_t)G * PP * sizeof(double));
	carve(&l->presence, base, &off, PP * sizeof(double));
	carve(&l->role, base, &off, W * sizeof(uint32_t));
	carve(&ps->order, base, &off, W * sizeof(uint32_t));
	carve(&ps->gstart, base, &off, (G + 1) * sizeof(uint32_t));
	/* rows of a range under L2_BLOCKS iterations (medians): the layout does not depend on
	 * the ranges, so the sorted ranks are kept across them */
	carve(&ps->buf, base, &off, (PP * L2_BLOCKS + 1) * sizeof(uint32_t));
	carve(&ps->bbuf, base, &off, (PP * L2_BLOCKS + 1) * sizeof(uint32_t));
	carve(&ps->xs, base, &off, (W + 1) * sizeof(double));
	carve(&ps->scratch, base, &off, (W + 1) * sizeof(double));
	carve(&ps->colsv, base, &off, (size_t)L2_COLS * W * sizeof(double));
	carve(&ps->colsb, base, &off, (size_t)L2_COLS * W * sizeof(double));
	carve(&ps->cnt, base, &off, PP * sizeof(uint64_t));
	carve(&ps->bcnt, base, &off, PP * sizeof(uint64_t));
	carve(&ps->idx, base, &off, (W + 1) * sizeof(uint32_t));
	carve(&ps->sorder, base, &off, (W + 1) * sizeof(uint32_t));
	carve(&ps->stage, base, &off, W * sizeof(uint32_t));
	carve(&ps->sstart, base, &off, (S + 1) * sizeof(uint32_t));
	carve(&ps->stage_st, base, &off, S * sizeof(*ps->stage_st));
	carve(&ps->cst, base, &off, (ps->dims ? W + 1 : 1) * sizeof(*ps->cst));
	carve(&ps->gst, base, &off, (G + 1) * sizeof(*ps->gst));
	for (int d = 0; d < TOPO_DIM_COUNT; d++) {
		if (!(ps->dims >> d & 1))
			continue;
		carve(&ps->coll[d].group, base, &off, W * sizeof(uint32_t));
		carve(&ps->coll[d].order, base, &off, W * sizeof(uint32_t));
		carve(&ps->coll[d].start, base, &off, (W + 2) * sizeof(uint32_t));
	}
	return off;
}

/* Every array in one arena, kept in *l between passes (at 100,000 ranks fresh arrays cost
 * 13,000 page faults a pass), grown when this run's layout needs more. -1 when out of
 * memory. */
static int layout(struct l2 *l, struct pass *ps)
{
	size_t need = carve_all(l, ps, NULL);
	if (need > l->mem_size) {
		free(l->mem);
		l->mem = hugemem_alloc(need, 0); /* first touched by this pass */
		l->mem_size = l->mem ? need : 0;
	}
	if (!l->mem)
		return -1;
	carve_all(l, ps, l->mem);
	return 0;
}

/* The window's medians into l->val and l->presence, and the baseline's into l->base (NAN
 * without one), at once: the store is only read. */
static void window_medians(struct l2 *l, const struct store *s, struct pass *ps, uint32_t first, uint32_t last,
			   uint32_t bfirst, uint32_t blast, const struct l2_config *cfg)
{
	uint32_t W = ps->W, P = ps->P;
	struct medians_job bj = {s, bfirst, blast, P, l->base, ps->bbuf, ps->bcnt};
	pthread_t th;
	int threaded = l->has_base && store_config(s)->one_shot && (size_t)W * P >= L2_THREAD_CELLS &&
		       pthread_create(&th, NULL, medians_thread, &bj) == 0;
	medians(s, first, last, P, cfg->window_mean, l->val, ps->buf, ps->cnt);
	for (uint32_t p = 0; p < P; p++)
		l->presence[p] = (double)ps->cnt[p] / ((double)W * (last - first + 1));
	if (threaded)
		pthread_join(th, NULL);
	else if (l->has_base)
		medians_thread(&bj);
	if (l->has_base) {
		uint64_t held = 0;
		for (uint32_t p = 0; p < P; p++)
			held += ps->bcnt[p];
		l->has_base = held > 0; /* a range before the input's first iteration holds nothing */
	}
	if (!l->has_base)
		for (size_t i = 0; i < (size_t)W * (P ? P : 1); i++)
			l->base[i] = NAN;
}

/* The ranks by role group (into l->role, ps->order, ps->gstart) and by pipeline stage (ps->stage,
 * ps->sorder, ps->sstart), counting-sorted. -1 when the role groups outnumber the ranks. */
static int sort_ranks(struct l2 *l, const struct topo *t, struct pass *ps)
{
	uint32_t W = ps->W, G = ps->G, S = ps->S;
	memset(ps->gstart, 0, (G + 1) * sizeof(uint32_t));
	memset(ps->sstart, 0, (S + 1) * sizeof(uint32_t));
	for (uint32_t r = 0; r < W; r++) {
		l->role[r] = topo_role_group(t, r);
		ps->gstart[l->role[r] + 1]++;
	}
	for (uint32_t g = 0; g < G; g++)
		ps->gstart[g + 1] += ps->gstart[g];
	uint32_t *cur = G <= W + 1 ? ps->idx : NULL; /* idx as a cursor array of G entries */
	if (!cur)
		return -1;
	memcpy(cur, ps->gstart, G * sizeof(uint32_t));
	for (uint32_t r = 0; r < W; r++)
		ps->order[cur[l->role[r]]++] = r;

	/* ranks by pipeline stage, for the comparison with the stage */
	for (uint32_t r = 0; r < W; r++) {
		ps->stage[r] = topo_coords(t, r).pp;
		ps->sstart[ps->stage[r] + 1]++;
	}
	for (uint32_t q = 0; q < S; q++)
		ps->sstart[q + 1] += ps->sstart[q];
	memcpy(cur, ps->sstart, S * sizeof(uint32_t));
	for (uint32_t r = 0; r < W; r++)
		ps->sorder[cur[ps->stage[r]]++] = r;
	return 0;
}

/* The values of phases [p0, p0 + L2_COLS) as columns (colsv, colsb: [q * W + rank]), which
 * the statistics gather by group: a gather from [rank * P + p] was a cache miss per rank at
 * 100,000 ranks, and a rank's values of these phases share a cache line. */
static void gather_columns(const struct l2 *l, struct pass *ps, uint32_t p0)
{
	uint32_t W = ps->W, P = ps->P, C = P - p0 < L2_COLS ? P - p0 : L2_COLS;
	for (uint32_t r = 0; r < W; r++) {
		const double *vr = l->val + (size_t)r * P + p0, *br = l->base + (size_t)r * P + p0;
		for (uint32_t q = 0; q < C; q++) {
			ps->colsv[(size_t)q * W + r] = vr[q];
			ps->colsb[(size_t)q * W + r] = br[q];
		}
	}
}

/* The ranks' own changes (v / b) of a phase, each value of a host phase taken at host_floor
 * at least, and their reference (change_ref) into *ref and *spread; returns how many. */
static size_t own_change(const struct pass *ps, const double *colv, const double *colb, int host, double host_floor,
			 double *ref, double *spread)
{
	size_t n = 0;
	for (uint32_t r = 0; r < ps->W; r++) {
		double v = colv[r], b = colb[r];
		if (host && isfinite(b) && b < host_floor)
			b = host_floor; /* its own past at next to nothing: its excess */
		if (host && isfinite(v) && v < host_floor)
			v = host_floor;
		if (isfinite(v) && isfinite(b) && b > 0)
			ps->xs[n++] = v / b;
	}
	change_ref(ps->xs, n, ps->scratch, ref, spread);
	return n;
}

/* Phase p of every rank judged (judge, judge_comm) against its role group, its stage and
 * its own change, or a communication phase against its collective's members; the role
 * groups' cv and median kept for the report. */
static void judge_phase(struct l2 *l, const struct store *s, const struct topo *t, struct pass *ps, uint32_t p,
			const struct l2_config *cfg)
{
	uint32_t W = ps->W, P = ps->P, G = ps->G, S = ps->S;
	const uint32_t *order = ps->order, *gstart = ps->gstart, *stage = ps->stage;
	double *xs = ps->xs, *scratch = ps->scratch;
	struct stats_group *stage_st = ps->stage_st, *gst = ps->gst;
	/* a communication phase: its collective's own group, where the member that arrived
	 * last waits least and a slow link's member transfers longest */
	int comm = store_phase_kind(s, p) == RECORD_KIND_COMM;
	uint32_t p0 = p - p % L2_COLS;
	if (p == p0)
		gather_columns(l, ps, p0);
	const double *colv = ps->colsv + (size_t)(p - p0) * W, *colb = ps->colsb + (size_t)(p - p0) * W;
	/* each role group's statistics (their cv and median are kept for the report) */
	for (uint32_t g = 0; g < G; g++)
		members_stats(colv, order + gstart[g], gstart[g + 1] - gstart[g], xs, scratch, 1, &gst[g]);
	/* the collective's groups: along DP they are the role groups (topo_collective_group),
	 * whose statistics are at hand */
	enum topo_dim dim = l2_collective_dim(store_phase_group(s, p));
	const uint32_t *cgroup = l->role;
	const struct stats_group *cstat = gst;
	if (comm && dim != TOPO_DP) {
		if (!(l->topo_colls >> dim & 1)) {
			coll_build(&ps->coll[dim], t, dim);
			l->topo_colls |= 1u << dim;
		}
		collective_stats(colv, &ps->coll[dim], xs, scratch, ps->cst);
		cgroup = ps->coll[dim].group;
		cstat = ps->cst;
	}
	int host = store_phase_kind(s, p) == RECORD_KIND_HOST;
	double host_floor = cfg->step_ms > 0 ? cfg->step_share * cfg->step_ms : cfg->min_delta_ms;
	size_t own_n = 0; /* ranks with a change (v / b) */
	double own_ref = NAN, own_spread = NAN;
	if (l->has_base && !comm)
		own_n = own_change(ps, colv, colb, host, host_floor, &own_ref, &own_spread);

	/* the stage: every rank of the same pipeline stage (other TP/CP ranks and other role
	 * groups do the same work); without TP or CP ranks it is the role group, which the
	 * stage comparison needs more than (stage_st stays empty: n 0) */
	for (uint32_t q = 0; q < S && !comm && G != S; q++)
		members_stats(colv, ps->sorder + ps->sstart[q], ps->sstart[q + 1] - ps->sstart[q], xs, scratch, 0,
			      &stage_st[q]);
	for (uint32_t g = 0; g < G; g++) {
		uint32_t n0 = gstart[g], n1 = gstart[g + 1];
		const struct stats_group st = gst[g];
		size_t n = st.n;
		size_t gp = (size_t)g * P + p;
		int small = n1 - n0 < cfg->small_group;
		l->group_cv[gp] = small ? NAN : st.cv;
		l->group_med[gp] = st.median;
		for (uint32_t i = n0; i < n1; i++) {
			uint32_t r = order[i];
			size_t c = (size_t)r * P + p;
			double v = colv[r], b = colb[r];
			if (!isfinite(v))
				continue;
			const struct stats_group *sg = &stage_st[stage[r]];
			struct cmp k[3];
			if (comm) {
				/* waiting is only seen against the collective's members: no stage, no
				 * own history (a victim waits longer than before) */
				const struct stats_group *cg = &cstat[cgroup[r]];
				double floor = cfg->mad_floor_rel * cg->median;
				if (cfg->step_ms > 0 && cfg->comm_share * cfg->step_ms / 10 < floor)
					floor = cfg->comm_share * cfg->step_ms / 10;
				compare(&k[0], v, cg->n >= 2, cg->median, cg->mad, 1, floor);
				judge_comm(l, c, v, b, &k[0], cg->n, cfg);
				continue;
			}
			/* a host phase whose peers spend next to nothing in it (the time before the
			 * first phase, where a loader nobody timed shows): judged by its excess, the
			 * peers taken at step_share of the step at least, so that peers at 0 still
			 * compare (a ratio to 0 says nothing) */
			double gm = st.median, sm = sg->median;
			if (host && gm < host_floor)
				gm = host_floor;
			if (host && sm < host_floor)
				sm = host_floor;
			compare(&k[0], v, !small, gm, st.mad, 1, cfg->mad_floor_rel * gm);
			/* the stage adds evidence only when it holds more than the role group */
			compare(&k[1], v, sg->n >= 4 && sg->n > n, sm, sg->mad, 1, cfg->mad_floor_rel * sm);
			/* own change against the job's: v / b over the pooled v / b */
			double bo = host && isfinite(b) && b < host_floor ? host_floor : b;
			double vo = host && v < host_floor ? host_floor : v;
			compare(&k[2], isfinite(bo) && bo > 0 ? vo / bo : NAN,
				own_n >= cfg->small_group && isfinite(bo) && bo > 0, own_ref, own_spread, bo,
				cfg->mad_floor_rel * own_ref);
			judge(l, c, v, b, k, l->presence[p], cfg);
		}
	}
}

int l2_run(struct l2 *l, const struct store *s, uint32_t first, uint32_t last, uint32_t bfirst, uint32_t blast,
	   const struct l2_config *cfgp)
{
	struct l2_config cfg;
	if (cfgp)
		cfg = *cfgp;
	else
		l2_config_default(&cfg);
	const struct topo *t = store_topo(s);
	struct pass ps = {0};
	ps.W = t->world;
	ps.P = store_phase_count(s);
	ps.G = topo_role_group_count(t);
	ps.S = t->pp ? t->pp : 1;
	ps.dims = comm_dims(s, ps.P);
	l->world = ps.W;
	l->nphase = ps.P;
	l->ngroups = ps.G;
	l->has_base = blast >= bfirst;
	size_t cells = (size_t)ps.W * (ps.P ? ps.P : 1);
	if (last - first + 1 > L2_MAX_SPAN)
		first = last - L2_MAX_SPAN + 1;
	if (blast >= bfirst && blast - bfirst + 1 > L2_MAX_SPAN)
		bfirst = blast - L2_MAX_SPAN + 1;
	if (layout(l, &ps) < 0)
		goto fail;
	memset(l->z, 0, cells * sizeof(float));
	memset(l->ratio, 0, cells * sizeof(float));
	memset(l->flag, 0, cells);
	memset(ps.stage_st, 0, ps.S * sizeof(*ps.stage_st));
	/* the ranks by role group, by stage and by collective group depend on the topology
	 * only: kept from the run before when it had the same topology, phase count and
	 * collective dimensions, which fix the arena's layout (a larger arena comes only with
	 * another layout) */
	int kept = l->topo_kept && l->topo_P == ps.P && l->topo_dims == ps.dims && topo_equal(&l->topo, t);
	if (!kept)
		l->topo_colls = 0;
	l->topo_kept = 0; /* until this run ends well */
	for (int d = 0; d < TOPO_DIM_COUNT; d++)
		if (ps.dims >> d & 1)
			ps.coll[d].count = coll_count(t, (enum topo_dim)d);
	window_medians(l, s, &ps, first, last, bfirst, blast, &cfg);
	if (!kept && sort_ranks(l, t, &ps) < 0)
		goto fail;
	for (uint32_t p = 0; p < ps.P; p++)
		judge_phase(l, s, t, &ps, p, &cfg);
	l->topo_kept = 1;
	l->topo = *t;
	l->topo_P = ps.P;
	l->topo_dims = ps.dims;
	return 0;
fail:
	l2_free(l);
	return -1;
}
