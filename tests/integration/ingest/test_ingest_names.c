/* test_ingest_names.c: a batch's names reach PostgreSQL as the names the agent meant, however
 * it numbers them. Two agents of one job on the real culpritd and PostgreSQL: agent b names by
 * name ids of its own (900 "alpha", 7 "beta", later 3 "zeta"), in an order that is neither
 * the job's nor the batch's first use; agent a sends a batch with its own dictionary ("zeta",
 * "beta", "alpha") whose indexes are neither. Every phase, kernel and raw kernel row must
 * carry its own name, and the job three names in all. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "frame.h"
#include "harness.h"
#include "pgtest.h"

#define JOB "names"
#define MAX_ROWS 4

static struct h_proc proc;

/* Iteration seq of rank with phases named phase[0..n_phases) lasting
 * dur0, dur0 + 1, ..., one kernel (5 calls) and one raw kernel named kernel and raw; names by
 * the batch's dictionary (dict) or else by the agent's ids, defined by defs. */
struct batch {
	uint64_t seq;
	uint32_t rank;
	const char **dict;
	size_t n_dict;
	const uint32_t *def_ids;
	const char **def_names;
	size_t n_defs;
	uint32_t phase[MAX_ROWS];
	size_t n_phases;
	int64_t dur0;
	uint32_t kernel, raw;
};

static void send_batch(int fd, const struct batch *in)
{
	frame_envelope env = CULPRIT__V1__ENVELOPE__INIT;
	Culprit__V1__Batch b = CULPRIT__V1__BATCH__INIT;
	Culprit__V1__NameDef defs[MAX_ROWS], *pdefs[MAX_ROWS];
	Culprit__V1__RawKernel raw = CULPRIT__V1__RAW_KERNEL__INIT, *praw = &raw;
	int64_t now_us = (int64_t)time(NULL) * 1000000, iter_dur = 50000;
	uint32_t rank[MAX_ROWS], iter[MAX_ROWS], zero[MAX_ROWS] = {0}, kernel_count = 5;
	int64_t start[MAX_ROWS], dur[MAX_ROWS], ksum = 500;

	H_CHECK(in->n_defs <= MAX_ROWS && in->n_phases <= MAX_ROWS, &proc);
	for (size_t i = 0; i < in->n_defs; i++) {
		culprit__v1__name_def__init(&defs[i]);
		defs[i].id = in->def_ids[i];
		defs[i].name = (char *)in->def_names[i];
		pdefs[i] = &defs[i];
	}
	for (size_t i = 0; i < MAX_ROWS; i++) {
		rank[i] = in->rank;
		iter[i] = (uint32_t)in->seq;
		start[i] = -1;
		dur[i] = in->dur0 + (int64_t)i;
	}
	b.seq = in->seq;
	b.names = (char **)in->dict, b.n_names = in->n_dict;
	b.name_defs = pdefs, b.n_name_defs = in->n_defs;
	b.iter_rank = rank, b.n_iter_rank = 1;
	b.iter_iter = iter, b.n_iter_iter = 1;
	b.iter_start_us = &now_us, b.n_iter_start_us = 1;
	b.iter_dur_us = &iter_dur, b.n_iter_dur_us = 1;
	b.phase_rank = rank, b.n_phase_rank = in->n_phases;
	b.phase_iter = iter, b.n_phase_iter = in->n_phases;
	b.phase_name = (uint32_t *)in->phase, b.n_phase_name = in->n_phases;
	b.phase_kind = zero, b.n_phase_kind = in->n_phases;
	b.phase_group = zero, b.n_phase_group = in->n_phases;
	b.phase_start_us = start, b.n_phase_start_us = in->n_phases;
	b.phase_dur_us = dur, b.n_phase_dur_us = in->n_phases;
	b.kernel_rank = rank, b.n_kernel_rank = 1;
	b.kernel_iter = iter, b.n_kernel_iter = 1;
	b.kernel_name = (uint32_t *)&in->kernel, b.n_kernel_name = 1;
	b.kernel_count = &kernel_count, b.n_kernel_count = 1;
	b.kernel_sum_us = &ksum, b.n_kernel_sum_us = 1;
	b.kernel_min_us = &ksum, b.n_kernel_min_us = 1;
	b.kernel_max_us = &ksum, b.n_kernel_max_us = 1;
	raw.rank = in->rank;
	raw.iter = (uint32_t)in->seq;
	raw.name = in->raw;
	raw.start_us = now_us + in->dur0;
	raw.dur_us = in->dur0;
	b.raw_kernels = &praw, b.n_raw_kernels = 1;
	env.msg_case = CULPRIT__V1__ENVELOPE__MSG_BATCH;
	env.batch = &b;
	h_send_env(fd, &env);
	H_CHECK(h_wait_ack(fd, in->seq), &proc);
}

