/* test_jsonl.c: the interchange reader (escapes, unknown and nested fields, summaries,
 * gzip of one member or several, damaged gzip) and its errors with file and line; the
 * writer round-trips through it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "jsonl.h"

struct seen {
	int jobs, hosts, iters, phases, kernels, events;
	char job[64], host[64], name[64], detail[64], device[8];
	uint32_t world, ep, rank;
	int64_t dur, sum[5]; /* the last kernel's sum, min, max, p50, p99 */
	uint32_t count;
	size_t ndurs;
	int64_t durs[4];
	uint8_t kind, group;
};

static int s_job(void *c, const struct jsonl_job *j, const char **why)
{
	struct seen *s = c;
	(void)why;
	s->jobs++;
	snprintf(s->job, sizeof(s->job), "%s", j->job ? j->job : "");
	s->world = j->world;
	s->ep = j->ep;
	snprintf(s->device, sizeof(s->device), "%s", j->device ? j->device : "-");
	return 0;
}

static int s_host(void *c, uint32_t rank, const char *host, const char **why)
{
	struct seen *s = c;
	(void)why;
	s->hosts++;
	s->rank = rank;
	snprintf(s->host, sizeof(s->host), "%s", host);
	return 0;
}

static int s_iter(void *c, const struct record_iter *r, const char **why)
{
	struct seen *s = c;
	s->iters++;
	s->dur = r->dur_us;
	if (r->rank == 99) {
		*why = "rank 99 refused";
		return -1;
	}
	return 0;
}

static int s_phase(void *c, const struct record_phase *r, const char *name, const char **why)
{
	struct seen *s = c;
	(void)why;
	s->phases++;
	snprintf(s->name, sizeof(s->name), "%s", name);
	s->kind = r->kind;
	s->group = r->group;
	return 0;
}

static int s_kernel(void *c, const struct record_kernel *r, const char *name, const int64_t *d, size_t n,
		    const char **why)
{
	struct seen *s = c;
	(void)why;
	(void)name;
	s->kernels++;
	s->ndurs = n;
	for (size_t i = 0; i < n && i < 4; i++)
		s->durs[i] = d[i];
	int64_t sum[5] = {r->sum_us, r->min_us, r->max_us, r->p50_us, r->p99_us};
	memcpy(s->sum, sum, sizeof(sum));
	s->count = r->count;
	return 0;
}

static int s_event(void *c, const char *host, const char *kind, int64_t ts, const char *source, const char *detail,
		   const char **why)
{
	struct seen *s = c;
	(void)host;
	(void)kind;
	(void)ts;
	(void)source;
	(void)why;
	s->events++;
	snprintf(s->detail, sizeof(s->detail), "%s", detail ? detail : "");
	return 0;
}

static const char *write_tmp(const char *content, int gz)
{
	static char path[64];
	snprintf(path, sizeof(path), "/tmp/test_jsonl.%d%s", (int)getpid(), gz ? ".gz" : "");
	if (gz) {
		gzFile f = gzopen(path, "wb");
		gzputs(f, content);
		gzclose(f);
	} else {
		FILE *f = fopen(path, "w");
		fputs(content, f);
		fclose(f);
	}
	return path;
}

static const char good[] =
	"{\"type\":\"job\",\"job\":\"J\\\"1\",\"world\":12960,\"tp\":1,\"cp\":1,\"pp\":9,\"dp\":1440,\"ep\":32,"
	"\"order\":\"tp-cp-ep-dp-pp\",\"gpus_per_node\":8}\n"
	"\n"
	"{\"type\":\"host\",\"job\":\"J\",\"rank\":10352,\"host\":\"node-\\u00e9\\ud83d\\ude00\"}\n"
	"  {\"type\":\"iter\",\"job\":\"J\",\"rank\":10352,\"iter\":120,\"start_us\":3600000000,\"dur_us\":91000000,"
	"\"extra\":{\"a\":[1,2,{\"b\":null}],\"c\":true}}\r\n"
	"{\"type\":\"phase\",\"job\":\"J\",\"rank\":10352,\"iter\":120,\"name\":\"mlp\",\"kind\":\"compute\",\"group\":"
	"\"ep\",\"dur_us\":250000}\n"
	"{\"type\":\"kernel\",\"job\":\"J\",\"rank\":10352,\"iter\":120,\"name\":\"sm90_gemm\",\"kind\":\"compute\","
	"\"count\":96,\"durs_us\":[2510, 2490,-1e3]}\n"
	"{\"type\":\"kernel\",\"job\":\"J\",\"rank\":1,\"iter\":120,\"name\":\"k\",\"kind\":\"comm\",\"count\":9,\"sum_"
	"us\":9,\"min_us\":1,\"max_us\":3,\"p50_us\":2}\n"
	"{\"type\":\"event\",\"job\":\"J\",\"host\":\"node-1294\",\"kind\":\"port_down\",\"ts_us\":3590000000,"
	"\"source\":\"oob\",\"detail\":\"eth3\\n\"}\n"
	"{\"type\":\"future_record\",\"x\":1}\n";

