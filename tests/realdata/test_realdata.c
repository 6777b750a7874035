/* test_realdata: the importers on the real traces of tests/data:
 * every HTA file imports with its steps and kernels; kernel sketches keep every kernel's
 * median within 2% and a step's Batch on the wire within 2.7 KB (PARAM and HTA traces);
 * bad files fail with the file and a position. The data directory is argv[1] or
 * $CULPRIT_DATA_DIR; when it is missing the test FAILS (CI has it). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cmocka.h>

#include "import.h"
#include "kernel_summary.h"

static const char *data_dir;

struct names {
	char *s[4096];
	size_t n;
};

static uint32_t name_id(struct names *nm, const char *s, int *fresh)
{
	for (size_t i = 0; i < nm->n; i++)
		if (strcmp(nm->s[i], s) == 0) {
			*fresh = 0;
			return (uint32_t)i;
		}
	assert_true(nm->n < 4096);
	nm->s[nm->n] = strdup(s);
	*fresh = 1;
	return (uint32_t)nm->n++;
}

/* collects one file's records and measures every step as the agent would send it */
struct col {
	uint64_t jobs, iters, phases, kernels;
	uint32_t world;
	struct names nm;
	/* the step being collected */
	struct record_iter it;
	int have_it;
	struct record_phase ph[256];
	size_t nph;
	struct record_kernel k[1024];
	uint8_t *sk[1024];
	size_t nk;
	uint32_t fresh[1280]; /* name ids first seen in this step */
	size_t nfresh;
	/* figures */
	uint64_t steps, bytes_steady, bytes_first, max_steady, bytes_kernels, max_kernels, bytes_sketch;
	uint64_t medians, bad_medians;
	double worst_err;
	struct kernel_summary ks;
};

static void flush_step(struct col *c)
{
	if (!c->have_it)
		return;
	size_t steady =
		kernel_summary_wire_bytes(&c->it, 1, c->ph, c->nph, c->k, c->nk, NULL, 0, (const char *const *)c->nm.s);
	size_t first = kernel_summary_wire_bytes(&c->it, 1, c->ph, c->nph, c->k, c->nk, c->fresh, c->nfresh,
						 (const char *const *)c->nm.s);
	c->steps++;
	size_t kb = kernel_summary_wire_bytes(&c->it, 0, c->ph, 0, c->k, c->nk, NULL, 0, (const char *const *)c->nm.s);
	c->bytes_kernels += kb;
	if (kb > c->max_kernels)
		c->max_kernels = kb;
	for (size_t i = 0; i < c->nk; i++)
		c->bytes_sketch += c->k[i].sketch_len;
	c->bytes_steady += steady;
	c->bytes_first += first;
	if (steady > c->max_steady)
		c->max_steady = steady;
	for (size_t i = 0; i < c->nk; i++)
		free(c->sk[i]);
	c->nk = c->nph = c->nfresh = 0;
	c->have_it = 0;
}

static int on_job(void *ctx, const struct jsonl_job *j, const char **why)
{
	(void)why;
	struct col *c = ctx;
	c->jobs++;
	c->world = j->world;
	return 0;
}

static int on_iter(void *ctx, const struct record_iter *r, const char **why)
{
	(void)why;
	struct col *c = ctx;
	flush_step(c);
	c->it = *r;
	c->have_it = 1;
	c->iters++;
	if (r->rank >= c->world || r->dur_us < 0)
		return -1;
	return 0;
}

