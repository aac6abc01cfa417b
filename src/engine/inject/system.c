/* System-wide on the inject engine (-e inject, neither -p nor COMMAND):
 * every process running at start that maps a probed file is attached as
 * with -p (inject.c, inj_proc_attach): stopped, patched, and let go; what
 * it forks takes itself up (forks.c). Each has its own image, rings and
 * janitor entry: a kill -9 of uscope restores every one.
 *
 * Which processes: those whose maps hold one of the sites' files (by
 * device and inode, or by path), but uscope's own (this process, its
 * janitor, another uscope: they run uscope's executable) and kernel
 * threads (no maps). At most --max-procs, in /proc's order. Another
 * user's process, whose maps uscope may not read without the capability,
 * is known by its command line: said when its program is named as a
 * probed file is.
 *
 * A process uscope may not ptrace (another user's without the capability,
 * YAMA, a debugger on it) or must not patch (seccomp, a shadow stack) is
 * handed to the session's fallback engine (usc_engine_ctx.refused: the bpf
 * engine, its uprobes for that process alone, so that none lands in an
 * injected process), or left out where there is none; either said once
 * per reason with the count.
 *
 * The processes that start mapping a file after attach (an exec, a
 * dlopen) are stopped by the gate (gate.c) at the file's first point,
 * before their first probed call, and attached here as they are told
 * (inj_system_seen): the same choices (uscope's own, refusals,
 * --max-procs), the same janitor entry, then let go (SIGCONT). One with a
 * controlling terminal is not stopped (a job-control shell would take the
 * terminal back): attached as soon as seen, its calls before that missed,
 * said at the end. For that, and because the gate's stop is a group-stop
 * the process's parent may see, -e auto does not take system-wide sites
 * to inject at all (inj_create): the kernel engines see every process from
 * its first call without stopping it, and auto must not change the
 * answer. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/grow.h"
#include "core/log.h"
#include "core/proc.h"
#include "engine/inject/inject_int.h"

/* Why a process was left out: each said once, with the count. */
enum sys_why { WHY_TRACED, WHY_PERM, WHY_UNSAFE, WHY_FAILED, WHY_MAX_PROCS, WHY_N };

static const char *const why_text[WHY_N] = {
	[WHY_TRACED] = "already traced by another tracer or debugger",
	[WHY_PERM] = "no permission to ptrace them: another user's process needs root or "
		     "CAP_SYS_PTRACE",
	[WHY_UNSAFE] = "seccomp or a shadow stack: -e bpf or -e tracefs can trace them",
	[WHY_FAILED] = "attaching failed",
	[WHY_MAX_PROCS] = "beyond --max-procs",
};

/* ... and when the session's fallback engine traces them instead */
static const char *const fell_text[WHY_N] = {
	[WHY_TRACED] = "already traced by another tracer or debugger",
	[WHY_PERM] = "no permission to ptrace them",
	[WHY_UNSAFE] = "seccomp or a shadow stack",
};

#define SYS_SHOWN 8	/* pids listed per reason */

struct sys_left {
	size_t n;
	pid_t pids[SYS_SHOWN];
};

struct sys_file {
	const char *path;
	dev_t dev;
	ino_t ino;
};

/* The sites' files, each once. */
static size_t site_files(const struct inj *j, struct sys_file *f, size_t max)
{
	size_t n = 0;

	for (size_t i = 0; i < j->base.nsites; i++) {
		const char *path = j->base.sites[i]->path;
		struct stat st;
		size_t k;

		if (!path)
			continue;
		for (k = 0; k < n && strcmp(f[k].path, path); k++)
			;
		if (k < n || n == max)
			continue;
		f[n] = (struct sys_file){.path = path};
		if (stat(path, &st) == 0) {
			f[n].dev = st.st_dev;
			f[n].ino = st.st_ino;
		}
		n++;
	}
	return n;
}

/* Does its command line's program name one of the files (by its last
 * component)? What is known of another user's process, whose maps uscope
 * may not read. */