static void reads_everything(void **state)
{
	(void)state;
	for (int gz = 0; gz < 2; gz++) {
		struct seen s;
		memset(&s, 0, sizeof(s));
		struct jsonl_handler h = {&s, s_job, s_host, s_iter, s_phase, s_kernel, s_event};
		char err[256] = "";
		uint64_t lines = 0;
		const char *path = write_tmp(good, gz);
		assert_int_equal(jsonl_read(path, &h, &lines, err, sizeof(err)), 0);
		unlink(path);
		assert_int_equal(lines, 9);
		assert_int_equal(s.jobs, 1);
		assert_string_equal(s.job, "J\"1");
		assert_int_equal(s.world, 12960);
		assert_int_equal(s.ep, 32);
		assert_string_equal(s.host, "node-\xc3\xa9\xf0\x9f\x98\x80");
		assert_int_equal(s.iters, 1);
		assert_int_equal(s.dur, 91000000);
		assert_string_equal(s.name, "mlp");
		assert_int_equal(s.kind, RECORD_KIND_COMPUTE);
		assert_int_equal(s.group, RECORD_GROUP_EP);
		assert_int_equal(s.kernels, 2);
		/* the summary kernel came last, p99 defaulting to max */
		assert_int_equal(s.ndurs, 0);
		assert_int_equal(s.count, 9);
		int64_t sum[5] = {9, 1, 3, 2, 3};
		assert_memory_equal(s.sum, sum, sizeof(sum));
		assert_int_equal(s.events, 1);
		assert_string_equal(s.detail, "eth3\n");
	}
}

