/* test_torch_job.c: a real PyTorch job streams into the real culpritd. Six processes of
 * python3 -m torch.distributed.run (gloo, CPU; train.py: a small model under DDP, 60
 * steps) with culprit_agent.torch.Monitor attached, the Python package over the real
 * libculprit_agent, culpritd on the test PostgreSQL; reports read through the REST API:
 *   - rank 5 computing three times as long from step 40: a compute_degradation report whose
 *     window covers step 40 (opened by it, or open when it came), naming rank 5 alone as
 *     culprit, the others victims;
 *   - rank 2's data loader sleeping from step 40: host_delay on rank 2, same bounds;
 *   - the same slow job's own torch.profiler traces (train.py --kineto: one per rank, the 20
 *     steps around step 40): `culprit diagnose DIR` offline names rank 5 alone, compute;
 *   - a healthy run: no incident.
 * Skipped (exit 77, with the reason) when no python3 imports torch (python3-torch). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "apitest.h"
#include "torchjob.h"

static struct h_proc proc;

/* Runs train.py as a 6-process job with the extra arguments (NULL-terminated); 0 when every
 * rank exited 0, which train.py does when all its records were acknowledged. */
static int run_job(const char *job, const char *const *extra)
{
	/* a device step long beside the CPU noise of 6 processes (40 ms was not, at a load of 10);
	 * 60 steps: 40 of baseline, 20 after the faults' onset (a report is due within 5) */
	const char *argv[16] = {"--device-ms", "80", "--steps", "60"};
	size_t n = 4;

	for (; *extra; extra++)
		argv[n++] = *extra;
	argv[n] = NULL;
	return torchjob_wait(torchjob_start(&proc, job, 6, argv));
}

static json_t *get(const char *path)
{
	json_t *j = NULL;

	if (api_call(&proc, "GET", path, NULL, &j) != 200) {
		json_decref(j);
		return NULL;
	}
	return j;
}

/* The first report (lowest id) of job whose category is cat and whose window covers step
 * 40, the fault's onset (opens at most 5 steps after it and is still open 5 steps before it);
 * NULL when none. (On this shared 2-core machine a rank starved of CPU for a while is
 * slower, and may be named in a window of its own before the fault: that report is not the
 * one for the fault; and such a window may still be open when the fault comes, which is
 * then diagnosed inside it.) */
static json_t *first_report(const char *job, const char *cat)
{
	char path[256];
	json_t *all, *found = NULL, *r;
	size_t i;

	snprintf(path, sizeof(path), "/api/v1/jobs/%s/reports?limit=100", job);
	H_CHECK((all = get(path)) != NULL, &proc);
	json_array_foreach(json_object_get(all, "reports"), i, r)
	{
		json_t *rep = json_object_get(r, "report");

		json_int_t first = json_integer_value(json_object_get(json_object_get(rep, "window"), "first_iter"));
		json_int_t last = json_integer_value(json_object_get(json_object_get(rep, "window"), "last_iter"));
		if (strcmp(json_string_value(json_object_get(json_object_get(rep, "verdict"), "category")), cat) != 0 ||
		    first > 45 || last < 35)
			continue;
		if (!found ||
		    json_integer_value(json_object_get(r, "id")) < json_integer_value(json_object_get(found, "id")))
			found = r;
	}
	if (!found) /* what there is, to see why */
		json_array_foreach(json_object_get(all, "reports"), i, r)
		{
			json_t *rep = json_object_get(r, "report");
			fprintf(stderr, "%s report %lld: window from %lld: %s\n", job,
				(long long)json_integer_value(json_object_get(r, "id")),
				(long long)json_integer_value(
					json_object_get(json_object_get(rep, "window"), "first_iter")),
				json_string_value(json_object_get(json_object_get(rep, "verdict"), "summary")));
		}
	found = found ? json_incref(json_object_get(found, "report")) : NULL;
	json_decref(all);
	return found;
}

