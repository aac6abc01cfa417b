#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
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
	} else if (!strcmp(key, "Uid")) {
		st->uid = (uint32_t)strtoul(v, NULL, 10);
	} else if (!strcmp(key, "Gid")) {
		st->gid = (uint32_t)strtoul(v, NULL, 10);
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

struct proc_node {
	pid_t pid, ppid;
	bool skip;	/* a kernel thread, uscope's own */
	bool in;	/* descends from the root */
};

#define PF_KTHREAD_FLAG 0x00200000u	/* the stat line's flags: a kernel thread */

/* Its parent and whether it is a kernel thread, from /proc/PID/stat. */
static int stat_read(pid_t pid, pid_t *ppid, bool *kthread)
{
	char path[64], buf[1024], *p;
	unsigned long flags = 0;
	int pp = 0;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -ESRCH;
	buf[n] = 0;
	p = strrchr(buf, ')');	/* past the name, which may hold anything */
	/* ") S ppid pgrp session tty_nr tpgid flags" */
	if (!p || sscanf(p + 1, " %*c %d %*d %*d %*d %*d %lu", &pp, &flags) != 2)
		return -ESRCH;
	*ppid = (pid_t)pp;
	*kthread = (flags & PF_KTHREAD_FLAG) != 0;
	return 0;
}

static bool runs_exe(pid_t pid, const struct stat *self)
{
	char path[64];
	struct stat st;

	snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
	return stat(path, &st) == 0 && st.st_dev == self->st_dev && st.st_ino == self->st_ino;
}

long proc_descendants(pid_t root, pid_t **out)
{
	struct proc_node *v = NULL;
	size_t n = 0, cap = 0, found = 0;
	pid_t me = getpid(), *res;
	struct dirent *de;
	struct stat self;
	bool grew;
	DIR *d;

	*out = NULL;
	if (stat("/proc/self/exe", &self))
		memset(&self, 0, sizeof(self));
	d = opendir("/proc");
	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		pid_t pid = (pid_t)atoi(de->d_name), ppid = 0;
		bool kthread = false;

		if (pid <= 0 || pid == root || stat_read(pid, &ppid, &kthread))
			continue;
		if (n == cap) {
			struct proc_node *nv = realloc(v, (cap = cap ? 2 * cap : 256) * sizeof(*v));

			if (!nv) {
				closedir(d);
				free(v);
				return -ENOMEM;
			}
			v = nv;
		}
		v[n++] = (struct proc_node){.pid = pid, .ppid = ppid, .skip = kthread || pid == me};
	}
	closedir(d);
	/* the tree, from the root down: a pass per generation */
	do {
		grew = false;
		for (size_t i = 0; i < n; i++) {
			bool parent_in = v[i].ppid == root;

			if (v[i].in || v[i].skip)
				continue;
			for (size_t k = 0; k < n && !parent_in; k++)
				parent_in = v[k].in && v[k].pid == v[i].ppid;
			if (!parent_in)
				continue;
			if (runs_exe(v[i].pid, &self)) {
				v[i].skip = true;
				continue;
			}
			v[i].in = grew = true;
			found++;
		}
	} while (grew);
	res = found ? malloc(found * sizeof(*res)) : NULL;
	if (found && !res) {
		free(v);
		return -ENOMEM;
	}
	found = 0;
	for (size_t i = 0; i < n; i++)
		if (v[i].in)
			res[found++] = v[i].pid;
	free(v);
	*out = res;
	return (long)found;
}

int proc_descendants_each(pid_t root, int (*fn)(pid_t pid, void *ctx), void *ctx)
{
	pid_t *seen = NULL;
	size_t nseen = 0;
	int ret = 0;

	for (int pass = 0; pass < 64 && !ret; pass++) {
		pid_t *now, *ns;
		long n = proc_descendants(root, &now);
		size_t fresh = 0;

		if (n < 0) {
			ret = (int)n;
			break;
		}
		ns = n ? realloc(seen, (nseen + (size_t)n) * sizeof(*seen)) : seen;
		if (n && !ns) {
			free(now);
			ret = -ENOMEM;
			break;
		}
		seen = ns;
		for (long i = 0; i < n && !ret; i++) {
			size_t k;

			for (k = 0; k < nseen && seen[k] != now[i]; k++)
				;
			if (k < nseen)
				continue;
			seen[nseen++] = now[i];
			fresh++;
			ret = fn(now[i], ctx);
		}
		free(now);
		if (!fresh)
			break;
	}
	free(seen);
	return ret;
}

int proc_main_stack(pid_t pid, uint64_t *top, uint64_t *size)
{
	char path[64], buf[1024], *p;
	unsigned long long v = 0;
	struct rlimit rl;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return n < 0 ? -errno : -EIO;
	buf[n] = 0;
	/* after the comm's last ')': state is field 3, startstack field 28 */
	if (!(p = strrchr(buf, ')')))
		return -EIO;
	p++;
	for (int f = 3; f <= 28; f++) {
		char *end;

		v = strtoull(p, &end, 10);
		if (f == 3) {	/* (a letter) */
			while (*p == ' ')
				p++;
			end = p + 1;
		} else if (end == p) {
			return -EIO;
		}
		p = end;
	}
	if (!v)
		return -ENOENT;
	*top = v;
	*size = 8ULL << 20;
	if (!prlimit(pid, RLIMIT_STACK, NULL, &rl) && rl.rlim_cur != RLIM_INFINITY &&
	    rl.rlim_cur >= 65536)
		*size = rl.rlim_cur;
	return 0;
}
