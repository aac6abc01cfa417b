/* $ustack walked where the probe runs: the tracer's half (the agent's is
 * agent/ustack.c; the layout and how it changes, inject_shared.h).
 *
 * Each image's shared memory holds a copy of the session's unwind tables
 * (stack/unwstore.h: every module's once, appended to as modules appear)
 * and the mappings of each of its processes (the one it was made in, and
 * the children that fork from it), which the process maps read-only. The
 * tables are copied as the store grows; a process's mappings are built
 * again when the cache's maps of it change (the kernel's mmap records:
 * stack/mapwatch.c), when a walk of it found a pc in no mapping (a module
 * loaded since: read from /proc again, at most every REFRESH_NS), and
 * first when a walk found none of its process (a child, forked since).
 * Counted stacks are read back from the image's table of them, and become
 * the session's ids (stack_intern). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/log.h"
#include "cache/cache.h"
#include "engine/inject/inject_int.h"
#include "ns/ns.h"
#include "stack/stack.h"
#include "stack/unwstore.h"

#define MAX_TABS 16384u
#define MAX_ROWS (8u << 20)		/* 64 MiB of rows, mapped, touched as used */
#define MAX_IDX (4u << 20)
#define REFRESH_NS 100000000ULL		/* a process's maps read again at most so often */

static bool walked(const struct usc_site *site, uint32_t *frames)
{
	bool any = false;

	for (unsigned a = 0; a < site->nargs; a++) {
		const struct fetch_insn *in = &site->args[a].insn[0];

		if (site->args[a].ninsn && in->op == FOP_USTACK &&
		    !((uint64_t)in->imm & FETCH_STACK_COPY)) {
			any = true;
			if (fetch_stack_frames(in->imm) > *frames)
				*frames = fetch_stack_frames(in->imm);
		}
	}
	return any;
}

void inj_stk_geometry(struct inj *j)
{
	struct inj_stk_geom *g = &j->stk;
	bool counted = false;

	memset(g, 0, sizeof(*g));
	for (size_t i = 0; i < j->base.nsites; i++) {
		const struct usc_site *site = j->base.sites[i];
		uint32_t frames = 0;

		if (!walked(site, &frames))
			continue;
		g->on = true;
		counted |= site->agg_in_place;
		if (frames > g->frames)
			g->frames = frames;
	}
	if (!g->on || !counted || !j->agg.kind)
		return;
	g->nents = 64;
	while (g->nents < 2 * j->agg.max_rows)
		g->nents *= 2;
	g->ent_size = (uint32_t)(sizeof(struct inj_stkent) + 8 * g->frames + 63) & ~63u;
}

static uint64_t page_up(uint64_t v)
{
	return (v + 4095) & ~4095ULL;
}

uint64_t inj_stk_reserve(struct inj *j, uint64_t off, struct inj_stk *k)
{
	const struct inj_stk_geom *g = &j->stk;

	memset(k, 0, sizeof(*k));
	if (!g->on)
		return off;
	/* the agent's: per slot, then the counted stacks */
	off = page_up(off);
	k->slots_off = off;
	off += (uint64_t)INJ_NSLOTS * INJ_STK_SLOT;
	k->ents_off = off;
	k->nents = g->nents;
	k->ent_size = g->ent_size;
	k->ent_frames = g->frames;
	off = page_up(off + (uint64_t)g->nents * g->ent_size);
	/* the tracer's, read-only to the process: this header first */
	k->ro_off = off;
	off = page_up(off + sizeof(*k));
	k->procs_off = off;
	off = page_up(off + INJ_STK_PROCS * sizeof(struct inj_stk_proc));
	k->tabs_off = off;
	k->max_tabs = MAX_TABS;
	off = page_up(off + (uint64_t)MAX_TABS * sizeof(struct stack_tab));
	k->rows_off = off;
	k->max_rows = MAX_ROWS;
	off = page_up(off + (uint64_t)MAX_ROWS * sizeof(struct stack_row));
	k->idx_off = off;
	k->max_idx = MAX_IDX;
	off = page_up(off + (uint64_t)MAX_IDX * sizeof(uint32_t));
	k->ro_len = off - k->ro_off;
	return off;
}

static struct inj_stk *stk_of(const struct inj_image *img)
{
	const struct inj_ctl *c = img->shm.ctl;

	return c && c->stk_off ? (struct inj_stk *)((char *)img->shm.map + c->stk_off) : NULL;
}

