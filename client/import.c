/* import.c: format detection, directory expansion and dispatch to the format importers. */
#include "import.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "import_chrome.h"
#include "import_csv.h"
#include "import_kineto.h"

static const char *const format_names[] = {"auto", "jsonl", "kineto", "chrome", "csv"};

int import_format_parse(const char *s)
{
	for (int i = 0; i < (int)(sizeof(format_names) / sizeof(format_names[0])); i++)
		if (strcmp(s, format_names[i]) == 0)
			return i;
	return -1;
}

const char *import_format_name(enum import_format f)
{
	return (unsigned)f < sizeof(format_names) / sizeof(format_names[0]) ? format_names[f] : "?";
}

static int has_any(const char *buf, const char *const *words)
{
	for (; *words; words++)
		if (strstr(buf, *words))
			return 1;
	return 0;
}

/* What only the PyTorch profiler writes: its top-level keys, or the categories and names of
 * its events (old traces have no schemaVersion, some no distributedInfo either). */
static const char *const kineto_keys[] = {
	"\"schemaVersion\"",
	"\"distributedInfo\"",
	"\"deviceProperties\"",
	NULL,
};
static const char *const kineto_marks[] = {
	"\"ProfilerStep#",
	"\"cpu_op\"",
	"\"cuda_runtime\"",
	"\"kernel\"",
	"\"Kernel\"",
	"\"Runtime\"",
	"\"user_annotation\"",
	"\"gpu_user_annotation\"",
	"\"python_function\"",
	"\"ac2g\"",
	NULL,
};

enum import_format import_detect(const char *path, char *err, size_t err_size)
{
	gzFile f = strcmp(path, "-") == 0 ? NULL : gzopen(path, "rb");
	if (!f) {
		snprintf(err, err_size, "%s: could not open: %s", path, strerror(errno ? errno : ENOMEM));
		return IMPORT_AUTO;
	}
	static char buf[8192];
	int n = gzread(f, buf, sizeof(buf) - 1);
	gzclose(f);
	if (n < 0) {
		snprintf(err, err_size, "%s: could not read (bad gzip data)", path);
		return IMPORT_AUTO;
	}
	buf[n] = 0;
	int i = 0;
	while (i < n && (buf[i] == ' ' || buf[i] == '\n' || buf[i] == '\r' || buf[i] == '\t'))
		i++;
	if (i == n)
		return IMPORT_JSONL; /* empty: no records */
	if (buf[i] == '[' || buf[i] == '{') {
		int j = i + 1;
		while (j < n && (buf[j] == ' ' || buf[j] == '\n' || buf[j] == '\r' || buf[j] == '\t'))
			j++;
		if (buf[i] == '[' && buf[j] == '[') {
			snprintf(err, err_size,
				 "%s: a memory-profiler timeline (torch.profiler export_memory_timeline), not a "
				 "profiler trace",
				 path);
			return IMPORT_AUTO;
		}
		if (buf[i] == '[') /* torch.profiler without Kineto (a CPU build) writes a bare array */
			return strstr(buf, "\"ProfilerStep#") || strstr(buf, "\"CPU functions\"") ? IMPORT_KINETO
												  : IMPORT_CHROME;
		if (strncmp(buf + j, "\"type\"", 6) == 0)
			return IMPORT_JSONL;
		int events = strstr(buf, "\"traceEvents\"") != NULL;
		if (!events && strstr(buf, "\"nodes\"") && strstr(buf, "\"schema\"")) {
			snprintf(err, err_size,
				 "%s: a PyTorch execution trace, not a profiler trace (culprit reads the "
				 "traces torch.profiler writes)",
				 path);
			return IMPORT_AUTO;
		}
		if (events)
			return has_any(buf, kineto_keys) || has_any(buf, kineto_marks) ? IMPORT_KINETO : IMPORT_CHROME;
		if (has_any(buf, kineto_keys)) /* traceEvents further on */
			return IMPORT_KINETO;
		char *nl = strchr(buf + i, '\n');
		if (nl)
			*nl = 0;
		if (strstr(buf + i, "\"type\""))
			return IMPORT_JSONL; /* a record line with "type" later */
		snprintf(err, err_size,
			 "%s: a JSON document that is not a trace (no traceEvents, and not interchange "
			 "JSONL: no \"type\")",
			 path);
		return IMPORT_AUTO;
	}
	char *nl = strchr(buf + i, '\n');
	if (nl)
		*nl = 0;
	if (strstr(buf + i, "worker") && strchr(buf + i, ','))
		return IMPORT_CSV;
	snprintf(err, err_size,
		 "%s: unrecognized format (expected JSONL, a PyTorch profiler or Chrome trace, or a "
		 "worker CSV)",
		 path);
	return IMPORT_AUTO;
}

static int trace_name(const char *name)
{
	static const char *const ends[] = {".json", ".jsonl", ".csv", ".json.gz", ".jsonl.gz", ".csv.gz", NULL};
	size_t len = strlen(name);

	if (name[0] == '.')
		return 0;
	for (const char *const *e = ends; *e; e++) {
		size_t el = strlen(*e);
		if (len > el && strcmp(name + len - el, *e) == 0)
			return 1;
	}
	return 0;
}

static int cmp_natural(const void *a, const void *b)
{
	return strverscmp(*(const char *const *)a, *(const char *const *)b);
}

