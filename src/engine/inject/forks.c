/* Forked children under -p and system-wide, with no ptrace after the
 * attach (issue 40): a process uscope patched runs on alone, and what it
 * forks is taken up without ever being stopped for uscope.
 *
 * A forked child runs a copy of its parent's patched code and maps the
 * same shared memory. Its first hit claims its self word (agent/tracer.c,
 * agent_claim) and lists its pid in the control block; at each drain uscope
 * takes the new ones up: a process of the image (its janitor entry, its
 * name, its mappings for $ustack), by the host's pid (a container's child
 * says its own). A child that never hits a probe is not listed: at the end,
 * uscope finds every process that maps the image's memfd (its device and
 * inode, in /proc/PID/maps) and restores each; and the janitor was told of
 * the memfd before any jump was written (USC_UNDO_INJECT, "mem:DEV:INO"):
 * after a death it does the same. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/log.h"
#include "core/proc.h"
#include "engine/inject/inject_int.h"
#include "ns/ns.h"

#ifndef KCMP_VM
#define KCMP_VM 1
#endif

/* Do a and b share one address space (a vfork child and its parent)? */
static bool same_vm(pid_t a, pid_t b)
{
	return syscall(SYS_kcmp, a, b, KCMP_VM, 0, 0) == 0;
}

static struct inj_proc *proc_of(struct inj *j, pid_t pid)
{
	for (size_t i = 0; i < j->nprocs; i++)
		if (j->procs[i].pid == pid)
			return &j->procs[i];
	return NULL;
}

bool inj_maps_memfd(pid_t pid, uint64_t dev, uint64_t ino)
{
	struct proc_map *m = NULL;
	ssize_t n;
	bool found = false;

	usc_log_quiet(true);	/* gone, or not ours to read */
	n = procmaps_read(pid, &m);
	usc_log_quiet(false);
	for (ssize_t i = 0; i < n && !found; i++)
		found = m[i].inode == ino && m[i].dev == dev && m[i].path &&
			strstr(m[i].path, "memfd:uscope");
	procmaps_free(m, n > 0 ? (size_t)n : 0);
	return found;
}

int inj_memfd_each(uint64_t dev, uint64_t ino, int (*fn)(pid_t pid, void *ctx), void *ctx)
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	pid_t me = getpid();
	int ret = 0;

	if (!d)
		return -errno;
	while (!ret && (de = readdir(d))) {
		pid_t pid;

		if (!isdigit((unsigned char)de->d_name[0]))
			continue;
		pid = (pid_t)atoi(de->d_name);
		if (pid != me && inj_maps_memfd(pid, dev, ino))
			ret = fn(pid, ctx);
	}
	closedir(d);
	return ret;
}

/* A child of img's process says pid (its own getpid): the host's. 0 when
 * it cannot be found (gone). */
struct host_find {
	pid_t inner, host;
};

static int host_match(pid_t pid, void *ctx)
{
	struct host_find *f = ctx;
	struct proc_status st;

	if (proc_status_read(pid, &st) == 0 && st.ns_tgid == f->inner) {
		f->host = pid;
		return 1;
	}
	return 0;
}

static pid_t host_pid(const struct inj_image *img, pid_t inner)
{
	struct host_find f = {inner, 0};

	if (ns_inner_tid(img->pid) == img->pid)
		return inner;	/* not in a namespace below ours: the same */
	inj_memfd_each((uint64_t)img->shm.memfd_dev, (uint64_t)img->shm.memfd_ino, host_match, &f);
	return f.host;
}

/* Its name as it told it (a child gone before we read its /proc). */
static void comm_told(struct inj *j, pid_t pid, const char *name)
{
	struct inj_comm *c;

	for (size_t i = 0; i < j->ncomms; i++)
		if (j->comms[i].tid == pid && !j->comms[i].img)
			return;
	c = realloc(j->comms, (j->ncomms + 1) * sizeof(*c));
	if (!c)
		return;
	j->comms = c;
	c = &c[j->ncomms++];
	c->tid = pid;
	c->img = NULL;
	memcpy(c->comm, name, 16);
	c->comm[16] = 0;
}

/* Process pid, which runs a copy of img's code (forked), taken up. */
static void take_up(struct inj *j, struct inj_image *img, pid_t pid, pid_t inner)
{
	struct inj_proc *v;

	if (proc_of(j, pid))
		return;
	v = realloc(j->procs, (j->nprocs + j->attaching + 1) * sizeof(*v));
	if (!v)
		return;
	j->procs = v;
	j->procs[j->nprocs++] = (struct inj_proc){.pid = pid, .state = PROC_RUN, .img = img,
						  .undo = inj_undo_tell(j, pid)};
	img->refs++;
	if (inner != pid) {	/* in a container: its records name it by that */
		struct inj_kid *k = realloc(j->kids, (j->nkids + 1) * sizeof(*k));

		if (k) {
			j->kids = k;
			j->kids[j->nkids++] = (struct inj_kid){img, pid, inner};
		}
	}
	inj_comm(j, NULL, pid, pid);	/* its name, while it is here */
	inj_stk_fork(j, img, pid);
	log_debug("inject: process %d, forked from %d, taken up", (int)pid, (int)img->pid);
}

/* A few of the children taken up that have ended since, forgotten (a
 * prefork server forks one a request: their entries would pile up, and
 * their pids come again). */
#define SWEEP_PER_POLL 16