/* The report names `rank`, and no other rank, as a culprit. */
static void check_culprit(json_t *rep, json_int_t rank)
{
	json_t *s;
	json_int_t culprits = 0;
	size_t i;

	json_array_foreach(json_object_get(rep, "suspects"), i, s)
	{
		if (strcmp(json_string_value(json_object_get(s, "role")), "culprit") != 0)
			continue;
		culprits++;
		H_CHECK(json_integer_value(json_object_get(s, "rank")) == rank, &proc);
	}
	H_CHECK(culprits == 1, &proc);
}

/* The job's first report of category cat whose window covers step 40 names `rank`
 * as its only culprit. Returns its victims. */
static json_int_t check_named(const char *job, const char *cat, json_int_t rank)
{
	json_t *rep = first_report(job, cat);
	json_int_t first, victims;

	if (!rep)
		fprintf(stderr, "%s: no %s report\n", job, cat);
	H_CHECK(rep != NULL, &proc);
	first = json_integer_value(json_object_get(json_object_get(rep, "window"), "first_iter"));
	fprintf(stderr, "%s: %s\n", job,
		json_string_value(json_object_get(json_object_get(rep, "verdict"), "summary")));
	H_CHECK(first <= 45, &proc); /* opened by the fault, or open when it came */
	check_culprit(rep, rank);
	victims = json_integer_value(json_object_get(json_object_get(rep, "victims"), "ranks"));
	json_decref(rep);
	return victims;
}

/* `culprit diagnose DIR` on the ranks' profiler traces names `rank` alone as a compute culprit. */
static void check_offline(const char *dir, json_int_t rank)
{
	char cmd[1024];
	FILE *f;
	json_t *rep;

	snprintf(cmd, sizeof(cmd), "%s diagnose %s", CULPRIT_BIN, dir);
	H_CHECK((f = popen(cmd, "r")) != NULL, &proc);
	rep = json_loadf(f, 0, NULL);
	H_CHECK(pclose(f) == 0 && rep != NULL, &proc);
	fprintf(stderr, "offline: %s\n",
		json_string_value(json_object_get(json_object_get(rep, "verdict"), "summary")));
	H_CHECK(strcmp(json_string_value(json_object_get(json_object_get(rep, "verdict"), "category")),
		       "compute_degradation") == 0,
		&proc);
	check_culprit(rep, rank);
	json_decref(rep);
}

int main(void)
{
	char dsn[1024], dir[600], kineto[700];
	const char *extra[] = {"--db", dsn, NULL};

	if (!TORCH_PYTHON[0]) {
		printf("skipped: no python3 here imports torch (install the Debian package python3-torch)\n");
		return 77;
	}
	h_db_create("test_torch_job", dsn, sizeof(dsn));
	h_tmpdir("torch_job", dir, sizeof(dir));
	H_CHECK(h_culpritd_start(&proc, dir, extra) == 0, &proc);

	int64_t t0 = h_now_ms();
	h_tmpdir("torch_kineto", kineto, sizeof(kineto));
	H_CHECK(run_job("torch-slow", (const char *[]){"--slow-rank", "5", "--kineto", kineto, NULL}) == 0, &proc);
	H_CHECK(check_named("torch-slow", "compute_degradation", 5) >= 4, &proc);
	check_offline(kineto, 5);

	H_CHECK(run_job("torch-loader", (const char *[]){"--loader-sleep-rank", "2", NULL}) == 0, &proc);
	check_named("torch-loader", "host_delay", 2);

	H_CHECK(run_job("torch-healthy", (const char *[]){NULL}) == 0, &proc);
	json_t *inc = get("/api/v1/jobs/torch-healthy/incidents");
	H_CHECK(inc != NULL, &proc);
	if (json_array_size(json_object_get(inc, "incidents")))
		fprintf(stderr, "healthy job: %s\n", json_dumps(inc, 0));
	H_CHECK(json_array_size(json_object_get(inc, "incidents")) == 0, &proc);
	json_decref(inc);

	H_CHECK(h_proc_stop(&proc, SIGTERM, 30000) == 0, &proc);
	printf("torch job: rank 5's compute (online and from its profiler traces) and rank 2's loader named within 5 "
	       "steps, the healthy run quiet (%lld ms)\n",
	       (long long)(h_now_ms() - t0));
	return 0;
}