/* What the store has that the image has not yet: copied, then published. */
static void sync_tables(struct inj *j, struct inj_image *img)
{
	struct stack_store *st = stack_store_of(j->base.ctx->cache);
	const struct stack_image *t = st ? stack_store_image(st) : NULL;
	struct inj_stk *k = stk_of(img);
	char *base = img->shm.map;
	uint32_t nt, nr, ni;

	if (!t || !k || t->ntabs == k->ntabs)
		return;
	nt = k->ntabs;
	nr = k->nrows;
	ni = k->nidx;
	/* whole tables, in order (each one's rows and index follow the last's) */
	while (nt < t->ntabs && t->tabs[nt].rows + t->tabs[nt].nrows <= k->max_rows &&
	       t->tabs[nt].idx + t->tabs[nt].nidx <= k->max_idx && nt < k->max_tabs)
		nt++;
	if (nt == k->ntabs) {
		if (!img->stk_full++)
			log_warn("inject: no room for more unwind tables in process %d: stacks "
				 "through the modules it loaded since are copied", (int)img->pid);
		return;
	}
	nr = t->tabs[nt - 1].rows + t->tabs[nt - 1].nrows;
	ni = t->tabs[nt - 1].idx + t->tabs[nt - 1].nidx;
	memcpy(base + k->tabs_off + k->ntabs * sizeof(struct stack_tab), &t->tabs[k->ntabs],
	       (nt - k->ntabs) * sizeof(struct stack_tab));
	memcpy(base + k->rows_off + (uint64_t)k->nrows * sizeof(struct stack_row),
	       &t->rows[k->nrows], (uint64_t)(nr - k->nrows) * sizeof(struct stack_row));
	memcpy(base + k->idx_off + (uint64_t)k->nidx * sizeof(uint32_t), &t->idx[k->nidx],
	       (uint64_t)(ni - k->nidx) * sizeof(uint32_t));
	__atomic_store_n(&k->nrows, nr, __ATOMIC_RELEASE);
	__atomic_store_n(&k->nidx, ni, __ATOMIC_RELEASE);
	__atomic_store_n(&k->ntabs, nt, __ATOMIC_RELEASE);
}

/* Process pid's mappings into entry p of the image, published. pid is the
 * host's; the entry is found by the agent with the pid the process knows
 * itself by (its self word: another one in a container's PID namespace). */
static int publish(struct inj *j, struct inj_image *img, uint32_t p, pid_t pid, bool refresh)
{
	struct stack_store *st = stack_store_of(j->base.ctx->cache);
	struct inj_stk *k = stk_of(img);
	struct inj_stk_proc *pr;
	struct stack_map *maps = NULL;
	uint32_t n = 0, next, self;
	int err;

	if (!st || !k)
		return -ENOMEM;
	err = stack_store_proc(st, j->base.ctx->cache, pid, refresh, &maps, &n);
	if (err)
		return err;
	img->stk_procs[p].gen = cache_maps_gen(j->base.ctx->cache, pid);
	sync_tables(j, img);
	pr = (struct inj_stk_proc *)((char *)img->shm.map + k->procs_off) + p;
	next = pr->gen + 1;
	if (n > STACK_MAPS_MAX)
		n = STACK_MAPS_MAX;
	memcpy(pr->maps[next & 1], maps, (size_t)n * sizeof(*maps));
	pr->nmaps[next & 1] = n;
	__atomic_store_n(&pr->gen, next, __ATOMIC_RELEASE);
	if (img->stk_procs[p].pid != pid || !k->tgids[p]) {
		self = (uint32_t)ns_inner_tid(pid);
		img->stk_procs[p].pid = pid;
		__atomic_store_n(&pr->tgid, self, __ATOMIC_RELEASE);
		__atomic_store_n(&k->tgids[p], self, __ATOMIC_RELEASE);
	}
	free(maps);
	log_debug("inject: the mappings of process %d for its stacks: %u (%u unwind tables)",
		  (int)pid, n, k->ntabs);
	return 0;
}

/* The entry of host pid pid in the image, or INJ_STK_PROCS. */
static uint32_t entry_of(const struct inj_image *img, const struct inj_stk *k, pid_t pid)
{
	uint32_t p;

	for (p = 0; p < INJ_STK_PROCS; p++)
		if (k->tgids[p] && img->stk_procs[p].pid == pid)
			break;
	return p;
}

/* The entry of process pid, made if new (a dead one's taken over). */
static int proc_entry(struct inj *j, struct inj_image *img, pid_t pid)
{
	struct inj_stk *k = stk_of(img);
	char path[64];
	uint32_t p = entry_of(img, k, pid);

	if (p < INJ_STK_PROCS)
		return (int)p;
	for (p = 0; p < INJ_STK_PROCS && k->tgids[p]; p++)
		;
	for (uint32_t q = 0; p == INJ_STK_PROCS && q < INJ_STK_PROCS; q++) {
		snprintf(path, sizeof(path), "/proc/%d", (int)img->stk_procs[q].pid);
		if (access(path, F_OK) && errno == ENOENT) {
			/* gone: no thread of it walks any more */
			__atomic_store_n(&k->tgids[q], 0, __ATOMIC_RELEASE);
			p = q;
		}
	}
	if (p == INJ_STK_PROCS) {
		if (!img->stk_full++)
			log_warn("inject: more than %d processes share an image: the stacks of the "
				 "others are copied", INJ_STK_PROCS);
		return -ENOSPC;
	}
	img->stk_procs[p].refreshed = inj_mono_ns();
	return publish(j, img, p, pid, true) ? -ESRCH : (int)p;
}