static bool runs_a_file(pid_t pid, const struct sys_file *f, size_t nf)
{
	char path[64], argv0[256], *base;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	n = read(fd, argv0, sizeof(argv0) - 1);
	close(fd);
	if (n <= 0)
		return false;
	argv0[n] = 0;
	base = strrchr(argv0, '/');
	base = base ? base + 1 : argv0;
	for (size_t k = 0; k < nf; k++) {
		const char *fb = strrchr(f[k].path, '/');

		if (!strcmp(base, fb ? fb + 1 : f[k].path))
			return true;
	}
	return false;
}

/* Does process pid map one of the files? 1: yes; 0: no (or gone, or a
 * kernel thread); -1: its maps are not ours to read, and its program is
 * named as a file is. */
static int maps_a_file(pid_t pid, const struct sys_file *f, size_t nf)
{
	struct proc_map *m;
	ssize_t n = procmaps_read(pid, &m);
	bool found = false;

	if (n == -EACCES || n == -EPERM)
		return runs_a_file(pid, f, nf) ? -1 : 0;
	if (n <= 0)
		return 0;
	for (ssize_t i = 0; i < n && !found; i++)
		for (size_t k = 0; k < nf && !found && m[i].path; k++)
			found = (f[k].ino && m[i].inode == f[k].ino && m[i].dev == f[k].dev) ||
				!strcmp(m[i].path, f[k].path);
	procmaps_free(m, (size_t)n);
	return found;
}

/* Does process pid run uscope's executable (this process, its janitor,
 * another uscope)? */
static bool is_uscope(pid_t pid, const struct stat *self)
{
	char path[64];
	struct stat st;

	snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
	return stat(path, &st) == 0 && st.st_dev == self->st_dev && st.st_ino == self->st_ino;
}

/* Why uscope may not attach to pid, known without touching it; or -1. */
static int refusal(pid_t pid)
{
	struct proc_status st;
	char path[64], why[256];
	int fd;

	if (proc_status_read(pid, &st))
		return WHY_FAILED;
	if (st.tracer)
		return WHY_TRACED;
	/* the same check as an attach (PTRACE_MODE_ATTACH, YAMA's too) */
	snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == EACCES || errno == EPERM ? WHY_PERM : WHY_FAILED;
	close(fd);
	return inj_proc_refusal(pid, why, sizeof(why)) ? WHY_UNSAFE : -1;
}

static void left_add(struct sys_left *l, pid_t pid)
{
	if (l->n < SYS_SHOWN)
		l->pids[l->n] = pid;
	l->n++;
}

/* A process refused (why): handed to the session's fallback engine
 * (engine.h, usc_engine_ctx.refused) when there is one. True: traced
 * there. */
static bool fall_back(struct inj *j, pid_t pid, int why)
{
	const struct usc_engine_ctx *c = j->base.ctx;

	if ((why != WHY_TRACED && why != WHY_PERM && why != WHY_UNSAFE) || !c->refused)
		return false;
	return c->refused(c, pid) == 0;
}

/* fell: the processes traced on the fallback engine instead. */
static void left_say(const struct sys_left *left, const char *what, uint32_t max_procs,
		     const char *fell)
{
	for (int w = 0; w < WHY_N; w++) {
		char pids[SYS_SHOWN * 12 + 8] = "";
		size_t used = 0;

		if (!left[w].n)
			continue;
		for (size_t k = 0; k < left[w].n && k < SYS_SHOWN; k++)
			used += (size_t)snprintf(pids + used, sizeof(pids) - used, "%s%d",
						 k ? " " : "", (int)left[w].pids[k]);
		if (left[w].n > SYS_SHOWN)
			snprintf(pids + used, sizeof(pids) - used, " ...");
		if (fell)
			log_warn("%zu process%s mapping %s traced on the %s engine instead (%s): %s",
				 left[w].n, left[w].n == 1 ? "" : "es", what, fell, fell_text[w],
				 pids);
		else if (w == WHY_MAX_PROCS)
			log_warn("%zu more process%s mapping %s not injected (--max-procs %u): %s",
				 left[w].n, left[w].n == 1 ? "" : "es", what, max_procs, pids);
		else
			log_warn("%zu process%s mapping %s could not be injected (%s): %s",
				 left[w].n, left[w].n == 1 ? "" : "es", what, why_text[w], pids);
	}
}

