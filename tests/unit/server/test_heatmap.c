/* test_heatmap.c: the heat map's encoding (server/heatmap.c), decoded back as the console does
 * (console/heatmap.js): the header and its arrays; a cell's byte is its ratio to the median of
 * the rank's role group in that iteration (log scale, 0 for a value not reported); rows a rank
 * each in group order, or past HEATMAP_CELLS_MAX cells one per group (their worst cell), and one
 * per run of groups past HEATMAP_ROWS_MAX groups; rows=A-B narrows to those rank rows; gzip
 * gives the same bytes back. Table-driven over the shapes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>
#include <math.h>
#include <zlib.h>

#include "heatmap.h"

struct decoded {
	json_t *meta;
	uint32_t rows, iters, roles, ib;
	const uint32_t *rank;
	const float *med;
	const uint8_t *cells;
	const uint8_t *host, *role; /* index arrays (ib bytes each) */
};

static uint32_t idx(const uint8_t *a, uint32_t ib, uint32_t i)
{
	uint32_t v = 0;

	memcpy(&v, a + (size_t)i * ib, ib);
	return v;
}

static void decode(const char *b, size_t len, struct decoded *d)
{
	uint32_t jl;
	size_t off;

	assert_true(len > 8 && memcmp(b, "CHM1", 4) == 0);
	memcpy(&jl, b + 4, 4);
	d->meta = json_loadb(b + 8, jl, 0, NULL);
	assert_non_null(d->meta);
	d->rows = (uint32_t)json_integer_value(json_object_get(d->meta, "rows"));
	d->iters = (uint32_t)json_integer_value(json_object_get(d->meta, "n_iters"));
	d->roles = (uint32_t)json_integer_value(json_object_get(d->meta, "n_roles"));
	d->ib = (uint32_t)json_integer_value(json_object_get(d->meta, "index_bytes"));
	off = (8 + jl + 3) & ~(size_t)3;
	d->rank = (const uint32_t *)(b + off);
	off += 4 * (size_t)d->rows;
	d->med = (const float *)(b + off);
	off += 4 * (size_t)d->roles * d->iters;
	d->host = (const uint8_t *)b + off;
	off = (off + (size_t)d->ib * d->rows + 3) & ~(size_t)3;
	d->role = (const uint8_t *)b + off;
	off = (off + (size_t)d->ib * d->rows + 3) & ~(size_t)3;
	d->cells = (const uint8_t *)b + off;
	assert_int_equal(off + (size_t)d->rows * d->iters, len);
}

static double ratio(uint8_t code)
{
	return code ? pow(2, HEATMAP_LOG2_LO + (code - 1) / 254.0 * (HEATMAP_LOG2_HI - HEATMAP_LOG2_LO)) : NAN;
}

/* world ranks, 8 a node, role group = rank % roles; every value 1000 us but the slow rank's
 * (slow_x times); rank missing reports nothing */
static void fill(struct heatmap_data *d, uint32_t world, uint32_t iters, uint32_t roles, uint32_t slow, double slow_x,
		 uint32_t missing)
{
	char name[32];

	memset(d, 0, sizeof(*d));
	snprintf(d->job, sizeof(d->job), "j");
	snprintf(d->metric, sizeof(d->metric), "mlp");
	assert_int_equal(heatmap_data_alloc(d, world, iters, 0), 0);
	d->n_roles = roles;
	for (uint32_t n = 0; n < (world + 7) / 8; n++) {
		snprintf(name, sizeof(name), "node-%u", n);
		assert_int_equal(heatmap_add_host(d, name), n);
	}
	for (uint32_t r = 0; r < world; r++) {
		d->role[r] = r % roles;
		d->host[r] = d->key[r] = r / 8;
		for (uint32_t i = 0; i < iters; i++) {
			d->step[(size_t)r * iters + i] = 2000;
			d->value[(size_t)r * iters + i] = r == missing ? HEATMAP_NONE
							  : r == slow  ? (uint32_t)(1000 * slow_x)
								       : 1000;
		}
	}
	assert_int_equal(heatmap_add_culprit(d, slow), 0);
	assert_int_equal(heatmap_add_phase(d, "mlp"), 0);
}

static const struct shape {
	const char *what;
	uint32_t world, iters, roles, slow;
	double slow_x;
	int rows_from, rows_to; /* -1: all */
	uint32_t want_rows;
	int aggregated;
} shapes[] = {
	{"a row per rank", 16, 4, 2, 3, 3.0, -1, -1, 16, 0},
	{"a row per node past 900,000 cells", 16000, 64, 4, 9001, 5.0, -1, -1, 2000, 1},
	{"a row per run of nodes past 2,000 nodes", 100000, 64, 9, 54321, 5.0, -1, -1, 1786, 1},
	{"rows A-B of a large one: its ranks", 100000, 64, 9, 54321, 5.0, 54320, 54327, 8, 0},
	{"a slow rank below its peers", 64, 8, 1, 7, 0.5, -1, -1, 64, 0},
};