static int on_phase(void *ctx, const struct record_phase *r, const char *name, const char **why)
{
	(void)why;
	struct col *c = ctx;
	c->phases++;
	if (c->nph < 256) {
		int fresh;
		c->ph[c->nph] = *r;
		c->ph[c->nph].name = name_id(&c->nm, name, &fresh);
		if (fresh && c->nfresh < 1280)
			c->fresh[c->nfresh++] = c->ph[c->nph].name;
		c->nph++;
	}
	return 0;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

static int on_kernel(void *ctx, const struct record_kernel *r, const char *name, const int64_t *durs, size_t nd,
		     const char **why)
{
	struct col *c = ctx;
	c->kernels++;
	if (!nd || c->nk >= 1024)
		return 0;
	struct record_kernel k = *r;
	int fresh;
	k.name = name_id(&c->nm, name, &fresh);
	if (fresh && c->nfresh < 1280)
		c->fresh[c->nfresh++] = k.name;
	if (kernel_summary_make(&c->ks, &k, durs, nd, why) < 0)
		return -1;
	/* the median the server gets back from the sketch against the exact one */
	struct sketch s;
	sketch_init(&s);
	if (!k.sketch_len) {
		/* what the server's store builds from the summary fields alone (store.c) */
		assert_true(nd <= KERNEL_SUMMARY_EXACT_MAX);
		sketch_add(&s, (double)k.min_us, 1);
		if (nd > 1)
			sketch_add(&s, (double)k.max_us, 1);
		if (nd > 2)
			sketch_add(&s, (double)k.p50_us, 1);
	} else if (sketch_deserialize(&s, k.sketch, k.sketch_len) < 0) {
		*why = "sketch does not deserialize";
		sketch_free(&s);
		return -1;
	}
	int64_t *sorted = malloc(nd * sizeof(*sorted));
	memcpy(sorted, durs, nd * sizeof(*durs));
	qsort(sorted, nd, sizeof(*sorted), cmp_i64);
	double exact = (double)sorted[(nd - 1) / 2], got = sketch_quantile(&s, 0.5);
	double err = exact > 0 ? (got - exact) / exact : got - exact;
	if (err < 0)
		err = -err;
	c->medians++;
	if (err > 0.02)
		c->bad_medians++;
	if (err > c->worst_err)
		c->worst_err = err;
	free(sorted);
	sketch_free(&s);
	c->sk[c->nk] = malloc(k.sketch_len ? k.sketch_len : 1);
	if (k.sketch_len)
		memcpy(c->sk[c->nk], k.sketch, k.sketch_len);
	k.sketch = c->sk[c->nk];
	c->k[c->nk++] = k;
	return 0;
}

static struct col *collect(const char *const *paths, size_t n, enum import_format fmt, int expect_ok, char *err,
			   size_t err_size)
{
	struct col *c = calloc(1, sizeof(*c));
	kernel_summary_init(&c->ks);
	struct jsonl_handler h = {c, on_job, NULL, on_iter, on_phase, on_kernel, NULL};
	int rc = import_read(fmt, paths, n, NULL, &h, err, err_size);
	flush_step(c);
	if (expect_ok && rc)
		fail_msg("%s", err);
	if (!expect_ok && !rc)
		fail_msg("%s imported, expected an error", paths[0]);
	return c;
}

static void col_free(struct col *c)
{
	flush_step(c);
	for (size_t i = 0; i < c->nm.n; i++)
		free(c->nm.s[i]);
	kernel_summary_free(&c->ks);
	free(c);
}

static const char *const hta_files[] = {
	"df_index_resolver__rank1of2_V100.json.gz",
	"nccl_parser_config__rank0of2_A100_ddp.json.gz",
	"negative_queue_length__rank0of16_A100.json.gz",
	"sampled_rank-0.json.gz",
	"sampled_rank-1.json.gz",
	"trace_diff_control__rank3of8_A100.json.gz",
	"trace_diff_test__rank1of2_V100.json.gz",
};

static void report_figures(const char *what, const struct col *c)
{
	printf("%-48s steps %3llu kernels %6llu  wire bytes/rank/step: %5.0f (max %llu), first step with "
	       "names %5.0f; kernels %5.0f (max %llu) of which sketches %5.0f; medians %llu, worst error %.2f%%\n",
	       what, (unsigned long long)c->steps, (unsigned long long)c->kernels,
	       c->steps ? (double)c->bytes_steady / (double)c->steps : 0, (unsigned long long)c->max_steady,
	       c->steps ? (double)c->bytes_first / (double)c->steps : 0,
	       c->steps ? (double)c->bytes_kernels / (double)c->steps : 0, (unsigned long long)c->max_kernels,
	       c->steps ? (double)c->bytes_sketch / (double)c->steps : 0, (unsigned long long)c->medians,
	       c->worst_err * 100);
}

static void hta_each_file(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(hta_files) / sizeof(hta_files[0]); i++) {
		char path[1024], err[1024];
		snprintf(path, sizeof(path), "%s/hta-single-rank/%s", data_dir, hta_files[i]);
		const char *p = path;
		assert_int_equal(import_detect(path, err, sizeof(err)), IMPORT_KINETO);
		struct col *c = collect(&p, 1, IMPORT_AUTO, 1, err, sizeof(err));
		report_figures(hta_files[i], c);
		assert_int_equal(c->jobs, 1);
		assert_true(c->iters >= 1);
		assert_true(c->kernels >= 1);
		assert_int_equal(c->bad_medians, 0);
		/* the kernel summaries of every step within 2.7 KB (the phases of df_index_resolver's
		 * CPU annotations add 2.4 KB of their own) */
		assert_true(c->max_kernels <= 2700);
		col_free(c);
	}
}