static void sweep(struct inj *j)
{
	for (int k = 0; k < SWEEP_PER_POLL && j->nprocs; k++) {
		struct inj_proc *p;

		if (j->sweep_at >= j->nprocs)
			j->sweep_at = 0;
		p = &j->procs[j->sweep_at];
		if (!p->img || p->img->pid == p->pid || kill(p->pid, 0) == 0 || errno != ESRCH) {
			j->sweep_at++;
			continue;
		}
		inj_undo_forget(j, &p->undo);
		inj_image_put(j, p->img);
		*p = j->procs[--j->nprocs];
	}
}

void inj_forks_poll(struct inj *j)
{
	if (j->children)
		sweep(j);
	for (size_t i = 0; i < j->nimages; i++) {
		struct inj_image *img = j->images[i];
		struct inj_ctl *c = img->shm.ctl;
		const struct inj_kid_ent *kids;
		uint32_t n, pending = UINT32_MAX;

		if (!c || !c->follow_forks || !c->kids_off || !inj_image_applied(img))
			continue;
		kids = (const struct inj_kid_ent *)((const char *)c + c->kids_off);
		n = __atomic_load_n(&c->nkids, __ATOMIC_ACQUIRE);
		n = n < INJ_MAX_KIDS ? n : INJ_MAX_KIDS;
		for (uint32_t at = img->kids_seen; at < n; at++) {
			const struct inj_kid_ent *k = &kids[at];
			pid_t inner = (pid_t)__atomic_load_n(&k->pid, __ATOMIC_ACQUIRE);
			pid_t host;

			if (!inner) {	/* being written: from here next time */
				pending = pending < at ? pending : at;
				continue;
			}
			host = host_pid(img, inner);
			if (host > 0) {
				comm_told(j, host, k->comm);
				take_up(j, img, host, inner);
			}
		}
		img->kids_seen = pending < n ? pending : n;
	}
}

const char *inj_forks_comm(struct inj *j, const struct inj_image *img, pid_t pid)
{
	const struct inj_ctl *c = img->shm.ctl;
	const struct inj_kid_ent *kids;
	uint32_t n;

	if (!c || !c->follow_forks || !c->kids_off)
		return NULL;
	(void)j;
	kids = (const struct inj_kid_ent *)((const char *)c + c->kids_off);
	n = __atomic_load_n(&c->nkids, __ATOMIC_ACQUIRE);
	n = n < INJ_MAX_KIDS ? n : INJ_MAX_KIDS;
	for (uint32_t at = n; at-- > 0;)	/* the newest first: a pid comes again */
		if ((pid_t)__atomic_load_n(&kids[at].pid, __ATOMIC_ACQUIRE) == pid)
			return kids[at].comm;
	return NULL;
}

/* ---- at the end: every process that maps an image's memfd ------------------------ */

/* Process pid, which maps img's memfd, taken up unless known (or a vfork
 * child of a known one: its memory is that one's, restored with it). */
static void found_one(struct inj *j, struct inj_image *img, pid_t pid)
{
	struct proc_status st;

	if (proc_of(j, pid) || proc_status_read(pid, &st))
		return;
	for (size_t i = 0; i < j->nprocs; i++)
		if (j->procs[i].img == img && same_vm(pid, j->procs[i].pid))
			return;
	take_up(j, img, pid, st.ns_tgid ? st.ns_tgid : pid);
}

/* The image whose memfd process pid maps, if any (one pass over its maps
 * for every image: system-wide has many). */
static struct inj_image *image_mapped(struct inj *j, pid_t pid)
{
	struct inj_image *found = NULL;
	struct proc_map *m = NULL;
	ssize_t n;

	usc_log_quiet(true);	/* gone, or not ours to read */
	n = procmaps_read(pid, &m);
	usc_log_quiet(false);
	for (ssize_t i = 0; i < n && !found; i++) {
		if (!m[i].path || !strstr(m[i].path, "memfd:uscope"))
			continue;
		for (size_t k = 0; k < j->nimages && !found; k++) {
			struct inj_image *img = j->images[k];

			if (img->shm.ctl && img->shm.ctl->follow_forks && img->shm.memfd_ino &&
			    m[i].inode == (uint64_t)img->shm.memfd_ino &&
			    m[i].dev == (uint64_t)img->shm.memfd_dev && inj_image_applied(img))
				found = img;
		}
	}
	procmaps_free(m, n > 0 ? (size_t)n : 0);
	return found;
}

void inj_forks_find(struct inj *j)
{
	DIR *d;
	struct dirent *de;
	pid_t me = getpid();
	bool any = false;

	inj_forks_poll(j);
	for (size_t k = 0; k < j->nimages; k++)
		any |= j->images[k]->shm.ctl && j->images[k]->shm.ctl->follow_forks &&
		       inj_image_applied(j->images[k]);
	if (!any || !(d = opendir("/proc")))
		return;
	while ((de = readdir(d))) {
		struct inj_image *img;
		pid_t pid;

		if (!isdigit((unsigned char)de->d_name[0]))
			continue;
		pid = (pid_t)atoi(de->d_name);
		if (pid != me && !proc_of(j, pid) && (img = image_mapped(j, pid)))
			found_one(j, img, pid);
	}
	closedir(d);
}

int inj_undo_tell_memfd(struct inj *j, struct inj_image *img)
{
	char path[32], text[64];

	snprintf(path, sizeof(path), "/proc/%d", (int)img->pid);
	snprintf(text, sizeof(text), "mem:%" PRIu64 ":%" PRIu64, (uint64_t)img->shm.memfd_dev,
		 (uint64_t)img->shm.memfd_ino);
	return engine_undo_add(j->base.ctx, USC_UNDO_INJECT, path, text);
}
