/* Taking the patches out when we cannot: our life as the agent sees it,
 * the undo table it lets go with, and a dead session's leftovers.
 *
 * The owner word: how an agent knows its tracer has died, with no thread of
 * its own in the process and no system call on a hit. It is a robust,
 * process-shared pthread mutex on a page of its own, locked by our main
 * thread: glibc puts a robust mutex it locks on the thread's robust list,
 * which it registered with set_robust_list, and when the thread dies,
 * however it dies (SIGKILL, the OOM killer, a crash), the kernel walks that
 * list, sets FUTEX_OWNER_DIED in each word and wakes a waiter. A pidfd
 * would need a thread in the process to poll it, and a heartbeat would need
 * a clock read on every hit and a timeout to guess with; the robust futex is
 * one bit every hit tests, set by the kernel the moment we are gone. When we
 * end cleanly, we set the bit ourselves, after taking the patches out. The
 * process maps the page read-only: glibc keeps the mutex's robust list
 * links in it, and we would follow links the process could rewrite.
 *
 * The undo table (inject_shared.h, struct inj_undo): each patch's bytes as
 * the file has them and as we wrote them, and its page's protection, filled
 * before any jump is written. An agent that lets go (agent/tracer.c) puts
 * back what one atomic store covers and leaves the rest marked.
 *
 * A dead session's leftovers: a uscope that attaches to a process in which
 * an earlier one died finds that one's shared memory (a memfd named uscope,
 * with our layout's magic and the owner word's FUTEX_OWNER_DIED), and with
 * every thread stopped takes out whatever its agent left (or everything,
 * when no probe was hit since), before it checks that the code is the
 * file's and patches. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/log.h"
#include "engine/inject/inject_int.h"

_Static_assert(offsetof(pthread_mutex_t, __data.__lock) == 0,
	       "glibc's mutex: its futex word first");

/* The owner page, in the process read-only: a memfd sealed against
 * writable mappings (Linux 5.1), or else opened again read-only there. The
 * address it is mapped at, or -errno (reported). */
static long owner_map_remote(struct remote *rem, long fd, int lfd, uint64_t scratch)
{
	char path[64];
	long rfd = fd, r;

	if (fcntl(lfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE)) {
		snprintf(path, sizeof(path), "/proc/self/fd/%ld", fd);
		r = remote_write(rem, scratch, path, strlen(path) + 1);
		rfd = r ? r : inj_rsys(rem, SYS_openat, AT_FDCWD, (long)scratch, O_RDONLY | O_CLOEXEC,
				       0, 0, 0);
		if (inj_rsys_failed(rfd))
			return rfd;
	}
	r = inj_rsys(rem, SYS_mmap, 0, 4096, PROT_READ, MAP_SHARED, rfd, 0);
	if (rfd != fd)
		inj_rsys(rem, SYS_close, rfd, 0, 0, 0, 0, 0);
	return r;
}

int inj_owner_hold(struct inj_shm *m, struct remote *rem, uint64_t scratch)
{
	static const char name[] = "uscope-owner";
	pthread_mutexattr_t a;
	pthread_mutex_t *mu;
	char path[64];
	long fd, r;
	int lfd, ret;

	/* our main thread holds it: a robust mutex is released when the
	 * thread that holds it ends, and ours ends with the process */
	if (gettid() != getpid())
		log_warn("inject: the shared memory is held by a thread that is not the main one");
	ret = remote_write(rem, scratch, name, sizeof(name));
	if (ret)
		return ret;
	fd = inj_rsys(rem, SYS_memfd_create, (long)scratch, MFD_CLOEXEC | MFD_ALLOW_SEALING, 0, 0,
		      0, 0);
	if (inj_rsys_failed(fd))
		return (int)fd;
	snprintf(path, sizeof(path), "/proc/%d/fd/%ld", (int)rem->pid, fd);
	lfd = open(path, O_RDWR | O_CLOEXEC);
	if (lfd < 0 || ftruncate(lfd, 4096) ||
	    (m->owner_map = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, lfd, 0)) ==
	    MAP_FAILED) {
		ret = -errno;
		m->owner_map = NULL;
		goto out;
	}
	mu = m->owner_map;
	pthread_mutexattr_init(&a);
	pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
	pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
	ret = -pthread_mutex_init(mu, &a);
	pthread_mutexattr_destroy(&a);
	if (!ret)
		ret = -pthread_mutex_lock(mu);
	if (ret)
		goto out;
	m->held = true;
	/* the kernel wakes a waiter of a dead owner's word only when
	 * FUTEX_WAITERS is in it: the agent cannot set it (read-only) */
	__atomic_or_fetch((uint32_t *)mu, INJ_OWNER_WAITERS, __ATOMIC_SEQ_CST);
	r = owner_map_remote(rem, fd, lfd, scratch);
	if (inj_rsys_failed(r))
		ret = (int)r;
	else
		m->owner_remote = (uint64_t)r;
