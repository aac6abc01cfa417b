/* $ustack walked where the probe runs: the bpf engine's user-space half
 * (the program's is uscope.bpf.c's "$ustack walked", the layout
 * bpf_shared.h's).
 *
 * The session's unwind tables (stack/unwstore.h) are copied into three
 * array maps, mapped here, as the store grows, their counts published
 * after them; each traced process's mappings into a range of a fourth,
 * found through stk_procs by tgid. A process's mappings are built when a
 * walk first finds none of its process (COMMAND's, the processes it forks,
 * every process system-wide: the hit that found none is copied), again
 * when the cache's maps of it change (the kernel's mmap records), and from
 * /proc when a walk of it found a pc in no mapping (at most every
 * REFRESH_NS). A new range each time, and a new gen: the old range is
 * reused a while later (REUSE_NS), long after any walk that read it has
 * ended. Counted stacks are read back from stk_stacks. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "core/log.h"
#include "cache/cache.h"
#include "engine/bpf/bpf_int.h"
#include "stack/stack.h"
#include "stack/unwstore.h"
#include "python/frame.h"
#include "python/names.h"
#include "uscope.skel.h"

#define MAX_TABS 4096u
#define MAX_ROWS (2u << 20)	/* 16 MiB of rows */
#define MAX_IDX (1u << 20)
#define MAX_MAPS 65536u		/* every process's mappings */
#define REFRESH_NS 100000000ULL
#define REUSE_NS 1000000000ULL

struct stk_proc {
	pid_t pid;
	uint32_t first, n;	/* its range in stk_maps */
	uint64_t cache_gen;	/* the cache's maps of it, as built */
	uint64_t refreshed;	/* ns, when they were last read from /proc */
};

struct stk_free {
	uint32_t first, n;
	uint64_t at;		/* ns, when it was let go */
};

struct bpfeng_stk {
	void *tabs, *rows, *idx, *maps;
	size_t tabs_len, rows_len, idx_len, maps_len;
	uint32_t ntabs, nrows, nidx;	/* published */
	uint32_t top;			/* stk_maps used up to here */
	uint32_t gen;
	struct stk_proc *procs;
	size_t nprocs;
	struct stk_free *free;
	size_t nfree;
	bool full_said;
};

static uint64_t mono_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ULL + (uint64_t)t.tv_nsec;
}

static bool site_walks(const struct usc_site *site)
{
	return site_has_ustack(site) && !site_copies_ustack(site);
}

int bpfeng_stk_prepare(struct bpfeng *u)
{
	struct uscope_bpf *skel = u->skel;
	bool counted = false, on = false;

	for (size_t i = 0; i < u->base.nsites; i++)
		if (site_walks(u->base.sites[i])) {
			on = true;
			counted |= u->base.sites[i]->agg_in_place;
		}
	skel->rodata->stk_on = on;
	if (!on)
		return 0;
	if (bpf_map__set_max_entries(skel->maps.stk_tabs, MAX_TABS) ||
	    bpf_map__set_max_entries(skel->maps.stk_rows, MAX_ROWS) ||
	    bpf_map__set_max_entries(skel->maps.stk_idx, MAX_IDX) ||
	    bpf_map__set_max_entries(skel->maps.stk_maps, MAX_MAPS) ||
	    bpf_map__set_max_entries(skel->maps.stk_stacks,
				     counted && u->base.ctx->set->agg.max_rows ?
				     u->base.ctx->set->agg.max_rows : 1))
		return -EINVAL;
	return 0;
}

static void *map_mmap(struct bpf_map *m, size_t *len)
{
	long page = sysconf(_SC_PAGESIZE);
	size_t n = (size_t)bpf_map__max_entries(m) * bpf_map__value_size(m);
	void *p;

	*len = (n + (size_t)page - 1) & ~((size_t)page - 1);
	p = mmap(NULL, *len, PROT_READ | PROT_WRITE, MAP_SHARED, bpf_map__fd(m), 0);
	return p == MAP_FAILED ? NULL : p;
}

