/* Attaching to many processes at once (system-wide, issue 27): each attach
 * runs in a fiber of its own on this thread, which stays every tracee's
 * tracer (ptrace's requests must come from the thread that seized). A fiber
 * runs until it waits for its tracee's stop (remote_waitpid), and the
 * others meanwhile: an attach is a dozen or so such waits, each for the
 * tracee to be scheduled, and on a busy machine the wait, not uscope's
 * work, is most of it. While nothing is ready the thread sleeps until a
 * SIGCHLD (a tracee stopped: blocked by the session, and raised again when
 * the fibers are done, for its own wait), at most 1 ms.
 *
 * x86-64 only, as the engine: the switch saves the callee-saved registers
 * on the fiber's stack. Not swapcontext(3): it makes a system call at each
 * switch (the signal mask) and ASan warns on its first use, on stderr,
 * which is the user's. Threads cannot do it: a tracee answers only the
 * thread that seized it. */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif

#include "engine/inject/remote.h"

#define FIBER_STACK (8 << 20)	/* a thread's, touched as used (an attach with $ustack or py: goes deep) */
#define FIBER_GUARD 4096

struct fiber {
	void *sp;		/* its stack pointer while switched out */
	void *stack;
	size_t i;		/* its item */
	bool busy;
};

struct fiber_sched {
	void *sp;		/* the scheduler's */
	struct fiber *cur;	/* the fiber running, or NULL */
	void (*fn)(void *arg, size_t i);
	void *arg;
	bool progress;		/* a fiber got on in this round */
};

static struct fiber_sched *sched;	/* while fibers run */

void inj_fiber_switch(void **save, void *to);
void inj_fiber_start(void);
void inj_fiber_main(struct fiber *f);

__asm__(".text\n"
	".globl inj_fiber_switch\n"
	".hidden inj_fiber_switch\n"
	".type inj_fiber_switch,@function\n"
	"inj_fiber_switch:\n"
	"	pushq %rbp\n"
	"	pushq %rbx\n"
	"	pushq %r12\n"
	"	pushq %r13\n"
	"	pushq %r14\n"
	"	pushq %r15\n"
	"	movq %rsp, (%rdi)\n"
	"	movq %rsi, %rsp\n"
	"	popq %r15\n"
	"	popq %r14\n"
	"	popq %r13\n"
	"	popq %r12\n"
	"	popq %rbx\n"
	"	popq %rbp\n"
	"	ret\n"
	".size inj_fiber_switch, .-inj_fiber_switch\n"
	".globl inj_fiber_start\n"
	".hidden inj_fiber_start\n"
	".type inj_fiber_start,@function\n"
	"inj_fiber_start:\n"
	"	movq %rbx, %rdi\n"
	"	call inj_fiber_main\n"
	"	ud2\n"
	".size inj_fiber_start, .-inj_fiber_start\n");

/* Its item, then back to the scheduler for good. */
void inj_fiber_main(struct fiber *f)
{
	sched->fn(sched->arg, f->i);
	f->busy = false;
	sched->progress = true;
	inj_fiber_switch(&f->sp, sched->sp);
}

/* A new fiber for item i: its stack as inj_fiber_switch leaves one, the
 * fiber in rbx, returning to inj_fiber_start with the stack aligned as at
 * a call. */
static void fiber_init(struct fiber *f, size_t i)
{
	uint64_t *sp = (uint64_t *)((char *)f->stack + FIBER_STACK) - 9;

	for (int k = 0; k < 9; k++)
		sp[k] = 0;
	sp[4] = (uint64_t)(uintptr_t)f;			/* rbx */
	sp[6] = (uint64_t)(uintptr_t)inj_fiber_start;	/* the return address */
	f->sp = sp;
	f->i = i;
	f->busy = true;
}

pid_t remote_waitpid(pid_t tid, int *st, int flags)
{
	pid_t w;

	if (!sched || !sched->cur || (flags & WNOHANG))
		return waitpid(tid, st, flags);
	while ((w = waitpid(tid, st, flags | WNOHANG)) == 0) {
		struct fiber *f = sched->cur;

		inj_fiber_switch(&f->sp, sched->sp);	/* the others meanwhile */
	}
	sched->progress = true;
	return w;
}

static void *stack_new(void)
{
	void *p = mmap(NULL, FIBER_STACK, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	if (p == MAP_FAILED)
		return NULL;
	mprotect(p, FIBER_GUARD, PROT_NONE);	/* an overflow faults */
	return p;
}

static void stack_free(void *p)
{
#if defined(__SANITIZE_ADDRESS__)
	__asan_unpoison_memory_region(p, FIBER_STACK);
#endif
	munmap(p, FIBER_STACK);
}

void remote_fibers(size_t n, unsigned par, void (*fn)(void *arg, size_t i), void *arg)
{
	struct fiber_sched s = {.fn = fn, .arg = arg};
	struct fiber *fs;
	size_t next = 0, live = 0, nf = 0;
	sigset_t chld;
	bool took = false;

	fs = sched || n < 2 || par < 2 ? NULL : calloc(par < n ? par : n, sizeof(*fs));
	while (fs && nf < (par < n ? par : n) && (fs[nf].stack = stack_new()))
		nf++;
	if (nf < 2) {		/* one at a time, as without fibers */
		for (size_t k = 0; k < nf; k++)
			stack_free(fs[k].stack);
		free(fs);
		for (size_t i = 0; i < n; i++)
			fn(arg, i);
		return;
	}
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sched = &s;
	while (next < n || live) {
		s.progress = false;
		for (size_t k = 0; k < nf; k++) {
			struct fiber *f = &fs[k];

			if (!f->busy) {
				if (next == n)
					continue;
				fiber_init(f, next++);
				live++;
				s.progress = true;
			}
			s.cur = f;
			inj_fiber_switch(&s.sp, f->sp);
			s.cur = NULL;
			live -= !f->busy;
		}
		if (!s.progress && live) {
			struct timespec ts = {0, 1000000};

			took |= sigtimedwait(&chld, NULL, &ts) == SIGCHLD;
		}
	}
	sched = NULL;
	if (took)	/* the session's own wait for its tracees hears it too */
		kill(getpid(), SIGCHLD);
	for (size_t k = 0; k < nf; k++)
		stack_free(fs[k].stack);
	free(fs);
}