/* 1 when table holds exactly one row of rank with duration column col = dur, named name. */
static int named(const char *dsn, const char *table, const char *col, uint32_t rank, int64_t dur, const char *name)
{
	char sql[512];

	snprintf(sql, sizeof(sql),
		 "SELECT count(*) FROM %s t JOIN names n USING (name_id) WHERE t.rank = %u AND t.%s = %lld"
		 " AND n.name = '%s'",
		 table, rank, col, (long long)dur, name);
	if (pgtest_scalar(dsn, sql) == 1)
		return 1;
	fprintf(stderr, "%s: no row of rank %u with %s %lld named \"%s\"\n", table, rank, col, (long long)dur, name);
	return 0;
}

int main(void)
{
	char dsn[512], dir[600];
	const char *extra[] = {"--db", dsn, NULL};
	const uint32_t b_ids1[] = {900, 7}, b_ids2[] = {3};
	const char *b_names1[] = {"alpha", "beta"}, *b_names2[] = {"zeta"};
	const char *a_dict[] = {"zeta", "beta", "alpha"};
	/* b's ids 7 and 900 are the batch's first names in that order, the job's in the other */
	const struct batch b1 = {.seq = 1,
				 .rank = 1,
				 .def_ids = b_ids1,
				 .def_names = b_names1,
				 .n_defs = 2,
				 .phase = {7, 900},
				 .n_phases = 2,
				 .dur0 = 2001,
				 .kernel = 900,
				 .raw = 7};
	const struct batch a1 = {.seq = 1,
				 .rank = 0,
				 .dict = a_dict,
				 .n_dict = 3,
				 .phase = {2, 0, 1},
				 .n_phases = 3,
				 .dur0 = 1001,
				 .kernel = 0,
				 .raw = 1};
	const struct batch b2 = {.seq = 2,
				 .rank = 1,
				 .def_ids = b_ids2,
				 .def_names = b_names2,
				 .n_defs = 1,
				 .phase = {3, 900},
				 .n_phases = 2,
				 .dur0 = 3001,
				 .kernel = 7,
				 .raw = 3};
	int fa, fb;

	h_db_create("test_ingest_names", dsn, sizeof(dsn));
	h_tmpdir("ingest_names", dir, sizeof(dir));
	H_CHECK(h_culpritd_start(&proc, dir, extra) == 0, &proc);
	fa = h_connect(proc.agent_port);
	fb = h_connect(proc.agent_port);
	H_CHECK(fa >= 0 && fb >= 0, &proc);
	H_CHECK(h_hello(fb, JOB, "b", 2, 1) && h_hello(fa, JOB, "a", 2, 0), &proc);
	send_batch(fb, &b1);
	send_batch(fa, &a1);
	send_batch(fb, &b2);

	H_CHECK(named(dsn, "phases", "dur_us", 1, 2001, "beta") && named(dsn, "phases", "dur_us", 1, 2002, "alpha") &&
			named(dsn, "phases", "dur_us", 1, 3001, "zeta") &&
			named(dsn, "phases", "dur_us", 1, 3002, "alpha"),
		&proc);
	H_CHECK(named(dsn, "phases", "dur_us", 0, 1001, "alpha") && named(dsn, "phases", "dur_us", 0, 1002, "zeta") &&
			named(dsn, "phases", "dur_us", 0, 1003, "beta"),
		&proc);
	H_CHECK(pgtest_scalar(dsn, "SELECT count(*) FROM phases") == 7, &proc);
	H_CHECK(pgtest_scalar(dsn, "SELECT count(*) FROM kernels k JOIN names n USING (name_id) WHERE"
				   " (k.rank, n.name) IN ((1, 'alpha'), (0, 'zeta'), (1, 'beta'))") == 3,
		&proc);
	H_CHECK(named(dsn, "raw_kernels", "dur_us", 1, 2001, "beta") &&
			named(dsn, "raw_kernels", "dur_us", 0, 1001, "beta") &&
			named(dsn, "raw_kernels", "dur_us", 1, 3001, "zeta"),
		&proc);
	H_CHECK(pgtest_scalar(dsn, "SELECT count(*) FROM names") == 3, &proc);
	H_CHECK(h_proc_stop(&proc, SIGTERM, 30000) == 0, &proc);
	fprintf(stderr, "test_ingest_names: ok\n");
	return 0;
}
