/* culprit: the command-line tool. One function per subcommand behind a dispatch table. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "build_info.h"
#include "engine.h"
#include "import.h"
#include "jsonl.h"
#include "replay.h"
#include "sim.h"
#include "sim_stream.h"
#include "trace_cmd.h"

/* --- culprit diagnose --- */

struct ingest {
	struct engine *engine;
	struct store *store;
	char job[128];
	uint64_t records;
	int wide;  /* imported traces: more phase and kernel names per job (import.h) */
	int whole; /* timelines: no window → analyse the whole input (engine.h) */
};

static int on_job(void *ctx, const struct jsonl_job *j, const char **why)
{
	struct ingest *in = ctx;
	if (in->engine) {
		if (strcmp(in->job, j->job ? j->job : "") != 0 || store_topo(in->store)->world != j->world) {
			*why = "a second job in the same input (diagnose one job at a time)";
			return -1;
		}
		return 0;
	}
	struct topo t;
	static char msg[200];
	if (topo_init(&t, j->world, j->tp, j->cp, j->pp, j->dp, j->ep, j->order, j->gpus_per_node, msg, sizeof(msg)) <
	    0) {
		*why = msg;
		return -1;
	}
	struct engine_config cfg;
	memset(&cfg, 0, sizeof(cfg));
	cfg.diagnose_on_close = 1;
	cfg.store.one_shot = 1; /* the window is filled once, at full speed */
	if (in->wide) {
		/* traces: more names, and collectives shorter than a millisecond (import.h) */
		cfg.store.max_phases = 48;
		cfg.store.max_kernels = 256;
		diagnose_config_default(&cfg.diag);
		cfg.diag.l2.min_delta_ms = 0.1;
	}
	cfg.whole_input = in->whole;
	in->engine = engine_create(&t, &cfg);
	if (!in->engine) {
		*why = "out of memory for the window store";
		return -1;
	}
	in->store = engine_store(in->engine);
	snprintf(in->job, sizeof(in->job), "%s", j->job ? j->job : "");
	store_set_job(in->store, in->job);
	store_set_device(in->store, j->device);
	return 0;
}

static int need_job(struct ingest *in, const char **why)
{
	if (!in->engine) {
		*why = "record before the job line";
		return -1;
	}
	in->records++;
	return 0;
}

static int on_host(void *ctx, uint32_t rank, const char *host, const char **why)
{
	struct ingest *in = ctx;
	if (need_job(in, why) < 0)
		return -1;
	if (store_set_host(in->store, rank, host) < 0) {
		*why = "rank out of range";
		return -1;
	}
	return 0;
}

static int on_iter(void *ctx, const struct record_iter *r, const char **why)
{
	struct ingest *in = ctx;
	if (need_job(in, why) < 0)
		return -1;
	if (r->rank >= store_topo(in->store)->world) {
		*why = "rank out of range";
		return -1;
	}
	if (store_add_iter(in->store, r) < 0) {
		*why = "out of memory";
		return -1;
	}
	engine_poll(in->engine);
	return 0;
}

static int on_phase(void *ctx, const struct record_phase *r, const char *name, const char **why)
{
	struct ingest *in = ctx;
	if (need_job(in, why) < 0)
		return -1;
	if (r->rank >= store_topo(in->store)->world) {
		*why = "rank out of range";
		return -1;
	}
	struct record_phase p = *r;
	int id = store_intern_name(in->store, name);
	if (id < 0) {
		*why = "out of memory";
		return -1;
	}
	p.name = (uint32_t)id;
	if (store_add_phase(in->store, &p) < 0) {
		*why = "out of memory";
		return -1;
	}
	return 0;
}

static int on_kernel(void *ctx, const struct record_kernel *r, const char *name, const int64_t *durs, size_t nd,
		     const char **why)
{
	struct ingest *in = ctx;
	if (need_job(in, why) < 0)
		return -1;
	if (r->rank >= store_topo(in->store)->world) {
		*why = "rank out of range";
		return -1;
	}
	struct record_kernel k = *r;
	int id = store_intern_name(in->store, name);
	if (id < 0 || (k.name = (uint32_t)id, store_add_kernel(in->store, &k, durs, nd) < 0)) {
		*why = "out of memory";
		return -1;
	}
	return 0;
}

static int on_event(void *ctx, const char *host, const char *kind, int64_t ts, const char *source, const char *detail,
		    const char **why)
{
	struct ingest *in = ctx;
	if (need_job(in, why) < 0)
		return -1;
	if (store_add_event(in->store, host, kind, ts, source, detail) < 0) {
		*why = "out of memory";
		return -1;
	}
	return 0;
}

static void diagnose_usage(FILE *f)
{
	fprintf(f, "usage: culprit diagnose [--format auto|jsonl|kineto|chrome|csv] [--meta FILE]\n"
		   "                        [--pp N] [--tp N] [--text] PATH...\n");
}

