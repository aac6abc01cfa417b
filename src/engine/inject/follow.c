/* COMMAND's tree under ptrace: the inject engine follows what the kernel
 * engines follow for `-- COMMAND`. Every process COMMAND starts is traced,
 * and after an exec the new image is patched too (`sh -c '...'`, make, test
 * runners).
 *
 * COMMAND is seized before its exec (PTRACE_SEIZE, with fork, vfork, clone
 * and exec events), and every task it creates is attached by the kernel as
 * it is created. A task stops for us only at those events and at the
 * signals it receives (which we pass on at once), never at system calls:
 *  - a forked child runs a copy of its parent's patched image, and shares
 *    its memory with us: the tracer writes the child's pid into its self
 *    word (wiped by MADV_WIPEONFORK) at its first stop, before it runs, and
 *    it records as itself from then on (a vfork child shares its parent's
 *    memory whole: it records as its parent);
 *  - an exec drops the old image: the new program is patched at its entry
 *    point (the dynamic linker has loaded its libraries by then, main has
 *    not run), the sites whose modules it maps, with shared memory of its
 *    own. To stop it there, at its execve's return a stub is mapped in it
 *    and its AT_ENTRY on the stack made the stub's address: the dynamic
 *    linker jumps to the stub, whose getpid we stop at (the task runs to
 *    its system calls meanwhile: PTRACE_SYSCALL), and the stub jumps to the
 *    entry point. Not an int3 at the entry point: should uscope die before
 *    it is reached, the trap would kill the program; the stub untraced is a
 *    getpid (a program with no dynamic linker is patched at its execve's
 *    return, where it is at its entry point already);
 *  - a group-stop (Ctrl-Z) is kept with PTRACE_LISTEN, as a debugger does.
 * Detach interrupts every task, writes back the original bytes of every
 * process still running a patched image, and lets every task go with the
 * signals it was stopped at. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cache/cache.h"
#include "core/log.h"
#include "core/proc.h"
#include "engine/inject/inject_int.h"
#include "ns/ns.h"

#define PT_OPTS (PTRACE_O_TRACEFORK | PTRACE_O_TRACEVFORK | PTRACE_O_TRACECLONE | \
		 PTRACE_O_TRACEEXEC | PTRACE_O_TRACESYSGOOD)
#define SYSCALL_STOP (SIGTRAP | 0x80)	/* PTRACE_O_TRACESYSGOOD */

static struct inj_task *task_find(struct inj *j, pid_t tid)
{
	for (size_t i = 0; i < j->ntasks; i++)
		if (j->tasks[i].tid == tid)
			return &j->tasks[i];
	return NULL;
}

static struct inj_task *task_add(struct inj *j, pid_t tid)
{
	struct inj_task *t = task_find(j, tid);

	if (t)
		return t;
	t = realloc(j->tasks, (j->ntasks + 1) * sizeof(*t));
	if (!t)
		return NULL;
	j->tasks = t;
	t = &j->tasks[j->ntasks++];
	memset(t, 0, sizeof(*t));
	t->tid = tid;
	return t;
}

static void task_del(struct inj *j, pid_t tid)
{
	struct inj_task *t = task_find(j, tid);

	if (t)
		*t = j->tasks[--j->ntasks];
}

static struct inj_proc *proc_find(struct inj *j, pid_t pid)
{
	for (size_t i = 0; i < j->nprocs; i++)
		if (j->procs[i].pid == pid)
			return &j->procs[i];
	return NULL;
}

static struct inj_proc *proc_add(struct inj *j, pid_t pid)
{
	struct inj_proc *p = proc_find(j, pid);

	if (p)
		return p;
	p = realloc(j->procs, (j->nprocs + 1) * sizeof(*p));
	if (!p)
		return NULL;
	j->procs = p;
	p = &j->procs[j->nprocs++];
	memset(p, 0, sizeof(*p));
	p->pid = pid;
	p->state = PROC_RUN;
	return p;
}

static void proc_del(struct inj *j, pid_t pid)
{
	struct inj_proc *p = proc_find(j, pid);

	if (!p)
		return;
	inj_image_put(j, p->img);
	inj_undo_forget(j, &p->undo);
	*p = j->procs[--j->nprocs];
}

/* Task tid's process, or -1 when gone. */
static long tgid_of(pid_t tid)
{
	struct proc_status st;

	return proc_status_read(tid, &st) ? -1 : st.tgid;
}