/* What the processes started after attach left out, said at the end. */
struct sys_late {
	struct sys_left left[WHY_N];
	struct sys_left fell[WHY_N];	/* traced on the fallback engine */
	char what[256];
	/* the processes the gate let go untraced: their pids forgotten by it
	 * once they are gone (this machine's pid_max may be 32768: a pid
	 * comes again soon), a few a poll */
	pid_t *untraced;
	size_t nuntraced, cursor;
};

static void untraced_add(struct sys_late *l, pid_t pid)
{
	pid_t *p = realloc(l->untraced, (l->nuntraced + 1) * sizeof(*p));

	if (p) {
		l->untraced = p;
		l->untraced[l->nuntraced++] = pid;
	}
}

/* A few of the processes let go untraced: the gone ones forgotten. */
static void untraced_sweep(struct inj *j)
{
	struct sys_late *l = j->late;

	for (int k = 0; k < 64 && l->nuntraced; k++) {
		pid_t pid;

		if (l->cursor >= l->nuntraced)
			l->cursor = 0;
		pid = l->untraced[l->cursor];
		if (kill(pid, 0) && errno == ESRCH) {
			inj_gate_forget(j, pid);
			l->untraced[l->cursor] = l->untraced[--l->nuntraced];
		} else {
			l->cursor++;
		}
	}
}

/* The processes to attach, found by the walk, attached several at once. */
struct sys_cands {
	struct inj *j;
	pid_t *pids;
	int *ret;		/* each one's attach */
	size_t n, cap;
};

static void cand_attach(void *arg, size_t i)
{
	struct sys_cands *c = arg;

	c->ret[i] = inj_proc_attach(c->j, c->pids[i]);
}

/* attaches under way at once: the bench's 50 busy processes were patched in
 * 800 ms with 8, 570 with 16, 500 with 32 or 50 (each stopped that long at
 * most) */
#define SYS_PAR 32

/* Attach the candidates, at most max in all, in /proc's order: a round
 * takes as many as there is room left for, the next the ones after if some
 * failed. The ones beyond left out (WHY_MAX_PROCS). */
static int cands_attach(struct inj *j, struct sys_cands *c, uint32_t max, size_t *done,
			struct sys_left *left)
{
	size_t at = 0;

	c->ret = c->n ? calloc(c->n, sizeof(*c->ret)) : NULL;
	if (c->n && !c->ret)
		return -ENOMEM;
	while (at < c->n && *done < max) {
		size_t k = max - *done < c->n - at ? max - *done : c->n - at;
		struct sys_cands round = {.j = j, .pids = c->pids + at, .ret = c->ret + at, .n = k};

		remote_fibers(k, SYS_PAR, cand_attach, &round);
		for (size_t i = at; i < at + k; i++) {
			if (c->ret[i] == -ENOMEM)
				return -ENOMEM;
			if (c->ret[i] && c->ret[i] != -ESRCH)	/* (gone: nothing to say) */
				left_add(&left[WHY_FAILED], c->pids[i]);
			*done += !c->ret[i];
		}
		at += k;
	}
	for (; at < c->n; at++)
		left_add(&left[WHY_MAX_PROCS], c->pids[at]);
	return 0;
}

