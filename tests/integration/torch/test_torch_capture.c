/* test_torch_capture.c: an on-demand capture answered by a real PyTorch job. Two gloo
 * processes of train.py (culprit_agent.torch.Monitor over the real libculprit_agent) stream
 * into culpritd on PostgreSQL; once both are connected, POST /api/v1/jobs/{job}/capture asks
 * for rank 1's next 3 iterations. The job stops when the capture is done (train.py
 * --until-captured, at most 2,000 steps); culpritd's trace (Chrome JSON) must then hold raw
 * kernels of rank 1 alone (ATen operators from torch.profiler), in 3 consecutive iterations,
 * each kernel inside its iteration, and culprit_records_total counts them accepted.
 * Skipped (exit 77) when no python3 imports torch. */
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include <jansson.h>

#include "apitest.h"
#include "torchjob.h"

#define JOB "torch-capture"

static struct h_proc proc;

int main(void)
{
	char dsn[1024], dir[600];
	const char *extra[] = {"--db", dsn, NULL};
	json_t *j, *e;
	json_int_t first = -1, last = -1, n = 0, iter_start[2000] = {0}, iter_end[2000] = {0};
	size_t i;
	pid_t job;
	int status;

	if (!TORCH_PYTHON[0]) {
		printf("skipped: no python3 here imports torch (install the Debian package python3-torch)\n");
		return 77;
	}
	h_db_create("test_torch_capture", dsn, sizeof(dsn));
	h_tmpdir("torch_capture", dir, sizeof(dir));
	H_CHECK(h_culpritd_start(&proc, dir, extra) == 0, &proc);
	job = torchjob_start(&proc, JOB, 2,
			     (const char *[]){"--device-ms", "5", "--steps", "2000", "--until-captured", NULL});
	H_CHECK(job > 0, &proc);

	/* 404 until the job's first agent says Hello, 409 until rank 1's does (an agent says
	 * Hello with its first records) */
	for (int64_t deadline = h_now_ms() + 120000;;) {
		status =
			api_call(&proc, "POST", "/api/v1/jobs/" JOB "/capture", "{\"ranks\":[1],\"iterations\":3}", &j);
		json_decref(j);
		if (status == 202)
			break;
		H_CHECK((status == 404 || status == 409) && h_now_ms() < deadline, &proc);
		H_CHECK(waitpid(job, NULL, WNOHANG) == 0, &proc); /* the job still runs */
		poll(NULL, 0, 50);
	}
	H_CHECK(torchjob_wait(job) == 0, &proc); /* every record acknowledged, raw kernels too */

	H_CHECK(api_call(&proc, "GET", "/api/v1/jobs/" JOB "/trace?ranks=0-1&from_iter=0&to_iter=999&format=chrome",
			 NULL, &j) == 200,
		&proc);
	json_array_foreach(json_object_get(j, "traceEvents"), i, e)
	{ /* the iterations' bounds first */
		json_t *args = json_object_get(e, "args");
		const char *cat = json_string_value(json_object_get(e, "cat"));
		json_int_t it = json_integer_value(json_object_get(args, "iter"));

		if (cat && strcmp(cat, "iteration") == 0 && json_integer_value(json_object_get(args, "rank")) == 1 &&
		    it >= 0 && it < 2000) {
			iter_start[it] = json_integer_value(json_object_get(e, "ts"));
			iter_end[it] = iter_start[it] + json_integer_value(json_object_get(e, "dur"));
		}
	}
	json_array_foreach(json_object_get(j, "traceEvents"), i, e)
	{
		json_t *args = json_object_get(e, "args");
		const char *cat = json_string_value(json_object_get(e, "cat"));
		json_int_t it = json_integer_value(json_object_get(args, "iter"));
		json_int_t ts = json_integer_value(json_object_get(e, "ts"));

		if (!cat || strcmp(cat, "kernel") != 0)
			continue;
		H_CHECK(json_integer_value(json_object_get(args, "rank")) == 1, &proc); /* rank 1 alone */
		H_CHECK(it >= 0 && it < 2000, &proc);
		H_CHECK(strncmp(json_string_value(json_object_get(e, "name")), "aten::", 6) == 0, &proc);
		H_CHECK(ts >= iter_start[it] && ts < iter_end[it], &proc); /* inside its iteration */
		if (first < 0 || it < first)
			first = it;
		if (it > last)
			last = it;
		n++;
	}
	json_decref(j);
	fprintf(stderr, "rank 1: %lld raw kernels in iterations %lld-%lld\n", (long long)n, (long long)first,
		(long long)last);
	H_CHECK(n >= 3 && first >= 0 && last - first == 2, &proc);
	H_CHECK(h_get_metric(proc.http_port, "culprit_records_total{type=\"raw_kernel\",outcome=\"accepted\"}") ==
			(double)n,
		&proc);
	H_CHECK(h_proc_stop(&proc, SIGTERM, 30000) == 0, &proc);
	printf("torch capture: rank 1's next 3 iterations captured, %lld raw operators\n", (long long)n);
	return 0;
}