int bpfeng_stk_attach(struct bpfeng *u)
{
	struct uscope_bpf *skel = u->skel;
	struct bpfeng_stk *k;

	if (!skel->rodata->stk_on)
		return 0;
	k = calloc(1, sizeof(*k));
	if (!k)
		return -ENOMEM;
	u->stk = k;
	k->tabs = map_mmap(skel->maps.stk_tabs, &k->tabs_len);
	k->rows = map_mmap(skel->maps.stk_rows, &k->rows_len);
	k->idx = map_mmap(skel->maps.stk_idx, &k->idx_len);
	k->maps = map_mmap(skel->maps.stk_maps, &k->maps_len);
	if (!k->tabs || !k->rows || !k->idx || !k->maps) {
		int err = -errno;

		log_error("bpf: cannot map the unwind tables' maps: %s", strerror(-err));
		return err;
	}
	return 0;
}

void bpfeng_stk_free(struct bpfeng *u)
{
	struct bpfeng_stk *k = u->stk;

	if (!k)
		return;
	if (k->tabs)
		munmap(k->tabs, k->tabs_len);
	if (k->rows)
		munmap(k->rows, k->rows_len);
	if (k->idx)
		munmap(k->idx, k->idx_len);
	if (k->maps)
		munmap(k->maps, k->maps_len);
	free(k->procs);
	free(k->free);
	free(k);
	u->stk = NULL;
}

/* What the store has that the maps have not yet: copied, then published. */
static void sync_tables(struct bpfeng *u)
{
	struct bpfeng_stk *k = u->stk;
	struct stack_store *st = stack_store_of(u->base.ctx->cache);
	const struct stack_image *t = st ? stack_store_image(st) : NULL;
	uint32_t nt = k->ntabs, nr, ni;

	if (!t || t->ntabs == k->ntabs)
		return;
	while (nt < t->ntabs && nt < MAX_TABS && t->tabs[nt].rows + t->tabs[nt].nrows <= MAX_ROWS &&
	       t->tabs[nt].idx + t->tabs[nt].nidx <= MAX_IDX)
		nt++;
	if (nt == k->ntabs) {
		if (!k->full_said)
			log_warn("bpf: no room for more unwind tables: stacks through the modules "
				 "seen since are copied");
		k->full_said = true;
		return;
	}
	nr = t->tabs[nt - 1].rows + t->tabs[nt - 1].nrows;
	ni = t->tabs[nt - 1].idx + t->tabs[nt - 1].nidx;
	_Static_assert(sizeof(struct stack_tab) % 8 == 0 && sizeof(struct stack_row) % 8 == 0 &&
		       sizeof(struct stack_map) % 8 == 0, "array maps' elements, packed");
	memcpy((struct stack_tab *)k->tabs + k->ntabs, &t->tabs[k->ntabs],
	       (nt - k->ntabs) * sizeof(struct stack_tab));
	memcpy((struct stack_row *)k->rows + k->nrows, &t->rows[k->nrows],
	       (size_t)(nr - k->nrows) * sizeof(struct stack_row));
	/* an array map's elements are 8-aligned: the index's are 8 bytes apart */
	for (uint32_t i = k->nidx; i < ni; i++)
		((uint64_t *)k->idx)[i] = t->idx[i];
	k->ntabs = nt;
	k->nrows = nr;
	k->nidx = ni;
	__atomic_store_n(&u->skel->bss->stk_nrows, nr, __ATOMIC_RELEASE);
	__atomic_store_n(&u->skel->bss->stk_nidx, ni, __ATOMIC_RELEASE);
	__atomic_store_n(&u->skel->bss->stk_ntabs, nt, __ATOMIC_RELEASE);
}

/* A range of n entries of stk_maps: one let go long enough ago, or new. */
static int range_get(struct bpfeng_stk *k, uint32_t n, uint32_t *first)
{
	uint64_t now = mono_ns();

	for (size_t i = 0; i < k->nfree; i++) {
		struct stk_free *f = &k->free[i];

		if (f->n < n || now - f->at < REUSE_NS)
			continue;
		*first = f->first;
		f->first += n;
		f->n -= n;
		if (!f->n)
			k->free[i] = k->free[--k->nfree];
		return 0;
	}
	if (MAX_MAPS - k->top < n)
		return -ENOSPC;
	*first = k->top;
	k->top += n;
	return 0;
}

