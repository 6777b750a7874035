/* test_alert_alertmanager: case5 streamed by `culprit sim` (12,960 ranks, 1,620 agents) into
 * culpritd, which posts to a real Prometheus Alertmanager on loopback. While the fault lasts,
 * Alertmanager holds one active alert for the job, with labels category=compute_degradation
 * and host=node-1294, the report URL and the action (drain node-1294; not its port) in its
 * annotations; after the fault ends (--recover-at) the alert is resolved (no longer active).
 * The job is labelled training_job, never job (Prometheus's own target label), and the
 * annotation lists the suspects by rank. Agents lagging on this loaded machine page no hang. */
#include <jansson.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include "alerttest.h"
#include "harness.h"

#define JOB "sim-case5"

static struct h_proc proc;
static pid_t am_pid;
static int am_port;
static char simlog[600];
static atomic_int sim_done, sim_rc;

static void stop_am(void)
{
	if (am_pid > 0) {
		kill(am_pid, SIGTERM);
		waitpid(am_pid, NULL, 0);
		am_pid = 0;
	}
}

static void start_am(const char *dir)
{
	char cfg[600], storage[600], listen[64], cfgarg[700], storarg[700], log[600];
	const char *bin = "/usr/bin/prometheus-alertmanager";
	FILE *f;

	if (access(bin, X_OK) != 0) {
		fprintf(stderr, "%s is missing: install the Debian package prometheus-alertmanager (install-deps.sh)\n",
			bin);
		exit(1);
	}
	snprintf(cfg, sizeof(cfg), "%s/alertmanager.yml", dir);
	snprintf(storage, sizeof(storage), "%s/am-data", dir);
	snprintf(log, sizeof(log), "%s/alertmanager.log", dir);
	mkdir(storage, 0755);
	f = fopen(cfg, "w");
	H_CHECK(f != NULL, NULL);
	fprintf(f, "route:\n  receiver: \"null\"\nreceivers:\n  - name: \"null\"\n");
	fclose(f);
	am_port = h_free_port();
	snprintf(listen, sizeof(listen), "--web.listen-address=127.0.0.1:%d", am_port);
	snprintf(cfgarg, sizeof(cfgarg), "--config.file=%s", cfg);
	snprintf(storarg, sizeof(storarg), "--storage.path=%s", storage);
	am_pid = fork();
	H_CHECK(am_pid >= 0, NULL);
	if (am_pid == 0) {
		const char *argv[] = {bin, cfgarg, storarg, listen, "--cluster.listen-address=", NULL};
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);

		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
			close(fd);
		}
		execv(bin, (char *const *)argv);
		_exit(127);
	}
	atexit(stop_am);
	for (int64_t deadline = h_now_ms() + 30000;; poll(NULL, 0, 50)) {
		char *body = NULL;
		int st = h_http(am_port, "GET", "/-/ready", NULL, &body);

		free(body);
		if (st == 200)
			break;
		if (h_now_ms() > deadline || waitpid(am_pid, NULL, WNOHANG) == am_pid) {
			fprintf(stderr, "alertmanager did not get ready; its log: %s\n", log);
			exit(1);
		}
	}
}

static void *run_sim(void *arg)
{
	(void)arg;
	atomic_store(&sim_rc, at_sim("case5", 40, 20, proc.agent_port, simlog));
	atomic_store(&sim_done, 1);
	return NULL;
}

/* Active alerts of the job in Alertmanager: how many; the first one's labels in *first. */
static int active_alerts(json_t **first)
{
	char *body = NULL;
	json_t *arr, *a;
	size_t i;
	int n = 0;

	*first = NULL;
	H_CHECK(h_http(am_port, "GET", "/api/v2/alerts", NULL, &body) == 200, &proc);
	arr = json_loads(body, 0, NULL);
	free(body);
	H_CHECK(json_is_array(arr), &proc);
	json_array_foreach(arr, i, a)
	{
		json_t *labels = json_object_get(a, "labels");
		const char *state = json_string_value(json_object_get(json_object_get(a, "status"), "state"));

		const char *job = json_string_value(json_object_get(labels, "training_job"));

		H_CHECK(json_object_get(labels, "job") == NULL, &proc);
		if (!job || strcmp(job, JOB) != 0 || !state || strcmp(state, "active") != 0)
			continue;
		if (n++ == 0)
			*first = json_incref(a);
	}
	json_decref(arr);
	return n;
}

