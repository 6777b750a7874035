/* config.h: culpritd's settings, all in one table (config.c).
 *
 * The table gives each setting its name, type, default, bounds, whether SIGHUP may change
 * it, and its help. The same table reads the config file ("name = value" lines, '#'
 * comments), the command line (--name value, with '_' written '-'), renders --help and
 * docs/config.md (culpritd --config-doc). */
#ifndef CULPRIT_CONFIG_H
#define CULPRIT_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "attrs.h"

struct config {
	char *data_dir;
	char *db;
	char *embedded_listen;
	char *embedded_grafana_password_file;
	char *agent_listen;
	char *http_listen;
	char *log_level;
	int64_t max_connections;
	int64_t max_connections_per_addr;
	int64_t max_connections_before_hello;
	int64_t max_jobs;
	int64_t job_retire_s;
	int64_t max_world;
	int64_t max_frame;
	int64_t max_frame_before_hello;
	int64_t max_input_buffer_bytes;
	int64_t max_names_per_job;
	int64_t hello_timeout_ms;
	int64_t idle_timeout_s;
	int64_t frame_timeout_s;
	int64_t max_ranks_per_agent;
	int64_t writer_queue_records;
	int64_t writer_txn_records;
	int64_t db_stall_s;
	int64_t retention_days;
	int64_t window_iters;
	int64_t http_max_body;
	int64_t http_max_headers;
	int64_t http_timeout_s;
	int64_t max_http_connections;
	/* authentication (auth.c) */
	char *agent_token;
	char *job_tokens_file;
	char *http_read_token;
	char *http_write_token;
	int64_t auth_failures_per_addr;
	/* TLS (tls.c) */
	char *tls_cert;
	char *tls_key;
	/* alerts (alerts.c, deliver.c) */
	char *alertmanager_url;
	char *webhook_url;
	char *webhook_secret;
	char *slack_url;
	char *pagerduty_url;
	char *pagerduty_routing_key;
	char *public_url;
	char *grafana_url;
	int64_t alert_resend_s;
	int64_t alert_backoff_max_s;
	int64_t alert_give_up_s;
	/* many instances (cluster.c) */
	char *advertise_agent_addr;
	char *advertise_api_url;
	char *instance_id;
	int64_t lease_s;
	int64_t max_relayed_agents;
	int64_t metrics_max_jobs;
	/* actions (actions.c, hooks.c) */
	char *action_modes;
	char *action_hook;
	int64_t action_timeout_s;
	int64_t action_retries;
	bool action_resume_on_resolve;
	char *operator_tokens_file;
	bool storage;
};

/* What culpritd does with an incident's action of a kind (setting action_modes). */
enum action_mode { ACTION_OFF, ACTION_DRY_RUN, ACTION_APPROVE, ACTION_AUTO };

/* The mode action_modes ("KIND=MODE,...") gives kind: ACTION_OFF for a kind it does not
 * name; -1 when modes is not well formed (config_check refuses it). */
int config_action_mode(const char *modes, const char *kind);
const char *config_action_mode_name(enum action_mode m);

/* Fills cfg with every default. */
void config_defaults(struct config *cfg);
void config_free(struct config *cfg);
/* Sets one setting from text. Returns 0, or -1 with a message in err naming the setting and
 * what is allowed. reload: refuse settings that cannot change at run time. */
MUST_CHECK int config_set(struct config *cfg, const char *name, const char *value, bool reload, char *err, size_t err_size);
/* Reads a file of "name = value" lines. -1 with "FILE:LINE: message" in err. */
MUST_CHECK int config_load_file(struct config *cfg, const char *path, bool reload, char *err, size_t err_size);
/* Cross-setting checks after everything is set. */
MUST_CHECK int config_check(const struct config *cfg, char *err, size_t err_size);
/* Deep copy (for an atomic reload: build a new one, check it, then swap). */
MUST_CHECK int config_copy(struct config *dst, const struct config *src);

/* The setting a --long-option names, or NULL ("--agent-listen" -> "agent_listen"). */
const char *config_option_name(const char *option, char *buf, size_t size);

void config_print_help(FILE *out);
void config_print_doc(FILE *out);
/* The value of string setting `name` as it may be shown (-t, logs): a secret as
 * "(set, not shown)" when set, the passwords inside a DSN or URL masked. Returns buf. */
const char *config_shown(const struct config *cfg, const char *name, char *buf, size_t size);
/* "name = value" for every setting (what -t prints), secrets masked as config_shown does. */
void config_print_values(const struct config *cfg, FILE *out);

/* Writes the printf-style message into err (size bytes): how the parsers here say why. */
void config_fail(char *err, size_t err_size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
