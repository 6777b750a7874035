/* bench_heatmap: the heat map's encoding (server/heatmap.c) on a query worker, alone: a job of
 * 12,960 ranks (case5's shape: 9 role groups, 1,620 nodes) and one of 100,000 ranks (12,500
 * nodes), 64 iterations each, one rank 5x slow. Prints for each the rows sent, the body's
 * bytes (raw and gzip'd) and the encoding's time (median of 7 runs). The gathering on the
 * event loop and the answer end to end: tests/bench/bench_console.sh.
 *
 *   cmake -S . -B build/rel -DCMAKE_BUILD_TYPE=Release && cmake --build build/rel -j2 --target bench_heatmap
 *   build/rel/tests/bench/bench_heatmap */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "benchutil.h"
#include "heatmap.h"

#define RUNS 7

static void fill(struct heatmap_data *d, uint32_t world, uint32_t roles, uint32_t iters)
{
	char name[32];

	memset(d, 0, sizeof(*d));
	snprintf(d->job, sizeof(d->job), "bench");
	snprintf(d->metric, sizeof(d->metric), "mlp");
	if (heatmap_data_alloc(d, world, iters, 0) < 0) {
		fprintf(stderr, "out of memory\n");
		exit(1);
	}
	d->n_roles = roles;
	for (uint32_t n = 0; n < world / 8; n++) {
		snprintf(name, sizeof(name), "node-%u", n);
		heatmap_add_host(d, name);
	}
	for (uint32_t r = 0; r < world; r++) {
		d->role[r] = r / (world / roles);
		d->host[r] = d->key[r] = r / 8;
		for (uint32_t i = 0; i < iters; i++) {
			uint32_t jitter = (r * 2654435761u + i * 40503u) % 600;

			d->step[(size_t)r * iters + i] = 30000000 + jitter * 100;
			d->value[(size_t)r * iters + i] = (r == world * 4 / 5 ? 5 : 1) * (12800000 + jitter * 1000);
		}
	}
	if (heatmap_add_culprit(d, world * 4 / 5) < 0) {
		fprintf(stderr, "bench_heatmap: out of memory\n");
		exit(1);
	}
}

static void one(uint32_t world, uint32_t roles, uint32_t iters)
{
	struct heatmap_data d;
	double ms[RUNS], zms[RUNS];
	size_t len = 0, zlen = 0;
	int gz;
	json_t *meta;
	uint32_t jl;
	char *b = NULL;

	fill(&d, world, roles, iters);
	for (int k = 0; k < RUNS; k++) {
		double t = now_s();

		d.gzip = 0;
		free(b);
		b = heatmap_encode(&d, &len, &gz);
		ms[k] = (now_s() - t) * 1000;
		t = now_s();
		d.gzip = 1;
		free(heatmap_encode(&d, &zlen, &gz));
		zms[k] = (now_s() - t) * 1000;
	}
	memcpy(&jl, b + 4, 4);
	meta = json_loadb(b + 8, jl, 0, NULL);
	printf("%u ranks x %u iterations: %lld rows (%s), %zu bytes (%.2f MB), gzip'd %zu bytes; encoded in %.1f ms, "
	       "with gzip %.1f ms (medians of %d)\n",
	       world, iters, (long long)json_integer_value(json_object_get(meta, "rows")),
	       json_is_true(json_object_get(meta, "aggregated")) ? "aggregated" : "a row per rank", len, len / 1e6,
	       zlen, median(ms, RUNS), median(zms, RUNS), RUNS);
	json_decref(meta);
	free(b);
	heatmap_data_free(&d);
}

int main(void)
{
	one(12960, 9, 64);
	one(100000, 10, 64);
	return 0;
}
