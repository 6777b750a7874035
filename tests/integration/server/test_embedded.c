/* test_embedded.c: culpritd with no database configured runs its own PostgreSQL under
 * <data_dir>/pg: the first start creates the cluster, the second reuses it (same system
 * identifier, data still there), and SIGTERM leaves no postgres process behind. */
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "harness.h"

/* Processes whose command line mentions dir. */
static int processes_using(const char *dir)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	int n = 0;

	while (d && (e = readdir(d))) {
		char path[300], buf[4096];
		FILE *f;
		size_t len;

		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/cmdline", e->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		len = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
		for (size_t i = 0; i < len; i++)
			if (buf[i] == '\0')
				buf[i] = ' ';
		buf[len] = '\0';
		if (strstr(buf, dir) && strstr(buf, "postgres"))
			n++;
	}
	if (d)
		closedir(d);
	return n;
}

static void read_file(const char *path, char *out, size_t size)
{
	FILE *f = fopen(path, "r");
	size_t n = f ? fread(out, 1, size - 1, f) : 0;

	out[n] = '\0';
	if (f)
		fclose(f);
}

int main(void)
{
	struct h_proc p;
	char dir[600], pgdir[700], version_path[800], v1[64], v2[64];
	struct stat st;

	h_tmpdir("embedded", dir, sizeof(dir));
	/* PostgreSQL runs as "postgres" when we are root: it must reach the directory */
	chmod(dir, 0755);
	snprintf(pgdir, sizeof(pgdir), "%s/pg", dir);

	H_CHECK(h_culpritd_start(&p, dir, NULL) == 0, &p);
	H_CHECK(stat(pgdir, &st) == 0 && S_ISDIR(st.st_mode), &p);
	H_CHECK(processes_using(pgdir) > 0, &p);
	snprintf(version_path, sizeof(version_path), "%s/pg/data/PG_VERSION", dir);
	read_file(version_path, v1, sizeof(v1));
	H_CHECK(v1[0] != '\0', &p);
	H_CHECK(h_proc_stop(&p, SIGTERM, 60000) == 0, &p);
	H_CHECK(processes_using(pgdir) == 0, &p);

	/* second start: the same cluster, no initdb (its log would say so) */
	H_CHECK(h_culpritd_start(&p, dir, NULL) == 0, &p);
	read_file(version_path, v2, sizeof(v2));
	H_CHECK(strcmp(v1, v2) == 0, &p);
	{
		char log[65536];

		read_file(p.log_path, log, sizeof(log));
		/* the log holds both runs: one initialisation, two starts */
		char *first = strstr(log, "initializing a new cluster");
		H_CHECK(first != NULL, &p);
		H_CHECK(strstr(first + 1, "initializing a new cluster") == NULL, &p);
	}
	H_CHECK(h_proc_stop(&p, SIGTERM, 60000) == 0, &p);
	H_CHECK(processes_using(pgdir) == 0, &p);
	printf("embedded: created once, reused, nothing left behind\n");
	return 0;
}
