/* test_online_hang.c: a job whose rank stops reporting while its agents stay connected
 * (culprit sim --scenario hang --linger) makes the real culpritd open a hang incident
 * naming that rank and its host, found through the REST API; the healthy ranks that keep
 * reporting are not named. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "harness.h"

int main(void)
{
	struct h_proc p;
	char dsn[1024], dir[600], cmd[2048];
	const char *extra[] = {"--db", dsn, NULL};
	json_t *latest = NULL;
	pid_t sim;

	h_db_create("test_online_hang", dsn, sizeof(dsn));
	h_tmpdir("online_hang", dir, sizeof(dir));
	H_CHECK(h_culpritd_start(&p, dir, extra) == 0, &p);

	snprintf(cmd, sizeof(cmd), "127.0.0.1:%d", p.agent_port);
	sim = fork();
	if (sim == 0) {
		execl(CULPRIT_BIN, CULPRIT_BIN, "sim", "--scenario", "hang", "--linger", "40", "--quiet", "--server",
		      cmd, (char *)NULL);
		_exit(127);
	}
	/* the hang must be named while the agents are still connected */
	for (int64_t deadline = h_now_ms() + 60000; h_now_ms() < deadline; usleep(200000)) {
		char *body = NULL;

		if (h_http(p.http_port, "GET", "/api/v1/jobs/sim-hang/reports/latest", NULL, &body) == 200) {
			json_t *j = json_loads(body, 0, NULL);
			const char *cat = json_string_value(json_object_get(json_object_get(j, "verdict"), "category"));

			if (cat && strcmp(cat, "hang") == 0) {
				latest = j;
				free(body);
				break;
			}
			json_decref(j);
		}
		free(body);
	}
	H_CHECK(latest != NULL, &p);
	json_t *suspects = json_object_get(latest, "suspects");
	size_t culprits = 0;
	for (size_t i = 0; i < json_array_size(suspects); i++) {
		json_t *s = json_array_get(suspects, i);

		if (strcmp(json_string_value(json_object_get(s, "role")), "culprit") != 0)
			continue;
		culprits++;
		H_CHECK(json_integer_value(json_object_get(s, "rank")) == 777, &p);
		H_CHECK(strcmp(json_string_value(json_object_get(s, "host")), "node-97") == 0, &p);
	}
	H_CHECK(culprits == 1, &p);
	json_decref(latest);

	/* the incident is open, with the hang category */
	{
		char *body = NULL;

		H_CHECK(h_http(p.http_port, "GET", "/api/v1/jobs/sim-hang/incidents", NULL, &body) == 200, &p);
		H_CHECK(strstr(body, "\"hang\"") != NULL, &p);
		free(body);
	}
	kill(sim, SIGTERM);
	waitpid(sim, NULL, 0);
	H_CHECK(h_proc_stop(&p, SIGTERM, 30000) == 0, &p);
	printf("online hang: rank 777 on node-97 named while its agents stayed connected\n");
	return 0;
}