out:
	if (ret)
		log_error("cannot share a read-only page with process %d: %s", (int)rem->pid,
			  strerror(-ret));
	if (lfd >= 0)
		close(lfd);
	inj_rsys(rem, SYS_close, fd, 0, 0, 0, 0, 0);
	return ret;
}

void inj_owner_release(struct inj_shm *m)
{
	uint32_t *word = m->owner_map;

	if (!m->owner_map)
		return;
	if (m->held) {
		/* off our robust list (the page is about to be unmapped), then
		 * the bit an agent reads as our end */
		pthread_mutex_unlock(m->owner_map);
		__atomic_store_n(word, INJ_OWNER_DIED, __ATOMIC_SEQ_CST);
		syscall(SYS_futex, word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
		m->held = false;
	}
	munmap(m->owner_map, 4096);
	m->owner_map = NULL;
}

int inj_undo_tell(struct inj *j, pid_t pid)
{
	char path[32], text[16];

	snprintf(path, sizeof(path), "/proc/%d", (int)pid);
	snprintf(text, sizeof(text), "%d", (int)pid);
	return engine_undo_add(j->base.ctx, USC_UNDO_INJECT, path, text);
}

void inj_undo_forget(struct inj *j, int *undo)
{
	engine_undo_done(j->base.ctx, *undo);
	*undo = 0;
}

/* PROT_* of the mapping that holds addr (code: r-x when unknown). */
static uint8_t prot_at(const struct proc_map *maps, size_t nmaps, uint64_t addr)
{
	for (size_t i = 0; i < nmaps; i++)
		if (addr >= maps[i].start && addr < maps[i].end)
			return (uint8_t)((maps[i].perms[0] == 'r' ? PROT_READ : 0) |
					 (maps[i].perms[1] == 'w' ? PROT_WRITE : 0) |
					 (maps[i].perms[2] == 'x' ? PROT_EXEC : 0));
	return PROT_READ | PROT_EXEC;
}

void inj_undo_fill(struct inj_image *img, const struct proc_map *maps, size_t nmaps)
{
	struct inj_ctl *c = img->shm.ctl;
	struct inj_undo *u = (struct inj_undo *)((char *)img->shm.map + c->undo_off);
	size_t n = 0;

	for (size_t p = 0; p < img->npatches && p < c->nsites; p++) {
		const struct inj_patch *pa = &img->patches[p];
		struct inj_undo *d = &u[n++];

		memset(d, 0, sizeof(*d));
		d->addr = pa->addr;
		d->n = pa->nwritten;
		memcpy(d->orig, pa->orig, pa->nwritten);
		memcpy(d->jump, pa->written, pa->nwritten);
		d->prot = prot_at(maps, nmaps, pa->addr);
		if (pa->spring) {
			d->spring = pa->spring;
			memcpy(d->orig_spring, pa->orig_spring, 5);
			memcpy(d->jump_spring, pa->written_spring, 5);
		}
	}
	__atomic_store_n(&c->nundo, (uint32_t)n, __ATOMIC_RELEASE);
}

/* ---- a dead session's leftovers ------------------------------------------------ */

/* Every thread whose next instruction is the jmp rel32 at addr (jump, as
 * written) made to have taken it: on in the trampoline, which passes
 * through. No single step: a tracer that dies in the middle of one leaves
 * the thread its trap. */
static void step_off(struct remote *rem, uint64_t addr, const uint8_t *jump)
{
	int32_t rel;

	if (jump[0] != 0xe9)
		return;
	memcpy(&rel, jump + 1, 4);
	for (size_t t = 0; t < rem->ntasks; t++) {
		struct user_regs_struct r;

		if (remote_get_regs(rem, t, &r) == 0 && r.rip == addr) {
			r.rip = addr + 5 + (uint64_t)(int64_t)rel;
			remote_set_regs(rem, t, &r);
		}
	}
}

/* bytes at addr are `now` (but for another uprobe's int3s, kept: foreign.c):
 * put `orig` back. 1 when it did. */
static int put_back(struct remote *rem, uint64_t addr, const uint8_t *now, const uint8_t *orig,
		    size_t n)
{
	uint8_t at[8], fix[8];

	if (n > sizeof(at) || remote_read(rem, addr, at, n) || inj_bytes_over(at, now, n) < 0)
		return 0;
	for (size_t i = 0; i < n; i++)
		fix[i] = at[i] == 0xcc && now[i] != 0xcc ? 0xcc : orig[i];
	return remote_write(rem, addr, fix, n) == 0;
}

/* The dead session whose control block is at base (mapped len bytes). */
static int undo_session(struct remote *rem, uint64_t base, uint64_t len, const struct inj_ctl *c)
{
	uint32_t state = INJ_LETGO_NONE, done = INJ_LETGO_TRACER, nundo = c->nundo;
	size_t restored = 0;
	struct inj_undo *u;

	if (remote_read(rem, c->self + INJ_SELF_LETGO, &state, sizeof(state)))
		return 0;	/* no self page: not this process's */
	if (state == INJ_LETGO_BUSY)
		return -EINPROGRESS;	/* its agent is at it, stopped: let it finish */
	if (state == INJ_LETGO_TRACER || nundo > INJ_MAX_SITES || c->nsem > INJ_MAX_SITES ||
	    c->undo_off + (uint64_t)nundo * sizeof(*u) > len ||
	    c->sem_off + (uint64_t)c->nsem * 8 > len)
		return 0;
	u = calloc(nundo + 1, sizeof(*u));
	if (!u)
		return -ENOMEM;
	if (nundo && remote_read(rem, base + c->undo_off, u, nundo * sizeof(*u))) {
		free(u);
		return 0;
	}
	for (uint32_t i = 0; i < nundo; i++) {
		restored += put_back(rem, u[i].addr, u[i].jump, u[i].orig, u[i].n);
		if (u[i].spring) {
			step_off(rem, u[i].spring, u[i].jump_spring);
			restored += put_back(rem, u[i].spring, u[i].jump_spring, u[i].orig_spring, 5);
		}
	}
	free(u);
	for (uint32_t i = 0; i < c->nsem && state == INJ_LETGO_NONE; i++) {
		uint64_t addr;
		uint16_t v;

		if (remote_read(rem, base + c->sem_off + 8 * i, &addr, 8) == 0 &&
		    remote_read(rem, addr, &v, 2) == 0 && v) {
			v--;
			remote_write(rem, addr, &v, 2);
		}
	}
	remote_write(rem, c->self + INJ_SELF_LETGO, &done, sizeof(done));
	/* its rings are never read again: their memory back */
	if (c->rings_off + (uint64_t)c->nslots * c->ring_size <= len)
		inj_rsys(rem, SYS_madvise, (long)(base + c->rings_off),
			 (long)((uint64_t)c->nslots * c->ring_size), MADV_REMOVE, 0, 0, 0);
	if (restored)
		log_info("inject: process %d: %zu patch%s left by a uscope that died there taken "
			 "out", (int)rem->pid, restored, restored == 1 ? "" : "es");
	return 0;
}

/* A uscope's shared memory mapped at m: its control block in *c. */
static bool region_at(struct remote *rem, const struct proc_map *m, struct inj_ctl *c)
{
	return m->path && strstr(m->path, "/memfd:uscope") && !m->pgoff &&
	       m->end - m->start >= sizeof(*c) && remote_read(rem, m->start, c, sizeof(*c)) == 0 &&
	       c->magic == INJ_MAGIC;
}

int inj_undo_dead(struct remote *rem, const struct proc_map *maps, size_t nmaps)
{
	for (size_t i = 0; i < nmaps; i++) {
		struct inj_ctl c;
		uint32_t own;
		int ret;

		if (!region_at(rem, &maps[i], &c) || remote_read(rem, c.owner, &own, sizeof(own)))
			continue;
		if (!(own & INJ_OWNER_DIED)) {
			if (own & ~INJ_OWNER_WAITERS) {
				log_error("process %d is traced by another uscope (its process %u)",
					  (int)rem->pid, own & FUTEX_TID_MASK);
				return -EBUSY;
			}
			continue;
		}
		ret = undo_session(rem, maps[i].start, maps[i].end - maps[i].start, &c);
		if (ret)
			return ret;
	}
	return 0;
}

/* ---- the janitor, after uscope died ------------------------------------------- */

#define JANITOR_AGENT_NS 100000000ULL	/* the agent's moment to let go */
#define JANITOR_STEP_US 2000
#define JANITOR_TRIES 300		/* 10 ms apart: the dead uscope's exit (it
					 * still traces the process until its very
					 * end), an agent letting go */

