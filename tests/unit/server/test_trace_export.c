/* test_trace_export.c: server/trace_export.c on hand-made timelines (strict nesting by
 * clipping, overlapping iterations of one rank kept whole, Chrome metadata and time origin, Perfetto BEGIN/END balance per track, JSON
 * escaping, an empty trace) and the ranks parameter parser of api_trace.c, table-driven. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "api_trace.h"
#include "perfetto_trace.pb-c.h"
#include "record.h"
#include "trace_export.h"

#define T0 1796207474000000LL /* the job's start */

static char *dup(const char *s)
{
	char *d = strdup(s);

	assert_non_null(d);
	return d;
}

/* Ranks 0 and 1 on node-a, rank 8 on node-b. Rank 0: iteration 3 over [T0+1000, +100): phase
 * "fwd" [+0, 40), "bwd" [+40, 120) (ends 20 after its iteration: clipped to 60), "opt"
 * zero-length at the iteration's end (after it, not inside); kernels on stream 3: [+10, 30)
 * and [+20, 30) (overlapping: the second is clipped to 20). Rank 8: one iteration. An incident
 * and a port_down on node-b. */
static void build(struct trace_data *d)
{
	static const char *const names[] = {"fwd", "bwd \"x\" \\ y\n", "opt", "sm90_gemm"};
	struct trace_slice s[] = {
		{.rank = 8, .iter = 3, .start_us = T0 + 5000, .dur_us = 50, .type = TRACE_SLICE_ITER, .start_known = 1},
		{.rank = 0,
		 .iter = 3,
		 .start_us = T0 + 1040,
		 .dur_us = 80,
		 .name = 1,
		 .type = TRACE_SLICE_PHASE,
		 .kind = RECORD_KIND_COMPUTE,
		 .start_known = 1},
		{.rank = 0,
		 .iter = 3,
		 .start_us = T0 + 1000,
		 .dur_us = 100,
		 .type = TRACE_SLICE_ITER,
		 .start_known = 1},
		{.rank = 0,
		 .iter = 3,
		 .start_us = T0 + 1000,
		 .dur_us = 40,
		 .name = 0,
		 .type = TRACE_SLICE_PHASE,
		 .kind = RECORD_KIND_COMPUTE,
		 .start_known = 1},
		{.rank = 0,
		 .iter = 3,
		 .start_us = T0 + 1100,
		 .dur_us = 0,
		 .name = 2,
		 .type = TRACE_SLICE_PHASE,
		 .kind = RECORD_KIND_HOST,
		 .start_known = 0},
		{.rank = 0,
		 .iter = 3,
		 .start_us = T0 + 1010,
		 .dur_us = 30,
		 .name = 3,
		 .type = TRACE_SLICE_KERNEL,
		 .stream = 3,
		 .start_known = 1},
		{.rank = 0,
		 .iter = 3,
		 .start_us = T0 + 1020,
		 .dur_us = 30,
		 .name = 3,
		 .type = TRACE_SLICE_KERNEL,
		 .stream = 3,
		 .start_known = 1},
	};

	memset(d, 0, sizeof(*d));
	snprintf(d->job, sizeof(d->job), "J");
	d->world = 16;
	d->job_start_us = T0;
	d->from_iter = d->to_iter = 3;
	d->n_ranks = 3;
	d->ranks = calloc(3, sizeof(*d->ranks));
	assert_non_null(d->ranks);
	d->ranks[0] = (struct trace_rank){.rank = 0, .host = "node-a", .known = 1};
	d->ranks[1] = (struct trace_rank){.rank = 1, .host = "node-a", .known = 1};
	d->ranks[2] = (struct trace_rank){.rank = 8, .pp = 1, .host = "node-b", .known = 1};
	d->n_names = 4;
	d->names = calloc(4, sizeof(char *));
	assert_non_null(d->names);
	for (int i = 0; i < 4; i++)
		d->names[i] = dup(names[i]);
	d->n_slices = d->cap_slices = sizeof(s) / sizeof(s[0]);
	d->slices = malloc(sizeof(s));
	assert_non_null(d->slices);
	memcpy(d->slices, s, sizeof(s));
	d->n_instants = d->cap_instants = 2;
	d->instants = calloc(2, sizeof(*d->instants));
	assert_non_null(d->instants);
	d->instants[0] =
		(struct trace_instant){T0 + 1000, dup("compute_degradation"), dup("slow \"mlp\"\tthere"), NULL, 4};
	d->instants[1] = (struct trace_instant){T0 + 900, dup("port_down"), dup("oob: eth3"), dup("node-b"), 9};
}