static void range_put(struct bpfeng_stk *k, uint32_t first, uint32_t n)
{
	struct stk_free *v;

	if (!n)
		return;
	v = realloc(k->free, (k->nfree + 1) * sizeof(*v));
	if (!v)
		return;	/* lost: the maps fill up sooner */
	k->free = v;
	v[k->nfree++] = (struct stk_free){first, n, mono_ns()};
}

static struct stk_proc *proc_find(struct bpfeng_stk *k, pid_t pid)
{
	for (size_t i = 0; i < k->nprocs; i++)
		if (k->procs[i].pid == pid)
			return &k->procs[i];
	return NULL;
}

/* Process pid's mappings into a new range, published (new tables first).
 * USCOPE_BPF_STK_PUBLISH=0 publishes none: every walk stops at its start
 * and falls back (the tests' burst of copies). */
static int publish(struct bpfeng *u, pid_t pid, bool refresh)
{
	struct bpfeng_stk *k = u->stk;
	struct stack_store *st = stack_store_of(u->base.ctx->cache);
	struct stk_proc *p = proc_find(k, pid);
	struct stack_map *maps = NULL;
	struct bpfeng_stk_proc v = {0};
	uint32_t n = 0, first = 0;
	int err;

	if (!st)
		return -ENOMEM;
	if (getenv("USCOPE_BPF_STK_PUBLISH") && !strcmp(getenv("USCOPE_BPF_STK_PUBLISH"), "0"))
		return -ENOENT;
	err = stack_store_proc(st, u->base.ctx->cache, pid, refresh, &maps, &n);
	if (err)
		return err;
	if (!p) {
		struct stk_proc *np = realloc(k->procs, (k->nprocs + 1) * sizeof(*np));

		if (!np) {
			free(maps);
			return -ENOMEM;
		}
		k->procs = np;
		p = &np[k->nprocs++];
		memset(p, 0, sizeof(*p));
		p->pid = pid;
	}
	p->cache_gen = cache_maps_gen(u->base.ctx->cache, pid);
	sync_tables(u);
	err = range_get(k, n ? n : 1, &first);
	if (err) {
		if (!k->full_said)
			log_warn("bpf: no room for the mappings of more processes: their stacks are "
				 "copied");
		k->full_said = true;
		free(maps);
		return err;
	}
	memcpy((struct stack_map *)k->maps + first, maps, (size_t)n * sizeof(*maps));
	v.first = first;
	v.n = n;
	v.gen = ++k->gen;
	__atomic_thread_fence(__ATOMIC_RELEASE);
	err = bpf_map_update_elem(bpf_map__fd(u->skel->maps.stk_procs), &pid, &v, BPF_ANY);
	if (err) {
		err = -errno;
		range_put(k, first, n ? n : 1);
	} else {
		range_put(k, p->first, p->n);
		p->first = first;
		p->n = n ? n : 1;
	}
	free(maps);
	log_debug("bpf: the mappings of process %d for its stacks: %u (%u unwind tables)",
		  (int)pid, n, k->ntabs);
	return err;
}

int bpfeng_stk_start(struct bpfeng *u, pid_t pid)
{
	struct bpfeng_stk *k = u->stk;
	struct stk_proc *p;

	if (!k || pid <= 0)
		return 0;
	if (u->follow && u->base.ctx->target->kind == USC_TARGET_COMMAND) {
		/* COMMAND, held before its exec: its mappings once the kernel's
		 * mmap records have them (bpfeng_stk_sync), or its first walk */
		p = realloc(k->procs, (k->nprocs + 1) * sizeof(*p));
		if (!p)
			return -ENOMEM;
		k->procs = p;
		p[k->nprocs++] = (struct stk_proc){.pid = pid, .n = 0,
						   .cache_gen = cache_maps_gen(u->base.ctx->cache,
									      pid)};
		return 0;
	}
	/* -p: a running process, mapped already (what it forks later: at its
	 * first walk, as COMMAND's children) */
	if (publish(u, pid, true))
		log_warn("bpf: process %d: no unwind tables: its stacks are copied", (int)pid);
	p = proc_find(u->stk, pid);
	if (p)
		p->refreshed = mono_ns();
	return 0;
}

void bpfeng_stk_sync(struct bpfeng *u)
{
	struct bpfeng_stk *k = u->stk;

	for (size_t i = 0; k && i < k->nprocs; i++)
		if (cache_maps_gen(u->base.ctx->cache, k->procs[i].pid) != k->procs[i].cache_gen)
			publish(u, k->procs[i].pid, false);
}

