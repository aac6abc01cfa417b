/* Another tool's kernel uprobe over our patches (bpftrace, perf, a uscope
 * on tracefs or bpf): the target must not pay for it, at any instant.
 *
 * A kernel uprobe writes an int3 over the first byte of the instruction at
 * its offset, in every process its filter takes, and when it is hit runs
 * the file's instruction out of line and goes on after it. Over our jump,
 * that lands in the middle of the jump. And when the uprobe goes, the
 * kernel writes the file's byte back over its int3, before our jump's other
 * bytes. So:
 *  - A patch goes after the site's instruction where that can stay in
 *    place (plan.c, plan_pre: a push at an entry, undone by the trampoline;
 *    anything that changes nothing the probes read): a uprobe at the site
 *    runs it and lands on our jump, and neither its hits nor its leaving
 *    touch our bytes.
 *  - Else the jump's bytes after the instruction are the file's own, its
 *    target a pad placed there (pad.c): a hit goes on in the file's code,
 *    and where all four are the file's, so does the uprobe's leaving. The
 *    sites with no pad are said at attach.
 *  - At attach, a patch whose bytes hold another uprobe's int3 is left
 *    alone in that process (its hits there go uncounted), said once (with
 *    -p and -e auto, the plan gave its site to a kernel engine already,
 *    which shares the uprobe).
 *  - While attached, the patches' bytes are read in every process (a few
 *    times a second, one system call a process): a patch another uprobe
 *    came over is taken out at once, but for the int3 (the file's bytes
 *    under the uprobe, as the kernel expects them), said once; one whose
 *    uprobe came and went since the last look gets its first byte back
 *    (put_back).
 *  - Detach, the janitor and the agent put the file's bytes back around
 *    another uprobe's int3, never over it (image.c, undo.c, agent/tracer.c).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "core/log.h"
#include "engine/inject/inject_int.h"

#define WATCH_NS 200000000ULL	/* how often the patches are read */
#define WATCH_IOV 512		/* patches read in one system call */

int inj_bytes_over(const uint8_t *now, const uint8_t *want, size_t n)
{
	int int3 = 0;

	for (size_t i = 0; i < n; i++) {
		if (now[i] == want[i])
			continue;
		if (now[i] != 0xcc)
			return -1;
		int3 = 1;
	}
	return int3;
}

/* Process pid's bytes of patch pa: another uprobe's int3 over our jump,
 * taken out around it. 1 when it was. */
static int take_out(struct inj_patch *pa, pid_t pid, const uint8_t *now)
{
	uint8_t fix[sizeof(pa->written)];
	struct remote rem;
	int ret;

	if (inj_bytes_over(now, pa->written, pa->nwritten) != 1)
		return 0;
	for (size_t i = 0; i < pa->nwritten; i++)
		fix[i] = now[i] == 0xcc && pa->written[i] != 0xcc ? 0xcc : pa->orig[i];
	if (remote_open(&rem, pid))
		return 0;
	ret = remote_write(&rem, pa->addr, fix, pa->nwritten);
	remote_forget(&rem);
	return ret == 0;
}

static void said(struct inj *j, const struct inj_patch *pa, pid_t pid, const char *how)
{
	const struct usc_site *site = j->base.sites[pa->sites[0]];

	log_warn("%s: another tool's uprobe (bpftrace, perf, a kernel engine) is on the patch at "
		 "0x%llx in process %d: %s; its calls there are not counted by uscope",
		 site->label, (unsigned long long)pa->addr, (int)pid, how);
}

/* A uprobe that came and went between two looks: the kernel wrote the
 * file's first byte back over its int3, before our jump's other bytes.
 * Where those are the file's too (pad.c: the file's bytes 1-4), that is the
 * file's code, and so it is after our taking out and its leaving; anywhere
 * else a broken instruction. Either way our jump's first byte put back (one
 * byte: atomic for the threads running there) makes it whole again. 1 when
 * it was. */
static int put_back(struct inj_patch *pa, pid_t pid, const uint8_t *now)
{
	struct remote rem;
	int ret;

	if (now[0] != pa->orig[0] || now[0] == pa->written[0] ||
	    memcmp(now + 1, pa->written + 1, pa->nwritten - 1u) || remote_open(&rem, pid))
		return 0;
	ret = remote_write(&rem, pa->addr, pa->written, 1);
	remote_forget(&rem);
	return ret == 0;
}

/* Every applied patch of process p read in one call; the ones another
 * uprobe came over taken out (said once a site), the ones it left put
 * back. */
static void watch_proc(struct inj *j, const struct inj_proc *p)
{
	struct inj_image *img = p->img;
	struct iovec local[WATCH_IOV], remote[WATCH_IOV];
	uint8_t (*now)[8] = calloc(WATCH_IOV, 8);
	size_t at = 0, idx[WATCH_IOV];

	if (!now)
		return;
	while (at < img->npatches) {
		size_t n = 0;
		ssize_t got;

		for (; at < img->npatches && n < WATCH_IOV; at++) {
			struct inj_patch *pa = &img->patches[at];

			if (!pa->applied)
				continue;
			local[n] = (struct iovec){now[n], pa->nwritten};
			remote[n] = (struct iovec){(void *)(uintptr_t)pa->addr, pa->nwritten};
			idx[n++] = at;
		}
		got = n ? process_vm_readv(p->pid, local, n, remote, n, 0) : 0;
		for (size_t k = 0; got > 0 && k < n; k++) {
			struct inj_patch *pa = &img->patches[idx[k]];

			if ((size_t)got < pa->nwritten)
				break;	/* (the rest unread: gone, or unmapped) */
			got -= (ssize_t)pa->nwritten;
			if (!memcmp(now[k], pa->written, pa->nwritten))
				continue;
			if (take_out(pa, p->pid, now[k])) {
				if (!pa->foreign)
					said(j, pa, p->pid, "taken out there at once");
				pa->foreign = true;
			} else if (!pa->plan.spring && put_back(pa, p->pid, now[k])) {
				log_info("%s: another tool's uprobe on the patch at 0x%llx in process "
					 "%d has gone: the patch is back", j->base.sites[pa->sites[0]]->label,
					 (unsigned long long)pa->addr, (int)p->pid);
			}
		}
	}
	free(now);
}

void inj_watch(struct inj *j)
{
	uint64_t now = inj_mono_ns();

	if (now < j->watch_next)
		return;
	j->watch_next = now + WATCH_NS;
	for (size_t i = 0; i < j->nprocs; i++)
		if (j->procs[i].img && j->procs[i].state == PROC_RUN &&
		    inj_image_applied(j->procs[i].img))
			watch_proc(j, &j->procs[i]);
}

void inj_foreign_said(struct inj *j, const struct inj_patch *pa, pid_t pid)
{
	said(j, pa, pid, "left alone there");
}