int inj_system_start(struct inj *j)
{
	uint32_t max = j->base.ctx->set->max_procs;
	struct sys_left left[WHY_N] = {{0}}, fell[WHY_N] = {{0}};
	struct sys_file files[16];
	size_t nf = site_files(j, files, 16), done = 0, nfell = 0;
	const char *what = nf == 1 ? files[0].path : "the probed files";
	uint64_t t0 = inj_mono_ns();
	struct sys_cands c = {.j = j};
	pid_t me = getpid();
	struct dirent *de;
	struct stat self;
	int ret;
	DIR *d;

	if (!nf)
		return 0;
	/* the gate first: a process that starts during the walk below is
	 * held by it, or found by the walk (or both: attached once) */
	j->late = calloc(1, sizeof(*j->late));
	if (!j->late)
		return -ENOMEM;
	snprintf(j->late->what, sizeof(j->late->what), "%s", what);
	ret = inj_gate_open(j);
	if (ret)
		return ret;
	if (stat("/proc/self/exe", &self))
		memset(&self, 0, sizeof(self));
	d = opendir("/proc");
	if (!d) {
		log_error("cannot read /proc: %s", strerror(errno));
		return -errno;
	}
	while ((de = readdir(d))) {
		pid_t pid = (pid_t)atoi(de->d_name);
		int why, maps;

		if (pid <= 0 || pid == me || is_uscope(pid, &self))
			continue;
		maps = maps_a_file(pid, files, nf);
		if (!maps)
			continue;
		why = maps < 0 ? WHY_PERM : refusal(pid);
		if (why >= 0 && fall_back(j, pid, why)) {
			left_add(&fell[why], pid);
			nfell++;
			continue;
		}
		if (why >= 0) {
			left_add(&left[why], pid);
			continue;
		}
		if (core_reserve(c.pids, c.cap, c.n + 1, 64)) {
			closedir(d);
			free(c.pids);
			return -ENOMEM;
		}
		c.pids[c.n++] = pid;
	}
	closedir(d);
	ret = cands_attach(j, &c, max, &done, left);
	free(c.pids);
	free(c.ret);
	if (ret)
		return ret;
	left_say(left, what, max, NULL);
	left_say(fell, what, max, j->base.ctx->fallback);
	if (!done && !nfell && !j->gate) {
		log_error("no running process that uscope may ptrace maps %s: the inject engine "
			  "has nothing to trace (-e bpf or -e tracefs also see the processes "
			  "started later)", what);
		return -ESRCH;
	}
	j->sys_procs = done;
	if (done >= max)
		inj_gate_full(j);
	log_info("inject: %zu process%s mapping %s patched in %.1f ms%s", done,
		 done == 1 ? "" : "es", what, (double)(inj_mono_ns() - t0) / 1e6,
		 j->gate ? "; the ones started from now on too, before their first call" : "");
	return 0;
}

/* Which processes are left to run untraced, and why: uscope's own, or
 * ours already (walked at start, or followed: an exec of a child): WHY_N;
 * gone already: WHY_GONE; a refusal; -1 when it is to be attached. */
#define WHY_GONE (WHY_N + 1)
static int seen_why(struct inj *j, pid_t pid)
{
	struct stat self;
	int why;

	if (stat("/proc/self/exe", &self))
		memset(&self, 0, sizeof(self));
	for (size_t i = 0; i < j->nprocs; i++)
		if (j->procs[i].pid == pid)
			return WHY_N;
	if (pid == getpid() || is_uscope(pid, &self))
		return WHY_N;
	if (j->sys_procs + j->sys_late >= j->base.ctx->set->max_procs)
		return WHY_MAX_PROCS;	/* (the gate no longer stops them) */
	why = refusal(pid);
	if (why == WHY_FAILED && kill(pid, 0) && errno == ESRCH)
		return WHY_GONE;	/* nothing to say */
	return why;
}

void inj_system_seen(struct inj *j, pid_t pid, bool stopped)
{
	int why, ret = -1;

	if (pid <= 0) {		/* (no new process: the sweep only) */
		untraced_sweep(j);
		return;
	}
	why = seen_why(j, pid);

	if (why < 0) {
		/* stopped: seized in its group-stop (a stop of ptrace's, with
		 * SIGSTOP); or, its SIGSTOP not taken yet, at it: held back
		 * (j->drop_stop), its parent sees no stop */
		j->drop_stop = stopped;
		ret = inj_proc_attach(j, pid);
		j->drop_stop = false;
		if (!ret) {
			j->sys_late++;
			if (j->sys_procs + j->sys_late >= j->base.ctx->set->max_procs)
				inj_gate_full(j);
		} else if (ret != -ESRCH) {
			log_debug("inject: process %d: %s", (int)pid, strerror(-ret));
			left_add(&j->late->left[WHY_FAILED], pid);
		}
	} else if (why < WHY_N && fall_back(j, pid, why)) {
		left_add(&j->late->fell[why], pid);	/* before it runs on */
	} else if (why < WHY_N) {
		left_add(&j->late->left[why], pid);
	}
	/* (one that ended before uscope could attach it too) */
	j->sys_late_tty += !stopped && why != WHY_MAX_PROCS && why != WHY_N;
	if (ret)
		untraced_add(j->late, pid);
	/* patched, or refused: it runs on (its group-stop ends, or its SIGSTOP
	 * still pending goes), and only then is it marked so: until then, a
	 * janitor after our death continues it (janitor.c) */
	if (stopped)
		kill(pid, SIGCONT);
	inj_gate_go(j, pid);
}

