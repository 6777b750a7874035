/* test_tls.c: TLS against the real culpritd on a real PostgreSQL, with a test CA and
 * server certificates made here by the openssl command in the test's scratch directory
 * (no key is committed).
 *
 *   1. An agent of the agent library over TLS, trusting the test CA, streams and gets its
 *      batches acknowledged (and its token checked); one trusting another CA does not
 *      connect, and neither does a plaintext client, which the server closes and counts
 *      (culprit_agent_connections_closed_total{reason="tls"}).
 *   2. The REST API answers over HTTPS (libcurl, verifying the certificate), with the
 *      tokens, and gives plain HTTP no answer.
 *   3. SIGHUP re-reads the certificate: after it points at one signed by the second CA,
 *      agents trusting that CA connect and those trusting the first do not; a key file
 *      that is not there keeps the old configuration. */
#include <curl/curl.h>
#include <endian.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent.h"
#include "harness.h"

#define AGENT_TOKEN "tls-agent-token-123"
#define READ_TOKEN "tls-read-token"
#define WRITE_TOKEN "tls-write-token"

static struct h_proc proc;
static char dir[600], conf_path[700];

/* CA NAME (NAME.crt, NAME.key) and a server certificate SERVER signed by it for
 * 127.0.0.1 and localhost */
static void make_ca_and_server(const char *ca, const char *server)
{
	char cmd[4096];

	snprintf(cmd, sizeof(cmd),
		 "cd '%s' && openssl req -x509 -newkey rsa:2048 -nodes -keyout %s.key -out %s.crt -days 2 "
		 "-subj '/CN=culprit test CA %s' >/dev/null 2>&1 && "
		 "openssl req -newkey rsa:2048 -nodes -keyout %s.key -out %s.csr -subj '/CN=localhost' >/dev/null 2>&1 "
		 "&& "
		 "printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\\n' > %s.ext && "
		 "openssl x509 -req -in %s.csr -CA %s.crt -CAkey %s.key -CAcreateserial -out %s.crt -days 2 "
		 "-extfile %s.ext >/dev/null 2>&1",
		 dir, ca, ca, ca, server, server, server, server, ca, ca, server, server);
	H_CHECK(system(cmd) == 0, &proc);
}

static void write_conf(const char *cert, const char *key)
{
	FILE *f = fopen(conf_path, "w");

	H_CHECK(f != NULL, &proc);
	fprintf(f, "tls_cert = %s/%s\ntls_key = %s/%s\nagent_token = %s\nhttp_read_token = %s\nhttp_write_token = %s\n",
		dir, cert, dir, key, AGENT_TOKEN, READ_TOKEN, WRITE_TOKEN);
	fclose(f);
}

/* ---- HTTPS with libcurl ---- */

struct buf {
	char *p;
	size_t n;
};

static size_t collect(char *data, size_t size, size_t n, void *arg)
{
	struct buf *b = arg;
	char *p = realloc(b->p, b->n + size * n + 1);

	if (!p)
		return 0;
	memcpy(p + b->n, data, size * n);
	b->p = p;
	b->n += size * n;
	b->p[b->n] = '\0';
	return size * n;
}

/* status of an HTTPS request verified against ca ("" for none: must fail), or -1 */
static long https(const char *ca, const char *method, const char *path, const char *token, const char *body, char **out)
{
	CURL *c = curl_easy_init();
	struct curl_slist *h = NULL;
	struct buf b = {0};
	char url[256], auth[256], ca_path[800];
	long status = -1;

	H_CHECK(c != NULL, &proc);
	snprintf(url, sizeof(url), "https://127.0.0.1:%d%s", proc.http_port, path);
	snprintf(ca_path, sizeof(ca_path), "%s/%s", dir, ca);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_CAINFO, ca_path);
	curl_easy_setopt(c, CURLOPT_CAPATH, NULL);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 20L);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
	if (token) {
		snprintf(auth, sizeof(auth), "Authorization: Bearer %s", token);
		h = curl_slist_append(h, auth);
	}
	h = curl_slist_append(h, "Content-Type: application/json");
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	if (body)
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
	if (curl_easy_perform(c) == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	curl_slist_free_all(h);
	curl_easy_cleanup(c);
	if (out)
		*out = b.p ? b.p : strdup("");
	else
		free(b.p);
	return status;
}