static int mem_rw(pid_t pid, uint64_t addr, void *buf, size_t len, bool write)
{
	char path[64];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
	fd = open(path, (write ? O_RDWR : O_RDONLY) | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = write ? pwrite(fd, buf, len, (off_t)addr) : pread(fd, buf, len, (off_t)addr);
	close(fd);
	return n == (ssize_t)len ? 0 : n < 0 ? -errno : -EIO;
}

static int auxv_entry(pid_t pid, uint64_t *entry)
{
	static const uint64_t type = AT_ENTRY;
	uint64_t v;
	int n = proc_auxv_read(pid, &type, &v, 1);

	if (n <= 0)
		return n ? n : -ENOENT;
	*entry = v;
	return 0;
}

/* Where AT_ENTRY's value is on the stack of a process at its execve's
 * return (sp at argc; then argv, envp, each to a NULL, and auxv's pairs),
 * or 0. */
static uint64_t auxv_slot(pid_t pid, uint64_t sp)
{
	char path[64];
	uint64_t w = 0, at, found = 0;
	int fd, nulls = 0;

	snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	if (pread(fd, &w, 8, (off_t)sp) != 8 || w > (1u << 20))
		goto out;
	at = sp + 8 * (w + 2);		/* past argc, argv and its NULL */
	for (int i = 0; i < (1 << 16) && !nulls; i++, at += 8)
		if (pread(fd, &w, 8, (off_t)at) != 8)
			goto out;
		else
			nulls = !w;	/* envp's NULL */
	for (int i = 0; i < 512 && nulls; i++, at += 16) {
		if (pread(fd, &w, 8, (off_t)at) != 8 || w == AT_NULL)
			break;
		if (w == AT_ENTRY) {
			found = at + 8;
			break;
		}
	}
out:
	close(fd);
	return found;
}

/* Let task tid go on: to its next system call while its process makes its
 * way to its entry point, else freely. */
static void cont(struct inj *j, pid_t tid, int sig)
{
	struct inj_proc *p = proc_find(j, tid);
	bool to_entry = p && (p->state == PROC_EXEC || p->state == PROC_ENTRY);

	ptrace(to_entry ? PTRACE_SYSCALL : PTRACE_CONT, tid, 0, (void *)(long)sig);
}

/* A new task's first stop. A new process (not a thread): a fork, whose copy
 * of its parent's image records as itself once its self word holds its
 * pid; or a vfork, whose memory is its parent's (the self word is not 0). */
static void new_task(struct inj *j, pid_t tid)
{
	struct inj_proc *parent, *p;
	struct proc_status st;
	long ppid, tgid = proc_status_read(tid, &st) ? -1 : st.tgid;
	uint32_t self = 0;

	/* its name now: a thread that exits before its records are read has
	 * no /proc entry left to ask */
	if (tgid > 0)
		inj_comm(j, NULL, (pid_t)tgid, tid);
	if (tgid != tid || proc_find(j, tid))
		return;		/* a thread, or known */
	inj_gate_go(j, tid);	/* ours: an exec of it is patched here, not stopped by the gate */
	ppid = st.ppid;
	p = proc_add(j, tid);	/* (may move the table: the parent is found after) */
	parent = ppid > 0 ? proc_find(j, (pid_t)ppid) : NULL;
	if (!p || !parent || !parent->img)
		return;
	if (mem_rw(tid, parent->img->shm.self_remote, &self, sizeof(self), false) || self)
		return;		/* vfork: its parent's memory, patches and all */
	self = (uint32_t)ns_inner_tid(tid);	/* getpid's, as the image's own process */
	if (mem_rw(tid, parent->img->shm.self_remote, &self, sizeof(self), true))
		return;
	if ((pid_t)self != tid) {	/* in a container: its records name it by that */
		struct inj_kid *k = realloc(j->kids, (j->nkids + 1) * sizeof(*k));

		if (k) {
			j->kids = k;
			j->kids[j->nkids++] = (struct inj_kid){parent->img, tid, (pid_t)self};
		}
	}
	p->undo = inj_undo_tell(j, tid);	/* a copy of the patches */
	p->img = parent->img;
	p->img->refs++;
	inj_stk_fork(j, p->img, tid);
}

/* An exec: the old image is gone from this process (nothing to restore);
 * run the new program to its execve's return. */
static void on_exec(struct inj *j, pid_t pid)
{
	struct inj_proc *p = proc_add(j, pid);

	if (!p)
		return;
	/* its records from before keep the old program's name; from now,
	 * the new one's */
	inj_comm_retire(j, pid, p->img);
	if (p->img) {
		inj_image_put(j, p->img);
		p->img = NULL;
	}
	inj_undo_forget(j, &p->undo);	/* that text is gone */
	p->state = PROC_EXEC;
	p->stub = p->auxv_at = 0;
}

static void at_entry(struct inj *j, struct inj_proc *p);

/* The stub the dynamic linker jumps to instead of the entry point: getpid
 * (mov $39,%eax; syscall), whose stops we see, then jmp *entry(%rip). */
#define STUB_SYSCALL_END 7	/* its ip after the syscall instruction */
static const uint8_t stub_code[] = {0xb8, 39, 0, 0, 0, 0x0f, 0x05, 0xff, 0x25, 0, 0, 0, 0};

/* At its execve's return, the new program not run yet: patched now if it
 * has no dynamic linker (it is at its entry point), else the stub made its
 * dynamic linker's way to its entry point (see the top). */
static void after_exec(struct inj *j, struct inj_proc *p)
{
	struct user_regs_struct regs;
	uint8_t code[sizeof(stub_code) + 8];
	struct remote rem;
	long stub;

	p->state = PROC_RUN;
	if (auxv_entry(p->pid, &p->entry) || ptrace(PTRACE_GETREGS, p->pid, 0, &regs) < 0)
		goto fail;
	if (regs.rip == p->entry) {
		at_entry(j, p);
		return;
	}
	p->auxv_at = auxv_slot(p->pid, regs.rsp);
	if (!p->auxv_at || remote_adopt(&rem, p->pid))
		goto fail;
	stub = inj_rsys(&rem, SYS_mmap, 0, 4096, PROT_READ | PROT_EXEC,
			MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	memcpy(code, stub_code, sizeof(stub_code));
	memcpy(code + sizeof(stub_code), &p->entry, 8);
	/* the stub, then the way to it */
	if (!inj_rsys_failed(stub) && remote_write(&rem, (uint64_t)stub, code, sizeof(code)) == 0 &&
	    remote_write(&rem, p->auxv_at, &stub, 8) == 0) {
		p->stub = (uint64_t)stub;
		p->state = PROC_ENTRY;
	}
	remote_forget(&rem);
	if (p->state == PROC_ENTRY)
		return;
fail:
	log_warn("process %d exec'd and cannot be followed into its new program", (int)p->pid);
}

/* Is task pid at the return of a system call (PTRACE_SYSCALL's exit stop)? */
static bool syscall_exit(pid_t pid)
{
	struct __ptrace_syscall_info si;

	return ptrace(PTRACE_GET_SYSCALL_INFO, pid, sizeof(si), &si) > 0 &&
	       si.op == PTRACE_SYSCALL_INFO_EXIT;
}

/* A system-call stop of a process on its way to its entry point. */
static void syscall_stop(struct inj *j, struct inj_proc *p)
{
	struct user_regs_struct regs;

	if (!syscall_exit(p->pid))
		return;
	if (p->state == PROC_EXEC) {
		after_exec(j, p);
		return;
	}
	if (ptrace(PTRACE_GETREGS, p->pid, 0, &regs) < 0 ||
	    regs.rip != p->stub + STUB_SYSCALL_END)
		return;		/* a system call of its dynamic linker */
	/* the stub's: at the entry point, its AT_ENTRY the file's again */
	p->state = PROC_RUN;
	regs.rip = p->entry;
	if (ptrace(PTRACE_SETREGS, p->pid, 0, &regs) < 0)
		return;
	mem_rw(p->pid, p->auxv_at, &p->entry, 8, true);
	at_entry(j, p);
}

/* At the new program's entry point, its only thread stopped: patch the
 * image. */
static void at_entry(struct inj *j, struct inj_proc *p)
{
	struct remote rem;
	int ret;

	p->state = PROC_RUN;
	ret = remote_adopt(&rem, p->pid);
	if (ret) {
		log_warn("cannot patch process %d after its exec: %s", (int)p->pid, strerror(-ret));
		return;
	}
	p->img = inj_image_new(j, p->pid);
	p->undo = inj_undo_tell(j, p->pid);
	ret = p->img ? inj_install(j, p->img, &rem) : -ENOMEM;
	if (ret) {
		log_warn("cannot patch process %d after its exec: %s", (int)p->pid, strerror(-ret));
		inj_image_put(j, p->img);
		p->img = NULL;
		inj_undo_forget(j, &p->undo);
	} else {
		inj_calibrate(j);
		inj_comm(j, NULL, p->pid, p->pid);	/* its name, while it is here */
		log_info("inject: process %d patched at its entry point", (int)p->pid);
	}
	remote_forget(&rem);
}

/* One wait status of a task of the tree. resume: let it go on (false while
 * detaching: it stays stopped). */
static void handle(struct inj *j, pid_t pid, int st, bool resume)
{
	struct inj_task *t;
	struct inj_proc *p;
	int sig, ev;

	if (WIFEXITED(st) || WIFSIGNALED(st)) {
		task_del(j, pid);
		if (proc_find(j, pid))
			inj_gate_forget(j, pid);	/* its pid may come again */
		proc_del(j, pid);
		return;
	}
	if (!WIFSTOPPED(st))
		return;
	t = task_add(j, pid);
	sig = WSTOPSIG(st);
	ev = st >> 16;
	switch (ev) {
	case PTRACE_EVENT_FORK:
	case PTRACE_EVENT_VFORK:
	case PTRACE_EVENT_CLONE:
		break;		/* the new task reports its own first stop */
	case PTRACE_EVENT_EXIT:
		/* hold_exit: a process's last moment with its memory, until the
		 * next drain (inj_follow_exits) */
		if (j->hold_exit && resume && t && proc_find(j, pid)) {
			t->exiting = true;
			t->stopped = true;
			return;
		}
		break;
	case PTRACE_EVENT_EXEC: {
		unsigned long former = 0;

		/* a thread that exec'd took the leader's pid */
		if (ptrace(PTRACE_GETEVENTMSG, pid, 0, &former) == 0 && (pid_t)former != pid)
			task_del(j, (pid_t)former);
		t = task_find(j, pid);
		on_exec(j, pid);
		break;
	}
	case PTRACE_EVENT_STOP:
		if (sig == SIGSTOP || sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU) {
			if (t)
				t->stopped = true;
			if (resume)
				ptrace(PTRACE_LISTEN, pid, 0, 0);	/* a group-stop */
			return;
		}
		new_task(j, pid);	/* a first stop, or our interrupt */
		break;
	default:
		p = proc_find(j, pid);
		if (sig == SYSCALL_STOP) {
			if (p && (p->state == PROC_EXEC || p->state == PROC_ENTRY))
				syscall_stop(j, p);
			break;
		}
		/* a signal for the task: delivered now, or at detach */
		if (!resume) {
			siginfo_t si;

			if (t && t->nheld < REMOTE_MAX_HELD &&
			    ptrace(PTRACE_GETSIGINFO, pid, 0, &si) == 0)
				t->held[t->nheld++] = si;
			break;
		}
		if (t)
			t->stopped = false;
		cont(j, pid, sig);
		return;
	}
	if (t)
		t->stopped = !resume;
	if (resume)
		cont(j, pid, 0);
}

void inj_follow_exits(struct inj *j)
{
	for (size_t i = 0; i < j->ntasks; i++)
		if (j->tasks[i].exiting) {
			j->tasks[i].exiting = false;
			j->tasks[i].stopped = false;
			cont(j, j->tasks[i].tid, 0);
		}
}

int inj_follow_spawned(struct inj *j, pid_t pid)
{
	long opts = PT_OPTS | (j->hold_exit ? PTRACE_O_TRACEEXIT : 0);

	if (ptrace(PTRACE_SEIZE, pid, 0, (void *)opts) < 0) {
		int err = -errno;

		log_error("cannot ptrace the command (process %d): %s", (int)pid, strerror(-err));
		return err;
	}
	if (!task_add(j, pid) || !proc_add(j, pid))
		return -ENOMEM;
	proc_find(j, pid)->state = PROC_HELD;
	j->pid = pid;
	return 0;
}

int inj_follow_launched(struct inj *j, pid_t pid)
{
	/* its exec, then the int3 at its entry point: the first patches are in
	 * before it runs a line of main */
	for (;;) {
		struct inj_proc *p = proc_find(j, pid);
		int st;

		if (p && p->state == PROC_RUN && p->img)
			return 0;
		if (waitpid(pid, &st, __WALL) != pid)
			return -ECHILD;
		if (WIFEXITED(st) || WIFSIGNALED(st)) {
			handle(j, pid, st, true);
			return -ESRCH;
		}
		handle(j, pid, st, true);
		p = proc_find(j, pid);
		if (p && p->state == PROC_RUN)
			return p->img ? 0 : -EIO;	/* at its entry: patched, or not */
	}
}

void inj_host_ids(struct inj *j, const struct inj_image *img, int32_t *pid, int32_t *tid)
{
	for (size_t i = j->nkids; i-- > 0;)	/* the newest first: an id used again */
		if (j->kids[i].img == img && j->kids[i].ns_pid == *pid) {
			if (*tid == *pid) {	/* its first thread */
				*pid = *tid = j->kids[i].pid;
				return;
			}
			cache_ns_host_ids(j->base.ctx->cache, j->kids[i].pid, pid, tid);
			return;
		}
	cache_ns_host_ids(j->base.ctx->cache, img->pid, pid, tid);
}

void inj_follow_waited(struct inj *j, pid_t pid, int status)
{
	handle(j, pid, status, true);
}

/* Every task stopped (a signal that arrives meanwhile held), or given up
 * on after 5 s. */
static void stop_tasks(struct inj *j)
{
	uint64_t deadline;

	inj_follow_exits(j);	/* they exit */
	/* every task stopped; a task that was stopped already (a group-stop)
	 * is interrupted too, which gives a stop we can see */
	for (size_t i = 0; i < j->ntasks; i++) {
		j->tasks[i].stopped = false;
		if (ptrace(PTRACE_INTERRUPT, j->tasks[i].tid, 0, 0) < 0 && errno == ESRCH)
			j->tasks[i].stopped = true;	/* gone: its exit is on its way */
	}
	deadline = inj_mono_ns() + 5000000000ULL;
	for (;;) {
		bool all = true;
		int st;
		pid_t pid;

		for (size_t i = 0; i < j->ntasks; i++)
			all &= j->tasks[i].stopped;
		if (all)
			break;
		pid = waitpid(-1, &st, __WALL | WNOHANG);
		if (pid < 0 && errno == ECHILD)
			break;
		if (pid <= 0) {
			if (inj_mono_ns() > deadline)
				break;
			usleep(1000);
			continue;
		}
		handle(j, pid, st, false);
	}
}

/* Let every task go, each with the first signal it was stopped at; the
 * others, again. A process on its way to its entry point goes there. */
static void let_go(struct inj *j)
{
	for (size_t i = 0; i < j->nprocs; i++) {
		struct inj_proc *p = &j->procs[i];

		if (p->state == PROC_ENTRY)	/* its dynamic linker goes to the entry point */
			mem_rw(p->pid, p->auxv_at, &p->entry, 8, true);
	}
	for (size_t i = 0; i < j->ntasks; i++) {
		struct inj_task *t = &j->tasks[i];
		int first = 0;
		unsigned k = 0;

		if (t->nheld && ptrace(PTRACE_SETSIGINFO, t->tid, 0, &t->held[0]) == 0) {
			first = t->held[0].si_signo;
			k = 1;
		}
		ptrace(PTRACE_DETACH, t->tid, 0, (void *)(long)first);
		for (; k < t->nheld; k++)
			kill(t->tid, t->held[k].si_signo);
	}
	j->ntasks = 0;
}

void inj_follow_detach(struct inj *j)
{
	stop_tasks(j);
	/* every process running a patched image, every thread of it stopped */
	for (size_t i = 0; i < j->nprocs; i++) {
		struct inj_proc *p = &j->procs[i];
		struct remote rem;
		bool held = true;
		char dir[64];

		if (!p->img || !inj_image_applied(p->img))
			continue;
		for (size_t k = 0; k < j->ntasks; k++)
			if (tgid_of(j->tasks[k].tid) == p->pid)
				held &= j->tasks[k].stopped;
		snprintf(dir, sizeof(dir), "/proc/%d", (int)p->pid);
		if (!held) {
			if (access(dir, F_OK) == 0)
				log_warn("process %d did not stop: its patches stay", (int)p->pid);
			continue;
		}
		if (remote_adopt(&rem, p->pid) == 0) {
			inj_restore(j, p->img, &rem);
			remote_forget(&rem);
		}
		inj_undo_forget(j, &p->undo);
	}
	for (size_t i = 0; i < j->nimages; i++)
		inj_image_retire(j->images[i]);
	let_go(j);
}
