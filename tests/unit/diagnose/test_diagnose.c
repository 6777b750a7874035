/* test_diagnose.c: small role groups (DP of 2 and 4) fall back to the rank's own history
 * and the other groups; the report JSON has every field of docs/report.md's table; an input
 * too short for a baseline gives a report without NaN. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "report_check.h"

/* An offline engine (a report on every closed window) for t, its job named job */
static struct engine *offline_engine(const struct topo *t, const char *job)
{
	struct engine_config cfg;
	memset(&cfg, 0, sizeof(cfg));
	cfg.diagnose_on_close = 1;
	struct engine *e = engine_create(t, &cfg);
	assert_non_null(e);
	store_set_job(engine_store(e), job);
	return e;
}

/* world = 4 stages x dp; rank `slow` runs mlp 3x from iteration 20 on */
static void run_small(uint32_t dp, uint32_t slow, struct report *rep, struct engine **out)
{
	struct topo t;
	char err[64];
	assert_int_equal(topo_init(&t, 4 * dp, 1, 1, 4, dp, 1, "tp-cp-dp-pp", 8, err, sizeof(err)), 0);
	struct engine *e = offline_engine(&t, "small");
	struct store *s = engine_store(e);
	uint32_t mlp = (uint32_t)store_intern_name(s, "mlp");
	uint32_t rs = (uint32_t)store_intern_name(s, "dp_reduce_scatter");
	uint32_t seed = 1;
	for (uint32_t it = 0; it < 40; it++) {
		int bad = it >= 20;
		for (uint32_t r = 0; r < t.world; r++) {
			seed = seed * 1103515245u + 12345u;
			double j = 1 + ((seed >> 16) % 1000) / 1000.0 * 0.06 - 0.03;
			int64_t m = (int64_t)(1000000 * j * (bad && r == slow ? 3 : 1));
			int64_t c = (int64_t)(500000 * j + (bad && r != slow ? 2000000 : 0));
			struct record_phase p1 = {r, it, mlp, RECORD_KIND_COMPUTE, RECORD_GROUP_NONE, 0, m};
			struct record_phase p2 = {r, it, rs, RECORD_KIND_COMM, RECORD_GROUP_DP, m, c};
			struct record_iter ri = {r, it, (int64_t)it * 4000000, 1600000 + (bad ? 2000000 : 0)};
			assert_int_equal(store_add_phase(s, &p1), 0);
			assert_int_equal(store_add_phase(s, &p2), 0);
			assert_int_equal(store_add_iter(s, &ri), 0);
		}
		engine_poll(e);
	}
	assert_int_equal(engine_finish(e, rep), 0);
	*out = e;
}

/* 64 data-parallel ranks; ranks 0-3 start their steps 1.5 s late from iteration 20 on (a
 * host stall before the step, no phase of theirs longer) and wait least in the reduce: a
 * host delay of those four, which the replay, starting every rank's step together, cannot
 * put back and must not drop */
static void late_start(void **state)
{
	(void)state;
	struct topo t;
	char err[64];
	assert_int_equal(topo_init(&t, 64, 1, 1, 1, 64, 1, "tp-cp-dp-pp", 8, err, sizeof(err)), 0);
	struct engine *e = offline_engine(&t, "late");
	struct store *s = engine_store(e);
	uint32_t fwd = (uint32_t)store_intern_name(s, "fwd");
	uint32_t ar = (uint32_t)store_intern_name(s, "allreduce");
	uint32_t seed = 7;
	for (uint32_t it = 0; it < 40; it++) {
		int bad = it >= 20;
		for (uint32_t r = 0; r < t.world; r++) {
			seed = seed * 1103515245u + 12345u;
			double j = 1 + ((seed >> 16) % 1000) / 1000.0 * 0.04 - 0.02;
			int late = bad && r < 4;
			int64_t f = (int64_t)(1000000 * j), w = late ? 20000 : bad ? 1500000 : (int64_t)(300000 * j);
			struct record_phase p1 = {r, it, fwd, RECORD_KIND_COMPUTE, RECORD_GROUP_NONE, 0, f};
			struct record_phase p2 = {r, it, ar, RECORD_KIND_COMM, RECORD_GROUP_DP, f, w};
			struct record_iter ri = {r, it, (int64_t)it * 4000000 + (late ? 1500000 : 0), f + w};
			assert_int_equal(store_add_phase(s, &p1), 0);
			assert_int_equal(store_add_phase(s, &p2), 0);
			assert_int_equal(store_add_iter(s, &ri), 0);
		}
		engine_poll(e);
	}
	struct report rep;
	assert_int_equal(engine_finish(e, &rep), 0);
	assert_string_equal(rep.category, "host_delay");
	size_t n = 0;
	for (size_t i = 0; i < rep.nsuspects; i++)
		n += rep.suspects[i].rank < 4;
	assert_int_equal(n, 4);
	report_free(&rep);
	engine_destroy(e);
}

