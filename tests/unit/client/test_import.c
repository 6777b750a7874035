/* test_import: the importers on small inputs written here (format detection, NCCL names,
 * Kineto step assignment and phases, Chrome layout and kinds, CSV rows and ragged end,
 * kernel summaries, a record the sink refuses). The real traces are in tests/realdata. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "import.h"
#include "import_kineto.h"
#include "kernel_summary.h"

static char dir[256];

static const char *put(const char *name, const char *text)
{
	static char path[8][512];
	static int k;
	char *p = path[k++ % 8];
	snprintf(p, 512, "%s/%s", dir, name);
	FILE *f = fopen(p, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	return p;
}

struct got {
	struct jsonl_job job;
	char jobname[64];
	int jobs;
	struct record_iter it[64];
	int nit;
	struct record_phase ph[128];
	char phname[128][64];
	int nph;
	struct record_kernel k[64];
	char kname[64][64];
	int64_t kdur[64][8];
	int nk;
};

static int g_job(void *c, const struct jsonl_job *j, const char **w)
{
	(void)w;
	struct got *g = c;
	g->job = *j;
	snprintf(g->jobname, sizeof(g->jobname), "%s", j->job);
	g->jobs++;
	return 0;
}
static int g_iter(void *c, const struct record_iter *r, const char **w)
{
	(void)w;
	struct got *g = c;
	if (g->nit < 64)
		g->it[g->nit++] = *r;
	return 0;
}
static int g_phase(void *c, const struct record_phase *r, const char *n, const char **w)
{
	(void)w;
	struct got *g = c;
	if (g->nph < 128) {
		snprintf(g->phname[g->nph], 64, "%s", n);
		g->ph[g->nph++] = *r;
	}
	return 0;
}
static int g_kernel(void *c, const struct record_kernel *r, const char *n, const int64_t *d, size_t nd, const char **w)
{
	(void)w;
	struct got *g = c;
	if (g->nk < 64) {
		snprintf(g->kname[g->nk], 64, "%s", n);
		for (size_t i = 0; i < nd && i < 8; i++)
			g->kdur[g->nk][i] = d[i];
		g->k[g->nk++] = *r;
	}
	return 0;
}

static int run(enum import_format f, const char *path, struct got *g, char *err)
{
	memset(g, 0, sizeof(*g));
	struct jsonl_handler h = {g, g_job, NULL, g_iter, g_phase, g_kernel, NULL};
	return import_read(f, &path, 1, NULL, &h, err, 1024);
}

static const struct record_phase *phase(const struct got *g, uint32_t rank, uint32_t iter, const char *name)
{
	for (int i = 0; i < g->nph; i++)
		if (g->ph[i].rank == rank && g->ph[i].iter == iter && strcmp(g->phname[i], name) == 0)
			return &g->ph[i];
	return NULL;
}

static void detect(void **state)
{
	(void)state;
	char err[1024];
	static const struct {
		const char *text;
		enum import_format want;
	} cases[] = {
		{"{\"type\":\"job\",\"job\":\"J\"}\n", IMPORT_JSONL},
		{"  {\"schemaVersion\": 1, \"traceEvents\": []}", IMPORT_KINETO},
		{"{\"traceEvents\": []}", IMPORT_CHROME},
		{"[{\"ph\":\"X\"}]", IMPORT_CHROME},
		{",worker,gpu,time,batch_time_norm\n0,0,1,1,5\n", IMPORT_CSV},
		{"", IMPORT_JSONL},
		/* Kineto without schemaVersion (old PyTorch): known by its event categories */
		{"{\"traceEvents\": [{\"ph\": \"X\", \"cat\": \"Kernel\", \"name\": \"k\"}]}", IMPORT_KINETO},
		{"{\"traceEvents\": [{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::mm\"}]}", IMPORT_KINETO},
		/* torch.profiler without Kineto (Debian's CPU torch): a bare array */
		{"[{\"name\": \"aten::zeros\", \"ph\": \"X\", \"ts\": 62, \"dur\": 8, \"tid\": 1, \"pid\": \"CPU "
		 "functions\", "
		 "\"args\": {}}]",
		 IMPORT_KINETO},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		assert_int_equal(import_detect(put("d", cases[i].text), err, sizeof(err)), cases[i].want);
	assert_int_equal(import_detect(put("d", "hello world\n"), err, sizeof(err)), IMPORT_AUTO);
	assert_non_null(strstr(err, "unrecognized format"));
	assert_int_equal(import_format_parse("kineto"), IMPORT_KINETO);
	assert_int_equal(import_format_parse("bogus"), -1);
}