static json_t *find_x(json_t *ev, const char *name, int64_t ts)
{
	size_t i;
	json_t *e;

	json_array_foreach(ev, i, e)
	{
		if (strcmp(json_string_value(json_object_get(e, "ph")), "X") == 0 &&
		    strcmp(json_string_value(json_object_get(e, "name")), name) == 0 &&
		    json_integer_value(json_object_get(e, "ts")) == ts)
			return e;
	}
	return NULL;
}

/* The X event name at ts: its dur, and clipped with its measured duration (measured >= 0)
 * or not clipped (measured < 0). */
static json_t *expect_x(json_t *ev, const char *name, int64_t ts, int64_t dur, int64_t measured)
{
	json_t *e = find_x(ev, name, ts), *args;

	assert_non_null(e);
	args = json_object_get(e, "args");
	assert_int_equal(json_integer_value(json_object_get(e, "dur")), dur);
	if (measured < 0) {
		assert_null(json_object_get(args, "clipped"));
	} else {
		assert_true(json_is_true(json_object_get(args, "clipped")));
		assert_int_equal(json_integer_value(json_object_get(args, "dur_us")), measured);
	}
	return e;
}

static int count_meta(json_t *ev, const char *what, int pid, int tid)
{
	size_t i;
	json_t *e;
	int n = 0;

	json_array_foreach(ev, i, e)
	{
		if (strcmp(json_string_value(json_object_get(e, "ph")), "M") == 0 &&
		    strcmp(json_string_value(json_object_get(e, "name")), what) == 0 &&
		    json_integer_value(json_object_get(e, "pid")) == pid &&
		    (tid < 0 || json_integer_value(json_object_get(e, "tid")) == tid))
			n++;
	}
	return n;
}

static void test_chrome(void **state)
{
	struct trace_data d;
	char *out;
	size_t len;
	json_error_t err;
	json_t *j, *ev, *e;

	(void)state;
	build(&d);
	assert_int_equal(trace_export(&d, TRACE_FORMAT_CHROME, &out, &len), 0);
	j = json_loadb(out, len, 0, &err);
	if (!j)
		fail_msg("not JSON: %s: %.*s", err.text, (int)len, out);
	free(out);
	ev = json_object_get(j, "traceEvents");
	assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "otherData"), "job_start_us")), T0);
	/* hosts in rank order, ranks as threads under them, a kernel thread */
	assert_int_equal(count_meta(ev, "process_name", 1, -1), 1);
	assert_int_equal(count_meta(ev, "process_name", 2, -1), 1);
	assert_int_equal(count_meta(ev, "thread_name", 1, trace_export_tid(0)), 1);
	assert_int_equal(count_meta(ev, "thread_name", 1, trace_export_tid(1)), 1);
	assert_int_equal(count_meta(ev, "thread_name", 2, trace_export_tid(8)), 1);
	assert_int_equal(count_meta(ev, "thread_name", 1, trace_export_kernel_tid(0, 3)), 1);
	/* ts from the job's start; the iteration whole */
	e = find_x(ev, "iteration 3", 1000);
	assert_non_null(e);
	assert_int_equal(json_integer_value(json_object_get(e, "dur")), 100);
	assert_int_equal(json_integer_value(json_object_get(e, "tid")), trace_export_tid(0));
	/* the phase past its iteration's end: clipped, measured duration kept; name escaped */
	expect_x(ev, "bwd \"x\" \\ y\n", 1040, 60, 80);
	/* a phase inside: not clipped */
	expect_x(ev, "fwd", 1000, 40, -1);
	/* a zero-length phase placed at the end: its own, start unknown */
	e = find_x(ev, "opt", 1100);
	assert_non_null(e);
	assert_true(json_is_false(json_object_get(json_object_get(e, "args"), "start_known")));
	/* overlapping kernels of one stream: the second cut at the first's end */
	e = find_x(ev, "sm90_gemm", 1020);
	assert_non_null(e);
	assert_int_equal(json_integer_value(json_object_get(e, "dur")), 20);
	assert_int_equal(json_integer_value(json_object_get(e, "tid")), trace_export_kernel_tid(0, 3));
	/* instants: the incident job-wide, the event on its host's process */
	{
		size_t i;
		int inc = 0, evt = 0;

		json_array_foreach(ev, i, e)
		{
			if (strcmp(json_string_value(json_object_get(e, "ph")), "i") != 0)
				continue;
			if (strcmp(json_string_value(json_object_get(e, "s")), "g") == 0) {
				inc++;
				assert_string_equal(
					json_string_value(json_object_get(json_object_get(e, "args"), "detail")),
					"slow \"mlp\"\tthere");
			} else {
				evt++;
				assert_int_equal(json_integer_value(json_object_get(e, "pid")), 2);
				assert_int_equal(json_integer_value(json_object_get(e, "ts")), 900);
			}
		}
		assert_int_equal(inc, 1);
		assert_int_equal(evt, 1);
	}
	json_decref(j);
	storage_trace_free(&d);
}