static void errors_name_file_and_line(void **state)
{
	(void)state;
	struct {
		const char *line;
		const char *msg;
	} cases[] = {
		{"{\"type\":\"iter\",\"rank\":1,", "malformed JSON"},
		{"{\"type\":\"iter\",\"rank\":1,\"iter\":2}", "missing field \"dur_us\""},
		{"{\"type\":\"iter\",\"rank\":-1,\"iter\":2,\"dur_us\":3}", "invalid field \"rank\""},
		{"{\"type\":\"iter\",\"rank\":\"7\",\"iter\":2,\"dur_us\":3}", "invalid field \"rank\""},
		{"{\"type\":\"phase\",\"rank\":1,\"iter\":2,\"name\":\"x\",\"kind\":\"gpu\",\"dur_us\":3}",
		 "unknown kind"},
		{"{\"type\":\"kernel\",\"rank\":1,\"iter\":2,\"name\":\"x\",\"kind\":\"comm\",\"durs_us\":[1,\"a\"]}",
		 "invalid field \"durs_us\""},
		{"{\"type\":\"iter\",\"rank\":99,\"iter\":2,\"dur_us\":3}", "rank 99 refused"},
		{"[1,2]", "not an object"},
		{"{\"type\":\"iter\"} x", "trailing"},
		{"{\"type\":\"iter\",\"rank\":01,\"iter\":2,\"dur_us\":3}", "malformed JSON"},
		{"{\"type\":\"host\",\"rank\":1,\"host\":\"a\\qb\"}", "invalid escape"},
		{"{\"dur_us\":3}", "missing field \"type\""},
		/* in the writer's shape, so that only the general parser may decide */
		{"{\"type\":\"iter\",\"job\":\"J\",\"rank\":01,\"iter\":2,\"start_us\":0,\"dur_us\":3}",
		 "malformed JSON"},
		{"{\"type\":\"iter\",\"job\":\"J\",\"rank\":1,\"iter\":2,\"start_us\":0,\"dur_us\":-3}",
		 "negative dur_us"},
		{"{\"type\":\"iter\",\"job\":\"J\",\"rank\":4294967296,\"iter\":2,\"start_us\":0,\"dur_us\":3}",
		 "invalid field \"rank\""},
		{"{\"type\":\"phase\",\"job\":\"J\",\"rank\":1,\"iter\":2,\"name\":\"x\",\"kind\":\"gpu\","
		 "\"group\":\"\",\"start_us\":0,\"dur_us\":3}",
		 "unknown kind \"gpu\""},
		{"{\"type\":\"phase\",\"job\":\"J\",\"rank\":1,\"iter\":2,\"name\":\"x\",\"kind\":\"comm\","
		 "\"group\":\"xp\",\"start_us\":0,\"dur_us\":3}",
		 "unknown group \"xp\""},
		{"{\"type\":\"phase\",\"job\":\"J\",\"rank\":1,\"iter\":2,\"name\":\"x\\u0000\",\"kind\":\"comm\","
		 "\"group\":\"\",\"start_us\":0,\"dur_us\":3}",
		 "NUL in string"},
		{"{\"type\":\"kernel\",\"job\":\"J\",\"rank\":1,\"iter\":2,\"name\":\"x\",\"kind\":\"comm\","
		 "\"count\":0,\"durs_us\":[1,\"a\"]}",
		 "invalid field \"durs_us\""},
		{"{\"type\":\"iter\",\"job\":\"J\",\"rank\":1,\"iter\":2,\"start_us\":0,\"dur_us\":3}}", "trailing"},
		{"{\"type\":\"iter\",\"job\":\"J\",\"rank\":1,\"iter\":2,\"start_us\":0,\"dur_us\":3",
		 "malformed JSON"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		char content[512];
		snprintf(content, sizeof(content),
			 "{\"type\":\"job\",\"job\":\"J\",\"world\":8,\"dp\":8}\n\n%s\n{\"type\":\"event\"}\n",
			 cases[i].line);
		struct seen s;
		memset(&s, 0, sizeof(s));
		struct jsonl_handler h = {&s, s_job, s_host, s_iter, s_phase, s_kernel, s_event};
		char err[256] = "";
		const char *path = write_tmp(content, (int)(i % 2));
		assert_int_equal(jsonl_read(path, &h, NULL, err, sizeof(err)), -1);
		char want[128];
		snprintf(want, sizeof(want), "%s:3: ", path);
		if (strncmp(err, want, strlen(want)) != 0 || !strstr(err, cases[i].msg))
			fail_msg("case %zu: got \"%s\", want \"%s...%s\"", i, err, want, cases[i].msg);
		unlink(path);
	}
	char err[256];
	struct jsonl_handler h = {0};
	assert_int_equal(jsonl_read("/nonexistent/x.jsonl", &h, NULL, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "/nonexistent/x.jsonl"));
}

struct iters {
	int n;
	uint32_t rank[16];
	int64_t dur[16];
};

static int k_iter(void *c, const struct record_iter *r, const char **why)
{
	struct iters *it = c;
	(void)why;
	if (it->n < 16) {
		it->rank[it->n] = r->rank;
		it->dur[it->n] = r->dur_us;
	}
	it->n++;
	return 0;
}

/* The reader tries each key first as the one that followed the same key on the line
 * before: keys in another order, a key longer than the guess or escaped, and a repeated
 * key (the last wins) still read as written. */
static void keys_in_any_order(void **state)
{
	(void)state;
	static const char content[] = "{\"type\":\"job\",\"job\":\"J\",\"world\":8,\"dp\":8}\n"
				      "{\"type\":\"iter\",\"rank\":1,\"iter\":2,\"dur_us\":3}\n"
				      "{\"type\":\"iter\",\"rank\":1,\"iter\":2,\"dur_us\":4}\n"
				      "{\"dur_us\":5,\"iter\":2,\"type\":\"iter\",\"rank\":2}\n"
				      "{\"type\":\"iter\",\"rank\":3,\"rankx\":7,\"iter\":2,\"dur_us\":6}\n"
				      "{\"type\":\"iter\",\"ranks\":7,\"rank\":4,\"iter\":2,\"dur_us\":7}\n"
				      "{\"type\":\"iter\",\"r\\u0061nk\":5,\"iter\":2,\"dur_us\":8}\n"
				      "{\"type\":\"iter\",\"rank\":6,\"iter\":2,\"dur_us\":9,\"dur_us\":10}\n"
				      "{\"type\":\"iter\",\"rank\":7,\"iter\":2,\"dur_\":7,\"dur_us\":11}\n"
				      "{\"type\":\"iter\",\"rank\":7,\"iter\":2,\"dur_us\":12,\"rank\":0}\n";
	static const uint32_t ranks[] = {1, 1, 2, 3, 4, 5, 6, 7, 0};
	static const int64_t durs[] = {3, 4, 5, 6, 7, 8, 10, 11, 12};
	struct iters it;
	memset(&it, 0, sizeof(it));
	struct jsonl_handler h = {&it, NULL, NULL, k_iter, NULL, NULL, NULL};
	char err[256] = "";
	const char *path = write_tmp(content, 0);
	int rc = jsonl_read(path, &h, NULL, err, sizeof(err));
	unlink(path);
	if (rc != 0)
		fail_msg("%s", err);
	assert_int_equal(it.n, 9);
	for (int i = 0; i < 9; i++) {
		assert_int_equal(it.rank[i], ranks[i]);
		assert_int_equal(it.dur[i], durs[i]);
	}
}

static void writer_round_trip(void **state)
{
	(void)state;
	char path[64];
	snprintf(path, sizeof(path), "/tmp/test_jsonl_w.%d.gz", (int)getpid());
	char err[128];
	struct jsonl_writer *w = jsonl_writer_open(path, 1, err, sizeof(err));
	assert_non_null(w);
	struct jsonl_job j = {.job = "a\"b", .world = 16, .tp = 2, .cp = 1, .pp = 2, .dp = 4, .ep = 2,
			      .gpus_per_node = 8, .order = "tp-cp-ep-dp-pp", .device = "cpu"};
	jsonl_write_job(w, &j);
	struct record_iter it = {3, 4, 5, 6};
	jsonl_write_iter(w, "a\"b", &it);
	struct record_phase ph = {3, 4, 0, RECORD_KIND_COMM, RECORD_GROUP_DP, RECORD_NO_START, 7};
	jsonl_write_phase(w, "a\"b", &ph, "dp_reduce_scatter");
	struct record_kernel k;
	memset(&k, 0, sizeof(k));
	k.rank = 3;
	k.count = 2;
	int64_t d[2] = {10, 20};
	jsonl_write_kernel(w, "a\"b", &k, "g", d, 2);
	jsonl_write_event(w, "a\"b", "node-0", "xid", 9, "oob", "79");
	assert_int_equal(jsonl_writer_close(w), 0);
	struct seen s;
	memset(&s, 0, sizeof(s));
	struct jsonl_handler h = {&s, s_job, s_host, s_iter, s_phase, s_kernel, s_event};
	uint64_t lines;
	assert_int_equal(jsonl_read(path, &h, &lines, err, sizeof(err)), 0);
	unlink(path);
	assert_int_equal(lines, 5);
	assert_string_equal(s.job, "a\"b");
	assert_string_equal(s.device, "cpu"); /* what the ranks run on, written and read back */
	assert_int_equal(s.dur, 6);
	assert_int_equal(s.group, RECORD_GROUP_DP);
	assert_int_equal(s.ndurs, 2);
	assert_int_equal(s.durs[1], 20);
	assert_string_equal(s.detail, "79");
}

/* members lines of iter records each, one gzip member per call: dur_us counts the lines */
static void gz_members(const char *path, int members, int lines)
{
	int d = 0;
	for (int m = 0; m < members; m++) {
		gzFile f = gzopen(path, m ? "ab" : "wb");
		assert_non_null(f);
		if (!m)
			gzputs(f, "{\"type\":\"job\",\"job\":\"J\",\"world\":8,\"dp\":8}\n");
		for (int i = 0; i < lines; i++, d++)
			gzprintf(f, "{\"type\":\"iter\",\"job\":\"J\",\"rank\":%d,\"iter\":%d,\"dur_us\":%d}\n", d % 8,
				 d / 8, d);
		gzclose(f);
	}
}

static char *slurp(const char *path, long *n)
{
	FILE *f = fopen(path, "rb");
	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	*n = ftell(f);
	rewind(f);
	char *b = malloc((size_t)*n);
	assert_non_null(b);
	assert_int_equal(fread(b, 1, (size_t)*n, f), (size_t)*n);
	fclose(f);
	return b;
}

static void spit(const char *path, const char *b, long n)
{
	FILE *f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(b, 1, (size_t)n, f), (size_t)n);
	fclose(f);
}

