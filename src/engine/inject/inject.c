/* The inject engine: probes patched into the traced process itself.
 *
 * A site is planned once, from the file, when the session asks whether the
 * engine can place it (plan.c): the whole function is decoded and the
 * 5-byte jump checked safe. Then, with every thread of the process stopped,
 * its image is patched (image.c): shared memory, the agent, trampolines,
 * jumps. A running process (-p, system-wide) is stopped by ptrace for that
 * and let go: it runs, forks and takes signals on its own; a child it forks
 * takes itself up at its first hit (forks.c), or with --no-children records
 * nothing. Each system call run in it is a step it finishes alone should we
 * die (step.c). COMMAND's tree is held by ptrace all along (follow.c):
 * the processes it forks record as themselves, and an exec'd program is
 * patched at its entry point. Detach stops the processes once more and
 * writes back every original byte; trampolines and the shared memory stay
 * mapped, since a thread may still be inside them. A tracer that dies
 * without detaching (SIGKILL, OOM) leaves its agent to let go by itself:
 * no thread waits for it, and the first hit takes the patches out (undo.c,
 * agent/tracer.c); what no atomic store could take out, the next tracer
 * does. A stopped tracer costs a thread that waits for room one bound
 * (--max-wait), then nothing until it makes progress.
 *
 * Events: the agent (agent/agent.c) appends records to the hitting
 * thread's ring; poll drains every ring of every image, merges by time and
 * delivers events exactly as the other engines do (rings.c). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/fault.h"
#include "core/log.h"
#include "engine/inject/gate_shared.h"
#include "engine/inject/inject_int.h"

static int inj_create(const struct usc_engine_ctx *s, struct usc_engine **out, char *why,
		      size_t len)
{
	struct inj *j;

	/* system-wide: only when named (-e inject), see system.c */
	if (s->target->kind == USC_TARGET_SYSTEM && !s->engine_named) {
		snprintf(why, len, "system-wide, the inject engine attaches late the processes "
			 "with a terminal started after attach: -e inject to use it");
		return -ENOTSUP;
	}
	if (s->target->kind == USC_TARGET_PID && inj_proc_refusal(s->target->pid, why, len))
		return -ENOTSUP;
	if (s->set->record.snapshot > INJ_RING_SIZE) {
		snprintf(why, len, "--snapshot keeps at most %u MiB a thread (the size of its "
			 "ring)", INJ_RING_SIZE >> 20);
		return -ENOTSUP;
	}
	j = calloc(1, sizeof(*j));
	if (!j)
		return -ENOMEM;
	j->base.ops = &inject_engine_ops;
	j->base.ctx = s;
	j->follow = s->target->kind == USC_TARGET_COMMAND;
	j->children = s->target->kind != USC_TARGET_COMMAND && s->children;
	j->clock = calloc(1, sizeof(*j->clock));
	if (!j->clock) {
		free(j);
		return -ENOMEM;
	}
	tsc_sample(j->clock, 1);
	*out = &j->base;
	return 0;
}

static int inj_can_place(struct usc_engine *e, const struct usc_site *site, char *why,
			 size_t len)
{
	struct inj *j = inj_of(e);
	const struct usc_engine_ctx *s = e->ctx;

	if (!j->plans) {
		j->plans = calloc(s->nsites + 1, sizeof(*j->plans));
		j->pre = calloc(s->nsites + 1, sizeof(*j->pre));
		if (!j->plans || !j->pre)
			return -ENOMEM;
	}
	return inj_plan_site(j, site, why, len);
}

/* The bytes a patch moves, and its springboard slot. */
static size_t inj_footprint(struct usc_engine *e, const struct usc_site *site,
			    uint64_t (*r)[2], size_t max)
{
	struct inj *j = inj_of(e);
	const struct x86_patch *p = &j->plans[site - e->ctx->sites];
	size_t n = 0;

	if (max < 2)
		return 0;
	r[n][0] = p->addr;
	r[n++][1] = p->addr + p->len;
	if (p->spring) {
		r[n][0] = p->spring;
		r[n++][1] = p->spring + X86_JMP_LEN;
	}
	return n;
}