static void small_groups_fall_back(void **state)
{
	(void)state;
	uint32_t dps[] = {2, 4};
	for (size_t i = 0; i < 2; i++) {
		struct report rep;
		struct engine *e;
		uint32_t slow = dps[i] + 1; /* stage 1 */
		run_small(dps[i], slow, &rep, &e);
		assert_string_equal(rep.category, "compute_degradation");
		assert_int_equal(rep.culprits_total, 1);
		assert_int_equal(rep.suspects[0].rank, slow);
		assert_int_equal(rep.suspects[0].role, REPORT_CULPRIT);
		assert_string_equal(rep.suspects[0].ev[0].phase, "mlp");
		assert_true(rep.suspects[0].ev[0].fallback);
		assert_true(rep.suspects[0].ev[0].ratio > 2.5 && rep.suspects[0].ev[0].ratio < 3.5);
		/* a group of 2 has no spread of its own; one of 4 does (a median of 4 holds one
		 * outlier), but the rank's own change is the stronger evidence there */
		assert_true(dps[i] < 4 ? isnan(rep.suspects[0].ev[0].group_cv)
				       : isfinite(rep.suspects[0].ev[0].group_cv));
		report_free(&rep);
		engine_destroy(e);
	}
}

static void json_contract(void **state)
{
	(void)state;
	struct report rep;
	struct engine *e;
	run_small(4, 5, &rep, &e);
	store_add_event(engine_store(e), "node-0", "port_down", 1, "oob", "eth3");
	/* the same on the culprit's host ten hours later: not about this window */
	store_add_event(engine_store(e), "node-0", "port_down", 36000LL * 1000000, "oob", "eth3");
	/* a GPU event on the culprit's host fits; one on another host is unrelated */
	store_add_event(engine_store(e), "node-0", "xid_79", 2, "dcgm", "");
	store_add_event(engine_store(e), "node-9", "xid_79", 2, "dcgm", "");
	report_free(&rep);
	struct diagnose_input in;
	diagnose_input_from_l1(&in, engine_l1(e), 0);
	assert_int_equal(diagnose_run(engine_store(e), &in, NULL, &rep), 0);
	json_t *o = report_to_json(&rep);
	assert_non_null(o);
	assert_string_equal(json_string_value(json_object_get(o, "job")), "small");
	json_t *w = json_object_get(o, "window");
	assert_int_equal(json_integer_value(json_object_get(w, "first_iter")), 20);
	assert_int_equal(json_integer_value(json_object_get(w, "last_iter")), 39);
	assert_true(json_is_integer(json_object_get(w, "baseline_iter_ms")));
	assert_true(json_is_integer(json_object_get(w, "window_iter_ms")));
	json_t *v = json_object_get(o, "verdict");
	assert_string_equal(json_string_value(json_object_get(v, "category")), "compute_degradation");
	assert_true(json_is_string(json_object_get(v, "summary")));
	json_t *s0 = json_array_get(json_object_get(o, "suspects"), 0);
	assert_int_equal(json_integer_value(json_object_get(s0, "rank")), 5);
	assert_string_equal(json_string_value(json_object_get(s0, "host")), "node-0");
	json_t *c = json_object_get(s0, "coords");
	const char *keys[] = {"tp", "cp", "ep", "dp", "pp"};
	for (int k = 0; k < 5; k++)
		assert_true(json_is_integer(json_object_get(c, keys[k])));
	assert_int_equal(json_integer_value(json_object_get(c, "pp")), 1);
	assert_int_equal(json_integer_value(json_object_get(c, "dp")), 1);
	assert_string_equal(json_string_value(json_object_get(s0, "role")), "culprit");
	assert_true(json_is_number(json_object_get(s0, "score")));
	assert_true(json_is_string(json_object_get(s0, "level")));
	json_t *ev = json_array_get(json_object_get(s0, "evidence"), 0);
	assert_string_equal(json_string_value(json_object_get(ev, "phase")), "mlp");
	assert_string_equal(json_string_value(json_object_get(ev, "kind")), "compute");
	assert_true(json_is_number(json_object_get(ev, "ratio")));
	assert_true(json_is_number(json_object_get(ev, "z")));
	assert_non_null(json_object_get(ev, "group_cv"));
	assert_true(json_is_array(json_object_get(s0, "kernels")));
	json_t *vi = json_object_get(o, "victims");
	assert_true(json_integer_value(json_object_get(vi, "ranks")) > 0);
	assert_true(json_is_array(json_object_get(vi, "phases")));
	json_t *e0 = json_array_get(json_object_get(o, "events"), 0);
	assert_string_equal(json_string_value(json_object_get(e0, "host")), "node-0");
	assert_string_equal(json_string_value(json_object_get(e0, "kind")), "port_down");
	assert_string_equal(json_string_value(json_object_get(e0, "verdict")), "contradicted");
	assert_true(json_is_string(json_object_get(e0, "reason")));
	json_t *evs = json_object_get(o, "events");
	assert_int_equal(json_array_size(evs), 4);
	assert_string_equal(json_string_value(json_object_get(json_array_get(evs, 1), "verdict")), "unrelated");
	assert_string_equal(json_string_value(json_object_get(json_array_get(evs, 2), "verdict")), "consistent");
	assert_string_equal(json_string_value(json_object_get(json_array_get(evs, 3), "verdict")), "unrelated");
	assert_true(json_integer_value(json_object_get(o, "lost_ms_per_iter")) > 1500);
	char *txt = report_to_text(&rep);
	assert_non_null(strstr(txt, "rank 5 on node-0"));
	free(txt);
	json_decref(o);
	report_free(&rep);
	engine_destroy(e);
}

