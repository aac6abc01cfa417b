/* JIT frames' names: the perf maps a JIT writes (node --perf-basic-prof,
 * CPython -X perf, the JVM's perf-map-agent, LuaJIT), read as perf reads
 * them. /tmp/perf-PID.map, and /tmp/perf-PID.dump when there is one, hold
 * a line a symbol: "START SIZE name", START and SIZE in hex (a "0x" or not),
 * the name the rest of the line. A JIT appends to them as it compiles; an
 * address compiled again (the same memory reused) is named by the later
 * line. A process in another pid namespace names its map with its pid
 * there and writes it in its own /tmp: /proc/PID/root/tmp/perf-NSPID.map.
 *
 * Each process's files are opened once and kept open (so a process that
 * has exited is still named), and read on from where the last read ended
 * whenever they have grown: a lookup costs an fstat, and a binary search
 * over the symbols sorted by start (with, at each, the highest end before
 * it, so that the earlier symbols overlapping an address are few to look
 * at). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/proc.h"
#include "stack/stack_int.h"

#define PERFMAP_PROCS 32	/* processes whose maps are kept open */
#define PERFMAP_RETRY_MS 1000	/* a process without a map: looked for again */
#define PERFMAP_LINE 4096	/* longer lines are cut (the name) */

struct pm_sym {
	uint64_t start, end;
	uint32_t seq;		/* the order read: a later one wins */
	uint32_t name;		/* offset in names */
};

struct pm_file {
	int fd;			/* -1: none */
	off_t off;		/* read up to here: after the last whole line */
};

struct pm_proc {
	pid_t pid;
	uint64_t tried;		/* ms: when it was last looked for */
	struct pm_file f[2];	/* .map, .dump */
	struct pm_sym *v;	/* sorted by start, then seq */
	uint64_t *maxend;	/* maxend[i]: the highest end of v[0..i] */
	size_t n, cap;
	char *names;
	size_t nlen, ncap;
	uint32_t seq;
	uint64_t used;
};

struct stack_perfmaps {
	struct pm_proc p[PERFMAP_PROCS];
	uint64_t tick;
};

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void proc_clear(struct pm_proc *p)
{
	for (int i = 0; i < 2; i++)
		if (p->f[i].fd >= 0)
			close(p->f[i].fd);
	free(p->v);
	free(p->maxend);
	free(p->names);
	memset(p, 0, sizeof(*p));
	p->f[0].fd = p->f[1].fd = -1;
}

void stack_perfmaps_free(struct stack_perfmaps *pm)
{
	if (!pm)
		return;
	for (size_t i = 0; i < PERFMAP_PROCS; i++)
		if (pm->p[i].pid)
			proc_clear(&pm->p[i]);
	free(pm);
}

/* The pid of pid in its own namespace (the last of /proc/PID/status's
 * NStgid), or pid. */
static pid_t ns_pid(pid_t pid)
{
	struct proc_status st;

	if (proc_status_read(pid, &st) || !st.ns_known || st.ns_tgid <= 0)
		return pid;
	return st.ns_tgid;
}

/* Open the process's file of this suffix: in its root's /tmp under its
 * namespace's pid, else in ours. */
static int open_map(pid_t pid, pid_t ns, const char *suffix)
{
	char path[96];
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/root/tmp/perf-%d.%s", (int)pid, (int)ns, suffix);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0)
		return fd;
	snprintf(path, sizeof(path), "/tmp/perf-%d.%s", (int)pid, suffix);
	return open(path, O_RDONLY | O_CLOEXEC);
}