static int read_file(const char *path, struct seen *s, uint64_t *lines, char *err, size_t err_size)
{
	memset(s, 0, sizeof(*s));
	struct jsonl_handler h = {s, s_job, s_host, s_iter, s_phase, s_kernel, s_event};
	return jsonl_read(path, &h, lines, err, err_size);
}

/* gzip as zlib's gzread took it: several members (over many blocks), bytes after the last
 * member ignored, standard input; a truncated file and a bad CRC are errors. */
static void gzip_members_and_damage(void **state)
{
	(void)state;
	char path[64], err[256] = "";
	snprintf(path, sizeof(path), "/tmp/test_jsonl_gz.%d.gz", (int)getpid());
	struct seen s;
	uint64_t lines = 0;
	gz_members(path, 3, 40000); /* about 6 MB inflated: several 1 MiB blocks */
	FILE *f = fopen(path, "ab");
	assert_non_null(f);
	fputs("not gzip\n", f);
	fclose(f);
	assert_int_equal(read_file(path, &s, &lines, err, sizeof(err)), 0);
	assert_int_equal(lines, 120001);
	assert_int_equal(s.iters, 120000);
	assert_int_equal(s.dur, 119999);

	/* the same through standard input */
	int saved = dup(0);
	FILE *in = fopen(path, "rb");
	assert_non_null(in);
	assert_int_equal(dup2(fileno(in), 0), 0);
	int rc = read_file("-", &s, &lines, err, sizeof(err));
	dup2(saved, 0);
	close(saved);
	fclose(in);
	assert_int_equal(rc, 0);
	assert_int_equal(s.iters, 120000);
	assert_int_equal(s.dur, 119999);

	/* cut in the middle of the second member: the lines before it, then the error */
	long n;
	gz_members(path, 3, 40000);
	char *b = slurp(path, &n);
	spit(path, b, n / 2);
	assert_int_equal(read_file(path, &s, &lines, err, sizeof(err)), -1);
	char want[128];
	snprintf(want, sizeof(want), "%s:", path);
	if (strncmp(err, want, strlen(want)) != 0 || !strstr(err, "truncated gzip data"))
		fail_msg("truncated: got \"%s\"", err);
	assert_true(s.iters > 40000 && s.iters < 120000);

	/* a bit of the last member's CRC flipped */
	b[n - 6] ^= 1;
	spit(path, b, n);
	free(b);
	assert_int_equal(read_file(path, &s, &lines, err, sizeof(err)), -1);
	if (strncmp(err, want, strlen(want)) != 0 || !strstr(err, "incorrect data check"))
		fail_msg("bad crc: got \"%s\"", err);
	unlink(path);
}