static void nccl_names(void **state)
{
	(void)state;
	char t[32];
	assert_int_equal(import_kineto_nccl_type("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*)", t, sizeof(t)),
			 1);
	assert_string_equal(t, "AllReduce");
	assert_int_equal(import_kineto_nccl_type("ncclDevKernel_SendRecv(ncclDevComm*)", t, sizeof(t)), 1);
	assert_string_equal(t, "SendRecv");
	assert_int_equal(import_kineto_nccl_type("ncclAllReduceRingLLKernel_sum_f32", t, sizeof(t)), 1);
	assert_string_equal(t, "nccl");
	assert_int_equal(import_kineto_nccl_type("volta_sgemm_128x64_nn", t, sizeof(t)), 0);
}

static void kineto_steps(void **state)
{
	(void)state;
	char err[1024];
	struct got g;
	const char *p = put(
		"k.json",
		"{\"distributedInfo\":{\"rank\":1,\"world_size\":2},\"traceEvents\":["
		"{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"early\",\"ts\":500,\"dur\":1},"
		"{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"ProfilerStep#4\",\"ts\":2000,\"dur\":900},"
		"{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"gemm\",\"ts\":1010,\"dur\":40,\"args\":{\"grid\":[1,2]}},"
		"{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"gemm\",\"ts\":1060,\"dur\":42},"
		"{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"ncclKernel_AllReduce_RING\",\"ts\":1110,\"dur\":90.4},"
		"{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"ncclKernel_AllReduce_RING\",\"ts\":1300,\"dur\":10},"
		"{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"ProfilerStep#3\",\"ts\":1000,\"dur\":950},"
		"{\"ph\":\"X\",\"cat\":\"gpu_user_annotation\",\"name\":\"ProfilerStep#3\",\"ts\":1005,\"dur\":5},"
		"{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"gemm\",\"ts\":2100,\"dur\":41},"
		"{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"late\",\"ts\":9000,\"dur\":1}"
		"],\"INFO\":[\"x\",1]}");
	assert_int_equal(run(IMPORT_AUTO, p, &g, err), 0);
	assert_int_equal(g.jobs, 1);
	assert_int_equal(g.job.world, 2);
	assert_int_equal(g.job.dp, 2);
	assert_int_equal(g.nit, 2);
	assert_int_equal(g.it[0].rank, 1);
	assert_int_equal(g.it[0].iter, 3);
	assert_int_equal(g.it[0].start_us, 1000);
	assert_int_equal(g.it[0].dur_us, 950);
	assert_int_equal(g.it[1].iter, 4);
	const struct record_phase *c = phase(&g, 1, 3, "gpu_compute");
	assert_non_null(c);
	assert_int_equal(c->dur_us, 82);
	assert_int_equal(c->kind, RECORD_KIND_COMPUTE);
	const struct record_phase *a0 = phase(&g, 1, 3, "nccl_AllReduce#0"), *a1 = phase(&g, 1, 3, "nccl_AllReduce#1");
	assert_non_null(a0);
	assert_non_null(a1);
	assert_int_equal(a0->dur_us, 90);
	assert_int_equal(a0->start_us, 110);
	assert_int_equal(a0->kind, RECORD_KIND_COMM);
	assert_int_equal(a0->group, RECORD_GROUP_DP);
	assert_int_equal(a1->dur_us, 10);
	assert_non_null(phase(&g, 1, 4, "gpu_compute"));
	/* kernels: gemm x2 and the collective x2 in step 3; gemm in step 4; "early" dropped,
	 * "late" (past twice the last step's length) dropped */
	int gemm3 = -1;
	for (int i = 0; i < g.nk; i++) {
		assert_string_not_equal(g.kname[i], "early");
		assert_string_not_equal(g.kname[i], "late");
		if (g.k[i].iter == 3 && strcmp(g.kname[i], "gemm") == 0)
			gemm3 = i;
	}
	assert_int_equal(g.nk, 3);
	assert_true(gemm3 >= 0);
	assert_int_equal(g.k[gemm3].count, 2);
	assert_int_equal(g.kdur[gemm3][0], 40);
	assert_int_equal(g.kdur[gemm3][1], 42);
}