static int cmd_diagnose(int argc, char **argv)
{
	const char *format = "auto";
	int text = 0;
	static const struct option opts[] = {
		{"format", required_argument, NULL, 'f'},
		{"text", no_argument, NULL, 't'},
		{"meta", required_argument, NULL, 'm'},
		{"pp", required_argument, NULL, 'P'},
		{"tp", required_argument, NULL, 'T'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	struct import_options iopt;
	memset(&iopt, 0, sizeof(iopt));
	iopt.warn = import_warn_stderr;
	iopt.warn_ctx = (void *)"culprit diagnose";
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "f:th", opts, NULL)) != -1) {
		switch (c) {
		case 'f': format = optarg; break;
		case 'm': iopt.meta = optarg; break;
		case 'P':
		case 'T': {
			char *end;
			unsigned long v = strtoul(optarg, &end, 10);
			if (*end || v < 1 || v > 65536) {
				fprintf(stderr, "culprit diagnose: --%s wants a number from 1 to 65536\n",
					c == 'P' ? "pp" : "tp");
				return 2;
			}
			if (c == 'P')
				iopt.pp = (uint32_t)v;
			else
				iopt.tp = (uint32_t)v;
			break;
		}
		case 't': text = 1; break;
		case 'h': diagnose_usage(stdout); return 0;
		default: diagnose_usage(stderr); return 2;
		}
	}
	int fmt = import_format_parse(format);
	if (fmt < 0) {
		fprintf(stderr, "culprit diagnose: unknown format \"%s\"\n", format);
		return 2;
	}
	if (optind >= argc) {
		diagnose_usage(stderr);
		return 2;
	}
	char err[1024], **paths;
	size_t npaths;
	if (import_expand((const char *const *)argv + optind, (size_t)(argc - optind), &iopt, &paths, &npaths, err,
			  sizeof(err)) < 0) {
		fprintf(stderr, "culprit diagnose: %s\n", err);
		return 2;
	}
	struct ingest in;
	memset(&in, 0, sizeof(in));
	int first = fmt;
	if (fmt == IMPORT_AUTO) {
		char e[512];
		first = strcmp(paths[0], "-") != 0 ? (int)import_detect(paths[0], e, sizeof(e)) : IMPORT_JSONL;
	}
	in.wide = first > IMPORT_JSONL;
	in.whole = first == IMPORT_CHROME;
	struct jsonl_handler h = {&in, on_job, on_host, on_iter, on_phase, on_kernel, on_event};
	int rc = 0;
	if (import_read((enum import_format)fmt, (const char *const *)paths, npaths, &iopt, &h, err, sizeof(err)) < 0) {
		fprintf(stderr, "culprit diagnose: %s\n", err);
		rc = 2;
	}
	free(paths);
	if (!rc && !in.engine) {
		fprintf(stderr, "culprit diagnose: no job line in the input\n");
		rc = 2;
	}
	if (rc) {
		engine_destroy(in.engine);
		return rc;
	}
	struct report rep;
	if (engine_finish(in.engine, &rep) < 0) {
		fprintf(stderr, "culprit diagnose: out of memory\n");
		engine_destroy(in.engine);
		return 1;
	}
	if (text) {
		char *s = report_to_text(&rep);
		if (s)
			fputs(s, stdout);
		free(s);
	} else {
		json_t *o = report_to_json(&rep);
		char *s = o ? json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10)) : NULL;
		if (s)
			printf("%s\n", s);
		free(s);
		json_decref(o);
	}
	report_free(&rep);
	engine_destroy(in.engine);
	return 0;
}

/* --- culprit sim --- */

struct sim_out {
	struct jsonl_writer *w;
	const char *job;
	const char *const *names;
};

static int out_job(void *ctx, const struct jsonl_job *job)
{
	struct sim_out *o = ctx;
	o->job = job->job;
	jsonl_write_job(o->w, job);
	return 0;
}

static int out_rank_iter(void *ctx, const struct sim_rank_iter *ri)
{
	struct sim_out *o = ctx;
	jsonl_write_iter(o->w, o->job, &ri->iter);
	for (size_t p = 0; p < ri->nphases; p++)
		jsonl_write_phase(o->w, o->job, &ri->phases[p], o->names[ri->phases[p].name]);
	for (size_t k = 0; k < ri->nkernels; k++)
		jsonl_write_kernel(o->w, o->job, &ri->kernels[k], o->names[ri->kernels[k].name], ri->kernel_durs[k],
				   ri->kernel_ndurs[k]);
	return 0;
}

static int out_host(void *ctx, uint32_t rank, const char *host)
{
	struct sim_out *o = ctx;
	jsonl_write_host(o->w, o->job, rank, host);
	return 0;
}

static int out_event(void *ctx, const char *host, const char *kind, int64_t ts, const char *source, const char *detail)
{
	struct sim_out *o = ctx;
	jsonl_write_event(o->w, o->job, host, kind, ts, source, detail);
	return 0;
}

static void sim_usage(FILE *f)
{
	fprintf(f,
		"usage: culprit sim --scenario NAME [--seed N] [--iters N] [--kernels N] (--out FILE | --server "
		"HOST:PORT)\n"
		"  --kernels N  kernel names per rank, 3 to %d (default 3)\n"
		"scenarios:",
		SIM_MAX_KERNELS);
	for (const char *const *s = sim_scenarios(); *s; s++)
		fprintf(f, " %s", *s);
	fprintf(f, "\n");
}