static void test_shapes(void **state)
{
	(void)state;
	for (size_t k = 0; k < sizeof(shapes) / sizeof(shapes[0]); k++) {
		const struct shape *s = &shapes[k];
		struct heatmap_data d;
		struct decoded x;
		size_t len = 0;
		int gz = 1, seen_slow = 0;
		char *b;
		uint32_t missing = s->slow + 1;

		fprintf(stderr, "%s\n", s->what);
		fill(&d, s->world, s->iters, s->roles, s->slow, s->slow_x, missing);
		if (s->rows_from >= 0) {
			d.has_rows = 1;
			d.row_from = (uint32_t)s->rows_from;
			d.row_to = (uint32_t)s->rows_to;
		}
		b = heatmap_encode(&d, &len, &gz);
		assert_non_null(b);
		assert_int_equal(gz, 0);
		decode(b, len, &x);
		assert_int_equal(x.rows, s->want_rows);
		assert_int_equal(json_is_true(json_object_get(x.meta, "aggregated")), s->aggregated);
		assert_int_equal(x.iters, s->iters);
		/* the role groups' medians: 1 ms */
		for (uint32_t g = 0; g < x.roles * x.iters; g++)
			assert_true(fabs(x.med[g] - 1.0) < 1e-6);
		for (uint32_t r = 0; r < x.rows; r++) {
			int slow_row, missing_row;

			if (s->aggregated) { /* the group's rows: [first, rows, culprits, label] */
				json_t *g = json_array_get(json_object_get(x.meta, "groups"), r);
				uint32_t first = (uint32_t)json_integer_value(json_array_get(g, 0)),
					 n = (uint32_t)json_integer_value(json_array_get(g, 1));

				slow_row = s->slow >= first && s->slow < first + n; /* ranks in node order */
				missing_row = 0;
				assert_int_equal(json_integer_value(json_array_get(g, 2)), slow_row);
			} else {
				slow_row = x.rank[r] == s->slow;
				missing_row = x.rank[r] == missing;
				assert_int_equal(
					idx(x.host, x.ib, r),
					0 + (x.rank[r] / 8 - (s->rows_from >= 0 ? (uint32_t)s->rows_from / 8 : 0)));
				assert_int_equal(idx(x.role, x.ib, r), x.rank[r] % s->roles);
			}
			for (uint32_t i = 0; i < x.iters; i++) {
				uint8_t c = x.cells[(size_t)r * x.iters + i];

				if (missing_row)
					assert_int_equal(c, 0);
				else if (slow_row)
					assert_true(fabs(ratio(c) / s->slow_x - 1) < 0.01);
				else
					assert_true(fabs(ratio(c) - 1) < 0.01);
			}
			seen_slow += slow_row;
		}
		assert_int_equal(seen_slow, 1);
		/* gzip: the same bytes */
		{
			size_t zlen = 0;
			char *z, *out = malloc(len);
			uLongf n = (uLongf)len;
			z_stream zs;

			d.gzip = 1;
			z = heatmap_encode(&d, &zlen, &gz);
			assert_int_equal(gz, 1);
			memset(&zs, 0, sizeof(zs));
			assert_int_equal(inflateInit2(&zs, 15 + 16), Z_OK);
			zs.next_in = (Bytef *)z;
			zs.avail_in = (uInt)zlen;
			zs.next_out = (Bytef *)out;
			zs.avail_out = (uInt)n;
			assert_int_equal(inflate(&zs, Z_FINISH), Z_STREAM_END);
			assert_int_equal(zs.total_out, len);
			assert_memory_equal(out, b, len);
			inflateEnd(&zs);
			free(out);
			free(z);
		}
		json_decref(x.meta);
		free(b);
		heatmap_data_free(&d);
	}
}

static void test_groups(void **state)
{
	struct heatmap_data d;
	struct decoded x;
	size_t len;
	int gz;
	char *b;

	(void)state;
	fill(&d, 32, 2, 1, 17, 4.0, UINT32_MAX);
	d.group = HEATMAP_BY_STAGE;
	for (uint32_t r = 0; r < 32; r++)
		d.key[r] = r % 2; /* two stages, interleaved ranks */
	b = heatmap_encode(&d, &len, &gz);
	decode(b, len, &x);
	/* stage 0's ranks (even) first, by host then rank; then stage 1's */
	for (uint32_t r = 0; r < 32; r++)
		assert_int_equal(x.rank[r], r < 16 ? 2 * r : 2 * (r - 16) + 1);
	assert_int_equal(json_array_size(json_object_get(x.meta, "groups")), 2);
	assert_string_equal(json_string_value(json_array_get(json_array_get(json_object_get(x.meta, "groups"), 1), 3)),
			    "pp 1");
	assert_int_equal(json_integer_value(json_array_get(json_array_get(json_object_get(x.meta, "groups"), 1), 2)),
			 1);
	json_decref(x.meta);
	free(b);
	heatmap_data_free(&d);
	assert_int_equal(heatmap_group_parse("dp"), HEATMAP_BY_DP);
	assert_int_equal(heatmap_group_parse("rack"), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_shapes),
		cmocka_unit_test(test_groups),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