static double metric(const char *sample)
{
	char *body = NULL;
	double v;

	H_CHECK(https("ca1.crt", "GET", "/metrics", READ_TOKEN, NULL, &body) == 200, &proc);
	v = h_metric(body, sample);
	free(body);
	return v;
}

/* ---- agents ---- */

/* An agent trusting ca streams 3 iterations of 8 ranks: 1 when all were acknowledged in
 * timeout_ms, 0 when it never connected. */
static int agent_run(const char *ca, const char *server_host, const char *agent_id, int timeout_ms)
{
	uint32_t ranks[8];
	char server[64], ca_path[800];
	struct agent_config cfg = {0};
	struct agent_stats st;
	struct agent *a;
	static uint32_t iter;
	int rc;

	for (int i = 0; i < 8; i++)
		ranks[i] = (uint32_t)i;
	snprintf(server, sizeof(server), "%s:%d", server_host, proc.agent_port);
	snprintf(ca_path, sizeof(ca_path), "%s/%s", dir, ca);
	cfg.server = server;
	cfg.job = "tls-job";
	cfg.topo = (struct agent_topology){.world = 8, .tp = 1, .cp = 1, .pp = 1, .dp = 8, .ep = 1, .gpus_per_node = 8};
	cfg.agent_id = agent_id;
	cfg.host = "node-0";
	cfg.ranks = ranks;
	cfg.n_ranks = 8;
	cfg.token = AGENT_TOKEN;
	cfg.tls_ca = ca_path;
	cfg.flush_interval_ms = 20;
	cfg.backoff_min_ms = 50;
	cfg.backoff_max_ms = 200;
	a = agent_new(&cfg);
	H_CHECK(a != NULL, &proc);
	for (int k = 0; k < 3; k++, iter++)
		for (uint32_t r = 0; r < 8; r++) {
			struct record_iter it = {.rank = r,
						 .iter = iter,
						 .start_us = 1700000000000000LL + iter * 30000000LL,
						 .dur_us = 30000000};

			H_CHECK(agent_add_iters(a, &it, 1) == 0, &proc);
		}
	rc = agent_flush(a, timeout_ms);
	agent_get_stats(a, &st);
	agent_close(a, 0);
	if (rc == 0) {
		H_CHECK(st.batches_acked > 0 && st.connects >= 1, &proc);
		return 1;
	}
	H_CHECK(st.connects == 0 && st.batches_acked == 0, &proc);
	return 0;
}

