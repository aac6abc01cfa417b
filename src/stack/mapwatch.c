/* The traced processes' code mappings as they change, from the kernel's
 * perf mmap records (PERF_RECORD_MMAP2, COMM with exec, FORK), as perf
 * record keeps them: a stack copied at a hit is symbolized with the maps
 * of that moment, even when the process has exited (and its
 * /proc/PID/maps gone) before uscope reads the hit, or loaded a library
 * since. A dummy software event a CPU, nothing sampled: only the
 * side-band records, read before the engines' records each round. */
#include <errno.h>
#include <linux/perf_event.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "core/log.h"
#include "objfile/modules.h"
#include "cache/cache.h"
#include "stack/mapwatch.h"

#define MW_PAGES 64	/* data pages a CPU: 256 KiB of map records */

struct mapwatch {
	int n;
	int *fd;
	void **ring;
	size_t page, bytes;
	uint64_t lost;
};

int mapwatch_open(pid_t pid, bool on_exec, struct mapwatch **out)
{
	long ncpu = sysconf(_SC_NPROCESSORS_CONF);
	struct mapwatch *w;
	struct perf_event_attr a;

	*out = NULL;
	if (ncpu < 1)
		ncpu = 1;
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->fd = calloc((size_t)ncpu, sizeof(*w->fd));
	w->ring = calloc((size_t)ncpu, sizeof(*w->ring));
	if (!w->fd || !w->ring) {
		mapwatch_close(w);
		return -ENOMEM;
	}
	w->page = (size_t)sysconf(_SC_PAGESIZE);
	w->bytes = (MW_PAGES + 1) * w->page;
	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.type = PERF_TYPE_SOFTWARE;
	a.config = PERF_COUNT_SW_DUMMY;
	a.mmap = 1;		/* executable mappings */
	a.mmap_data = 1;	/* and the rest: libdwfl places a module by its first */
	a.mmap2 = 1;
	a.comm = 1;
	a.comm_exec = 1;
	a.task = 1;		/* forks */
	a.sample_id_all = 1;	/* records end with their time: the CPUs' rings */
	a.sample_type = PERF_SAMPLE_TIME;	/* are merged in time order */
	a.exclude_kernel = 1;
	a.exclude_hv = 1;
	a.inherit = pid > 0;	/* and its children */
	a.disabled = on_exec;
	a.enable_on_exec = on_exec;
	for (long cpu = 0; cpu < ncpu; cpu++) {
		int fd = (int)syscall(SYS_perf_event_open, &a, pid > 0 ? pid : -1, (int)cpu, -1,
				      PERF_FLAG_FD_CLOEXEC);
		void *r;

		if (fd < 0) {
			if (errno == ENODEV || errno == EINVAL)
				continue;	/* a CPU not online */
			int err = -errno;

			mapwatch_close(w);
			return err;
		}
		r = mmap(NULL, w->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (r == MAP_FAILED) {
			int err = -errno;

			close(fd);
			mapwatch_close(w);
			return err;
		}
		w->fd[w->n] = fd;
		w->ring[w->n] = r;
		w->n++;
	}
	*out = w;
	return 0;
}

void mapwatch_close(struct mapwatch *w)
{
	if (!w)
		return;
	for (int i = 0; i < w->n; i++) {
		munmap(w->ring[i], w->bytes);
		close(w->fd[i]);
	}
	free(w->fd);
	free(w->ring);
	free(w);
}

struct mmap2_rec {
	struct perf_event_header h;
	uint32_t pid, tid;
	uint64_t addr, len, pgoff;
	uint32_t maj, min;
	uint64_t ino, ino_generation;
	uint32_t prot, flags;
	char filename[];
};

struct comm_rec {
	struct perf_event_header h;
	uint32_t pid, tid;
	char comm[];
};

struct fork_rec {
	struct perf_event_header h;
	uint32_t pid, ppid, tid, ptid;
	uint64_t time;
};

static void one(struct mapwatch *w, struct usc_cache *c, const void *rec, size_t size, int *changed)
{
	const struct perf_event_header *h = rec;

	switch (h->type) {
	case PERF_RECORD_MMAP2: {
		const struct mmap2_rec *m = rec;
		struct proc_map pm = {0};
		size_t room = size - sizeof(*m);
		bool anon;

		/* files, and anonymous executable memory ("//anon": JIT code,
		 * CPython's perf trampolines; mprotect's making memory
		 * executable is reported too): the walkers know it at once,
		 * rather than from /proc after a walk met it in no mapping */
		if (size < sizeof(*m) || m->filename[0] != '/' || !memchr(m->filename, 0, room))
			break;
		anon = !strcmp(m->filename, "//anon");
		if (m->filename[1] == '/' && !(anon && (m->prot & PROT_EXEC)))
			break;
		pm.start = m->addr;
		pm.end = m->addr + m->len;
		pm.pgoff = m->pgoff;
		memcpy(pm.perms, "---p", 5);
		if (m->prot & PROT_READ)
			pm.perms[0] = 'r';
		if (m->prot & PROT_WRITE)
			pm.perms[1] = 'w';
		if (m->prot & PROT_EXEC)
			pm.perms[2] = 'x';
		if (!(h->misc & PERF_RECORD_MISC_MMAP_BUILD_ID)) {
			pm.dev = makedev(m->maj, m->min);
			pm.inode = m->ino;
		}
		pm.path = anon ? NULL : (char *)m->filename;
		if (cache_add_map(c, (pid_t)m->pid, &pm) == 0)
			*changed = (int)m->pid;
		break;
	}
	case PERF_RECORD_COMM: {
		const struct comm_rec *cr = rec;

		if (size >= sizeof(*cr) && (h->misc & PERF_RECORD_MISC_COMM_EXEC) &&
		    cr->pid == cr->tid)
			cache_clear_maps(c, (pid_t)cr->pid);	/* a new program */
		break;
	}
	case PERF_RECORD_FORK: {
		const struct fork_rec *f = rec;

		if (size >= sizeof(*f) && f->pid != f->ppid)	/* a process, not a thread */
			cache_copy_maps(c, (pid_t)f->ppid, (pid_t)f->pid);
		break;
	}
	case PERF_RECORD_LOST:
		w->lost++;
		break;
	default:
		break;
	}
}

struct mw_rec {
	uint64_t time;
	size_t off, size;
};

static int cmp_rec(const void *a, const void *b)
{
	const struct mw_rec *x = a, *y = b;

	if (x->time != y->time)
		return x->time < y->time ? -1 : 1;
	return x->off < y->off ? -1 : x->off > y->off;
}

int mapwatch_poll(struct mapwatch *w, struct usc_cache *c, int *changed)
{
	size_t data = MW_PAGES * w->page, used = 0, cap = 0, n = 0, ncap = 0;
	uint8_t *all = NULL;
	struct mw_rec *recs = NULL;

	*changed = 0;
	/* every CPU's records, then applied in time order (an exec on one CPU
	 * and its mappings on another) */
	for (int i = 0; i < w->n; i++) {
		struct perf_event_mmap_page *mp = w->ring[i];
		uint8_t *base = (uint8_t *)w->ring[i] + w->page;
		uint64_t head = __atomic_load_n(&mp->data_head, __ATOMIC_ACQUIRE);
		uint64_t tail = mp->data_tail;

		while (tail + sizeof(struct perf_event_header) <= head) {
			struct perf_event_header h;
			size_t at = tail % data, size;

			for (size_t k = 0; k < sizeof(h); k++)
				((uint8_t *)&h)[k] = base[(at + k) % data];
			size = h.size;
			if (size < sizeof(h) + 8 || tail + size > head)
				break;
			if (used + size > cap || n == ncap) {
				size_t nc = cap ? cap * 2 : 65536, nn = ncap ? ncap * 2 : 256;
				uint8_t *a2;
				struct mw_rec *r2;

				while (nc < used + size)
					nc *= 2;
				a2 = realloc(all, nc);
				if (a2)
					all = a2;
				r2 = a2 ? realloc(recs, nn * sizeof(*r2)) : NULL;
				if (r2)
					recs = r2;
				if (!a2 || !r2)
					break;	/* out of memory: the rest waits */
				cap = nc;
				ncap = nn;
			}
			for (size_t k = 0; k < size; k++)
				all[used + k] = base[(at + k) % data];
			memcpy(&recs[n].time, all + used + size - 8, 8);
			recs[n].off = used;
			recs[n].size = size;
			n++;
			used += size;
			tail += size;
		}
		__atomic_store_n(&mp->data_tail, tail, __ATOMIC_RELEASE);
	}
	if (n)
		qsort(recs, n, sizeof(*recs), cmp_rec);
	for (size_t i = 0; i < n; i++) {
		one(w, c, all + recs[i].off, recs[i].size - 8, changed);
	}
	free(all);
	free(recs);
	if (w->lost) {
		log_warn("the kernel lost %llu records of mappings: some stacks may not "
			 "symbolize", (unsigned long long)w->lost);
		w->lost = 0;
	}
	return (int)n;
}