static void param_sketches_and_bytes(void **state)
{
	(void)state;
	char paths[8][1024], err[1024];
	const char *p[8];
	for (int r = 0; r < 8; r++) {
		snprintf(paths[r], sizeof(paths[r]), "%s/param-dlrm-8rank/rank-%d.json.gz", data_dir, r);
		p[r] = paths[r];
	}
	struct col *c = collect(p, 8, IMPORT_KINETO, 1, err, sizeof(err));
	report_figures("param-dlrm-8rank (8 ranks)", c);
	assert_int_equal(c->jobs, 1);
	assert_int_equal(c->world, 8);
	assert_int_equal(c->iters, 8); /* one ProfilerStep#10 per rank */
	assert_true(c->kernels > 8 * 20);
	assert_int_equal(c->bad_medians, 0);
	assert_true(c->max_steady <= 2700);
	col_free(c);
}

/* --- bad files --- */

static char tmpdir[256];

static void write_file(const char *name, const void *data, size_t len, int gz, char *path, size_t cap)
{
	snprintf(path, cap, "%s/%s", tmpdir, name);
	if (gz) {
		gzFile f = gzopen(path, "wb");
		assert_non_null(f);
		gzwrite(f, data, (unsigned)len);
		gzclose(f);
	} else {
		FILE *f = fopen(path, "wb");
		assert_non_null(f);
		fwrite(data, 1, len, f);
		fclose(f);
	}
}

static void expect_error(const char *path, enum import_format fmt, const char *needle)
{
	char err[1024] = "";
	struct col *c = collect(&path, 1, fmt, 0, err, sizeof(err));
	if (!strstr(err, path) || !strstr(err, needle))
		fail_msg("error \"%s\" lacks \"%s\" or the path", err, needle);
	printf("  %s\n", err);
	col_free(c);
}