int inj_stk_install(struct inj *j, struct inj_image *img, struct remote *rem)
{
	struct inj_stk *k = stk_of(img);
	long r;

	if (!k)
		return 0;
	if (proc_entry(j, img, img->pid) < 0)
		log_warn("inject: process %d: no unwind tables: its stacks are copied",
			 (int)img->pid);
	/* what only we write, read-only to the process */
	r = inj_rsys(rem, SYS_mprotect, (long)(img->shm.remote + k->ro_off), (long)k->ro_len,
		     PROT_READ, 0, 0, 0);
	if (inj_rsys_failed(r))
		log_debug("inject: process %d: unwind tables left writable: %s", (int)img->pid,
			  strerror((int)-r));
	return 0;
}

void inj_stk_fork(struct inj *j, struct inj_image *img, pid_t pid)
{
	if (stk_of(img))
		proc_entry(j, img, pid);
}

void inj_stk_sync(struct inj *j)
{
	struct usc_cache *c = j->base.ctx->cache;

	for (size_t i = 0; i < j->nimages; i++) {
		struct inj_image *img = j->images[i];
		struct inj_stk *k = stk_of(img);

		if (!k || !img->refs)
			continue;
		for (uint32_t p = 0; p < INJ_STK_PROCS; p++) {
			pid_t pid = img->stk_procs[p].pid;

			if (k->tgids[p] && cache_maps_gen(c, pid) != img->stk_procs[p].gen)
				publish(j, img, p, pid, false);
		}
	}
}

void inj_stk_event(struct inj *j, struct inj_image *img, const struct usc_event *ev)
{
	struct inj_stk *k = stk_of(img);

	if (!k)
		return;
	for (unsigned a = 0; a < ev->nvals; a++) {
		const struct usc_value *v = &ev->vals[a];
		struct fetch_stack_hdr h;
		uint32_t p;

		if (v->kind != USC_V_USTACK || v->len < sizeof(h))
			continue;
		memcpy(&h, v->str, sizeof(h));
		if (h.why == STACK_FB_NOPROC) {
			proc_entry(j, img, ev->pid);
		} else if (h.why == STACK_FB_NOMODULE) {
			/* loaded since, and not seen yet? */
			p = entry_of(img, k, ev->pid);
			if (p < INJ_STK_PROCS &&
			    inj_mono_ns() - img->stk_procs[p].refreshed >= REFRESH_NS) {
				img->stk_procs[p].refreshed = inj_mono_ns();
				publish(j, img, p, ev->pid, true);
			}
		}
	}
}

/* ---- counted stacks ---------------------------------------------------------- */

/* The host's pid of the process the agent knows as self (its getpid). */
static pid_t host_pid(struct inj *j, const struct inj_image *img, uint32_t self)
{
	const struct inj_stk *k = stk_of(img);
	int32_t pid = (int32_t)self, tid = (int32_t)self;

	for (uint32_t p = 0; p < INJ_STK_PROCS; p++)
		if (k->tgids[p] == self)
			return img->stk_procs[p].pid;
	inj_host_ids(j, img, &pid, &tid);
	return pid;
}

/* The session's id of the image's counted stack id, or 0. */
static uint64_t session_id(struct inj *j, const struct inj_image *img, uint64_t id)
{
	const struct inj_stk *k = stk_of(img);
	union {
		struct usc_stack st;
		uint8_t b[sizeof(struct usc_stack) + 8 * USC_STACK_FRAMES_MAX];
	} u;
	const struct inj_stkent *e;
	struct fetch_walk_hdr h;

	if (!k || !id || id > k->nents)
		return 0;
	e = (const void *)((const char *)img->shm.map + k->ents_off + (id - 1) * k->ent_size);
	if (__atomic_load_n(&e->state, __ATOMIC_ACQUIRE) != INJ_DIR_READY)
		return 0;
	memcpy(&h, &e->h, sizeof(h));
	if (h.n > k->ent_frames ||
	    stack_walked(&e->h, sizeof(h) + 8 * (size_t)h.n, &u.st, USC_STACK_FRAMES_MAX))
		return 0;
	return stack_intern(j->base.ctx->cache, host_pid(j, img, e->tgid), &u.st);
}

struct key_ctx {
	struct inj *j;
	const struct inj_image *img;
};

static uint64_t key_id(void *ctx, uint32_t pad, uint64_t id)
{
	struct key_ctx *k = ctx;

	(void)pad;
	return session_id(k->j, k->img, id);
}

void inj_stk_key(struct inj *j, const struct inj_image *img, const struct usc_site *site,
		 uint8_t *key, uint32_t keylen)
{
	struct key_ctx k = {j, img};

	agg_key_stacks(&j->base.ctx->set->agg, site, key, keylen, key_id, &k);
}

