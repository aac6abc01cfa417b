#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/proc.h"

/* The last number of a "Field:\tA\tB\tC" line, and how many it has. */
static long last_field(const char *v, int *n)
{
	long last = 0;
	char *end;

	*n = 0;
	for (;;) {
		long x;

		while (*v == ' ' || *v == '\t')
			v++;
		x = strtol(v, &end, 10);
		if (end == v)
			return last;
		last = x;
		++*n;
		v = end;
	}
}

static void field(struct proc_status *st, const char *key, const char *v)
{
	int n;

	if (!strcmp(key, "Name")) {
		while (*v == ' ' || *v == '\t')
			v++;
		snprintf(st->name, sizeof(st->name), "%.*s", (int)strcspn(v, "\n"), v);
	} else if (!strcmp(key, "Tgid")) {
		st->tgid = (pid_t)strtol(v, NULL, 10);
	} else if (!strcmp(key, "PPid")) {
		st->ppid = (pid_t)strtol(v, NULL, 10);
	} else if (!strcmp(key, "TracerPid")) {
		st->tracer = (pid_t)strtol(v, NULL, 10);
	} else if (!strcmp(key, "NStgid")) {
		st->ns_tgid = (pid_t)last_field(v, &n);
	} else if (!strcmp(key, "NSpid")) {
		st->ns_tid = (pid_t)last_field(v, &n);
		st->ns_nested = n > 1;
		st->ns_known = true;
	} else if (!strcmp(key, "Seccomp")) {
		st->seccomp = (int)strtol(v, NULL, 10);
	} else if (!strcmp(key, "x86_Thread_features")) {
		st->shstk = strstr(v, "shstk") != NULL;
	} else if (!strcmp(key, "CapEff")) {
		st->cap_eff = strtoull(v, NULL, 16);
	}
}

int proc_status_read(pid_t pid, struct proc_status *st)
{
	char path[64], line[512];
	FILE *f;

	memset(st, 0, sizeof(*st));
	if (pid)
		snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	else
		snprintf(path, sizeof(path), "/proc/self/status");
	f = fopen(path, "re");
	if (!f)
		return errno == ENOENT ? -ESRCH : -errno;
	for (bool whole = true; fgets(line, sizeof(line), f);) {
		char *colon = strchr(line, ':');
		bool head = whole;	/* (not the rest of a long line: Groups:) */

		whole = strchr(line, '\n') != NULL;
		if (!head || !colon)
			continue;
		*colon = 0;
		field(st, line, colon + 1);
	}
	fclose(f);
	return st->tgid ? 0 : -ESRCH;	/* (a task reaped as we read) */
}

int proc_auxv_read(pid_t pid, const uint64_t *types, uint64_t *vals, size_t n)
{
	char path[64];
	uint64_t kv[2];
	int fd, found = 0;

	snprintf(path, sizeof(path), "/proc/%d/auxv", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	memset(vals, 0, n * sizeof(*vals));
	while (read(fd, kv, sizeof(kv)) == (ssize_t)sizeof(kv) && kv[0] != AT_NULL)
		for (size_t i = 0; i < n; i++)
			if (kv[0] == types[i]) {
				vals[i] = kv[1];
				found++;
			}
	close(fd);
	return found;
}
