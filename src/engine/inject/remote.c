/* Controlling a traced process with ptrace. */
#include "engine/inject/remote.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/grow.h"
#include "core/log.h"
#include "core/proc.h"
#include "objfile/modules.h"

static struct remote_task *remote_find(struct remote *r, pid_t tid)
{
	for (size_t i = 0; i < r->ntasks; i++)
		if (r->tasks[i].tid == tid)
			return &r->tasks[i];
	return NULL;
}

static int remote_add(struct remote *r, pid_t tid)
{
	if (core_reserve(r->tasks, r->cap, r->ntasks + 1, 16))
		return -ENOMEM;
	memset(&r->tasks[r->ntasks], 0, sizeof(r->tasks[0]));
	r->tasks[r->ntasks++].tid = tid;
	return 0;
}

static pid_t tracer_of(pid_t pid)
{
	struct proc_status st;

	return proc_status_read(pid, &st) ? 0 : st.tracer;
}

/* Wait for tid's next stop. A signal that arrives meanwhile is kept for
 * detach and the task resumed with `resume` (PTRACE_SINGLESTEP or
 * PTRACE_CONT), until a stop of the wanted kind: want_trap for a finished
 * single step (or breakpoint), else the PTRACE_INTERRUPT stop. */
static int remote_wait(struct remote *r, pid_t tid, bool want_trap, int resume)
{
	for (;;) {
		int st, ev, sig;
		struct remote_task *t;

		if (remote_waitpid(tid, &st, __WALL) < 0)
			return -errno;
		if (WIFEXITED(st) || WIFSIGNALED(st))
			return -ESRCH;
		if (!WIFSTOPPED(st))
			continue;
		sig = WSTOPSIG(st);
		ev = st >> 16;
		if (!want_trap && (ev == PTRACE_EVENT_STOP || sig == SIGTRAP))
			return 0;	/* stopped: by our interrupt, or a trap */
		if (want_trap && sig == SIGTRAP && ev == 0)
			return 0;
		if (ev == 0 && sig == SIGSTOP && r->drop_stop) {
			/* dropped: on to our interrupt's stop */
			if (ptrace(resume, tid, 0, 0) < 0)
				return -errno;
			continue;
		}
		if (ev == 0 && sig != SIGTRAP && (t = remote_find(r, tid))) {
			siginfo_t si;	/* delivered at detach */

			if (ptrace(PTRACE_GETSIGINFO, tid, 0, &si) == 0 && t->nheld < REMOTE_MAX_HELD)
				t->held[t->nheld++] = si;
		}
		if (ev == 0 && !want_trap)
			return 0;	/* stopped at a signal: stopped all the same */
		if (ptrace(resume, tid, 0, 0) < 0)
			return -errno;
	}
}

static int remote_open_mem(struct remote *r)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/mem", (int)r->pid);
	r->mem_fd = open(path, O_RDWR | O_CLOEXEC);
	return r->mem_fd < 0 ? -errno : 0;
}

/* The offset of the first `syscall` instruction in our vDSO (the same
 * image as every process's), found once: -1 when there is none. */
static long vdso_syscall_off(void)
{
	static long off = -2;
	const uint8_t *mine = (const uint8_t *)getauxval(AT_SYSINFO_EHDR);
	struct proc_map *maps = NULL;
	ssize_t n;

	if (off != -2)
		return off;
	off = -1;
	n = mine ? procmaps_read(getpid(), &maps) : -1;
	for (ssize_t i = 0; i < n; i++)
		if (maps[i].path && !strcmp(maps[i].path, "[vdso]") &&
		    maps[i].start == (uint64_t)(uintptr_t)mine)
			for (uint64_t k = 0; off < 0 && k + 1 < maps[i].end - maps[i].start; k++)
				if (mine[k] == 0x0f && mine[k + 1] == 0x05)
					off = (long)k;
	procmaps_free(maps, n > 0 ? (size_t)n : 0);
	return off;
}

/* The target's vDSO as its auxiliary vector says, and the instruction
 * there checked: 0, or -1 (then its maps are read). Half the /proc reads
 * of an attach that were its maps. */