static int inj_attach(struct usc_engine *e)
{
	struct inj *j = inj_of(e);

	if (e->nsites > INJ_MAX_SITES) {
		log_error("the inject engine takes at most %d sites (%zu asked)", INJ_MAX_SITES,
			  e->nsites);
		return -E2BIG;
	}
	j->stats = calloc(e->nsites + 1, sizeof(*j->stats));
	/* Python's code objects are named from its memory, stacks' frames
	 * from its mappings as they are at the end: a process of COMMAND's
	 * waits at its exit for its last records to be read */
	j->hold_exit = j->follow && (inj_py_wanted(j) || e->ctx->has_stacks);
	inj_agg_geometry(j);
	inj_stk_geometry(j);
	return j->stats ? 0 : -ENOMEM;
}

/* A running process: stop every thread, patch, let them go (held by
 * ptrace when its children are followed). */
int inj_proc_attach(struct inj *j, pid_t pid)
{
	struct usc_engine *e = &j->base;
	struct inj_image *img;
	struct inj_proc *v;
	struct remote rem;
	uint64_t t0 = inj_mono_ns();
	int ret, undo;

	/* its record first: once its code is patched, nothing may fail
	 * before the process is tracked (its janitor entry is marked done
	 * only when j->procs holds it); room for the others under way too
	 * (system-wide, several attach at once: remote_fibers) */
	v = core_fault("inject.proc") ? NULL :
		realloc(j->procs, (j->nprocs + j->attaching + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	j->procs = v;
	j->attaching++;
	undo = inj_undo_tell(j, pid);
	for (int tries = 0;; tries++) {
		ret = j->drop_stop ? remote_stop_all_nostop(&rem, pid) : remote_stop_all(&rem, pid);
		if (ret) {
			inj_undo_forget(j, &undo);
			j->attaching--;
			return ret;
		}
		img = inj_image_new(j, pid);
		ret = img ? inj_install(j, img, &rem) : -ENOMEM;
		if (ret != -EINPROGRESS || tries >= 100)
			break;
		/* the agent of a uscope that died here is letting go: let it */
		remote_release(&rem);
		usleep(10000);
	}
	if (ret == -EINPROGRESS)
		log_error("process %d: the agent of a uscope that died there does not finish "
			  "letting go", (int)pid);
	j->attaching--;
	if (!ret) {
		struct inj_proc *p = &j->procs[j->nprocs++];

		*p = (struct inj_proc){.pid = pid, .state = PROC_RUN, .img = img, .undo = undo};
		undo = 0;
		/* (system-wide: ours, the gate lets it be; one the gate stopped
		 * is marked so once it is sent on: system.c) */
		if (!j->drop_stop)
			inj_gate_go(j, pid);
		j->live = true;
		inj_calibrate(j);
		for (size_t t = 0; t < rem.ntasks; t++)
			inj_comm(j, NULL, pid, rem.tasks[t].tid);	/* the names before any exec */
		inj_py_attach(img, &rem);	/* py: probes in a running interpreter */
	}
	if (j->drop_stop)	/* the gate's SIGSTOP (system.c): not given back */
		for (size_t t = 0; t < rem.ntasks; t++)
			for (unsigned k = 0; k < rem.tasks[t].nheld; k++)
				if (rem.tasks[t].held[k].si_signo == SIGSTOP)
					rem.tasks[t].held[k--] =
						rem.tasks[t].held[--rem.tasks[t].nheld];
	/* let go: what it forks takes itself up (forks.c), nothing waits for
	 * us from now on */
	remote_release(&rem);
	inj_undo_forget(j, &undo);	/* nothing stays applied, or j->procs has it */
	if (!ret)
		log_info("inject: %zu probe%s patched in process %d, stopped for %.2f ms",
			 e->nsites, e->nsites == 1 ? "" : "s", (int)pid,
			 (double)(inj_mono_ns() - t0) / 1e6);
	return ret;
}

static int inj_start(struct usc_engine *e, pid_t pid, bool follow_children)
{
	struct inj *j = inj_of(e);
	char why[256];
	int ret;

	(void)follow_children;
	if (j->follow) {
		j->pid = pid;
		return 0;	/* at its entry point: inj_launched */
	}
	if (!pid)
		return inj_system_start(j);	/* system.c */
	j->pid = pid;
	if (inj_proc_refusal(pid, why, sizeof(why))) {
		log_error("%s", why);
		return -ENOTSUP;
	}
	ret = inj_proc_attach(j, pid);
	if (ret == -ESRCH)
		log_error("process %d has gone", (int)pid);
	/* its descendants now: it is held, so what it forks meanwhile is
	 * followed (system.c) */
	if (!ret && j->children)
		ret = inj_system_descendants(j, pid);
	return ret;
}

static int inj_spawned(struct usc_engine *e, pid_t pid)
{
	return inj_follow_spawned(inj_of(e), pid);
}

static int inj_launched(struct usc_engine *e, pid_t pid)
{
	struct inj *j = inj_of(e);
	int ret = inj_follow_launched(j, pid);

	j->live = !ret;
	return ret;
}

static void inj_waited(struct usc_engine *e, pid_t pid, int status)
{
	inj_follow_waited(inj_of(e), pid, status);
}

static int inj_poll(struct usc_engine *e, int timeout_ms, usc_event_fn fn, void *ctx)
{
	struct inj *j = inj_of(e);
	int n;

	(void)timeout_ms;
	if (j->gate) {	/* system-wide: the processes started since (system.c) */
		struct gate_seen seen[64];
		size_t k = inj_gate_poll(j, seen, 64);

		for (size_t i = 0; i < k; i++)
			inj_system_seen(j, (pid_t)seen[i].tgid, seen[i].stopped);
		inj_system_seen(j, 0, false);
	}
	inj_forks_poll(j);	/* children forked since (their names, their maps) */
	inj_watch(j);		/* another tool's uprobe over a patch: taken out */
	n = inj_poll_images(j, fn, ctx);	/* (the names the events need first) */
	inj_follow_exits(j);	/* drained: a process held at its exit ends */
	return n;
}

static int inj_record(struct usc_engine *e, const struct usc_raw_out *out)
{
	struct inj *j = inj_of(e);
	int n;

	if (j->gate) {	/* system-wide: the processes started since (system.c) */
		struct gate_seen seen[64];
		size_t k = inj_gate_poll(j, seen, 64);

		for (size_t i = 0; i < k; i++)
			inj_system_seen(j, (pid_t)seen[i].tgid, seen[i].stopped);
		inj_system_seen(j, 0, false);
	}
	inj_forks_poll(j);	/* children forked since (their names, their maps) */
	inj_watch(j);		/* another tool's uprobe over a patch: taken out */
	for (size_t i = 0; i < j->nimages; i++)
		inj_py_sync(j, j->images[i]);
	n = inj_record_images(j, out);

	inj_follow_exits(j);
	return n;
}

static int inj_wait_fd(struct usc_engine *e)
{
	struct inj *j = inj_of(e);
	int bell = inj_bell_fd(j);

	/* system-wide: the gate's processes wake us too, a process it
	 * stopped waits for no poll's period */
	return j->gate && bell >= 0 ? inj_gate_wait_fd(j, bell) : bell;
}

static void inj_stop(struct usc_engine *e)
{
	struct inj *j = inj_of(e);

	for (size_t i = 0; i < j->nimages; i++)
		if (j->images[i]->shm.ctl)
			j->images[i]->shm.ctl->enabled = 0;	/* hits are still counted */
}

static int inj_stats(struct usc_engine *e, struct usc_stats *st)
{
	struct inj *j = inj_of(e);

	if (!j->stats) {
		st->events = st->lost = 0;
		st->sites = NULL;
		return 0;
	}
	return inj_stats_images(j, st);
}

/* Not gone, nor a zombie. */
static bool proc_alive(pid_t pid)
{
	char path[64], buf[256], *p;
	ssize_t n;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return false;
	n = (ssize_t)fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	if (n <= 0)
		return false;
	buf[n] = 0;
	p = strrchr(buf, ')');
	return p && p[1] == ' ' && p[2] != 'Z' && p[2] != 'X';
}

static void inj_detach(struct usc_engine *e)
{
	struct inj *j = inj_of(e);
	bool any = false;

	inj_system_end(j);	/* the gate first: no process is held by it after */
	inj_stop(e);
	inj_wake_all(j);	/* a thread waiting for room drops its record */
	j->live = false;
	if (j->follow) {
		if (j->ntasks)
			inj_follow_detach(j);
		return;
	}
	if (j->children)
		inj_forks_find(j);	/* every child, including those that never hit */
	for (size_t i = 0; i < j->nprocs; i++) {
		struct inj_proc *p = &j->procs[i];

		if (!p->img || !inj_image_applied(p->img))
			continue;
		any = true;
		/* (one that exec'd since maps the image's memory no more: the
		 * addresses are another program's, left alone) */
		if (proc_alive(p->pid) &&
		    (!p->img->shm.memfd_ino ||
		     inj_maps_memfd(p->pid, (uint64_t)p->img->shm.memfd_dev,
				    (uint64_t)p->img->shm.memfd_ino)))
			inj_leave(j, p->img, p->pid);	/* else nothing of it to restore */
		else if (proc_alive(p->pid))
			log_debug("inject: process %d exec'd since it was patched: its new program "
				  "is left alone", (int)p->pid);
		inj_undo_forget(j, &p->undo);
	}
	if (any)
		for (size_t i = 0; i < j->nimages; i++)
			inj_image_retire(j->images[i]);
	for (size_t i = 0; i < j->nimages; i++)
		inj_undo_forget(j, &j->images[i]->undo_memfd);
}

/* The rows aggregated in place: the names of the py: probes' functions
 * in them first. */
static int inj_agg_read_py(struct usc_engine *e, usc_agg_fn fn, void *ctx)
{
	struct inj *j = inj_of(e);

	for (size_t i = 0; i < j->nimages; i++)
		inj_py_sync(j, j->images[i]);
	return inj_agg_read(e, fn, ctx);
}

static size_t inj_procs(struct usc_engine *e, size_t *late)
{
	*late = inj_of(e)->sys_late;
	return inj_of(e)->sys_procs;
}

static void inj_destroy(struct usc_engine *e)
{
	struct inj *j = inj_of(e);
	uint64_t timeouts = 0;

	inj_detach(e);
	inj_bell_stop(j);	/* it waits on the images' memory */
	for (size_t i = 0; i < j->nimages; i++)
		timeouts += j->images[i]->shm.ctl ? j->images[i]->shm.ctl->timeouts : 0;
	if (timeouts)
		log_info("inject: %llu waits for room ran out (--max-wait %.3g ms): records "
			 "dropped meanwhile are counted as lost", (unsigned long long)timeouts,
			 (double)e->ctx->set->max_wait_ns / 1e6);
	if (j->dropped)
		log_info("inject: %llu tail calls did not return through a probed ret (a longjmp, "
			 "an unwind, or their thread ended)", (unsigned long long)j->dropped);
	for (size_t i = 0; i < j->nimages; i++)
		inj_image_free(j->images[i]);
	free(j->images);
	free(j->procs);
	free(j->tasks);
	free(j->kids);
	free(j->plans);
	free(j->pre);
	free(j->exposed);
	procmaps_free(j->plan_maps, j->plan_nmaps);
	free(j->stats);
	free(j->comms);
	tsc_free(j->clock);
	free(j->shadow);
	free(j);
}

const struct usc_engine_ops inject_engine_ops = {
	.name = "inject",
	.trace_exec = true,
	.follows_tail_calls = true,
	.flight_recorder = true,
	.objtrace = true,
	.create = inj_create,
	.can_place = inj_can_place,
	.footprint = inj_footprint,
	.attach = inj_attach,
	.start = inj_start,
	.spawned = inj_spawned,
	.launched = inj_launched,
	.waited = inj_waited,
	.poll = inj_poll,
	.record = inj_record,
	.wait_fd = inj_wait_fd,
	.stop = inj_stop,
	.stats = inj_stats,
	.detach = inj_detach,
	.destroy = inj_destroy,
	.filters = inj_filters,
	.agg_place = inj_agg_place,
	.script_place = inj_script_place,
	.script_rows = inj_script_rows,
	.script_clear = inj_script_clear,
	.script_errors = inj_script_errors,
	.agg_read = inj_agg_read_py,
	.procs = inj_procs,
};
