/* bench_import: importer throughput (MB/s of uncompressed JSON) and peak RSS.
 *
 *   bench_import [--gen FILE MB] PATH...
 * --gen writes a Kineto-like trace of about MB megabytes to FILE first (uncompressed; put it
 * in /tmp, not in the repository) and includes it. Each PATH is imported with
 * import_kineto_read_stats into a handler that only counts, three times; the medians of the
 * wall time and of the CPU time (user + system, this process: the figure that does not
 * depend on what else the machine runs) are printed, with MB per wall and per CPU second.
 * Peak RSS (ru_maxrss) is printed after each file, so run one large file per
 * process to read its own peak. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "benchutil.h"
#include "import_kineto.h"

static uint64_t nrec;
static int c_job(void *c, const struct jsonl_job *j, const char **w)
{
	(void)c, (void)j, (void)w;
	return 0;
}
static int c_iter(void *c, const struct record_iter *r, const char **w)
{
	(void)c, (void)r, (void)w;
	nrec++;
	return 0;
}
static int c_phase(void *c, const struct record_phase *r, const char *n, const char **w)
{
	(void)c, (void)r, (void)n, (void)w;
	nrec++;
	return 0;
}
static int c_kernel(void *c, const struct record_kernel *r, const char *n, const int64_t *d, size_t nd, const char **w)
{
	(void)c, (void)r, (void)n, (void)d, (void)nd, (void)w;
	nrec++;
	return 0;
}

/* user + system CPU seconds of this process so far */
static double self_cpu_s(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
	       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

static int gen(const char *path, double mb)
{
	FILE *f = fopen(path, "w");
	if (!f)
		return -1;
	static const char *const kern[] = {
		"void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>",
		"volta_sgemm_128x64_nn", "ampere_bf16_s16816gemm_bf16_128x256_ldg8_f2f_stages_64x3_tn",
		"ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
		"void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float>>"};
	fprintf(f, "{\"schemaVersion\": 1, \"distributedInfo\": {\"backend\": \"nccl\", \"rank\": 0, "
		   "\"world_size\": 8}, \"traceEvents\": [\n");
	uint64_t target = (uint64_t)(mb * 1e6), written = 0;
	int64_t ts = 1700000000000000;
	unsigned step = 0, i = 0;
	srand(1);
	while (written < target) {
		if (i % 20000 == 0) {
			written += (uint64_t)fprintf(
				f,
				"  {\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"ProfilerStep#%u\", "
				"\"pid\": 100, \"tid\": 100, \"ts\": %" PRId64
				", \"dur\": %d, \"args\": {\"External id\": %u}},\n",
				step++, ts, 20000 * 12, i);
		}
		int k = rand() % 5;
		int cpu = i % 2;
		if (cpu)
			written += (uint64_t)fprintf(
				f,
				"  {\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::add_\", \"pid\": 100, "
				"\"tid\": 100, "
				"\"ts\": %" PRId64
				", \"dur\": %d, \"args\": {\"External id\": %u, \"Sequence number\": %u, "
				"\"Fwd thread id\": 0, \"Record function id\": 0, \"Ev Idx\": %u}},\n",
				ts, 5 + rand() % 10, i, i, i);
		else
			written += (uint64_t)fprintf(
				f,
				"  {\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"%s\", \"pid\": 0, \"tid\": 7, "
				"\"ts\": %" PRId64 ", \"dur\": %d, \"args\": {\"External id\": %u, \"queued\": 0, "
				"\"device\": 0, \"context\": 1, \"stream\": 7, \"correlation\": %u, \"registers per "
				"thread\": 32, "
				"\"shared memory\": 0, \"blocks per SM\": 1.6, \"warps per SM\": 6.4, \"grid\": [128, "
				"1, 1], "
				"\"block\": [128, 1, 1], \"est. achieved occupancy %%\": 8}},\n",
				kern[k], ts, 3 + rand() % 20, i, i);
		ts += 12;
		i++;
	}
	fprintf(f,
		"  {\"ph\": \"i\", \"s\": \"g\", \"name\": \"Record Window End\", \"pid\": \"\", \"tid\": \"\", "
		"\"ts\": %" PRId64 "}\n], \"traceName\": \"gen\"}\n",
		ts);
	return fclose(f);
}

int main(int argc, char **argv)
{
	int i = 1;
	const char *genpath = NULL;
	if (argc > 3 && strcmp(argv[1], "--gen") == 0) {
		genpath = argv[2];
		fprintf(stderr, "writing %s (%s MB)...\n", argv[2], argv[3]);
		if (gen(argv[2], atof(argv[3])) < 0) {
			perror(argv[2]);
			return 1;
		}
		i = 4;
	}
	struct jsonl_handler h = {NULL, c_job, NULL, c_iter, c_phase, c_kernel, NULL};
	int nfiles = argc - i + (genpath ? 1 : 0);
	if (nfiles <= 0) {
		fprintf(stderr, "usage: bench_import [--gen FILE MB] PATH...\n");
		return 2;
	}
	for (int f = 0; f < nfiles; f++) {
		const char *path = f < argc - i ? argv[i + f] : genpath;
		double t[3], c[3];
		struct import_kineto_stats st;
		for (int r = 0; r < 3; r++) {
			memset(&st, 0, sizeof(st));
			char err[1024];
			double t0 = now_s(), c0 = self_cpu_s();
			if (import_kineto_read_stats(&path, 1, NULL, &h, &st, err, sizeof(err)) < 0) {
				fprintf(stderr, "%s\n", err);
				return 1;
			}
			t[r] = now_s() - t0;
			c[r] = self_cpu_s() - c0;
		}
		double tm = median(t, 3), cm = median(c, 3);
		struct rusage ru;
		getrusage(RUSAGE_SELF, &ru);
		printf("%-60s %8.1f MB  %6.3f s wall  %6.3f s CPU (medians of 3)  %7.1f MB/s  %7.1f MB/CPU-s  steps "
		       "%" PRIu64 " kernels %" PRIu64 "  peak RSS %.1f MiB\n",
		       path, (double)st.bytes / 1e6, tm, cm, (double)st.bytes / 1e6 / tm, (double)st.bytes / 1e6 / cm,
		       st.steps, st.kernels, (double)ru.ru_maxrss / 1024.0);
	}
	return 0;
}