static int parse_u64(const char *s, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s || *end || s[0] == '-')
		return -1;
	*out = v;
	return 0;
}

static int cmd_sim(int argc, char **argv)
{
	struct sim_options opt;
	memset(&opt, 0, sizeof(opt));
	const char *out = NULL;
	/* streaming to culpritd: client/sim_stream.c */
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--server") == 0 || strncmp(argv[i], "--server=", 9) == 0)
			return sim_stream_main(argc, argv);
	static const struct option opts[] = {
		{"scenario", required_argument, NULL, 's'}, {"seed", required_argument, NULL, 'S'},
		{"iters", required_argument, NULL, 'i'},    {"kernels", required_argument, NULL, 'k'},
		{"out", required_argument, NULL, 'o'},      {"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	int c;
	uint64_t v;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 's': opt.scenario = optarg; break;
		case 'S':
			if (parse_u64(optarg, &opt.seed) < 0) {
				fprintf(stderr, "culprit sim: invalid --seed \"%s\"\n", optarg);
				return 2;
			}
			break;
		case 'i':
			if (parse_u64(optarg, &v) < 0 || v < 1 || v > 1000000) {
				fprintf(stderr, "culprit sim: invalid --iters \"%s\"\n", optarg);
				return 2;
			}
			opt.iters = (uint32_t)v;
			break;
		case 'k':
			if (parse_u64(optarg, &v) < 0 || v < 3 || v > SIM_MAX_KERNELS) {
				fprintf(stderr, "culprit sim: invalid --kernels \"%s\"\n", optarg);
				return 2;
			}
			opt.kernels = (uint32_t)v;
			break;
		case 'o': out = optarg; break;
		case 'h': /* both ways: to a file, and streamed to culpritd (sim_stream.c) */
			sim_usage(stdout);
			printf("\nstreaming to culpritd:\n");
			return sim_stream_main(2, (char *[]){(char *)"sim", (char *)"--help", NULL});
		default: sim_usage(stderr); return 2;
		}
	}
	if (!opt.scenario || !out || optind != argc) {
		if (!opt.scenario)
			fprintf(stderr, "culprit sim: --scenario NAME is missing\n");
		else if (!out)
			fprintf(stderr, "culprit sim: --out FILE or --server HOST:PORT is missing (where the records go)\n");
		else
			fprintf(stderr, "culprit sim: unexpected argument \"%s\"\n", argv[optind]);
		sim_usage(stderr);
		return 2;
	}
	int known = 0;
	for (const char *const *s = sim_scenarios(); *s; s++)
		known |= strcmp(*s, opt.scenario) == 0;
	if (!known) {
		fprintf(stderr, "culprit sim: unknown scenario \"%s\"\n", opt.scenario);
		sim_usage(stderr);
		return 2;
	}
	size_t len = strlen(out);
	int gz = len > 3 && strcmp(out + len - 3, ".gz") == 0;
	char err[256];
	struct sim_out so;
	memset(&so, 0, sizeof(so));
	so.names = sim_names(NULL);
	so.w = jsonl_writer_open(out, gz, err, sizeof(err));
	if (!so.w) {
		fprintf(stderr, "culprit sim: %s\n", err);
		return 1;
	}
	struct sim_sink sink = {.ctx = &so, .job = out_job, .rank_iter = out_rank_iter, .host = out_host, .event = out_event};
	int rc = sim_run(&opt, &sink, err, sizeof(err));
	if (jsonl_writer_close(so.w) < 0 && !rc) {
		fprintf(stderr, "culprit sim: could not write \"%s\"\n", out);
		return 1;
	}
	if (rc < 0) {
		fprintf(stderr, "culprit sim: %s\n", err);
		return 1;
	}
	return 0;
}

/* --- culprit replay: client/replay.c --- */

struct command {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *help;
};

static const struct command commands[] = {
	{"diagnose", cmd_diagnose, "diagnose interchange files and print the report"},
	{"sim", cmd_sim, "generate a simulated job with a known fault"},
	{"replay", replay_main, "stream interchange files to culpritd as agents"},
	{"trace", trace_cmd_main, "fetch a Perfetto or Chrome trace of chosen ranks from culpritd"},
	{"capture", capture_cmd_main, "ask the agents of chosen ranks for raw kernel events"},
};

static void usage(FILE *f)
{
	fprintf(f, "usage: culprit COMMAND [ARGS...] | --version\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(*commands); i++)
		fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].help);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "--version")) {
		printf("culprit %s (commit %s, %s build)\n", CULPRIT_VERSION, CULPRIT_COMMIT, CULPRIT_BUILD_TYPE);
		return 0;
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(*commands); i++)
		if (strcmp(argv[1], commands[i].name) == 0)
			return commands[i].run(argc - 1, argv + 1);
	fprintf(stderr, "culprit: unknown command \"%s\"\n", argv[1]);
	usage(stderr);
	return 2;
}