void bpfeng_stk_event(struct bpfeng *u, const struct usc_event *ev)
{
	struct bpfeng_stk *k = u->stk;

	for (unsigned a = 0; k && a < ev->nvals; a++) {
		const struct usc_value *v = &ev->vals[a];
		struct fetch_stack_hdr h;
		struct stk_proc *p;

		if (v->kind != USC_V_USTACK || v->len < sizeof(h))
			continue;
		memcpy(&h, v->str, sizeof(h));
		if (h.why != STACK_FB_NOPROC && h.why != STACK_FB_NOMODULE)
			continue;
		p = proc_find(k, ev->pid);
		if (p && mono_ns() - p->refreshed < REFRESH_NS)
			continue;	/* read lately: not there yet (JIT code?) */
		publish(u, ev->pid, true);
		p = proc_find(k, ev->pid);
		if (p)
			p->refreshed = mono_ns();
	}
}

/* ---- counted stacks ---------------------------------------------------------- */

static uint64_t session_id(struct bpfeng *u, uint32_t tgid, uint64_t hash)
{
	struct bpfeng_stk_key key = {tgid, 0, hash};
	union {
		struct fetch_walk_hdr h;
		uint8_t b[sizeof(struct fetch_walk_hdr) + 8 * STACK_WALK_MAX];
	} v;
	union {
		struct usc_stack st;
		uint8_t b[sizeof(struct usc_stack) + 8 * USC_STACK_FRAMES_MAX];
	} s;

	if (bpf_map_lookup_elem(bpf_map__fd(u->skel->maps.stk_stacks), &key, &v) ||
	    v.h.n > STACK_WALK_MAX ||
	    stack_walked(&v, sizeof(v.h) + 8 * (size_t)v.h.n, &s.st, USC_STACK_FRAMES_MAX))
		return 0;
	return stack_intern(u->base.ctx->cache, (pid_t)tgid, &s.st);
}

/* A $pystack the program counted: its frames named (from the names
 * read when it was first seen: bpfeng_py_names), the session's id. */
static uint64_t py_session_id(struct bpfeng *u, uint32_t tgid, uint64_t hash)
{
	struct bpfeng_stk_key key = {tgid, 0, hash};
	/* (the map's values are as large as stk_stacks') */
	uint8_t v[sizeof(struct fetch_walk_hdr) + 8 * STACK_WALK_MAX];
	struct python_stack_hdr h;
	union {
		struct usc_stack st;
		uint8_t b[sizeof(struct usc_stack) + 8 * USC_STACK_FRAMES_MAX];
	} s;

	if (bpf_map_lookup_elem(bpf_map__fd(u->skel->maps.py_stacks), &key, v))
		return 0;
	memcpy(&h, v, sizeof(h));
	if (h.n > PYTHON_FRAMES_MAX ||
	    python_names_stack(u->base.ctx->cache, (pid_t)tgid, v,
			       sizeof(h) + h.n * sizeof(struct python_frame), &s.st,
			       USC_STACK_FRAMES_MAX))
		return 0;
	return stack_intern(u->base.ctx->cache, (pid_t)tgid, &s.st);
}

static uint64_t key_id(void *ctx, uint32_t tgid, uint64_t hash)
{
	struct bpfeng *u = ctx;

	if (hash & BPFENG_STK_PY)
		return py_session_id(u, tgid, hash);
	return u->stk ? session_id(u, tgid, hash) : 0;
}

void bpfeng_py_names(struct bpfeng *u, const struct usc_event *ev)
{
	union {
		struct usc_stack st;
		uint8_t b[sizeof(struct usc_stack) + 8 * USC_STACK_FRAMES_MAX];
	} s;

	for (unsigned a = 0; a < ev->nvals; a++)
		if (ev->vals[a].kind == USC_V_PYSTACK)
			python_names_stack(u->base.ctx->cache, ev->pid, ev->vals[a].str,
					   ev->vals[a].len, &s.st, USC_STACK_FRAMES_MAX);
}

void bpfeng_stk_key(struct bpfeng *u, const struct usc_site *site, uint8_t *key, uint32_t keylen)
{
	agg_key_stacks(&u->base.ctx->set->agg, site, key, keylen, key_id, u);
}