static void bad_files(void **state)
{
	(void)state;
	char path[1024];
	/* truncated gzip: the first 20,000 bytes of a real trace */
	char src[1024];
	snprintf(src, sizeof(src), "%s/param-dlrm-8rank/rank-0.json.gz", data_dir);
	FILE *f = fopen(src, "rb");
	assert_non_null(f);
	static char buf[20000];
	size_t n = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	write_file("trunc.json.gz", buf, n, 0, path, sizeof(path));
	expect_error(path, IMPORT_KINETO, "byte");
	expect_error(path, IMPORT_AUTO, "byte");

	static const char trunc_json[] =
		"{\"schemaVersion\":1,\"distributedInfo\":{\"rank\":0,\"world_size\":2},\"traceEvents\":["
		"{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"ts\":1,\"dur\":2},{\"ph\":\"X\",\"na";
	write_file("trunc.json", trunc_json, sizeof(trunc_json) - 1, 0, path, sizeof(path));
	expect_error(path, IMPORT_AUTO, "truncated JSON");

	static const char wrong[] =
		"{\"schemaVersion\":1,\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\","
		"\"ts\":\"soon\",\"dur\":2}]}";
	write_file("wrong.json.gz", wrong, sizeof(wrong) - 1, 1, path, sizeof(path));
	expect_error(path, IMPORT_AUTO, "\"ts\" is not a number");

	static const char wrong2[] = "{\"schemaVersion\":1,\"traceEvents\":[1,2,3]}";
	write_file("wrong2.json", wrong2, sizeof(wrong2) - 1, 0, path, sizeof(path));
	expect_error(path, IMPORT_KINETO, "not an object");

	/* without ProfilerStep#N the timed events make one step; without those either, nothing */
	static const char nosteps[] =
		"{\"schemaVersion\":1,\"distributedInfo\":{\"rank\":0,\"world_size\":1},\"traceEvents\":["
		"{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":1,\"args\":{\"name\":\"p\"}}]}";
	write_file("nosteps.json", nosteps, sizeof(nosteps) - 1, 0, path, sizeof(path));
	expect_error(path, IMPORT_AUTO, "no steps");

	/* not profiler traces, refused by name (well-formed JSON is never "malformed") */
	static const struct {
		const char *name, *text;
		int gz;
		const char *needle;
	} not_traces[] = {
		{"x_et.json", "{\n  \"schema\": \"1.0.1\", \"pid\": 5,\n  \"nodes\": [{\"name\": \"x\", \"id\": 2}]}\n",
		 1, "a PyTorch execution trace, not a profiler trace"},
		{"memory_timeline.raw", "[[-1, 1, 37888, 7], [-1, 1, 512, 7]]", 0, "a memory-profiler timeline"},
		{"other.json", "{\n  \"hello\": 1\n}\n", 0, "not a trace"},
	};
	for (size_t i = 0; i < sizeof(not_traces) / sizeof(not_traces[0]); i++) {
		write_file(not_traces[i].name, not_traces[i].text, strlen(not_traces[i].text), not_traces[i].gz, path,
			   sizeof(path));
		expect_error(path, IMPORT_AUTO, not_traces[i].needle);
	}

	static const char csv[] = ",worker,gpu,batch_time_norm\n0,0,25,476\n";
	write_file("nocol.csv", csv, sizeof(csv) - 1, 0, path, sizeof(path));
	expect_error(path, IMPORT_CSV, ":1: missing column \"time\"");

	static const char csv2[] = ",worker,gpu,time,batch_time_norm\n0,0,25,1,476\n1,x,25,1,500\n";
	write_file("badrow.csv", csv2, sizeof(csv2) - 1, 0, path, sizeof(path));
	expect_error(path, IMPORT_AUTO, ":3: worker");

	static const char chrome[] = "[{\"name\":\"forward-compute\",\"ph\":\"X\",\"pid\":0,\"tid\":0,"
				     "\"ts\":1,\"dur\":2,\"args\":{\"step\":1}}]";
	write_file("timeline-X.json", chrome, sizeof(chrome) - 1, 0, path, sizeof(path));
	expect_error(path, IMPORT_CHROME, "no thread named");
}

int main(int argc, char **argv)
{
	data_dir = argc > 1 ? argv[1] : getenv("CULPRIT_DATA_DIR");
	struct stat st;
	if (!data_dir || stat(data_dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
		fprintf(stderr, "test_realdata: the real data directory \"%s\" is missing (tests/data)\n",
			data_dir ? data_dir : "(unset)");
		return 1;
	}
	const char *t = getenv("CULPRIT_TEST_TMP");
	snprintf(tmpdir, sizeof(tmpdir), "%s/realdata.XXXXXX", t && *t ? t : "/tmp");
	if (t && *t)
		mkdir(t, 0755);
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 1;
	}
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(hta_each_file),
		cmocka_unit_test(param_sketches_and_bytes),
		cmocka_unit_test(bad_files),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", tmpdir);
	return rc;
}