/* A trace without kernels (a CPU job's, torch.profiler without Kineto: no categories, a bare
 * array): per step, cpu_compute is the time in the step thread's operators outside one
 * another, data_wait the data loader's next(); other threads' operators do not count */
static void kineto_cpu(void **state)
{
	(void)state;
	char err[1024];
	struct got g;
	const char *p = put("cpu.json", "[{\"name\": \"aten::zeros\", \"ph\": \"X\", \"ts\": 10, \"dur\": 5, \"tid\": "
					"1, \"pid\": \"CPU functions\"},"
					"{\"name\": \"ProfilerStep#3\", \"ph\": \"X\", \"ts\": 100, \"dur\": 1000, "
					"\"tid\": 1, \"pid\": \"CPU functions\"},"
					"{\"name\": \"enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__\", "
					"\"ph\": \"X\", \"ts\": 110, "
					"\"dur\": 50, \"tid\": 1, \"pid\": \"CPU functions\"},"
					"{\"name\": \"aten::linear\", \"ph\": \"X\", \"ts\": 200, \"dur\": 300, "
					"\"tid\": 1, \"pid\": \"CPU functions\"},"
					"{\"name\": \"aten::addmm\", \"ph\": \"X\", \"ts\": 210, \"dur\": 250, "
					"\"tid\": 1, \"pid\": \"CPU functions\"},"
					"{\"name\": \"aten::add_\", \"ph\": \"X\", \"ts\": 250, \"dur\": 600, \"tid\": "
					"2, \"pid\": \"CPU functions\"},"
					"{\"name\": \"DeviceBackward\", \"ph\": \"X\", \"ts\": 600, \"dur\": 200, "
					"\"tid\": 1, \"pid\": \"CPU functions\"},"
					"{\"name\": \"ProfilerStep#4\", \"ph\": \"X\", \"ts\": 1100, \"dur\": 500, "
					"\"tid\": 1, \"pid\": \"CPU functions\"},"
					"{\"name\": \"aten::mm\", \"ph\": \"X\", \"ts\": 1150, \"dur\": 70, \"tid\": "
					"1, \"pid\": \"CPU functions\"}]");
	assert_int_equal(run(IMPORT_AUTO, p, &g, err), 0);
	assert_int_equal(g.nit, 2);
	assert_int_equal(g.it[0].iter, 3);
	const struct record_phase *c = phase(&g, 0, 3, "cpu_compute"), *d = phase(&g, 0, 3, "data_wait");
	assert_non_null(c);
	assert_non_null(d);
	assert_int_equal(c->dur_us, 500); /* linear (addmm inside it) and DeviceBackward; not tid 2's add_ */
	assert_int_equal(c->kind, RECORD_KIND_COMPUTE);
	assert_int_equal(d->dur_us, 50);
	assert_int_equal(d->kind, RECORD_KIND_HOST);
	assert_int_equal(phase(&g, 0, 4, "cpu_compute")->dur_us, 70);
	assert_null(phase(&g, 0, 3, "gpu_compute"));
	assert_int_equal(g.nk, 0);
}

static void warn_count(void *ctx, const char *msg)
{
	int *n = ctx;
	(*n)++;
	printf("  warning: %s\n", msg);
}

/* distributedInfo without world_size: the files' order decides, said once; a trace without
 * ProfilerStep#N is one step 0 over its timed events */