static void test_perfetto(void **state)
{
	struct trace_data d;
	char *out;
	size_t len;
	Perfetto__Protos__Trace *t;
	int processes = 0, threads = 0, named = 0, begins = 0, ends = 0, instants = 0;
	uint64_t open[8][8];
	uint64_t uuids[8];
	int depth[8] = {0}, n_tracks = 0;

	(void)state;
	build(&d);
	assert_int_equal(trace_export(&d, TRACE_FORMAT_PERFETTO, &out, &len), 0);
	t = perfetto__protos__trace__unpack(NULL, len, (const uint8_t *)out);
	free(out);
	assert_non_null(t);
	assert_true(t->n_packet > 0);
	assert_int_equal(t->packet[0]->sequence_flags, 1);
	for (size_t i = 0; i < t->n_packet; i++) {
		Perfetto__Protos__TracePacket *p = t->packet[i];
		Perfetto__Protos__TrackEvent *e = p->track_event;
		int k;

		assert_int_equal(p->trusted_packet_sequence_id, 1);
		if (i > 0)
			assert_false(p->has_sequence_flags);
		if (p->track_descriptor) {
			processes += p->track_descriptor->process != NULL;
			threads += p->track_descriptor->thread != NULL;
			named += p->track_descriptor->name != NULL;
			continue;
		}
		assert_non_null(e);
		for (k = 0; k < n_tracks && uuids[k] != e->track_uuid; k++)
			;
		if (k == n_tracks) {
			assert_true(n_tracks < 8);
			uuids[n_tracks++] = e->track_uuid;
		}
		switch (e->type) {
		case PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_SLICE_BEGIN:
			begins++;
			assert_true(depth[k] < 8);
			open[k][depth[k]++] = p->timestamp;
			break;
		case PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_SLICE_END:
			ends++;
			assert_true(depth[k] > 0); /* never an END without its BEGIN on the track */
			assert_true(p->timestamp >= open[k][depth[k] - 1]);
			depth[k]--;
			break;
		case PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_INSTANT: instants++; break;
		default: fail_msg("unexpected event type %d", e->type);
		}
	}
	for (int k = 0; k < n_tracks; k++)
		assert_int_equal(depth[k], 0);
	assert_int_equal(processes, 2);
	assert_int_equal(threads, 3);
	assert_int_equal(named, 2); /* the incidents track and rank 0's kernels (stream 3) */
	assert_int_equal(begins, 7);
	assert_int_equal(ends, 7);
	assert_int_equal(instants, 2);
	perfetto__protos__trace__free_unpacked(t, NULL);
	storage_trace_free(&d);
}

/* Iterations 4 and 5 of rank 0 overlap by 3 us (5 starts before 4 ends), each with a phase:
 * iteration 5 keeps its 100 us in both formats (it is not nested in 4 and clipped to 3 us);
 * 4 is cut at 5's start, its measured 100 us in the args; every slice on the track nests. */
