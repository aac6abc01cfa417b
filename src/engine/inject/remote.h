/* Controlling a traced process with ptrace: stopping every thread, reading
 * and writing its memory, and running system calls in it. */
#ifndef USC_ENGINE_INJECT_REMOTE_H
#define USC_ENGINE_INJECT_REMOTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/user.h>

#include <signal.h>

#define REMOTE_MAX_HELD 8

/* Signals that arrived while we held a task, given back at detach: the
 * first with its siginfo (PTRACE_SETSIGINFO + PTRACE_DETACH), later ones
 * with tgkill (another process cannot be sent a kernel siginfo). */
struct remote_task {
	pid_t tid;
	bool stepped;		/* it ran an instruction under us */
	unsigned nheld;
	siginfo_t held[REMOTE_MAX_HELD];
};

struct remote {
	pid_t pid;
	int mem_fd;		/* /proc/PID/mem */
	struct remote_task *tasks;
	size_t ntasks, cap;
	uint64_t syscall_insn;	/* address of a `syscall` instruction (the vDSO) */
	/* steps (step.c): the area in the process they run from (its vDSO's
	 * dead tail), 0: not found yet */
	uint64_t step_at;
	bool step_none;		/* no room for one: the old way (a single step) */
	bool step_placed;	/* bytes of ours (or a dead uscope's) there: the vDSO's
				 * back at the end */
	bool step_code;		/* this session's stub written there */
	bool drop_stop;		/* a SIGSTOP that comes while it is stopped is dropped
				 * (the gate's, for a process it holds: system.c) */
};

/* Stop every thread of pid: PTRACE_SEIZE + PTRACE_INTERRUPT each task in
 * /proc/PID/task, rescanning until the set stops growing; a thread a uscope
 * that died left in a step put back (step.c), or waited for. -ESRCH (gone),
 * -EBUSY (another tracer holds it, or a dead uscope's step does not end;
 * logged), -EPERM (logged). */
int remote_stop_all(struct remote *r, pid_t pid);
/* The same, a SIGSTOP that comes meanwhile dropped, never held (the gate's
 * stop of a process started after attach: a SIGSTOP held here would stop it
 * again should we die before we let it go). */
int remote_stop_all_nostop(struct remote *r, pid_t pid);
/* Take over a process that is already our tracee and stopped, with one
 * thread (COMMAND, held by PTRACE_TRACEME at its exec). */
int remote_adopt(struct remote *r, pid_t pid);
/* Its memory only, no task held (remote_read, remote_write): free it with
 * remote_forget. 0, or -errno (-ENOENT: it has gone). */
int remote_open(struct remote *r, pid_t pid);
/* Let every thread go (PTRACE_DETACH), giving back held signals. */
void remote_release(struct remote *r);
/* Forget the process without letting it go: it stays our tracee (COMMAND's
 * tree, which the engine holds all along). */
void remote_forget(struct remote *r);

int remote_read(struct remote *r, uint64_t addr, void *buf, size_t len);
int remote_write(struct remote *r, uint64_t addr, const void *buf, size_t len);
int remote_get_regs(struct remote *r, size_t task, struct user_regs_struct *regs);
int remote_set_regs(struct remote *r, size_t task, const struct user_regs_struct *regs);
/* Run system call nr in a stopped task (the leader, unless it is stopped
 * with a signal to deliver), its registers and signal mask saved and
 * restored (an interrupted system call is still restarted afterwards): a
 * step the thread finishes alone if we die (step.c). Returns the call's
 * result (-errno on its failure), or an -errno of ptrace itself with *ok
 * false. */
long remote_syscall(struct remote *r, bool *ok, long nr, long a1, long a2, long a3, long a4,
		    long a5, long a6);

/* Call fn(a1, a2) in task `task` of the stopped process, on its own stack
 * below the red zone, its registers and signal mask saved and restored (an
 * interrupted system call is restarted afterwards), signals blocked
 * meanwhile: a step (step.c); where there is no room for one, returning to
 * trap (an int3 in the process). The other tasks stay stopped. The
 * function runs at most timeout_ms: past it the task is interrupted and put
 * back as it was (a function that blocks on a lock a stopped task holds).
 * 0 with *ret its return value, -ETIMEDOUT, or -errno of ptrace. */
int remote_call(struct remote *r, size_t task, uint64_t fn, uint64_t a1, uint64_t a2,
		uint64_t trap, unsigned timeout_ms, uint64_t *ret);

/* step.c */
/* The system call as a step: its result, or -ENOTSUP (no room: *ok false,
 * the caller takes the old way). a: its 6 arguments. */
long remote_step_syscall(struct remote *r, bool *ok, long nr, const long *a);
/* The call as a step: 0, -ENOTSUP (no room), -ETIMEDOUT, -errno. */
int remote_step_call(struct remote *r, size_t task, uint64_t fn, uint64_t a1, uint64_t a2,
		     unsigned timeout_ms, uint64_t *ret);
/* Every thread stopped: one a uscope that died left in a step put back as
 * the step would have. 0, or -EINPROGRESS: a thread is still inside the
 * function it called (let the threads run, and try again). */
int remote_step_finish_dead(struct remote *r);
/* The step area back to the vDSO's bytes (before the process is let go). */
void remote_step_clean(struct remote *r);

/* fiber.c: fn(arg, i) for every i < n, each in a fiber of its own, at most
 * par at once, on this thread (the tracer): a fiber runs until it waits for
 * a tracee (remote_waitpid), the others meanwhile. One at a time when
 * called from a fiber, or without the memory for their stacks. */
void remote_fibers(size_t n, unsigned par, void (*fn)(void *arg, size_t i), void *arg);
/* waitpid(tid, st, flags); in a fiber, a wait that blocks lets the others
 * run meanwhile */
pid_t remote_waitpid(pid_t tid, int *st, int flags);

#endif
