/* test_report.c: the text form of a report: culprits first with their evidence, the late
 * arrivers as a count and the first few, an [L3] tag that names its kernel evidence. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "record.h"
#include "report.h"

#define NCULPRITS 2
#define NLATE 30

/* Two culprits on node-7 scored about 5.9 and thirty late arrivers scored 43 (they waited
 * far longer than they ran); kernels as given. */
static void fill(struct report *r, struct report_suspect *su, const struct report_kernel *k, size_t nk)
{
	report_init(r);
	snprintf(r->job, sizeof(r->job), "j");
	r->category = "compute_degradation";
	snprintf(r->summary, sizeof(r->summary), "compute slowdown on node-7");
	for (size_t i = 0; i < NCULPRITS + NLATE; i++) {
		struct report_suspect *s = &su[i];
		memset(s, 0, sizeof(*s));
		s->role = i < NCULPRITS ? REPORT_CULPRIT : REPORT_LATE_ARRIVER;
		s->rank = i < NCULPRITS ? 56 + (uint32_t)i : 100 + (uint32_t)i;
		snprintf(s->host, sizeof(s->host), "node-%u", s->rank / 8);
		s->score = i < NCULPRITS ? 5.9 : 43.2;
		s->level = i < NCULPRITS ? "L3" : "L2";
		s->consistent = 1;
		s->nev = 1;
		snprintf(s->ev[0].phase, sizeof(s->ev[0].phase), "%s", i < NCULPRITS ? "mlp" : "dp_allreduce");
		s->ev[0].kind = i < NCULPRITS ? RECORD_KIND_COMPUTE : RECORD_KIND_COMM;
		s->ev[0].ratio = i < NCULPRITS ? 5.9 : 0.02;
		if (i < NCULPRITS) {
			memcpy(s->k, k, nk * sizeof(*k));
			s->nk = nk;
		}
	}
	r->suspects = su;
	r->nsuspects = NCULPRITS + NLATE;
	r->culprits_total = NCULPRITS;
	r->late_total = 280;
	r->late_consistent = 1;
	r->victims = 1000;
}

static size_t count(const char *s, const char *what)
{
	size_t n = 0;
	for (const char *p = strstr(s, what); p; p = strstr(p + 1, what))
		n++;
	return n;
}

static void late_arrivers_one_line(void **state)
{
	(void)state;
	struct report r;
	struct report_suspect su[NCULPRITS + NLATE];
	struct report_kernel k = {.name = "gemm", .kind = RECORD_KIND_COMPUTE, .ratio = 5.5, .ks = 0.9, .max_ratio = 6};
	fill(&r, su, &k, 1);
	char *t = report_to_text(&r);
	assert_non_null(t);
	assert_non_null(strstr(t, "280 ranks arrive late (waiting on the culprits): 102, 103, 104, 105, 106, 107, "
				  "108, 109, ...\n"));
	/* one line for all of them: none of their ranks past the first few, none of their phases */
	assert_null(strstr(t, "rank 131"));
	assert_null(strstr(t, "dp_allreduce"));
	/* no score above the culprits' */
	assert_null(strstr(t, "43.2"));
	assert_int_equal(count(t, "score "), NCULPRITS);
	/* the culprits first, with their evidence */
	assert_non_null(strstr(t, "culprits (2):\n  rank 56 on node-7"));
	assert_true(strstr(t, "rank 57 on node-7") < strstr(t, "280 ranks arrive late"));
	assert_int_equal(count(t, "phase mlp"), NCULPRITS);
	free(t);

	r.late_consistent = 0;
	t = report_to_text(&r);
	assert_non_null(strstr(t, "280 ranks arrive late (not all explained by the culprits): 102,"));
	free(t);
}

/* the [L3] tag says which kernel reading it stands on */
static void level_names_its_kernel(void **state)
{
	(void)state;
	static const struct {
		struct report_kernel k[2];
		const char *tag;
	} cases[] = {
		{{{"flash_attn", RECORD_KIND_COMPUTE, 1.0, 0.1, 1.0}, {"sm90_gemm", RECORD_KIND_COMPUTE, 5.47, 0.9, 6}},
		 "[L3: compute kernel sm90_gemm 5.47x the peers' median]"},
		{{{"nccl_all_to_all", RECORD_KIND_COMM, 1.0, 0.3, 0.7},
		  {"sm90_gemm", RECORD_KIND_COMPUTE, 1.02, 0.33, 14}},
		 "[L3: compute kernel sm90_gemm stalls, its slowest 14.0x the peers' p99]"},
		{{{"nccl_all_to_all", RECORD_KIND_COMM, 1.0, 0.3, 0.7},
		  {"sm90_gemm", RECORD_KIND_COMPUTE, 1.00, 0.33, 5.6}},
		 "[L3: kernels compared, none slower at the median]"},
	};
	for (size_t c = 0; c < sizeof(cases) / sizeof(*cases); c++) {
		struct report r;
		struct report_suspect su[NCULPRITS + NLATE];
		fill(&r, su, cases[c].k, 2);
		char *t = report_to_text(&r);
		assert_non_null(t);
		if (count(t, cases[c].tag) != NCULPRITS)
			print_error("case %zu: want %s twice in\n%s", c, cases[c].tag, t);
		assert_int_equal(count(t, cases[c].tag), NCULPRITS);
		assert_null(strstr(t, "[L3]"));
		free(t);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(late_arrivers_one_line),
		cmocka_unit_test(level_names_its_kernel),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