static int remote_auxv_syscall(struct remote *r)
{
	long off = vdso_syscall_off();
	uint64_t auxv[2 * 64], base = 0;
	uint8_t insn[2];
	char path[64];
	ssize_t n;
	int fd;

	if (off < 0)
		return -1;
	snprintf(path, sizeof(path), "/proc/%d/auxv", (int)r->pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	n = fd >= 0 ? read(fd, auxv, sizeof(auxv)) : -1;
	if (fd >= 0)
		close(fd);
	for (ssize_t i = 0; i + 1 < n / 8 && auxv[i]; i += 2)
		if (auxv[i] == AT_SYSINFO_EHDR)
			base = auxv[i + 1];
	/* (a vDSO moved since, as a restored process may have it: its maps) */
	if (!base || remote_read(r, base + (uint64_t)off, insn, 2) || insn[0] != 0x0f ||
	    insn[1] != 0x05)
		return -1;
	r->syscall_insn = base + (uint64_t)off;
	return 0;
}

/* A `syscall` instruction in the target: its vDSO is the same image as ours. */
static int remote_find_syscall(struct remote *r)
{
	const uint8_t *mine = (const uint8_t *)getauxval(AT_SYSINFO_EHDR);
	struct proc_map *maps = NULL;
	ssize_t n;
	uint64_t base = 0, len = 0;

	if (remote_auxv_syscall(r) == 0)
		return 0;
	n = procmaps_read(r->pid, &maps);
	for (ssize_t i = 0; i < n; i++)
		if (maps[i].path && !strcmp(maps[i].path, "[vdso]")) {
			base = maps[i].start;
			len = maps[i].end - maps[i].start;
		}
	procmaps_free(maps, n > 0 ? (size_t)n : 0);
	if (n < 0)
		return (int)n;
	if (!mine || !base)
		return -ENOTSUP;
	for (uint64_t i = 0; i + 1 < len; i++)
		if (mine[i] == 0x0f && mine[i + 1] == 0x05) {
			r->syscall_insn = base + i;
			return 0;
		}
	return -ENOTSUP;
}

static int stop_once(struct remote *r, pid_t pid, bool drop_stop)
{
	char dir[64];
	bool grew = true;
	int ret;

	memset(r, 0, sizeof(*r));
	r->drop_stop = drop_stop;
	r->pid = pid;
	r->mem_fd = -1;
	snprintf(dir, sizeof(dir), "/proc/%d/task", (int)pid);
	while (grew) {
		DIR *d = opendir(dir);
		struct dirent *de;

		if (!d) {
			ret = -ESRCH;
			goto fail;
		}
		grew = false;
		while ((de = readdir(d))) {
			pid_t tid = (pid_t)atoi(de->d_name);

			if (tid <= 0 || remote_find(r, tid))
				continue;
			/* (its steps' system-call stops tell themselves apart) */
			if (ptrace(PTRACE_SEIZE, tid, 0, (void *)PTRACE_O_TRACESYSGOOD) < 0) {
				pid_t other;

				ret = -errno;
				if (ret == -ESRCH)
					continue;	/* a thread that just exited */
				closedir(d);
				other = tracer_of(pid);
				if (ret == -EPERM && other && other != getpid()) {
					log_error("process %d is already traced by process %d "
						  "(a debugger or another tracer)", (int)pid,
						  (int)other);
					ret = -EBUSY;
				} else if (ret == -EPERM) {
					log_error("no permission to ptrace process %d (another "
						  "user's process needs root or CAP_SYS_PTRACE)",
						  (int)pid);
				} else {
					log_error("cannot ptrace process %d: %s", (int)pid,
						  strerror(-ret));
				}
				goto fail;
			}
			ret = remote_add(r, tid);
			if (ret) {
				closedir(d);
				goto fail;
			}
			if (ptrace(PTRACE_INTERRUPT, tid, 0, 0) < 0 ||
			    remote_wait(r, tid, false, PTRACE_CONT) < 0) {
				/* it exited meanwhile */
				ptrace(PTRACE_DETACH, tid, 0, 0);
				r->ntasks--;
				continue;
			}
			grew = true;
		}
		closedir(d);
	}
	if (!r->ntasks || !remote_find(r, pid)) {
		ret = -ESRCH;
		goto fail;
	}
	/* the thread-group leader first: it runs the system calls */
	for (size_t i = 0; i < r->ntasks; i++)
		if (r->tasks[i].tid == pid) {
			struct remote_task t = r->tasks[0];

			r->tasks[0] = r->tasks[i];
			r->tasks[i] = t;
		}
	ret = remote_open_mem(r);
	if (!ret)
		ret = remote_find_syscall(r);
	if (!ret)
		ret = remote_step_finish_dead(r);
	if (ret)
		goto fail;
	return 0;
fail:
	remote_release(r);
	return ret;
}

#define DEAD_STEP_TRIES 200	/* 10 ms apart: a dead uscope's call ends */

static int stop_all(struct remote *r, pid_t pid, bool drop_stop)
{
	for (int tries = 0;; tries++) {
		int ret = stop_once(r, pid, drop_stop);

		if (ret != -EINPROGRESS)
			return ret;
		if (tries == DEAD_STEP_TRIES) {
			log_error("process %d: a thread is still inside a call a uscope that died "
				  "made there", (int)pid);
			return -EBUSY;
		}
		usleep(10000);
	}
}

int remote_stop_all(struct remote *r, pid_t pid)
{
	return stop_all(r, pid, false);
}

int remote_stop_all_nostop(struct remote *r, pid_t pid)
{
	return stop_all(r, pid, true);
}

int remote_adopt(struct remote *r, pid_t pid)
{
	int ret;

	memset(r, 0, sizeof(*r));
	r->pid = pid;
	r->mem_fd = -1;
	ret = remote_add(r, pid);
	if (!ret)
		ret = remote_open_mem(r);
	if (!ret)
		ret = remote_find_syscall(r);
	if (ret)
		remote_release(r);
	return ret;
}

int remote_open(struct remote *r, pid_t pid)
{
	memset(r, 0, sizeof(*r));
	r->pid = pid;
	return remote_open_mem(r);
}

/* A fault the instruction raises again when it runs once more. */
static bool sync_fault(const siginfo_t *si)
{
	return si->si_code > 0 && (si->si_signo == SIGSEGV || si->si_signo == SIGBUS ||
				   si->si_signo == SIGILL || si->si_signo == SIGFPE);
}

void remote_release(struct remote *r)
{
	remote_step_clean(r);
	for (size_t i = 0; i < r->ntasks; i++) {
		struct remote_task *t = &r->tasks[i];
		int first = 0;
		unsigned k = 0;

		for (; k < t->nheld; k++)
			if (!(t->stepped && sync_fault(&t->held[k])))
				break;
		if (k < t->nheld &&
		    ptrace(PTRACE_SETSIGINFO, t->tid, 0, &t->held[k]) == 0)
			first = t->held[k++].si_signo;
		ptrace(PTRACE_DETACH, t->tid, 0, (void *)(long)first);
		for (; k < t->nheld; k++)
			if (!(t->stepped && sync_fault(&t->held[k])))
				syscall(SYS_tgkill, r->pid, t->tid, t->held[k].si_signo);
	}
	remote_forget(r);
}

void remote_forget(struct remote *r)
{
	remote_step_clean(r);
	free(r->tasks);
	r->tasks = NULL;
	r->ntasks = r->cap = 0;
	if (r->mem_fd >= 0)
		close(r->mem_fd);
	r->mem_fd = -1;
}

int remote_read(struct remote *r, uint64_t addr, void *buf, size_t len)
{
	ssize_t n = pread(r->mem_fd, buf, len, (off_t)addr);

	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EIO;
}

int remote_write(struct remote *r, uint64_t addr, const void *buf, size_t len)
{
	ssize_t n = pwrite(r->mem_fd, buf, len, (off_t)addr);

	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EIO;
}

int remote_get_regs(struct remote *r, size_t task, struct user_regs_struct *regs)
{
	return ptrace(PTRACE_GETREGS, r->tasks[task].tid, 0, regs) < 0 ? -errno : 0;
}

int remote_set_regs(struct remote *r, size_t task, const struct user_regs_struct *regs)
{
	return ptrace(PTRACE_SETREGS, r->tasks[task].tid, 0, regs) < 0 ? -errno : 0;
}

/* Execute one instruction of a stopped task: the old way, where a step
 * has no room (a tracer that dies meanwhile leaves the trap flag). */
static int legacy_step(struct remote *r, size_t task)
{
	pid_t tid = r->tasks[task].tid;

	r->tasks[task].stepped = true;
	if (ptrace(PTRACE_SINGLESTEP, tid, 0, 0) < 0)
		return -errno;
	return remote_wait(r, tid, true, PTRACE_SINGLESTEP);
}

long remote_syscall(struct remote *r, bool *ok, long nr, long a1, long a2, long a3, long a4,
		    long a5, long a6)
{
	const long a[6] = {a1, a2, a3, a4, a5, a6};
	struct user_regs_struct saved, regs;
	long res = remote_step_syscall(r, ok, nr, a);
	int ret;

	if (*ok || !r->step_none)
		return res;
	log_debug("inject: process %d: no room for a step in its vDSO: a single step",
		  (int)r->pid);
	ret = remote_get_regs(r, 0, &saved);
	if (ret)
		return ret;
	regs = saved;
	regs.rax = (unsigned long long)nr;
	regs.orig_rax = (unsigned long long)-1;	/* no restart into our call */
	regs.rdi = (unsigned long long)a1;
	regs.rsi = (unsigned long long)a2;
	regs.rdx = (unsigned long long)a3;
	regs.r10 = (unsigned long long)a4;
	regs.r8 = (unsigned long long)a5;
	regs.r9 = (unsigned long long)a6;
	regs.rip = r->syscall_insn;
	ret = remote_set_regs(r, 0, &regs);
	if (!ret)
		ret = legacy_step(r, 0);
	if (!ret)
		ret = remote_get_regs(r, 0, &regs);
	if (remote_set_regs(r, 0, &saved) && !ret)
		ret = -EIO;
	if (ret)
		return ret;
	*ok = true;
	return (long)regs.rax;
}

/* Wait for tid's trap (the call's return) at most timeout_ms; a signal that
 * comes meanwhile is kept for detach and the task resumed. */
static int wait_trap(struct remote *r, pid_t tid, unsigned timeout_ms)
{
	for (unsigned waited = 0;;) {
		int st;
		pid_t w = waitpid(tid, &st, __WALL | WNOHANG);
		struct remote_task *t;

		if (w < 0)
			return -errno;
		if (w == 0) {
			if (waited >= timeout_ms)
				return -ETIMEDOUT;
			usleep(1000);
			waited++;
			continue;
		}
		if (WIFEXITED(st) || WIFSIGNALED(st))
			return -ESRCH;
		if (!WIFSTOPPED(st))
			continue;
		if (WSTOPSIG(st) == SIGTRAP && (st >> 16) == 0)
			return 0;
		if ((st >> 16) == 0 && (t = remote_find(r, tid))) {
			siginfo_t si;

			if (ptrace(PTRACE_GETSIGINFO, tid, 0, &si) == 0 && t->nheld < REMOTE_MAX_HELD)
				t->held[t->nheld++] = si;
		}
		if (ptrace(PTRACE_CONT, tid, 0, 0) < 0)
			return -errno;
	}
}

int remote_call(struct remote *r, size_t task, uint64_t fn, uint64_t a1, uint64_t a2,
		uint64_t trap, unsigned timeout_ms, uint64_t *ret)
{
	struct user_regs_struct saved, regs;
	pid_t tid = r->tasks[task].tid;
	uint64_t sp;
	int err = remote_step_call(r, task, fn, a1, a2, timeout_ms, ret);

	if (err != -ENOTSUP || !r->step_none)
		return err;
	if ((err = remote_get_regs(r, task, &saved)))
		return err;
	regs = saved;
	/* below the red zone, aligned as at a call: the return address pushed */
	sp = ((saved.rsp - 1024) & ~15ULL) - 8;
	if ((err = remote_write(r, sp, &trap, 8)))
		return err;
	regs.rsp = sp;
	regs.rip = fn;
	regs.rdi = a1;
	regs.rsi = a2;
	regs.rax = 0;
	regs.orig_rax = (unsigned long long)-1;	/* no restart into our call */
	if ((err = remote_set_regs(r, task, &regs)))
		return err;
	r->tasks[task].stepped = true;
	if (ptrace(PTRACE_CONT, tid, 0, 0) < 0)
		err = -errno;
	else
		err = wait_trap(r, tid, timeout_ms);
	if (err == -ETIMEDOUT) {
		/* stopped where it waits, and put back */
		ptrace(PTRACE_INTERRUPT, tid, 0, 0);
		remote_wait(r, tid, false, PTRACE_CONT);
	}
	if (!err && (err = remote_get_regs(r, task, &regs)) == 0)
		*ret = regs.rax;
	if (remote_set_regs(r, task, &saved) && !err)
		err = -EIO;
	return err;
}