static void kineto_fallbacks(void **state)
{
	(void)state;
	char err[1024];
	struct got g;
	memset(&g, 0, sizeof(g));
	const char *p[2];
	p[0] = put("a.json",
		   "{\"distributedInfo\":{\"rank\":5},\"traceEvents\":["
		   "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"ProfilerStep#1\",\"ts\":100,\"dur\":50},"
		   "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"gemm\",\"ts\":110,\"dur\":20}]}");
	p[1] = put("b.json", "{\"distributedInfo\":{\"backend\":\"nccl\"},\"traceEvents\":["
			     "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::mm\",\"ts\":200,\"dur\":30},"
			     "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"gemm\",\"ts\":210,\"dur\":40}]}");
	int warnings = 0;
	struct import_options o = {.warn = warn_count, .warn_ctx = &warnings};
	struct jsonl_handler h = {&g, g_job, NULL, g_iter, g_phase, g_kernel, NULL};
	assert_int_equal(import_read(IMPORT_AUTO, p, 2, &o, &h, err, sizeof(err)), 0);
	assert_int_equal(g.job.world, 2);
	assert_int_equal(g.nit, 2);
	assert_int_equal(g.it[0].rank, 0);
	assert_int_equal(g.it[0].iter, 1);
	assert_int_equal(g.it[1].rank, 1);
	assert_int_equal(g.it[1].iter, 0);
	assert_int_equal(g.it[1].start_us, 200);
	assert_int_equal(g.it[1].dur_us, 50);
	assert_int_equal(phase(&g, 1, 0, "gpu_compute")->dur_us, 40);
	assert_int_equal(warnings, 2); /* the ranks once, the missing steps once */
	/* a complete one that contradicts itself is still an error */
	const char *bad = put("c.json", "{\"distributedInfo\":{\"rank\":3,\"world_size\":2},\"traceEvents\":[]}");
	assert_int_equal(run(IMPORT_AUTO, bad, &g, err), -1);
	assert_non_null(strstr(err, "out of range"));
}

/* a directory is its trace files in natural order; other files are skipped */
static void expand_dirs(void **state)
{
	(void)state;
	char err[1024], sub[600], **v;
	size_t n;
	snprintf(sub, sizeof(sub), "%s/ranks", dir);
	assert_true(mkdir(sub, 0755) == 0 || errno == EEXIST);
	static const char *const names[] = {"ranks/r-10.json.gz", "ranks/r-2.json", "ranks/LICENSE", "ranks/r-1.csv"};
	for (size_t i = 0; i < 4; i++)
		put(names[i], "");
	int warnings = 0;
	struct import_options o = {.warn = warn_count, .warn_ctx = &warnings};
	const char *in[] = {"x.jsonl", sub};
	assert_int_equal(import_expand(in, 2, &o, &v, &n, err, sizeof(err)), 0);
	assert_int_equal(n, 4);
	assert_string_equal(v[0], "x.jsonl");
	assert_non_null(strstr(v[1], "/ranks/r-1.csv"));
	assert_non_null(strstr(v[2], "/ranks/r-2.json"));
	assert_non_null(strstr(v[3], "/ranks/r-10.json.gz"));
	assert_int_equal(warnings, 1);
	free(v);
	snprintf(sub, sizeof(sub), "%s/empty", dir);
	assert_true(mkdir(sub, 0755) == 0 || errno == EEXIST);
	in[1] = sub;
	assert_int_equal(import_expand(in, 2, &o, &v, &n, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "no trace file"));
}

static void kineto_long_name(void **state)
{
	(void)state;
	char err[1024], name[700], json[2000];
	struct got g;
	memset(name, 'a', 600);
	name[600] = 0;
	snprintf(json, sizeof(json),
		 "{\"schemaVersion\":1,\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":"
		 "\"ProfilerStep#0\",\"ts\":0,\"dur\":100},{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"%s\","
		 "\"ts\":1,\"dur\":2}]}",
		 name);
	assert_int_equal(run(IMPORT_KINETO, put("long.json", json), &g, err), 0);
	assert_int_equal(g.nk, 1);
	assert_int_equal(g.job.world, 1);
}

