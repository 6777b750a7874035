/* test_config.c: what -t prints and culpritd logs of each setting: secrets (a flag in the
 * settings table) only as "(set, not shown)", the passwords inside a DSN or URL masked,
 * everything else as it is; URL settings refuse other schemes without echoing the value. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

static void shown(void **state)
{
	static const struct {
		const char *name, *value, *want;
	} cases[] = {
		{"db", "host=db user=culprit password=pw1 dbname=culprit",
		 "host=db user=culprit password=**** dbname=culprit"},
		{"db", "password='p w\\'2' host=db", "password=**** host=db"},
		{"db", "host=db password = pw3", "host=db password=****"},
		{"db", "postgresql://culprit:pw4@db:5432/culprit", "postgresql://culprit:****@db:5432/culprit"},
		{"db", "postgresql://culprit:p@w5@db/culprit", "postgresql://culprit:****@db/culprit"},
		{"db", "postgresql://db/culprit?user=u&password=pw6&sslmode=require",
		 "postgresql://db/culprit?user=u&password=****&sslmode=require"},
		{"db", "postgresql://culprit@db/culprit", "postgresql://culprit@db/culprit"},
		{"db", "host=db user=mypassword", "host=db user=mypassword"},
		{"webhook_url", "https://user:pw7@hooks.example/in?x=1", "https://user:****@hooks.example/in?x=1"},
		{"webhook_url", "https://hooks.example/a:b@c", "https://hooks.example/a:b@c"},
		{"alertmanager_url", "http://am:pw8@am:9093", "http://am:****@am:9093"},
		{"public_url", "http://ops:pw9@culprit.example", "http://ops:****@culprit.example"},
		{"slack_url", "https://hooks.slack.com/services/T0/B0/KEY10", "(set, not shown)"},
		{"slack_url", "", ""},
		{"agent_token", "tok11,tok12", "(set, not shown)"},
		{"http_read_token", "tok13", "(set, not shown)"},
		{"http_write_token", "tok14", "(set, not shown)"},
		{"webhook_secret", "key15", "(set, not shown)"},
		{"pagerduty_routing_key", "key16", "(set, not shown)"},
		{"job_tokens_file", "/etc/culprit/job_tokens", "/etc/culprit/job_tokens"},
		{"data_dir", "/var/lib/password=x", "/var/lib/password=x"},
	};
	char err[256], buf[512];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct config cfg;

		config_defaults(&cfg);
		assert_int_equal(config_set(&cfg, cases[i].name, cases[i].value, false, err, sizeof(err)), 0);
		config_shown(&cfg, cases[i].name, buf, sizeof(buf));
		if (strcmp(buf, cases[i].want) != 0)
			fail_msg("%s = \"%s\": shown as \"%s\", want \"%s\"", cases[i].name, cases[i].value, buf,
				 cases[i].want);
		config_free(&cfg);
	}
	(void)state;
}

/* A password cut by a short buffer is still not shown. */
static void shown_short_buffer(void **state)
{
	struct config cfg;
	char err[256], buf[24];

	config_defaults(&cfg);
	assert_int_equal(config_set(&cfg, "db", "host=db password=abcdefghijkl", false, err, sizeof(err)), 0);
	config_shown(&cfg, "db", buf, sizeof(buf));
	assert_string_equal(buf, "host=db password=****");
	assert_int_equal(config_set(&cfg, "db", "host=database.example password=abcdefghijkl", false, err, sizeof(err)),
			 0);
	config_shown(&cfg, "db", buf, sizeof(buf));
	assert_null(strstr(buf, "abc"));
	config_free(&cfg);
	(void)state;
}

static void url_schemes(void **state)
{
	static const struct {
		const char *name, *value;
		int ok;
	} cases[] = {
		{"webhook_url", "https://hooks.example/in", 1}, {"webhook_url", "HTTP://hooks.example/in", 1},
		{"webhook_url", "ftp://hooks.example/in", 0},   {"webhook_url", "file:///etc/passwd", 0},
		{"webhook_url", "hooks.example/in", 0},         {"slack_url", "gopher://SECRETPATH", 0},
		{"alertmanager_url", "dict://am:11211", 0},     {"pagerduty_url", "ldap://pd", 0},
		{"public_url", "javascript:alert(1)", 0},       {"webhook_url", "", 1},
	};
	char err[256];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct config cfg;
		int rc;

		config_defaults(&cfg);
		assert_int_equal(config_set(&cfg, cases[i].name, cases[i].value, false, err, sizeof(err)), 0);
		err[0] = '\0';
		rc = config_check(&cfg, err, sizeof(err));
		if ((rc == 0) != cases[i].ok)
			fail_msg("%s = \"%s\": config_check %d (%s)", cases[i].name, cases[i].value, rc, err);
		if (!cases[i].ok) {
			assert_non_null(strstr(err, cases[i].name));
			assert_null(strstr(err, "SECRETPATH")); /* the value is not echoed */
		}
		config_free(&cfg);
	}
	(void)state;
}

/* action_modes: KIND=MODE pairs; on needs action_hook, approve needs operator_tokens_file */
static void action_modes(void **state)
{
	static const struct {
		const char *modes, *hook, *ops;
		int ok;
	} cases[] = {
		{"", "", "", 1},
		{"drain_node=auto", "/h", "", 1},
		{"drain_node=dry_run,inspect_host=off", "/h", "", 1},
		{"drain_node=approve", "/h", "/ops", 1},
		{"drain_node=approve", "/h", "", 0},
		{"drain_node=auto", "", "", 0},
		{"drain_node=off", "", "", 1},
		{"drain_node", "/h", "", 0},
		{"drain_node=sometimes", "/h", "", 0},
		{"reboot_node=auto", "/h", "", 0},
		{"drain_node=auto,", "/h", "", 0},
	};
	char err[512];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct config cfg;
		int rc;

		config_defaults(&cfg);
		assert_int_equal(config_set(&cfg, "action_modes", cases[i].modes, false, err, sizeof(err)), 0);
		assert_int_equal(config_set(&cfg, "action_hook", cases[i].hook, false, err, sizeof(err)), 0);
		assert_int_equal(config_set(&cfg, "operator_tokens_file", cases[i].ops, false, err, sizeof(err)), 0);
		rc = config_check(&cfg, err, sizeof(err));
		if ((rc == 0) != cases[i].ok)
			fail_msg("action_modes \"%s\": config_check %d (%s)", cases[i].modes, rc, err);
		config_free(&cfg);
	}
	assert_int_equal(config_action_mode("inspect_host=dry_run,drain_node=approve", "drain_node"), ACTION_APPROVE);
	assert_int_equal(config_action_mode("inspect_host=dry_run", "drain_node"), ACTION_OFF);
	(void)state;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(shown),
		cmocka_unit_test(shown_short_buffer),
		cmocka_unit_test(url_schemes),
		cmocka_unit_test(action_modes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