void inj_system_end(struct inj *j)
{
	if (!j->late)
		return;
	inj_gate_close(j);
	left_say(j->late->left, j->late->what, j->base.ctx->set->max_procs, NULL);
	left_say(j->late->fell, j->late->what, j->base.ctx->set->max_procs,
		 j->base.ctx->fallback);
	if (j->sys_late)
		log_info("inject: %zu process%s started after attach traced", j->sys_late,
			 j->sys_late == 1 ? "" : "es");
	if (j->sys_late_tty)
		log_warn("%zu process%s with a terminal started after attach: not stopped (a "
			 "job-control shell would take the terminal back), attached as soon as "
			 "seen, their calls before that not seen; -e bpf traces them from their "
			 "first call", j->sys_late_tty, j->sys_late_tty == 1 ? "" : "es");
	free(j->late->untraced);
	free(j->late);
	j->late = NULL;
}

/* -p: the processes descending from the target already, attached as it
 * is (after it: what they fork from now on takes itself up, forks.c). */
struct sys_desc {
	struct inj *j;
	struct sys_file files[16];
	size_t nf, done;
	struct sys_left left[WHY_N];
};

static int desc_attach(pid_t pid, void *ctx)
{
	struct sys_desc *c = ctx;
	struct proc_status st;
	int why, maps, ret;

	for (size_t i = 0; i < c->j->nprocs; i++)
		if (c->j->procs[i].pid == pid)
			return 0;	/* forked since attach: followed */
	if (proc_status_read(pid, &st))
		return 0;	/* gone */
	/* forked since the attach of one we patched: a copy of its code,
	 * which takes itself up */
	for (size_t i = 0; i < c->j->nimages; i++) {
		const struct inj_image *img = c->j->images[i];

		if (img->shm.memfd_ino && inj_maps_memfd(pid, (uint64_t)img->shm.memfd_dev,
							 (uint64_t)img->shm.memfd_ino))
			return 0;
	}
	maps = maps_a_file(pid, c->files, c->nf);
	if (!maps)
		return 0;	/* it runs another program */
	why = maps < 0 ? WHY_PERM : refusal(pid);
	if (why >= 0) {
		left_add(&c->left[why], pid);
		return 0;
	}
	ret = inj_proc_attach(c->j, pid);
	if (ret == -ENOMEM)
		return ret;
	if (ret && ret != -ESRCH)
		left_add(&c->left[WHY_FAILED], pid);
	c->done += !ret;
	return 0;
}

int inj_system_descendants(struct inj *j, pid_t root)
{
	struct sys_desc *c = calloc(1, sizeof(*c));
	char what[64];
	int ret;

	if (!c)
		return -ENOMEM;
	c->j = j;
	c->nf = site_files(j, c->files, 16);
	ret = c->nf ? proc_descendants_each(root, desc_attach, c) : 0;
	snprintf(what, sizeof(what), "the probed file%s", c->nf == 1 ? "" : "s");
	left_say(c->left, c->nf == 1 ? c->files[0].path : what, j->base.ctx->set->max_procs,
		 NULL);
	if (c->done)
		log_info("inject: %zu process%s descending from %d patched too", c->done,
			 c->done == 1 ? "" : "es", (int)root);
	if (ret)
		log_error("cannot attach the processes of %d: %s", (int)root, strerror(-ret));
	free(c);
	return ret;
}