/* text to the file (gzip or plain), counting its newlines into *line */
static void put(gzFile gz, FILE *f, const char *text, uint64_t *line)
{
	if (gz)
		assert_true(gzputs(gz, text) >= 0);
	else
		assert_true(fputs(text, f) != EOF);
	for (const char *c = text; *c; c++)
		*line += *c == '\n';
}

struct order {
	int64_t n, last, bad; /* iter records seen, the last dur_us, ones out of order */
	int stall;            /* pause 5 ms every 10,000 records: readahead holds every block */
};

static int o_iter(void *c, const struct record_iter *r, const char **why)
{
	struct order *o = c;
	o->bad += r->dur_us <= o->last;
	o->last = r->dur_us;
	o->n++;
	if (o->stall && o->n % 10000 == 0)
		usleep(5000);
	if (r->rank == 99) {
		*why = "rank 99 refused";
		return -1;
	}
	return 0;
}

/* A file of many blocks, read by several threads, reaches the handler in the file's order:
 * lines ending in \r\n, blank ones, one longer than a block, the last without a newline.
 * A bad line and a refused record deep in it are named by their line, after every record
 * before them and none after. Decoded by three decoder threads and the caller, then by no
 * decoder thread: the caller and readahead's thread, which decodes while the handler stalls
 * and every block is held. */
static void blocks_in_file_order(void **state)
{
	(void)state;
	const int n = 60000, long_at = 20000; /* iter records; the long one's index */
	for (int run = 0; run < 8; run++) {
		int variant = run % 4;
		jsonl_decoders = run < 4 ? 3 : -1;
		/* 0 plain, 1 gzip, 2 a bad line at record 50,000, 3 rank 99 at record 45,000 */
		char path[64];
		snprintf(path, sizeof(path), "/tmp/test_jsonl_order.%d%s", (int)getpid(), variant == 1 ? ".gz" : "");
		gzFile gz = variant == 1 ? gzopen(path, "wb1") : NULL;
		FILE *f = variant == 1 ? NULL : fopen(path, "w");
		assert_true(gz || f);
		char *pad = malloc(3u << 19);
		assert_non_null(pad);
		memset(pad, 'x', (3u << 19) - 1);
		pad[(3u << 19) - 1] = 0;
		uint64_t line = 1, bad_line = 0; /* the line being written, from 1 */
		put(gz, f, "{\"type\":\"job\",\"job\":\"J\",\"world\":128,\"dp\":128}\n", &line);
		for (int i = 1; i <= n; i++) {
			char buf[256];
			int rank = (variant == 3 && i == 45000) ? 99 : i % 64;
			if ((variant == 2 && i == 50000) || (variant == 3 && i == 45000))
				bad_line = line;
			if (variant == 2 && i == 50000)
				snprintf(buf, sizeof(buf), "{\"type\":\"iter\",\"rank\":1,\n");
			else if (i == long_at)
				snprintf(buf, sizeof(buf),
					 "{\"type\":\"iter\",\"rank\":%d,\"iter\":%d,\"dur_us\":%d,\"pad\":\"", rank,
					 i / 128, i);
			else
				snprintf(buf, sizeof(buf),
					 "{\"type\":\"iter\",\"rank\":%d,\"iter\":%d,\"dur_us\":%d}%s%s", rank, i / 128,
					 i, i % 7 ? "" : "\r",
					 i == n     ? ""
					 : i % 1000 ? "\n"
						    : "\n\n");
			put(gz, f, buf, &line);
			if (i == long_at) {
				put(gz, f, pad, &line);
				put(gz, f, "\"}\n", &line);
			}
		}
		free(pad);
		if (gz)
			gzclose(gz);
		else
			fclose(f);
		struct order o = {0, 0, 0, run >= 4};
		struct jsonl_handler h = {&o, NULL, NULL, o_iter, NULL, NULL, NULL};
		char err[256] = "";
		uint64_t lines = 0;
		int rc = jsonl_read(path, &h, &lines, err, sizeof(err));
		unlink(path);
		assert_int_equal(o.bad, 0);
		if (variant < 2) {
			if (rc != 0)
				fail_msg("%s", err);
			assert_int_equal(o.n, n);
			assert_int_equal(o.last, n);
			assert_int_equal(lines, line);
			continue;
		}
		assert_int_equal(rc, -1);
		char want[128];
		snprintf(want, sizeof(want), "%s:%llu: %s", path, (unsigned long long)bad_line,
			 variant == 2 ? "malformed JSON" : "rank 99 refused");
		if (strncmp(err, want, strlen(want)) != 0)
			fail_msg("got \"%s\", want \"%s\"", err, want);
		assert_int_equal(lines, bad_line);
		assert_int_equal(o.n, variant == 2 ? 49999 : 45000);
	}
	jsonl_decoders = 3;
}

