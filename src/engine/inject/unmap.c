/* What a clean detach leaves in a process it attached to (-p).
 *
 * Once the jumps are out (inj_restore), no call enters a trampoline any
 * more, but a thread may still be on its way through one: stopped inside
 * it, or with a return address into it (a call among the instructions a
 * patch displaced returns to its relocated copy), or in the agent, or in a
 * signal handler that interrupted either (its frame holds the ip to go back
 * to). What such a thread runs of a trampoline after the relocated
 * instructions may be a probe's code, which reads the shared memory and
 * calls the agent.
 *
 * So, with every thread stopped: when no thread's ip, and no word of its
 * stack from its stack pointer to the end of that mapping (return
 * addresses, a signal frame's saved ip: read as words, conservatively), is
 * in the agent's code or a probe's, each probe's code becomes a jump over
 * itself, and the shared memory (its rings alone are 1 GiB of address
 * space), the agent's code, the self page and the owner page are unmapped.
 * A thread found inside: the caller lets the threads run a moment and
 * tries again; in the end, everything stays mapped, as before.
 *
 * What stays: the trampolines, one area near each probed module, 512 bytes
 * a site and one more per patch, in whole pages (4 KiB for a few probes):
 * a thread may return into them at any time later. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/log.h"
#include "engine/inject/inject_int.h"
#include "x86/reloc.h"

/* The agent's code mapped in the process: its bytes. */
static uint64_t agent_len(void)
{
	return ((uint64_t)(inject_agent_blob_end - inject_agent_blob) + 4095) & ~4095ULL;
}

/* Is a in the agent's code or a probe's? */
static bool in_probe(const struct inj_image *img, uint64_t a)
{
	if (a >= img->shm.agent_remote && a < img->shm.agent_remote + agent_len())
		return true;
	for (size_t i = 0; i < img->nchunks; i++)
		if (a >= img->chunks[i].at && a < img->chunks[i].at + img->chunks[i].len)
			return true;
	return false;
}

/* Is task t inside the agent or a probe, or on its way back to one? */
static bool thread_inside(const struct inj_image *img, struct remote *rem, size_t t,
			  const struct proc_map *maps, size_t nmaps)
{
	static uint64_t w[8192];
	struct user_regs_struct r;
	uint64_t at, end = 0;

	if (remote_get_regs(rem, t, &r))
		return false;	/* gone */
	if (in_probe(img, r.rip))
		return true;
	for (size_t i = 0; i < nmaps; i++)
		if (r.rsp >= maps[i].start && r.rsp < maps[i].end)
			end = maps[i].end;
	if (!end)
		return true;	/* a stack we cannot read: as if */
	for (at = r.rsp & ~7ULL; at < end;) {
		size_t n = end - at < sizeof(w) ? (size_t)(end - at) : sizeof(w);

		if (remote_read(rem, at, w, n))
			return true;
		for (size_t k = 0; k < n / 8; k++)
			if (in_probe(img, w[k]))
				return true;
		at += n;
	}
	return false;
}

/* py: probes set a profile function (the agent's code) in thread states
 * that take it out at their next Python call, and a pending call runs the
 * agent's code later: the agent and its memory must stay. */
static bool py_left(const struct inj_image *img)
{
	const struct inj_ctl *c = img->shm.ctl;
	const struct inj_py *py = c && c->py_off ? (const void *)((const char *)c + c->py_off) :
					    NULL;

	return py && py->state != INJ_PY_OFF;
}

int inj_unmap(struct inj_image *img, struct remote *rem)
{
	struct inj_shm *m = &img->shm;
	struct proc_map *maps = NULL;
	ssize_t nmaps = procmaps_read(rem->pid, &maps);
	uint64_t stays = 0;
	bool inside = false;

	if (nmaps < 0)
		return (int)nmaps;
	if (py_left(img)) {
		procmaps_free(maps, (size_t)nmaps);
		return -EEXIST;
	}
	for (size_t t = 0; t < rem->ntasks && !inside; t++)
		inside = thread_inside(img, rem, t, maps, (size_t)nmaps);
	procmaps_free(maps, (size_t)nmaps);
	if (inside)
		return -EBUSY;
	/* a thread on its way back through a trampoline passes its probes by */
	for (size_t i = 0; i < img->nchunks; i++) {
		uint8_t jmp[5];

		if (img->chunks[i].len < sizeof(jmp) ||
		    x86_encode_jmp(img->chunks[i].at, img->chunks[i].at + img->chunks[i].len, jmp) ||
		    remote_write(rem, img->chunks[i].at, jmp, sizeof(jmp)))
			return -EIO;	/* (the ones before are pass-throughs: harmless) */
	}
	if (m->remote)
		inj_rsys(rem, SYS_munmap, (long)m->remote, (long)m->size, 0, 0, 0, 0);
	if (m->agent_remote)
		inj_rsys(rem, SYS_munmap, (long)m->agent_remote, (long)agent_len(), 0, 0, 0, 0);
	if (m->owner_remote)
		inj_rsys(rem, SYS_munmap, (long)m->owner_remote, 4096, 0, 0, 0, 0);
	if (m->self_remote)
		inj_rsys(rem, SYS_munmap, (long)m->self_remote, INJ_SELF_SIZE, 0, 0, 0, 0);
	for (size_t a = 0; a < img->nareas; a++)
		stays += img->areas[a].size;
	log_info("inject: process %d: the shared memory (%llu MiB) and the agent unmapped; "
		 "%llu bytes of trampolines stay", (int)rem->pid,
		 (unsigned long long)(m->size >> 20), (unsigned long long)stays);
	return 0;
}

#define LEAVE_TRIES 20		/* 5 ms apart: a thread on its way out */

void inj_leave(struct inj *j, struct inj_image *img, pid_t pid)
{
	struct remote rem;
	int ret;

	if (remote_stop_all(&rem, pid))
		return;
	if (!inj_restore(j, img, &rem)) {
		remote_release(&rem);
		return;
	}
	for (int tries = 0;; tries++) {
		ret = inj_unmap(img, &rem);
		remote_release(&rem);
		if (ret == -EEXIST)
			log_info("inject: process %d: py: probes' profile function may still be "
				 "in a thread: the agent stays mapped", (int)pid);
		if (ret != -EBUSY)
			break;
		if (tries == LEAVE_TRIES) {
			log_info("inject: process %d: a thread stays inside a probe: the shared "
				 "memory stays mapped", (int)pid);
			return;
		}
		usleep(5000);
		if (remote_stop_all(&rem, pid))
			return;
	}
}
