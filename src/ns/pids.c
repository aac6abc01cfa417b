/* PIDs: a task's ids in its own PID namespace, read from /proc (see ns.h).
 * The session keeps what it learnt per task in its cache
 * (src/cache/nsids.c): one /proc read per task. */
#include "ns/ns.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* The last number of a "Field:\tA\tB\tC" line. */
static long last_field(const char *line)
{
	const char *p = line + strlen(line);

	while (p > line && (p[-1] == '\n' || p[-1] == ' ' || p[-1] == '\t'))
		p--;
	while (p > line && p[-1] >= '0' && p[-1] <= '9')
		p--;
	return strtol(p, NULL, 10);
}

/* How many numbers a "Field:\tA\tB" line has. */
static int fields(const char *line)
{
	int n = 0;

	for (const char *p = strchr(line, ':'); p && *p; p++)
		if (*p >= '0' && *p <= '9' && (p[-1] == '\t' || p[-1] == ' ' || p[-1] == ':'))
			n++;
	return n;
}

int ns_task_ids(pid_t tid, pid_t *ns_pid, pid_t *ns_tid)
{
	char path[64], line[256];
	long tgid = 0, nstgid = 0, nspid = 0;
	int nested = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)tid);
	f = fopen(path, "re");
	if (!f)
		return errno == ENOENT ? -ESRCH : -errno;
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, "Tgid:", 5)) {
			tgid = last_field(line);
		} else if (!strncmp(line, "NStgid:", 7)) {
			nstgid = last_field(line);
		} else if (!strncmp(line, "NSpid:", 6)) {
			nspid = last_field(line);
			nested = fields(line) > 1;
			break;
		}
	}
	fclose(f);
	if (nested < 0 || !tgid) {	/* a kernel without NSpid: one namespace */
		*ns_pid = (pid_t)(tgid ? tgid : tid);
		*ns_tid = tid;
		return tgid ? 0 : -ESRCH;
	}
	*ns_pid = (pid_t)(nested ? nstgid : tgid);
	*ns_tid = (pid_t)(nested ? nspid : tid);
	return nested;
}

pid_t ns_inner_tid(pid_t tid)
{
	pid_t p, t;

	return ns_task_ids(tid, &p, &t) > 0 ? t : tid;
}