/* A gzip file of two blocks, without decoder threads: readahead never holds every block, so
 * the caller decodes them all, woken by each block filled (without that wake-up, it waits
 * for the first block forever); ten reads. */
static void few_blocks_no_decoders(void **state)
{
	(void)state;
	char path[64];
	snprintf(path, sizeof(path), "/tmp/test_jsonl_few.%d.gz", (int)getpid());
	gzFile gz = gzopen(path, "wb1");
	assert_non_null(gz);
	assert_true(gzputs(gz, "{\"type\":\"job\",\"job\":\"J\",\"world\":64,\"dp\":64}\n") >= 0);
	const int n = 30000; /* 1.5 MB */
	for (int i = 1; i <= n; i++) {
		char buf[128];
		snprintf(buf, sizeof(buf), "{\"type\":\"iter\",\"rank\":%d,\"iter\":%d,\"dur_us\":%d}\n", i % 64,
			 i / 64, i);
		assert_true(gzputs(gz, buf) >= 0);
	}
	gzclose(gz);
	jsonl_decoders = -1;
	for (int run = 0; run < 10; run++) {
		struct order o = {0, 0, 0, 0};
		struct jsonl_handler h = {&o, NULL, NULL, o_iter, NULL, NULL, NULL};
		char err[256] = "";
		uint64_t lines = 0;
		if (jsonl_read(path, &h, &lines, err, sizeof(err)) != 0)
			fail_msg("%s", err);
		assert_int_equal(o.n, n);
		assert_int_equal(o.bad, 0);
		assert_int_equal(lines, n + 1);
	}
	jsonl_decoders = 3;
	unlink(path);
}

/* Every call a handler gets, as text: two reads are the same when their texts are. */
struct log {
	char *buf;
	size_t len, cap;
	int64_t n;
};