static int sym_cmp(const void *a, const void *b)
{
	const struct pm_sym *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* One line: a symbol added, or the line skipped. */
static int add_line(struct pm_proc *p, char *line)
{
	char *s = line, *end;
	uint64_t start, size;
	size_t len;

	start = strtoull(s, &end, 16);
	if (end == s || (*end != ' ' && *end != '\t'))
		return 0;
	s = end;
	size = strtoull(s, &end, 16);
	if (end == s || (*end != ' ' && *end != '\t') || !size || start + size < start)
		return 0;
	while (*end == ' ' || *end == '\t')
		end++;
	len = strlen(end);
	while (len && (end[len - 1] == '\r' || end[len - 1] == ' '))
		end[--len] = 0;
	if (!len)
		return 0;
	if (p->n == p->cap) {
		size_t cap = p->cap ? 2 * p->cap : 256;
		struct pm_sym *v = realloc(p->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		p->v = v;
		p->cap = cap;
	}
	if (p->nlen + len + 1 > p->ncap || p->nlen + len + 1 > UINT32_MAX) {
		size_t cap = p->ncap ? 2 * p->ncap : 4096;
		char *v;

		while (cap < p->nlen + len + 1)
			cap *= 2;
		if (cap > UINT32_MAX)
			return -ENOMEM;
		v = realloc(p->names, cap);
		if (!v)
			return -ENOMEM;
		p->names = v;
		p->ncap = cap;
	}
	memcpy(p->names + p->nlen, end, len + 1);
	p->v[p->n++] = (struct pm_sym){start, start + size, p->seq++, (uint32_t)p->nlen};
	p->nlen += len + 1;
	return 0;
}

/* Read what file f gained since the last read (whole lines). 1: some. */
static int read_more(struct pm_proc *p, struct pm_file *f)
{
	char buf[PERFMAP_LINE];
	struct stat st;
	int got = 0;

	if (f->fd < 0 || fstat(f->fd, &st) || st.st_size <= f->off)
		return 0;
	while (f->off < st.st_size) {
		ssize_t r = pread(f->fd, buf, sizeof(buf) - 1, f->off);
		size_t used = 0;
		char *nl;

		if (r <= 0)
			break;
		buf[r] = 0;
		while ((nl = memchr(buf + used, '\n', (size_t)r - used))) {
			*nl = 0;
			if (add_line(p, buf + used))
				return got;
			got = 1;
			used = (size_t)(nl - buf) + 1;
		}
		if (!used) {	/* a line longer than the buffer: skipped */
			if ((size_t)r < sizeof(buf) - 1)
				break;	/* not whole yet */
			used = (size_t)r;
			while (f->off + (off_t)used < st.st_size) {
				char c;

				if (pread(f->fd, &c, 1, f->off + (off_t)used) != 1)
					break;
				used++;
				if (c == '\n')
					break;
			}
		}
		f->off += (off_t)used;
	}
	return got;
}

static int index_syms(struct pm_proc *p)
{
	uint64_t *m = realloc(p->maxend, (p->n ? p->n : 1) * sizeof(*m));

	if (!m)
		return -ENOMEM;
	p->maxend = m;
	qsort(p->v, p->n, sizeof(*p->v), sym_cmp);
	for (size_t i = 0; i < p->n; i++)
		m[i] = i && m[i - 1] > p->v[i].end ? m[i - 1] : p->v[i].end;
	return 0;
}

static struct pm_proc *proc_get(struct stack_perfmaps *pm, pid_t pid)
{
	struct pm_proc *p = NULL, *lru = &pm->p[0];
	pid_t ns;

	for (size_t i = 0; i < PERFMAP_PROCS; i++) {
		if (pm->p[i].pid == pid) {
			p = &pm->p[i];
			break;
		}
		if (pm->p[i].used < lru->used)
			lru = &pm->p[i];
	}
	if (!p) {
		if (lru->pid)
			proc_clear(lru);
		p = lru;
		memset(p, 0, sizeof(*p));
		p->f[0].fd = p->f[1].fd = -1;
		p->pid = pid;
	}
	p->used = ++pm->tick;
	if (p->f[0].fd < 0 && p->f[1].fd < 0) {
		uint64_t t = now_ms();

		if (p->tried && t - p->tried < PERFMAP_RETRY_MS)
			return p;
		p->tried = t;
		ns = ns_pid(pid);
		p->f[0].fd = open_map(pid, ns, "map");
		p->f[1].fd = open_map(pid, ns, "dump");
	}
	return p;
}

const char *stack_perfmap_sym(struct stack_cache *sc, pid_t pid, uint64_t addr, uint64_t *start)
{
	struct pm_proc *p;
	const struct pm_sym *best = NULL;
	size_t lo = 0, hi;

	if (!sc->perfmaps) {
		sc->perfmaps = calloc(1, sizeof(*sc->perfmaps));
		if (!sc->perfmaps)
			return NULL;
		for (size_t i = 0; i < PERFMAP_PROCS; i++)
			sc->perfmaps->p[i].f[0].fd = sc->perfmaps->p[i].f[1].fd = -1;
	}
	p = proc_get(sc->perfmaps, pid);
	/* the .dump's lines after the .map's: read in that order, they win */
	if ((read_more(p, &p->f[0]) | read_more(p, &p->f[1])) && index_syms(p))
		return NULL;
	if (!p->n || !p->maxend)
		return NULL;
	/* the first symbol starting above addr */
	hi = p->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (p->v[mid].start <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* those before it that may cover addr: the latest read wins */
	for (size_t i = lo; i-- > 0 && p->maxend[i] > addr;)
		if (p->v[i].end > addr && (!best || p->v[i].seq > best->seq))
			best = &p->v[i];
	if (!best)
		return NULL;
	*start = best->start;
	return p->names + best->name;
}