static void test_overlapping_iterations(void **state)
{
	struct trace_slice s[] = {
		{.rank = 0, .iter = 4, .start_us = T0, .dur_us = 100, .type = TRACE_SLICE_ITER, .start_known = 1},
		{.rank = 0,
		 .iter = 4,
		 .start_us = T0,
		 .dur_us = 90,
		 .name = 0,
		 .type = TRACE_SLICE_PHASE,
		 .kind = RECORD_KIND_COMPUTE,
		 .start_known = 1},
		{.rank = 0, .iter = 5, .start_us = T0 + 97, .dur_us = 100, .type = TRACE_SLICE_ITER, .start_known = 1},
		{.rank = 0,
		 .iter = 5,
		 .start_us = T0 + 97,
		 .dur_us = 90,
		 .name = 0,
		 .type = TRACE_SLICE_PHASE,
		 .kind = RECORD_KIND_COMPUTE,
		 .start_known = 1},
	};
	struct trace_data d;
	char *out;
	size_t len;
	json_t *j, *ev;
	Perfetto__Protos__Trace *t;
	uint64_t open[8];
	int depth = 0, whole = 0;

	(void)state;
	for (int f = 0; f < 2; f++) {
		memset(&d, 0, sizeof(d));
		snprintf(d.job, sizeof(d.job), "J");
		d.world = 1;
		d.job_start_us = T0;
		d.n_ranks = 1;
		d.ranks = calloc(1, sizeof(*d.ranks));
		d.names = calloc(1, sizeof(char *));
		d.slices = malloc(sizeof(s));
		assert_true(d.ranks && d.names && d.slices);
		d.ranks[0] = (struct trace_rank){.rank = 0, .host = "node-a", .known = 1};
		d.names[0] = dup("fwd");
		d.n_names = 1;
		memcpy(d.slices, s, sizeof(s));
		d.n_slices = d.cap_slices = 4;
		assert_int_equal(trace_export(&d, f ? TRACE_FORMAT_PERFETTO : TRACE_FORMAT_CHROME, &out, &len), 0);
		storage_trace_free(&d);
		if (f == 0) {
			j = json_loadb(out, len, 0, NULL);
			assert_non_null(j);
			ev = json_object_get(j, "traceEvents");
			expect_x(ev, "iteration 5", 97, 100, -1);
			expect_x(ev, "iteration 4", 0, 97, 100);
			expect_x(ev, "fwd", 97, 90, -1);
			json_decref(j);
		} else {
			t = perfetto__protos__trace__unpack(NULL, len, (const uint8_t *)out);
			assert_non_null(t);
			for (size_t i = 0; i < t->n_packet; i++) {
				Perfetto__Protos__TrackEvent *te = t->packet[i]->track_event;

				if (!te || te->type == PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_INSTANT)
					continue;
				if (te->type == PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_SLICE_BEGIN) {
					assert_true(depth < 8);
					open[depth++] = t->packet[i]->timestamp;
					continue;
				}
				assert_true(depth > 0);
				depth--;
				/* iteration 5: from T0 + 97 us for 100 us */
				whole += open[depth] == (uint64_t)(T0 + 97) * 1000 &&
					 t->packet[i]->timestamp == (uint64_t)(T0 + 197) * 1000;
			}
			assert_int_equal(depth, 0);
			assert_int_equal(whole, 1);
			perfetto__protos__trace__free_unpacked(t, NULL);
		}
		free(out);
	}
}

static void test_empty(void **state)
{
	struct trace_data d;
	char *out;
	size_t len;
	json_t *j;

	(void)state;
	memset(&d, 0, sizeof(d));
	snprintf(d.job, sizeof(d.job), "empty");
	assert_int_equal(trace_export(&d, TRACE_FORMAT_CHROME, &out, &len), 0);
	j = json_loadb(out, len, 0, NULL);
	assert_non_null(j);
	assert_int_equal(json_array_size(json_object_get(j, "traceEvents")), 1); /* the job's name */
	json_decref(j);
	free(out);
	assert_int_equal(trace_export(&d, TRACE_FORMAT_PERFETTO, &out, &len), 0);
	assert_true(len > 0); /* the incidents track */
	free(out);
}

struct ranks_case {
	const char *in;
	int rc;
	size_t n;
	uint32_t first, last;
};

static const struct ranks_case ranks_cases[] = {
	{"10352-10359,10336", 0, 9, 10336, 10359},
	{"5", 0, 1, 5, 5},
	{"3,1,2,3,1-2", 0, 3, 1, 3},
	{"0-255", 0, 256, 0, 255},
	{"0-256", -1, 0, 0, 0}, /* 257 ranks */
	{"15,16", -2, 0, 0, 0}, /* world is 16 */
	{"", -1, 0, 0, 0},
	{"a", -1, 0, 0, 0},
	{"1,", 0, 1, 1, 1}, /* a trailing comma is tolerated */
	{"1,,2", -1, 0, 0, 0},
	{"5-3", -1, 0, 0, 0},
	{"-3", -1, 0, 0, 0},
	{"1-", -1, 0, 0, 0},
	{"1 2", -1, 0, 0, 0},
	{"99999999999", -1, 0, 0, 0},
};

static void test_parse_ranks(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(ranks_cases) / sizeof(ranks_cases[0]); i++) {
		const struct ranks_case *c = &ranks_cases[i];
		uint32_t *r = NULL;
		size_t n = 0;
		char err[256] = "";
		uint32_t world = strcmp(c->in, "15,16") == 0 ? 16 : 100000;
		int rc = api_parse_ranks(c->in, world, 256, &r, &n, err, sizeof(err));

		if (rc != c->rc)
			fail_msg("\"%s\": %d, want %d (%s)", c->in, rc, c->rc, err);
		if (rc == 0) {
			assert_int_equal(n, c->n);
			assert_int_equal(r[0], c->first);
			assert_int_equal(r[n - 1], c->last);
			for (size_t k = 1; k < n; k++)
				assert_true(r[k - 1] < r[k]);
		} else {
			assert_null(r);
			assert_true(err[0] != '\0');
		}
		free(r);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_chrome),
		cmocka_unit_test(test_perfetto),
		cmocka_unit_test(test_overlapping_iterations),
		cmocka_unit_test(test_empty),
		cmocka_unit_test(test_parse_ranks),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