enum { LEFT_NONE, LEFT_AGENT, LEFT_PATCHES };

/* What the dead session at base left, read without stopping anything:
 * LEFT_AGENT while its agent has not let go (or is at it), LEFT_PATCHES
 * when it let go and a jump of ours is still there. */
static int left_by(struct remote *rem, uint64_t base, uint64_t len, const struct inj_ctl *c)
{
	uint32_t state, nundo = c->nundo;
	struct inj_undo *u;
	int left = LEFT_NONE;

	if (remote_read(rem, c->self + INJ_SELF_LETGO, &state, sizeof(state)) ||
	    state == INJ_LETGO_TRACER)
		return LEFT_NONE;
	if (state != INJ_LETGO_AGENT)
		return LEFT_AGENT;
	if (!nundo || nundo > INJ_MAX_SITES || c->undo_off + (uint64_t)nundo * sizeof(*u) > len)
		return LEFT_NONE;
	u = calloc(nundo, sizeof(*u));
	if (!u || remote_read(rem, base + c->undo_off, u, nundo * sizeof(*u))) {
		free(u);
		return LEFT_PATCHES;	/* (stop it and see) */
	}
	for (uint32_t i = 0; i < nundo && !left; i++) {
		uint8_t at[8];

		if ((u[i].n <= sizeof(at) && remote_read(rem, u[i].addr, at, u[i].n) == 0 &&
		     inj_bytes_over(at, u[i].jump, u[i].n) >= 0) ||
		    (u[i].spring && remote_read(rem, u[i].spring, at, 5) == 0 &&
		     inj_bytes_over(at, u[i].jump_spring, 5) >= 0))
			left = LEFT_PATCHES;
	}
	free(u);
	return left;
}