int main(void)
{
	char dsn[512], dir[512], url[64];
	pthread_t sim;
	int seen = 0, status;
	json_t *a;

	h_db_create("alert_am", dsn, sizeof(dsn));
	h_tmpdir("alert_am", dir, sizeof(dir));
	snprintf(simlog, sizeof(simlog), "%s/sim.log", dir);
	start_am(dir);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d", am_port);
	{
		const char *extra[] = {"--db", dsn, "--alertmanager-url", url, "--alert-resend-s", "5", NULL};

		H_CHECK(h_culpritd_start(&proc, dir, extra) == 0, &proc);
	}
	H_CHECK(pthread_create(&sim, NULL, run_sim, NULL) == 0, &proc);

	/* while the fault lasts: one active alert, compute_degradation on node-1294 */
	int posted = 0;
	while (!seen && !atomic_load(&sim_done)) {
		char *body = NULL;
		if (!posted && h_http(proc.http_port, "GET", "/api/v1/jobs/" JOB, NULL, &body) == 200) {
			/* once the job is known: the out-of-band alarm the seed's on-call saw, which
			 * the action must rule out (events go to the windows of the jobs on its host) */
			char ev[256];
			struct timespec now;

			clock_gettime(CLOCK_REALTIME, &now);
			snprintf(ev, sizeof(ev),
				 "{\"host\":\"node-1294\",\"kind\":\"port_down\",\"ts_us\":%lld,\"source\":\"oob\"}",
				 (long long)now.tv_sec * 1000000);
			free(body);
			body = NULL;
			H_CHECK(h_http(proc.http_port, "POST", "/api/v1/events", ev, &body) == 202, &proc);
			posted = 1;
		}
		free(body);
		int n = active_alerts(&a);

		if (n >= 1) {
			json_t *labels = json_object_get(a, "labels");
			const char *cat = json_string_value(json_object_get(labels, "category"));
			const char *host = json_string_value(json_object_get(labels, "host"));

			if (cat && strcmp(cat, "compute_degradation") == 0) {
				const char *report_url = json_string_value(
					json_object_get(json_object_get(a, "annotations"), "report_url"));
				const char *suspects = json_string_value(
					json_object_get(json_object_get(a, "annotations"), "suspects"));

				fprintf(stderr,
					"alertmanager: %d active alert(s) for %s: category %s, host %s, suspects "
					"%.80s\n",
					n, JOB, cat, host ? host : "(none)", suspects ? suspects : "(none)");
				H_CHECK(n == 1, &proc);
				H_CHECK(host && strcmp(host, "node-1294") == 0, &proc);
				H_CHECK(strcmp(json_string_value(json_object_get(labels, "alertname")),
					       "CulpritIncident") == 0,
					&proc);
				H_CHECK(json_object_get(labels, "severity") != NULL, &proc);
				H_CHECK(report_url && strstr(report_url, "/api/v1/jobs/" JOB "/reports/latest"), &proc);
				H_CHECK(suspects && strstr(suspects, "10352 (node-1294, culprit)"), &proc);
				/* what to do, and not to do, reaches Alertmanager */
				const char *action =
					json_string_value(json_object_get(json_object_get(a, "annotations"), "action"));
				const char *avoid =
					json_string_value(json_object_get(json_object_get(a, "annotations"), "avoid"));

				H_CHECK(action && strncmp(action, "drain node-1294 ", 16) == 0, &proc);
				H_CHECK(avoid && strstr(avoid, "port_down on node-1294"), &proc);
				seen = 1;
			}
		}
		json_decref(a);
		poll(NULL, 0, 250);
	}
	pthread_join(sim, NULL);
	H_CHECK(atomic_load(&sim_rc) == 0, &proc);
	H_CHECK(seen, &proc);

	/* recovered: resolved in the database and no longer active in Alertmanager */
	for (int64_t deadline = h_now_ms() + 60000;; poll(NULL, 0, 250)) {
		int n = active_alerts(&a);

		json_decref(a);
		if (n == 0 && at_sql_long(dsn, "SELECT count(*) FROM incidents WHERE state = 'open'") == 0)
			break;
		H_CHECK(h_now_ms() < deadline, &proc);
	}
	H_CHECK(at_sql_long(dsn, "SELECT count(*) FROM incidents WHERE key LIKE 'sim-case5/%' AND"
				 " category = 'compute_degradation' AND state = 'resolved'") >= 1,
		&proc);
	H_CHECK(at_sql_long(dsn, "SELECT count(*) FROM incidents WHERE category = 'hang'") == 0, &proc);
	H_CHECK(at_sql_long(dsn, "SELECT count(*) FROM alert_outbox WHERE target = 'alertmanager' AND state = 'sent'"
				 " AND dedup_key LIKE '%/resolved/%'") >= 1,
		&proc);
	status = h_proc_stop(&proc, SIGTERM, 60000);
	H_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, &proc);
	stop_am();
	printf("ok\n");
	return 0;
}