static void logf_(struct log *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void logf_(struct log *l, const char *fmt, ...)
{
	if (l->cap - l->len < 512) {
		l->cap = l->cap ? l->cap * 2 : 1 << 20;
		l->buf = realloc(l->buf, l->cap);
		assert_non_null(l->buf);
	}
	va_list ap;
	va_start(ap, fmt);
	l->len += (size_t)vsnprintf(l->buf + l->len, l->cap - l->len, fmt, ap);
	va_end(ap);
	l->n++;
}

static int l_iter(void *c, const struct record_iter *r, const char **why)
{
	(void)why;
	logf_(c, "I %u %u %lld %lld\n", r->rank, r->iter, (long long)r->start_us, (long long)r->dur_us);
	return 0;
}

static int l_phase(void *c, const struct record_phase *r, const char *name, const char **why)
{
	(void)why;
	logf_(c, "P %u %u %u [%s] %u %u %lld %lld\n", r->rank, r->iter, r->name, name, r->kind, r->group,
	      (long long)r->start_us, (long long)r->dur_us);
	return 0;
}

static int l_kernel(void *c, const struct record_kernel *r, const char *name, const int64_t *d, size_t n,
		    const char **why)
{
	(void)why;
	logf_(c, "K %u %u %u [%s] %u %u %lld %lld %lld %lld %lld %u n=%zu:", r->rank, r->iter, r->name, name, r->kind,
	      r->count, (long long)r->sum_us, (long long)r->min_us, (long long)r->max_us, (long long)r->p50_us,
	      (long long)r->p99_us, r->sketch_len, n);
	for (size_t i = 0; i < n; i++)
		logf_(c, " %lld", (long long)d[i]);
	logf_(c, "\n");
	return 0;
}

static uint64_t rng_next(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

/* a value from the edges or anywhere */
static int64_t draw(uint64_t *x, int64_t lo, int64_t hi)
{
	switch (rng_next(x) % 4) {
	case 0: return lo;
	case 1: return hi;
	case 2: return lo + (int64_t)(rng_next(x) % 3);
	default: return lo + (int64_t)(rng_next(x) % (uint64_t)(hi - lo));
	}
}

/* The lines the writer writes (read by their shape, client/jsonl_decode.c) and the same records in
 * another key order and spacing (read by the general parser) reach the handler as the same
 * calls: numbers at their limits, names many and alike (the decoders' memory of names), names
 * with escapes, every kind and group, kernels with and without durations. With pool names
 * (700, or 9 that come back as a job's do), two jobs' lines in turn when jobs is 2. */
static void shaped_lines_check(int pool, int jobs)
{
	char names[700][48];
	for (int i = 0; i < pool && i < 700; i++) {
		if (i % 100 == 7)
			snprintf(names[i], sizeof(names[i]), "q\"uote\\%d\xc3\xa9",
				 i); /* escapes: the general parser */
		else if (i % 3 == 0)
			snprintf(names[i], sizeof(names[i]), "ncclDevKernel_AllReduce_Sum_f32_RING_LL_%03d", i % 1000);
		else if (i % 3 == 1)
			snprintf(names[i], sizeof(names[i]), "%.*s", 1 + i % 9, "abcdefghij" + i % 2);
		else
			snprintf(names[i], sizeof(names[i]), "k%d_gemm", i);
	}
	char pa[64], pb[64], err[256];
	snprintf(pa, sizeof(pa), "/tmp/test_jsonl_shape_a.%d", (int)getpid());
	snprintf(pb, sizeof(pb), "/tmp/test_jsonl_shape_b.%d", (int)getpid());
	struct jsonl_writer *w = jsonl_writer_open(pa, 0, err, sizeof(err));
	assert_non_null(w);
	FILE *f = fopen(pb, "w");
	assert_non_null(f);
	uint64_t x = 88172645463325252ull;
	const int n = 30000;
	for (int i = 0; i < n; i++) {
		uint32_t rank = (uint32_t)draw(&x, 0, UINT32_MAX), iter = (uint32_t)draw(&x, 0, UINT32_MAX);
		int64_t start = draw(&x, -999999999999999999ll, 999999999999999999ll);
		int64_t dur = draw(&x, 0, 999999999999999999ll);
		int ni = (int)(rng_next(&x) % (uint64_t)pool);
		const char *name = names[ni];
		const char *job = jobs > 1 && rng_next(&x) % 3 == 0 ? "Jx" : "J";
		char esc[128];
		size_t e = 0;
		for (const char *c = name; *c; c++) {
			if (*c == '"' || *c == '\\')
				esc[e++] = '\\';
			esc[e++] = *c;
		}
		esc[e] = 0;
		int kind = (int)(rng_next(&x) % RECORD_KIND_COUNT), group = (int)(rng_next(&x) % RECORD_GROUP_COUNT);
		if (pool < 700 && rng_next(&x) % 8) { /* a name's kind and group, mostly */
			kind = ni % RECORD_KIND_COUNT;
			group = ni % RECORD_GROUP_COUNT;
		}
		switch (rng_next(&x) % 3) {
		case 0: {
			struct record_iter it = {rank, iter, start, dur};
			jsonl_write_iter(w, job, &it);
			fprintf(f,
				"{\"dur_us\": %lld, \"type\": \"iter\", \"rank\": %u, \"iter\": %u, \"start_us\": "
				"%lld}\n",
				(long long)dur, rank, iter, (long long)start);
			break;
		}
		case 1: {
			if (i % 50 == 0)
				start = RECORD_NO_START; /* no start_us: the general parser */
			struct record_phase ph = {rank, iter, 0, (uint8_t)kind, (uint8_t)group, start, dur};
			jsonl_write_phase(w, job, &ph, name);
			fprintf(f,
				"{\"dur_us\": %lld, \"type\": \"phase\", \"rank\": %u, \"iter\": %u, \"name\": \"%s\", "
				"\"kind\": \"%s\", \"group\": \"%s\"",
				(long long)dur, rank, iter, esc, record_kind_name(kind), record_group_name(group));
			if (start != RECORD_NO_START)
				fprintf(f, ", \"start_us\": %lld", (long long)start);
			fprintf(f, "}\n");
			break;
		}
		default: {
			struct record_kernel k;
			memset(&k, 0, sizeof(k));
			k.rank = rank;
			k.iter = iter;
			k.kind = (uint8_t)(kind % 2);
			k.count = (uint32_t)(rng_next(&x) % 3 ? 0 : draw(&x, 0, UINT32_MAX));
			int64_t d[10];
			size_t nd = rng_next(&x) % 11;
			for (size_t j = 0; j < nd; j++)
				d[j] = draw(&x, -999999999999999999ll, 999999999999999999ll);
			if (!nd) { /* a summary: the general parser */
				k.sum_us = 9;
				k.min_us = 1;
				k.max_us = 5;
				k.p50_us = 2;
				k.p99_us = 5;
			}
			jsonl_write_kernel(w, job, &k, name, d, nd);
			fprintf(f,
				"{\"kind\": \"%s\", \"type\": \"kernel\", \"rank\": %u, \"iter\": %u, \"name\": "
				"\"%s\", "
				"\"count\": %u",
				record_kind_name(k.kind), rank, iter, esc, k.count);
			if (nd) {
				fprintf(f, ", \"durs_us\": [");
				for (size_t j = 0; j < nd; j++)
					fprintf(f, "%s%lld", j ? ", " : "", (long long)d[j]);
				fprintf(f, "]}\n");
			} else {
				fprintf(f, ", \"sum_us\": 9, \"min_us\": 1, \"max_us\": 5, \"p50_us\": 2, \"p99_us\": "
					   "5}\n");
			}
		}
		}
	}
	assert_int_equal(jsonl_writer_close(w), 0);
	fclose(f);
	struct log la = {0}, lb = {0};
	struct jsonl_handler ha = {&la, NULL, NULL, l_iter, l_phase, l_kernel, NULL};
	struct jsonl_handler hb = {&lb, NULL, NULL, l_iter, l_phase, l_kernel, NULL};
	int ra = jsonl_read(pa, &ha, NULL, err, sizeof(err));
	if (ra)
		fail_msg("%s", err);
	int rb = jsonl_read(pb, &hb, NULL, err, sizeof(err));
	if (rb)
		fail_msg("%s", err);
	unlink(pa);
	unlink(pb);
	assert_true(la.len > 0);
	assert_int_equal(la.len, lb.len);
	for (size_t i = 0; i < la.len; i++)
		if (la.buf[i] != lb.buf[i]) {
			size_t s0 = i > 80 ? i - 80 : 0;
			fail_msg("first difference at byte %zu:\n%.160s\n%.160s", i, la.buf + s0, lb.buf + s0);
		}
	free(la.buf);
	free(lb.buf);
}

/* kernel line i has 1,000 durations (i + j) % 9 + 1: a block's durations outgrow the room
 * made for them with the records, in shaped lines and in lines the general parser reads */
struct durs_seen {
	int n, bad;
};

static int d_kernel(void *c, const struct record_kernel *r, const char *name, const int64_t *d, size_t n,
		    const char **why)
{
	(void)name;
	(void)why;
	struct durs_seen *o = c;
	int ok = r->iter == (uint32_t)o->n && n == 1000;
	for (size_t j = 0; ok && j < n; j++)
		ok = d[j] == (int64_t)((r->iter + j) % 9 + 1);
	o->bad += !ok;
	o->n++;
	return 0;
}

static void many_small_durations(void **state)
{
	(void)state;
	char path[64], err[256];
	snprintf(path, sizeof(path), "/tmp/test_jsonl_durs.%d", (int)getpid());
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	const int n = 3000;
	for (int i = 0; i < n; i++) {
		fprintf(f,
			i % 5 ? "{\"type\":\"kernel\",\"job\":\"J\",\"rank\":1,\"iter\":%d,\"name\":\"g\",\"kind\":"
				"\"compute\",\"count\":0,\"durs_us\":["
			      : "{\"type\": \"kernel\", \"rank\": 1, \"iter\": %d, \"name\": \"g\", \"kind\": "
				"\"compute\", \"durs_us\": [",
			i);
		for (int j = 0; j < 1000; j++)
			fprintf(f, "%s%d", j ? "," : "", (i + j) % 9 + 1);
		fprintf(f, "]}\n");
	}
	fclose(f);
	struct durs_seen o = {0, 0};
	struct jsonl_handler h = {&o, NULL, NULL, NULL, NULL, d_kernel, NULL};
	int rc = jsonl_read(path, &h, NULL, err, sizeof(err));
	unlink(path);
	if (rc)
		fail_msg("%s", err);
	assert_int_equal(o.n, n);
	assert_int_equal(o.bad, 0);
}

static void shaped_lines_read_as_any(void **state)
{
	(void)state;
	shaped_lines_check(700, 1);
}

/* a decoder's memory of the lines' text (client/jsonl_decode.c): few names, each mostly with one
 * kind and group, three of them alike in their first 40 bytes, lines of two jobs in turn */
static void repeating_lines_read_as_any(void **state)
{
	(void)state;
	shaped_lines_check(9, 1);
	shaped_lines_check(9, 2);
}

int main(void)
{
	jsonl_decoders = 3; /* blocks decoded out of order, applied in order, whatever the CPUs */
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(reads_everything),         cmocka_unit_test(errors_name_file_and_line),
		cmocka_unit_test(keys_in_any_order),        cmocka_unit_test(writer_round_trip),
		cmocka_unit_test(gzip_members_and_damage),  cmocka_unit_test(blocks_in_file_order),
		cmocka_unit_test(shaped_lines_read_as_any), cmocka_unit_test(repeating_lines_read_as_any),
		cmocka_unit_test(many_small_durations),     cmocka_unit_test(few_blocks_no_decoders),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
