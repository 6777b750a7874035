/* test_api_many_kernels.c: culpritd diagnoses a job whose ranks report 20 kernel names
 * (`culprit sim --scenario compute_straggler --kernels 20`: 1,024 ranks, rank 517 on node-64
 * computes 3x from iteration 10). None of the culprit's top 4 kernels is a communication
 * kernel, a case that can overrun a stack sketch in the diagnosis and take culpritd down:
 * culpritd stays up, its reports name rank 517 on node-64, it stops cleanly. */
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apitest.h"

#define JOB "sim-compute_straggler"

int main(void)
{
	struct h_proc proc;
	char dir[512], dsn[512];
	const char *extra[3];
	json_t *j;
	char *body = NULL;
	long long before;

	h_tmpdir("api_many_kernels", dir, sizeof(dir));
	h_db_create("culprit_api_many_kernels", dsn, sizeof(dsn));
	extra[0] = "--db";
	extra[1] = dsn;
	extra[2] = NULL;
	H_CHECK(h_culpritd_start(&proc, dir, extra) == 0, &proc);
	H_CHECK(api_sim_wait(api_sim_start_kernels(&proc, "compute_straggler", 30, 20), 110000) == 0, &proc);
	H_CHECK(h_http(proc.http_port, "GET", "/healthz", NULL, &body) == 200, &proc);
	free(body);

	/* the diagnoses while streaming ran; one more on request, then its report */
	H_CHECK(api_call(&proc, "GET", "/api/v1/jobs/" JOB, NULL, &j) == 200, &proc);
	before = json_integer_value(json_object_get(j, "diagnoses"));
	H_CHECK(before > 0, &proc);
	json_decref(j);
	H_CHECK(api_call(&proc, "POST", "/api/v1/jobs/" JOB "/diagnose", NULL, &j) == 202, &proc);
	json_decref(j);
	for (int64_t deadline = h_now_ms() + 60000;;) {
		H_CHECK(api_call(&proc, "GET", "/api/v1/jobs/" JOB, NULL, &j) == 200, &proc);
		long long n = json_integer_value(json_object_get(j, "diagnoses"));
		json_decref(j);
		if (n > before)
			break;
		H_CHECK(h_now_ms() < deadline, &proc);
		poll(NULL, 0, 100);
	}
	H_CHECK(api_call(&proc, "GET", "/api/v1/jobs/" JOB "/reports/latest", NULL, &j) == 200, &proc);
	H_CHECK(strcmp(json_string_value(json_object_get(json_object_get(j, "verdict"), "category")),
		       "compute_degradation") == 0,
		&proc);
	json_t *s, *suspects = json_object_get(j, "suspects");
	size_t i, culprits = 0;
	json_array_foreach(suspects, i, s)
	{
		if (strcmp(json_string_value(json_object_get(s, "role")), "culprit") != 0)
			continue;
		culprits++;
		H_CHECK(json_integer_value(json_object_get(s, "rank")) == 517, &proc);
		H_CHECK(strcmp(json_string_value(json_object_get(s, "host")), "node-64") == 0, &proc);
	}
	H_CHECK(culprits == 1, &proc);
	json_decref(j);
	H_CHECK(h_proc_stop(&proc, SIGTERM, 30000) == 0, &proc);
	fprintf(stderr, "test_api_many_kernels: ok\n");
	return 0;
}