static void chrome_layout(void **state)
{
	(void)state;
	char err[1024];
	struct got g;
	put("meta-T.yaml", "trial_name: T\npp_size: 2\ntp_size: 1\ndp_size: 2\n");
	const char *p =
		put("timeline-T.json",
		    "[{\"name\":\"thread_name\",\"pid\":0,\"tid\":0,\"ph\":\"M\",\"args\":{\"name\":\"PP rank 0, TP "
		    "rank 0, compute\"}},"
		    "{\"name\":\"thread_name\",\"pid\":1,\"tid\":5,\"ph\":\"M\",\"args\":{\"name\":\"PP rank 1, TP "
		    "rank 0, compute\"}},"
		    "{\"name\":\"thread_name\",\"pid\":1,\"tid\":6,\"ph\":\"M\",\"args\":{\"name\":\"PP rank 1, TP "
		    "rank 0, dp-comm\"}},"
		    "{\"name\":\"forward-compute\",\"ph\":\"X\",\"pid\":0,\"tid\":0,\"ts\":10,\"dur\":100,\"args\":{"
		    "\"step\":9}},"
		    "{\"name\":\"forward-compute\",\"ph\":\"X\",\"pid\":0,\"tid\":0,\"ts\":200,\"dur\":50,\"args\":{"
		    "\"step\":9}},"
		    "{\"name\":\"gc\",\"ph\":\"X\",\"pid\":0,\"tid\":0,\"ts\":300,\"dur\":5,\"args\":{\"step\":9}},"
		    "{\"name\":\"forward-compute\",\"ph\":\"X\",\"pid\":1,\"tid\":5,\"ts\":20,\"dur\":300,\"args\":{"
		    "\"step\":12}},"
		    "{\"name\":\"grads-reduce-scatter\",\"ph\":\"X\",\"pid\":1,\"tid\":6,\"ts\":330,\"dur\":-3,"
		    "\"args\":{\"step\":12}}]");
	assert_int_equal(run(IMPORT_AUTO, p, &g, err), 0);
	assert_int_equal(g.job.world, 4);
	assert_int_equal(g.job.pp, 2);
	assert_int_equal(g.job.dp, 2);
	/* rank = dp + 2 * pp (tp-cp-ep-dp-pp): pid 0 pp 0 -> 0; pid 1 pp 1 -> 3; steps 9, 12 -> 0, 1 */
	const struct record_phase *f = phase(&g, 0, 0, "forward-compute");
	assert_non_null(f);
	assert_int_equal(f->dur_us, 150);
	assert_int_equal(f->kind, RECORD_KIND_COMPUTE);
	const struct record_phase *gc = phase(&g, 0, 0, "gc");
	assert_non_null(gc);
	assert_int_equal(gc->kind, RECORD_KIND_HOST);
	const struct record_phase *r = phase(&g, 3, 1, "grads-reduce-scatter");
	assert_non_null(r);
	assert_int_equal(r->kind, RECORD_KIND_COMM);
	assert_int_equal(r->group, RECORD_GROUP_DP);
	assert_int_equal(r->dur_us, 0);
	assert_int_equal(g.nit, 2);
	assert_int_equal(g.it[0].rank, 0);
	assert_int_equal(g.it[0].start_us, 10);
	assert_int_equal(g.it[0].dur_us, 295);
	/* a PP rank beyond the layout given by flags */
	struct import_options o = {.pp = 1};
	struct jsonl_handler h = {&g, g_job, NULL, g_iter, g_phase, g_kernel, NULL};
	assert_int_equal(import_read(IMPORT_CHROME, &p, 1, &o, &h, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "beyond the layout"));
}

static void csv_rows(void **state)
{
	(void)state;
	char err[1024];
	struct got g;
	const char *p = put("w.csv", "\n,worker,gpu,time,batch_time_norm\n"
				     "0,0,25,1,400\n1,1,25,1,600\n2,0,25,11,410\n3,1,25,11,420\n4,0,25,21,430\n");
	assert_int_equal(run(IMPORT_AUTO, p, &g, err), 0);
	assert_int_equal(g.job.world, 2);
	assert_int_equal(g.nit, 4); /* time 21 only has worker 0: the ragged end is dropped */
	assert_int_equal(g.it[0].dur_us, 600000);
	assert_int_equal(g.it[1].dur_us, 600000);
	assert_int_equal(g.it[2].start_us, 600000);
	const struct record_phase *b = phase(&g, 0, 0, "batch"), *w = phase(&g, 0, 0, "sync_wait");
	assert_non_null(b);
	assert_non_null(w);
	assert_int_equal(b->dur_us, 400000);
	assert_int_equal(w->dur_us, 200000);
	assert_int_equal(phase(&g, 1, 0, "sync_wait")->dur_us, 0);
}

static int refuse_job(void *c, const struct jsonl_job *j, const char **w)
{
	(void)c, (void)j;
	*w = "no room for the job";
	return -1;
}
static int refuse_phase(void *c, const struct record_phase *r, const char *n, const char **w)
{
	(void)c, (void)r, (void)n, (void)w; /* no reason given */
	return -1;
}