/* The most any dead session in process pid left (LEFT_*), or -errno. */
static int left_in(pid_t pid)
{
	struct proc_map *maps = NULL;
	ssize_t nmaps = procmaps_read(pid, &maps);
	struct remote rem;
	int left = LEFT_NONE;

	if (nmaps < 0)
		return (int)nmaps;
	if (remote_open(&rem, pid)) {
		procmaps_free(maps, (size_t)nmaps);
		return -ESRCH;
	}
	for (ssize_t i = 0; i < nmaps; i++) {
		struct inj_ctl c;
		uint32_t own;
		int l;

		if (!region_at(&rem, &maps[i], &c) || remote_read(&rem, c.owner, &own, sizeof(own)) ||
		    !(own & INJ_OWNER_DIED))
			continue;
		l = left_by(&rem, maps[i].start, maps[i].end - maps[i].start, &c);
		left = l > left ? l : left;
	}
	remote_forget(&rem);
	procmaps_free(maps, (size_t)nmaps);
	return left;
}

int inj_janitor_undo(pid_t pid)
{
	uint64_t until = inj_mono_ns() + JANITOR_AGENT_NS;
	int left, ret = 0;

	/* the agent first: it lets go at the first hit, with no stop (a thread
	 * of the process that never hits a probe leaves it all to us) */
	for (;;) {
		left = left_in(pid);
		if (left < 0)
			return left == -ESRCH || left == -ENOENT ? 0 : left;
		if (left == LEFT_NONE)
			return 0;
		if (left == LEFT_PATCHES || inj_mono_ns() >= until)
			break;
		usleep(JANITOR_STEP_US);
	}
	for (int tries = 0; tries < JANITOR_TRIES; tries++) {
		struct proc_map *maps = NULL;
		struct remote rem;
		ssize_t nmaps;

		ret = remote_stop_all(&rem, pid);
		if (ret == -ESRCH)
			return 0;
		if (!ret) {
			nmaps = procmaps_read(pid, &maps);
			ret = nmaps < 0 ? (int)nmaps : inj_undo_dead(&rem, maps, (size_t)nmaps);
			if (nmaps > 0)
				procmaps_free(maps, (size_t)nmaps);
			remote_release(&rem);
			if (ret != -EINPROGRESS)
				return ret;
		}
		usleep(10000);
	}
	return ret;
}

static int undo_one_mapper(pid_t pid, void *ctx)
{
	int *first = ctx, ret = inj_janitor_undo(pid);

	if (ret && !*first)
		*first = ret;
	return 0;
}

int inj_janitor_undo_memfd(uint64_t dev, uint64_t ino)
{
	int first = 0, ret = inj_memfd_each(dev, ino, undo_one_mapper, &first);

	return ret ? ret : first;
}