/* an input too short for a baseline, where nothing stands out: the summary and the text
 * say so without a NaN baseline ("rose from nan to 3 ms") */
static void short_input_without_baseline(void **state)
{
	(void)state;
	struct topo t;
	char err[64];
	assert_int_equal(topo_init(&t, 4, 1, 1, 1, 4, 1, NULL, 8, err, sizeof(err)), 0);
	struct engine *e = engine_create(&t, NULL);
	assert_non_null(e);
	struct store *s = engine_store(e);
	uint32_t mlp = (uint32_t)store_intern_name(s, "mlp");
	for (uint32_t it = 0; it < 2; it++)
		for (uint32_t r = 0; r < 4; r++) {
			struct record_phase p = {r, it, mlp, RECORD_KIND_COMPUTE, RECORD_GROUP_NONE, 0, 3000};
			struct record_iter ri = {r, it, (int64_t)it * 4000, 3000};
			assert_int_equal(store_add_phase(s, &p), 0);
			assert_int_equal(store_add_iter(s, &ri), 0);
		}
	struct report rep;
	assert_int_equal(engine_finish(e, &rep), 0);
	assert_string_equal(rep.category, "none");
	assert_true(rep.has_window);
	assert_null(report_check(&rep, 4));
	char *txt = report_to_text(&rep);
	assert_null(strstr(txt, "nan"));
	assert_non_null(strstr(txt, "no baseline"));
	free(txt);
	report_free(&rep);
	engine_destroy(e);
}

/* A job's L2 memory kept between its diagnoses (diagnose_input.l2_keep, as culpritd keeps it)
 * gives the reports a fresh run gives, after a diagnosis of another fault in it. */
static void kept_l2_memory(void **state)
{
	(void)state;
	struct report rep;
	struct engine *a, *b;
	struct l2 keep = {0};
	struct diagnose_input in;
	run_small(4, 5, &rep, &a);
	report_free(&rep);
	run_small(4, 10, &rep, &b);
	json_t *fresh = report_to_json(&rep);
	report_free(&rep);
	diagnose_input_from_l1(&in, engine_l1(a), 0);
	in.l2_keep = &keep;
	assert_int_equal(diagnose_run(engine_store(a), &in, NULL, &rep), 0);
	assert_int_equal(rep.suspects[0].rank, 5);
	report_free(&rep);
	void *mem = keep.mem;
	assert_non_null(mem);
	diagnose_input_from_l1(&in, engine_l1(b), 0);
	in.l2_keep = &keep;
	assert_int_equal(diagnose_run(engine_store(b), &in, NULL, &rep), 0);
	assert_ptr_equal(keep.mem, mem);
	json_t *kept = report_to_json(&rep);
	assert_true(json_equal(fresh, kept));
	assert_int_equal(rep.suspects[0].rank, 10);
	json_decref(fresh);
	json_decref(kept);
	report_free(&rep);
	l2_free(&keep);
	engine_destroy(a);
	engine_destroy(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(small_groups_fall_back),
		cmocka_unit_test(late_start),
		cmocka_unit_test(json_contract),
		cmocka_unit_test(kept_l2_memory),
		cmocka_unit_test(short_input_without_baseline),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