/* Every importer reports a record its sink refuses as "path: why", "path: rejected"
 * without a why, and stops there. */
static void sink_refuses(void **state)
{
	(void)state;
	char err[1024], want[1100];
	const char *paths[] = {
		put("r.json",
		    "{\"distributedInfo\":{\"rank\":0,\"world_size\":1},\"traceEvents\":["
		    "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"ProfilerStep#1\",\"ts\":10,\"dur\":90},"
		    "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"gemm\",\"ts\":20,\"dur\":40}]}"),
		put("r-timeline.json", "[{\"name\":\"thread_name\",\"pid\":0,\"tid\":0,\"ph\":\"M\",\"args\":{\"name\":"
				       "\"PP rank 0, TP rank 0, compute\"}},"
				       "{\"name\":\"forward-compute\",\"ph\":\"X\",\"pid\":0,\"tid\":0,\"ts\":10,"
				       "\"dur\":100,\"args\":{\"step\":1}}]"),
		put("r.csv", "worker,time,batch_time_norm\n0,1,400\n"),
	};
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		struct jsonl_handler no_job = {NULL, refuse_job, NULL, NULL, NULL, NULL, NULL};
		assert_int_equal(import_read(IMPORT_AUTO, &paths[i], 1, NULL, &no_job, err, sizeof(err)), -1);
		snprintf(want, sizeof(want), "%s: no room for the job", paths[i]);
		assert_string_equal(err, want);
		struct jsonl_handler no_phase = {NULL, NULL, NULL, NULL, refuse_phase, NULL, NULL};
		assert_int_equal(import_read(IMPORT_AUTO, &paths[i], 1, NULL, &no_phase, err, sizeof(err)), -1);
		snprintf(want, sizeof(want), "%s: rejected", paths[i]);
		assert_string_equal(err, want);
	}
}

static void summary(void **state)
{
	(void)state;
	struct kernel_summary ks;
	kernel_summary_init(&ks);
	const char *why = NULL;
	struct record_kernel k;
	memset(&k, 0, sizeof(k));
	int64_t few[] = {30, 10, 20};
	assert_int_equal(kernel_summary_make(&ks, &k, few, 3, &why), 0);
	assert_int_equal(k.sketch_len, 0);
	assert_int_equal(k.min_us, 10);
	assert_int_equal(k.p50_us, 20);
	assert_int_equal(k.max_us, 30);
	assert_int_equal(k.sum_us, 60);
	int64_t many[100];
	for (int i = 0; i < 100; i++)
		many[i] = 1000 + i;
	memset(&k, 0, sizeof(k));
	assert_int_equal(kernel_summary_make(&ks, &k, many, 100, &why), 0);
	assert_true(k.sketch_len > 0);
	assert_int_equal(k.count, 100);
	struct sketch s;
	sketch_init(&s);
	assert_int_equal(sketch_deserialize(&s, k.sketch, k.sketch_len), 0);
	double m = sketch_quantile(&s, 0.5);
	assert_true(m > 1049 * 0.98 && m < 1049 * 1.02);
	sketch_free(&s);
	int64_t neg[] = {5, -1, 4, 4};
	assert_int_equal(kernel_summary_make(&ks, &k, neg, 4, &why), -1);
	struct record_iter it = {0, 1, 0, 10};
	assert_true(kernel_summary_wire_bytes(&it, 1, NULL, 0, &k, 1, NULL, 0, NULL) > k.sketch_len);
	kernel_summary_free(&ks);
}

int main(void)
{
	snprintf(dir, sizeof(dir), "/tmp/test_import.XXXXXX");
	if (!mkdtemp(dir))
		return 1;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(detect),           cmocka_unit_test(nccl_names),    cmocka_unit_test(kineto_steps),
		cmocka_unit_test(kineto_fallbacks), cmocka_unit_test(kineto_cpu),    cmocka_unit_test(expand_dirs),
		cmocka_unit_test(kineto_long_name), cmocka_unit_test(chrome_layout), cmocka_unit_test(csv_rows),
		cmocka_unit_test(sink_refuses),     cmocka_unit_test(summary),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		rc = 1;
	return rc;
}