int main(void)
{
	char dsn[1024], db_arg[1100], *body = NULL;
	const char *extra[] = {"--db", db_arg, "--config", conf_path, NULL};
	double tls_closed;
	int reloads = 0;

	curl_global_init(CURL_GLOBAL_DEFAULT);
	h_db_create("test_tls", dsn, sizeof(dsn));
	snprintf(db_arg, sizeof(db_arg), "%s", dsn);
	h_tmpdir("tls", dir, sizeof(dir));
	snprintf(conf_path, sizeof(conf_path), "%s/culpritd.conf", dir);
	make_ca_and_server("ca1", "server1");
	make_ca_and_server("ca2", "server2");
	write_conf("server1.crt", "server1.key");
	H_CHECK(h_culpritd_start(&proc, dir, extra) == 0, &proc);
	H_CHECK(h_log_wait(&proc, "REST API on https://", 1, 0), &proc);

	/* 1. agents */
	H_CHECK(agent_run("ca1.crt", "127.0.0.1", "a1", 20000) == 1, &proc);
	H_CHECK(agent_run("ca1.crt", "localhost", "a2", 20000) == 1, &proc); /* by name */
	tls_closed = metric("culprit_agent_connections_closed_total{reason=\"tls\"}");
	H_CHECK(agent_run("ca2.crt", "127.0.0.1", "a3", 1500) == 0, &proc); /* another CA */
	H_CHECK(metric("culprit_agent_connections_closed_total{reason=\"tls\"}") > tls_closed, &proc);
	{
		/* a plaintext client sending a Hello frame's length prefix and bytes */
		static const uint8_t plain[] = {0, 0, 0, 8, 0x0a, 0x06, 0x08, 0x01, 0x12, 0x02, 0x4a, 0x31};
		int fd = h_connect(proc.agent_port);

		tls_closed = metric("culprit_agent_connections_closed_total{reason=\"tls\"}");
		H_CHECK(fd >= 0, &proc);
		H_CHECK(h_write_all(fd, plain, sizeof(plain)) == 0, &proc);
		H_CHECK(h_peer_closed(fd, 5000), &proc);
		close(fd);
		H_CHECK(metric("culprit_agent_connections_closed_total{reason=\"tls\"}") == tls_closed + 1, &proc);
		H_CHECK(metric("culprit_agent_connections_closed_total{reason=\"refused\"}") == 0, &proc);
	}

	/* 2. REST over HTTPS */
	H_CHECK(https("ca1.crt", "GET", "/healthz", NULL, NULL, NULL) == 200, &proc);
	H_CHECK(https("ca2.crt", "GET", "/healthz", NULL, NULL, NULL) == -1, &proc); /* not trusted */
	H_CHECK(https("ca1.crt", "GET", "/api/v1/jobs", NULL, NULL, NULL) == 401, &proc);
	H_CHECK(https("ca1.crt", "GET", "/api/v1/jobs", READ_TOKEN, NULL, &body) == 200, &proc);
	H_CHECK(strstr(body, "\"tls-job\"") != NULL, &proc);
	free(body);
	H_CHECK(https("ca1.crt", "POST", "/api/v1/events", READ_TOKEN, "{\"host\":\"node-0\",\"kind\":\"x\"}", NULL) ==
			403,
		&proc);
	H_CHECK(https("ca1.crt", "POST", "/api/v1/events", WRITE_TOKEN, "{\"host\":\"node-0\",\"kind\":\"x\"}", NULL) ==
			202,
		&proc);
	H_CHECK(h_http(proc.http_port, "GET", "/healthz", NULL, &body) == -1, &proc); /* plain HTTP */
	free(body);

	/* 3. SIGHUP: a key that is not there keeps the old configuration */
	write_conf("server2.crt", "missing.key");
	kill(proc.pid, SIGHUP);
	H_CHECK(h_log_wait(&proc, "keeping the old configuration", 1, 10000), &proc);
	H_CHECK(h_log_wait(&proc, "setting \"tls_key\"", 1, 0), &proc);
	H_CHECK(agent_run("ca1.crt", "127.0.0.1", "a1", 20000) == 1, &proc);
	/* the certificate of the second CA */
	write_conf("server2.crt", "server2.key");
	kill(proc.pid, SIGHUP);
	H_CHECK(h_log_wait(&proc, "SIGHUP: configuration reloaded", ++reloads, 10000), &proc);
	H_CHECK(agent_run("ca2.crt", "127.0.0.1", "a1", 20000) == 1, &proc);
	H_CHECK(agent_run("ca1.crt", "127.0.0.1", "a4", 1500) == 0, &proc);
	H_CHECK(https("ca2.crt", "GET", "/api/v1/jobs", READ_TOKEN, NULL, NULL) == 200, &proc);

	H_CHECK(h_proc_stop(&proc, SIGTERM, 60000) == 0, &proc);
	curl_global_cleanup();
	return 0;
}
