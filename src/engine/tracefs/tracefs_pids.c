/* The tracefs engine's process filter (tracefs_pids.h). */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include <tracefs.h>

#include "core/grow.h"
#include "core/proc.h"
#include "engine/tracefs/tracefs_pids.h"

/* Task ids for set_event_pid, gathered to be written at once: each write
 * after the first makes the kernel wait for a grace period or two
 * (tracepoint_synchronize_unregister, 30-60 ms), so the filter is one
 * write, and a second only for the tasks born while it was made. */
struct tidset {
	struct tracefs_instance *inst;
	int *tids;
	size_t n, cap;
	void (*learn)(int tid, void *ctx);	/* when set: each task seen */
	void *ctx;
};

static bool tidset_has(const struct tidset *s, int tid)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->tids[i] == tid)
			return true;
	return false;
}

/* Every task of process pid into s; -ESRCH when it is gone. */
static int tidset_add_process(pid_t pid, void *ctx)
{
	struct tidset *s = ctx;
	char dir[64];
	DIR *d;
	struct dirent *de;
	int ret = 0;

	snprintf(dir, sizeof(dir), "/proc/%d/task", (int)pid);
	d = opendir(dir);
	if (!d)
		return -ESRCH;
	while ((de = readdir(d))) {
		int tid;

		if (!isdigit((unsigned char)de->d_name[0]))
			continue;
		tid = atoi(de->d_name);
		if (s->learn)
			s->learn(tid, s->ctx);
		if (tidset_has(s, tid))
			continue;
		if (core_reserve(s->tids, s->cap, s->n + 1, 16)) {
			ret = -ENOMEM;
			break;
		}
		s->tids[s->n++] = tid;
	}
	closedir(d);
	return ret;
}

/* -p: a process that descends from the target already (gone meanwhile:
 * nothing to add) */
static int tidset_add_descendant(pid_t pid, void *ctx)
{
	int ret = tidset_add_process(pid, ctx);

	return ret == -ESRCH ? 0 : ret;
}

/* The tasks of s from from on into set_event_pid, in one write (append: to
 * what it holds). */
static int tidset_write(const struct tidset *s, size_t from, bool append)
{
	size_t cap = (s->n - from) * 12 + 2, len = 0;
	char *buf = malloc(cap);
	int ret;

	if (!buf)
		return -ENOMEM;
	buf[0] = 0;
	for (size_t i = from; i < s->n; i++)
		len += (size_t)snprintf(buf + len, cap - len, "%d ", s->tids[i]);
	ret = append ? tracefs_instance_file_append(s->inst, "set_event_pid", buf) :
		       tracefs_instance_file_write(s->inst, "set_event_pid", buf);
	free(buf);
	return ret < 0 ? -EIO : 0;
}

int tracefs_pids_filter(struct tracefs_instance *inst, pid_t pid, bool follow,
			void (*learn)(int tid, void *ctx), void *ctx)
{
	struct tidset s = {.inst = inst, .ctx = ctx};
	size_t first;
	int ret = tidset_add_process(pid, &s);

	if (!ret && follow)
		ret = proc_descendants_each(pid, tidset_add_descendant, &s);
	if (!ret)
		ret = tidset_write(&s, 0, false);
	/* the tasks born meanwhile, each known by its process now (one that
	 * exits before its events are read is still named right) */
	first = s.n;
	s.learn = learn;
	if (!ret)
		ret = tidset_add_process(pid, &s);
	if (!ret && follow)
		ret = proc_descendants_each(pid, tidset_add_descendant, &s);
	if (!ret && s.n > first)
		ret = tidset_write(&s, first, true);
	free(s.tids);
	return ret;
}