/* A growing list of strings kept in one allocation at the end (import_expand). */
struct strlist {
	char **s;
	size_t n, cap;
};

static int strlist_add(struct strlist *l, const char *a, const char *b)
{
	if (l->n == l->cap) {
		size_t c = l->cap ? l->cap * 2 : 16;
		char **ns = realloc(l->s, c * sizeof(*ns));
		if (!ns)
			return -1;
		l->s = ns;
		l->cap = c;
	}
	size_t la = strlen(a), lb = b ? strlen(b) : 0;
	char *p = malloc(la + lb + 2);
	if (!p)
		return -1;
	memcpy(p, a, la);
	if (b) {
		if (la && a[la - 1] == '/')
			la--; /* "dir/" */
		p[la] = '/';
		memcpy(p + la + 1, b, lb + 1);
	} else {
		p[la] = 0;
	}
	l->s[l->n++] = p;
	return 0;
}

static void strlist_free(struct strlist *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->s[i]);
	free(l->s);
}

/* The files of directory dir that are traces, in natural order, appended to l. */
static int expand_dir(const char *dir, struct strlist *l, const struct import_options *opt, char *err, size_t err_size)
{
	DIR *d = opendir(dir);
	if (!d) {
		snprintf(err, err_size, "%s: could not open the directory: %s", dir, strerror(errno));
		return -1;
	}
	size_t first = l->n, skipped = 0;
	char example[256] = "";
	struct dirent *e;
	int rc = 0;
	while (!rc && (e = readdir(d))) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		if (!trace_name(e->d_name)) {
			if (!skipped++)
				snprintf(example, sizeof(example), "%s", e->d_name);
			continue;
		}
		rc = strlist_add(l, dir, e->d_name);
	}
	closedir(d);
	if (rc) {
		snprintf(err, err_size, "%s: out of memory", dir);
		return -1;
	}
	if (l->n == first) {
		snprintf(err, err_size,
			 "%s: no trace file in the directory (names ending in .json, .jsonl or .csv, "
			 "optionally .gz)",
			 dir);
		return -1;
	}
	qsort(l->s + first, l->n - first, sizeof(*l->s), cmp_natural);
	if (skipped)
		import_warn(opt, "%s: %zu trace files; %zu other files skipped (such as %s)", dir, l->n - first,
			    skipped, example);
	return 0;
}

int import_expand(const char *const *paths, size_t n, const struct import_options *opt, char ***out, size_t *nout,
		  char *err, size_t err_size)
{
	struct strlist l = {0};
	int rc = 0;
	for (size_t i = 0; i < n && !rc; i++) {
		struct stat st;
		if (strcmp(paths[i], "-") != 0 && stat(paths[i], &st) == 0 && S_ISDIR(st.st_mode))
			rc = expand_dir(paths[i], &l, opt, err, err_size);
		else if (strlist_add(&l, paths[i], NULL) < 0) {
			snprintf(err, err_size, "out of memory");
			rc = -1;
		}
	}
	if (rc) {
		strlist_free(&l);
		return -1;
	}
	/* one allocation: the pointers, then the strings */
	size_t bytes = l.n * sizeof(char *);
	for (size_t i = 0; i < l.n; i++)
		bytes += strlen(l.s[i]) + 1;
	char **v = malloc(bytes ? bytes : 1);
	if (!v) {
		strlist_free(&l);
		snprintf(err, err_size, "out of memory");
		return -1;
	}
	char *p = (char *)(v + l.n);
	for (size_t i = 0; i < l.n; i++) {
		size_t len = strlen(l.s[i]) + 1;
		memcpy(p, l.s[i], len);
		v[i] = p;
		p += len;
	}
	strlist_free(&l);
	*out = v;
	*nout = l.n;
	return 0;
}

int import_read(enum import_format fmt, const char *const *paths, size_t n, const struct import_options *opt,
		const struct jsonl_handler *h, char *err, size_t err_size)
{
	static const struct import_options none;
	if (!opt)
		opt = &none;
	size_t i = 0;
	while (i < n) {
		enum import_format f = fmt;
		if (f == IMPORT_AUTO) {
			if (strcmp(paths[i], "-") == 0)
				f = IMPORT_JSONL;
			else if ((f = import_detect(paths[i], err, err_size)) == IMPORT_AUTO)
				return -1;
		}
		/* a run of files of the same format goes to its importer together */
		size_t j = i + 1;
		if (fmt == IMPORT_AUTO)
			while (j < n && strcmp(paths[j], "-") != 0 && import_detect(paths[j], err, err_size) == f)
				j++;
		else
			j = n;
		int rc = 0;
		switch (f) {
		case IMPORT_JSONL:
			for (size_t k = i; k < j && !rc; k++)
				rc = jsonl_read(paths[k], h, NULL, err, err_size);
			break;
		case IMPORT_KINETO: rc = import_kineto_read(paths + i, j - i, opt, h, err, err_size); break;
		case IMPORT_CHROME:
			for (size_t k = i; k < j && !rc; k++)
				rc = import_chrome_read(paths[k], opt, h, err, err_size);
			break;
		case IMPORT_CSV:
			for (size_t k = i; k < j && !rc; k++)
				rc = import_csv_read(paths[k], opt, h, err, err_size);
			break;
		default: snprintf(err, err_size, "unknown format"); rc = -1;
		}
		if (rc)
			return -1;
		i = j;
	}
	return 0;
}
