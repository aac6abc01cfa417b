/* Steps: a system call or a call that uscope runs in a stopped thread of the
 * process, which the thread can finish alone if uscope dies in the middle.
 *
 * A tracer that dies detaches its tracees as they are: a thread it was
 * single-stepping keeps the trap flag and dies of SIGTRAP after its next
 * instruction, and one whose registers it had set for a step runs on with
 * them. So no step is a single step, and none returns to an int3:
 *  - the step's code is a small stub written in the dead tail of the
 *    process's vDSO (the bytes of its last page past the image's end, which
 *    nothing maps or runs: the same on every process of this kernel), with
 *    a data block before it: the thread's registers as it is to go on with
 *    them (an interrupted system call made to restart, as the kernel would
 *    have on its way back), its signal mask, and which thread;
 *  - the thread runs from the stub with PTRACE_SYSCALL: the system call is
 *    made, or the function called and its result handed over at a getpid,
 *    and uscope, seeing the system call's stops, reads the result and puts
 *    the registers back itself. The kernel forgets PTRACE_SYSCALL when the
 *    tracer dies: the thread then runs the stub's end, which sets its
 *    signal mask back (it is all blocked during a step, so no signal is
 *    taken, and lost, meanwhile), loads every register from the block and
 *    jumps back where it was;
 *  - a later uscope (or the janitor's) finds the block: a thread left in the
 *    stub is given its registers from it, one still inside a called
 *    function is waited for (-EINPROGRESS), and the bytes go back to the
 *    vDSO's when that process is let go.
 * Where there is no such room (no vDSO, another image, too little past its
 * end), the old way is kept: a single step of the vDSO's `syscall`, a call
 * returning to an int3 of the agent's. */
#include <elf.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/fault.h"
#include "core/log.h"
#include "core/proc.h"
#include "engine/inject/remote.h"
#include "objfile/modules.h"

#define STEP_MAGIC 0x3170657473637375ULL	/* "uscstep1" */

/* The data block, at the area's start (qwords). */
enum {
	D_MAGIC, D_TID, D_MASK, D_FLAGS,
	D_RAX, D_RBX, D_RCX, D_RDX, D_RSI, D_RDI, D_RBP,
	D_R8, D_R9, D_R10, D_R11, D_R12, D_R13, D_R14, D_R15,
	D_RSP, D_RIP, D_SCRATCH, D_CALLRET,
	D_N
};
#define CODE_OFF 192		/* the stub, after the block */
/* offsets in the stub */
#define C_SYS 0			/* syscall; jmp restore */
#define C_CALL 4		/* call *%rax */
#define C_RET 6			/* mov %rax,%rdi; mov $39,%eax; syscall */
#define C_MARK_END 16		/* the getpid's end: the call is over */
#define C_RESTORE 16
#define STEP_CODE_MAX 192
#define STEP_SIZE (CODE_OFF + STEP_CODE_MAX)

_Static_assert(D_N * 8 <= CODE_OFF, "the block before the stub");

/* ---- the area: the dead tail of our vDSO, the same in every process ---------- */

struct vdso_geom {
	int known;		/* 1: usable, -1: not */
	const uint8_t *mine;	/* our vDSO */
	uint64_t content;	/* bytes of its image (segments, section headers) */
	uint64_t size;		/* of its mapping */
	uint64_t area;		/* the step area's offset in it */
	uint8_t code[STEP_CODE_MAX];
	uint32_t code_len;
};

static struct vdso_geom geom;

/* Append a `mov D[slot](%rip), reg` (REX.W 8B /r, rip-relative) at code[*n],
 * which runs at code offset *n of the stub. */
static void emit_load(uint8_t *code, uint32_t *n, int rex_r, int reg, int slot)
{
	int32_t disp;

	code[(*n)++] = (uint8_t)(rex_r ? 0x4c : 0x48);
	code[(*n)++] = 0x8b;
	code[(*n)++] = (uint8_t)(((reg & 7) << 3) | 5);
	disp = (int32_t)(slot * 8 - (CODE_OFF + (int32_t)*n + 4));
	memcpy(code + *n, &disp, 4);
	*n += 4;
}

/* A rip-relative operand to D[slot] ending the instruction at *n + 4. */
static void emit_disp(uint8_t *code, uint32_t *n, int slot)
{
	int32_t disp = (int32_t)(slot * 8 - (CODE_OFF + (int32_t)*n + 4));

	memcpy(code + *n, &disp, 4);
	*n += 4;
}

/* The stub (see the top). */
static void stub_build(struct vdso_geom *g)
{
	static const uint8_t head[] = {
		0x0f, 0x05,			/* C_SYS: syscall */
		0xeb, C_RESTORE - 4,		/* jmp restore */
		0xff, 0xd0,			/* C_CALL: call *%rax */
		0x48, 0x89, 0xc7,		/* C_RET: mov %rax,%rdi */
		0xb8, 39, 0, 0, 0,		/* mov $39,%eax (getpid) */
		0x0f, 0x05,			/* syscall: the tracer's marker */
	};
	/* every register but rsp: ModRM reg, REX.R */
	static const struct {
		int slot, reg, r;
	} regs[] = {
		{D_RAX, 0, 0}, {D_RCX, 1, 0}, {D_RDX, 2, 0}, {D_RBX, 3, 0}, {D_RBP, 5, 0},
		{D_RSI, 6, 0}, {D_RDI, 7, 0}, {D_R8, 0, 1}, {D_R9, 1, 1}, {D_R10, 2, 1},
		{D_R11, 3, 1}, {D_R12, 4, 1}, {D_R13, 5, 1}, {D_R14, 6, 1}, {D_R15, 7, 1},
	};
	uint8_t *c = g->code;
	uint32_t n = sizeof(head);

	_Static_assert(sizeof(head) == C_RESTORE, "the stub's head");
	memcpy(c, head, sizeof(head));
	/* restore: rt_sigprocmask(SIG_SETMASK, &D_MASK, NULL, 8) */
	c[n++] = 0xb8; c[n++] = 14; c[n++] = 0; c[n++] = 0; c[n++] = 0;	/* mov $14,%eax */
	c[n++] = 0xbf; c[n++] = 2; c[n++] = 0; c[n++] = 0; c[n++] = 0;	/* mov $2,%edi */
	c[n++] = 0x48; c[n++] = 0x8d; c[n++] = 0x35;			/* lea D_MASK(%rip),%rsi */
	emit_disp(c, &n, D_MASK);
	c[n++] = 0x31; c[n++] = 0xd2;					/* xor %edx,%edx */
	c[n++] = 0x41; c[n++] = 0xba; c[n++] = 8; c[n++] = 0; c[n++] = 0; c[n++] = 0;
	c[n++] = 0x0f; c[n++] = 0x05;					/* syscall */
	c[n++] = 0xff; c[n++] = 0x35;					/* pushq D_FLAGS(%rip) */
	emit_disp(c, &n, D_FLAGS);
	c[n++] = 0x9d;							/* popfq */
	for (size_t i = 0; i < sizeof(regs) / sizeof(regs[0]); i++)
		emit_load(c, &n, regs[i].r, regs[i].reg, regs[i].slot);
	emit_load(c, &n, 0, 4, D_RSP);					/* mov D_RSP(%rip),%rsp */
	c[n++] = 0xff; c[n++] = 0x25;					/* jmp *D_RIP(%rip) */
	emit_disp(c, &n, D_RIP);
	g->code_len = n;
}

/* Our vDSO's image and the room past it, found once. */
static const struct vdso_geom *vdso_geom(void)
{
	struct vdso_geom *g = &geom;
	const uint8_t *v = (const uint8_t *)getauxval(AT_SYSINFO_EHDR);
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)v;
	struct proc_map *maps = NULL;
	uint64_t end = 0;
	ssize_t n;

	if (g->known)
		return g->known > 0 ? g : NULL;
	g->known = -1;
	if (!v || memcmp(eh->e_ident, ELFMAG, SELFMAG) || eh->e_ident[EI_CLASS] != ELFCLASS64)
		return NULL;
	n = procmaps_read(getpid(), &maps);
	for (ssize_t i = 0; i < n; i++)
		if (maps[i].start == (uint64_t)(uintptr_t)v && maps[i].path &&
		    !strcmp(maps[i].path, "[vdso]"))
			g->size = maps[i].end - maps[i].start;
	procmaps_free(maps, n > 0 ? (size_t)n : 0);
	if (!g->size)
		return NULL;
	for (int i = 0; i < eh->e_phnum; i++) {
		const Elf64_Phdr *ph = (const Elf64_Phdr *)(v + eh->e_phoff) + i;

		if (ph->p_offset + ph->p_filesz > end)
			end = ph->p_offset + ph->p_filesz;
	}
	if (eh->e_shoff + (uint64_t)eh->e_shnum * eh->e_shentsize > end)
		end = eh->e_shoff + (uint64_t)eh->e_shnum * eh->e_shentsize;
	g->content = end;
	g->area = (end + 63) & ~63ULL;
	if (g->area + STEP_SIZE > g->size)
		return NULL;	/* no room */
	stub_build(g);
	g->mine = v;
	g->known = 1;
	return g;
}

/* The process's vDSO (its auxiliary vector's), checked to be ours: 0 with
 * *base, or -1. */
static int vdso_of(struct remote *r, const struct vdso_geom *g, uint64_t *base)
{
	static const uint64_t type = AT_SYSINFO_EHDR;
	uint8_t *img;
	int same;

	if (proc_auxv_read(r->pid, &type, base, 1) <= 0 || !*base)
		return -1;
	img = malloc(g->content);
	same = img && remote_read(r, *base, img, g->content) == 0 &&
	       !memcmp(img, g->mine, g->content);
	free(img);
	return same ? 0 : -1;
}

/* Where the process's step area is: 0 with r->step_at, or -1 (none). */
static int area_find(struct remote *r)
{
	const struct vdso_geom *g = vdso_geom();
	uint64_t base;

	if (r->step_at)
		return 0;
	if (r->step_none || !g || vdso_of(r, g, &base)) {
		r->step_none = true;
		return -1;
	}
	r->step_at = base + g->area;
	return 0;
}

/* The area as our vDSO has it (a process let go keeps nothing of ours). */
void remote_step_clean(struct remote *r)
{
	const struct vdso_geom *g = vdso_geom();

	if (!r->step_placed || !g || r->mem_fd < 0)
		return;
	if (remote_write(r, r->step_at, g->mine + g->area, STEP_SIZE))
		log_debug("inject: process %d: cannot put its vDSO's bytes back at 0x%llx",
			  (int)r->pid, (unsigned long long)r->step_at);
	r->step_placed = r->step_code = false;
}

/* ---- a thread's registers, as it goes on with them ---------------------------- */

/* The registers a thread stopped in the kernel goes back to user space
 * with, no signal taken: an interrupted system call made to run again (the
 * kernel's restart, done on the way back after a stop in get_signal). */
static void user_form(const struct user_regs_struct *k, struct user_regs_struct *u)
{
	*u = *k;
	if ((long long)k->orig_rax >= 0) {
		switch ((long long)k->rax) {
		case -512:	/* ERESTARTSYS */
		case -513:	/* ERESTARTNOINTR */
		case -514:	/* ERESTARTNOHAND */
			u->rax = k->orig_rax;
			u->rip -= 2;
			break;
		case -516:	/* ERESTART_RESTARTBLOCK */
			u->rax = SYS_restart_syscall;
			u->rip -= 2;
			break;
		}
	}
	u->orig_rax = (unsigned long long)-1;
}

static void block_fill(uint64_t *d, pid_t tid, uint64_t mask, const struct user_regs_struct *u,
		       uint64_t scratch, uint64_t callret)
{
	memset(d, 0, D_N * 8);
	d[D_MAGIC] = STEP_MAGIC;
	d[D_TID] = (uint32_t)tid;
	d[D_MASK] = mask;
	d[D_FLAGS] = u->eflags;
	d[D_RAX] = u->rax;
	d[D_RBX] = u->rbx;
	d[D_RCX] = u->rcx;
	d[D_RDX] = u->rdx;
	d[D_RSI] = u->rsi;
	d[D_RDI] = u->rdi;
	d[D_RBP] = u->rbp;
	d[D_R8] = u->r8;
	d[D_R9] = u->r9;
	d[D_R10] = u->r10;
	d[D_R11] = u->r11;
	d[D_R12] = u->r12;
	d[D_R13] = u->r13;
	d[D_R14] = u->r14;
	d[D_R15] = u->r15;
	d[D_RSP] = u->rsp;
	d[D_RIP] = u->rip;
	d[D_SCRATCH] = scratch;
	d[D_CALLRET] = callret;
}

/* The block's registers into regs (a thread that goes on with them). */
static void block_regs(const uint64_t *d, struct user_regs_struct *regs)
{
	regs->eflags = d[D_FLAGS];
	regs->rax = d[D_RAX];
	regs->rbx = d[D_RBX];
	regs->rcx = d[D_RCX];
	regs->rdx = d[D_RDX];
	regs->rsi = d[D_RSI];
	regs->rdi = d[D_RDI];
	regs->rbp = d[D_RBP];
	regs->r8 = d[D_R8];
	regs->r9 = d[D_R9];
	regs->r10 = d[D_R10];
	regs->r11 = d[D_R11];
	regs->r12 = d[D_R12];
	regs->r13 = d[D_R13];
	regs->r14 = d[D_R14];
	regs->r15 = d[D_R15];
	regs->rsp = d[D_RSP];
	regs->rip = d[D_RIP];
	regs->orig_rax = (unsigned long long)-1;
}

/* ---- a dead uscope's step ------------------------------------------------------- */

int remote_step_finish_dead(struct remote *r)
{
	uint64_t d[D_N], code;

	if (area_find(r) || remote_read(r, r->step_at, d, sizeof(d)) || d[D_MAGIC] != STEP_MAGIC)
		return 0;
	code = r->step_at + CODE_OFF;
	for (size_t t = 0; t < r->ntasks; t++) {
		struct user_regs_struct regs;
		uint64_t word = 0;

		if (remote_get_regs(r, t, &regs))
			continue;
		if (regs.rip >= code && regs.rip < code + STEP_CODE_MAX) {
			/* in the stub: where the step would have taken it */
			block_regs(d, &regs);
			if (remote_set_regs(r, t, &regs) == 0) {
				ptrace(PTRACE_SETSIGMASK, r->tasks[t].tid, (void *)8, &d[D_MASK]);
				log_info("inject: process %d: thread %d was in a step of a uscope that "
					 "died: put back", (int)r->pid, (int)r->tasks[t].tid);
			}
			continue;
		}
		/* inside the function a dead uscope called: it returns to the
		 * stub, which restores it from the block; wait for it */
		if (r->tasks[t].tid == (pid_t)d[D_TID] && d[D_CALLRET] && d[D_SCRATCH] &&
		    regs.rsp < d[D_SCRATCH] &&
		    remote_read(r, d[D_SCRATCH] - 8, &word, 8) == 0 && word == d[D_CALLRET])
			return -EINPROGRESS;	/* (the block stays as it is meanwhile) */
	}
	r->step_placed = true;	/* the vDSO's bytes back at the release */
	return 0;
}

/* ---- running a step ----------------------------------------------------------- */

/* The task that runs the steps: one not stopped with a signal to deliver
 * (its siginfo is given back with it at the detach), the leader first. A
 * task has it when it must: the signal is sent again, pending, for the
 * kernel to keep (it is blocked during the steps). */
static size_t stepper(struct remote *r)
{
	for (size_t t = 0; t < r->ntasks; t++)
		if (!r->tasks[t].nheld)
			return t;
	for (unsigned k = 0; k < r->tasks[0].nheld; k++)
		syscall(SYS_tgkill, r->pid, r->tasks[0].tid, r->tasks[0].held[k].si_signo);
	r->tasks[0].nheld = 0;
	return 0;
}

enum { STOP_ENTRY, STOP_EXIT, STOP_OTHER };

/* The tests' way to die in the middle of a step (core/fault.h): uscope
 * kills itself at its Nth step (counted from 1 in this process), where
 * says when: "set" (the registers set, the thread not yet run), "entry"
 * (at the system call's entry), "exit" (at its exit), "inside" (a call's:
 * at the first system call the called function makes, or its marker):
 * USCOPE_FAULT=inject.stepN-WHERE; inject.call-inside: inside the first
 * call, whatever its step. */
static void die_at(unsigned step, const char *where)
{
	char point[48];

	snprintf(point, sizeof(point), "inject.step%u-%s", step, where);
	if (core_fault(point) || (!strcmp(where, "inside") && core_fault("inject.call-inside")))
		kill(getpid(), SIGKILL);
}

static unsigned nsteps;	/* steps run by this process */

/* tid's next stop of the step, resumed past the others (a signal that comes
 * meanwhile, one of SIGKILL, SIGSTOP or a fault, is kept for the detach).
 * STOP_* with *regs, or -errno (-ESRCH: gone; -ETIMEDOUT past deadline ns,
 * 0: none). */
static int step_wait(struct remote *r, size_t task, struct user_regs_struct *regs,
		     uint64_t deadline)
{
	pid_t tid = r->tasks[task].tid;

	for (;;) {
		int st, ev, sig;
		pid_t w = remote_waitpid(tid, &st, __WALL | (deadline ? WNOHANG : 0));

		if (w < 0)
			return -errno;
		if (w == 0) {
			struct timespec ts;

			clock_gettime(CLOCK_MONOTONIC, &ts);
			if ((uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec >= deadline)
				return -ETIMEDOUT;
			usleep(500);
			continue;
		}
		if (WIFEXITED(st) || WIFSIGNALED(st))
			return -ESRCH;
		if (!WIFSTOPPED(st))
			continue;
		sig = WSTOPSIG(st);
		ev = st >> 16;
		if (sig == (SIGTRAP | 0x80)) {
			struct __ptrace_syscall_info si;

			if (remote_get_regs(r, task, regs))
				return -ESRCH;
			if (ptrace(PTRACE_GET_SYSCALL_INFO, tid, sizeof(si), &si) <= 0)
				return -EIO;
			return si.op == PTRACE_SYSCALL_INFO_ENTRY ? STOP_ENTRY :
			       si.op == PTRACE_SYSCALL_INFO_EXIT ? STOP_EXIT : STOP_OTHER;
		}
		if (ev == 0 && !(sig == SIGSTOP && r->drop_stop)) {
			struct remote_task *t = &r->tasks[task];
			siginfo_t si;

			if (ptrace(PTRACE_GETSIGINFO, tid, 0, &si) == 0 && t->nheld < REMOTE_MAX_HELD)
				t->held[t->nheld++] = si;
		}
		if (ptrace(PTRACE_SYSCALL, tid, 0, 0) < 0)
			return -errno;
	}
}

/* Task t, running a step, stopped (PTRACE_INTERRUPT): 0, or -ESRCH. */
static int step_interrupt(struct remote *r, size_t t)
{
	pid_t tid = r->tasks[t].tid;

	if (ptrace(PTRACE_INTERRUPT, tid, 0, 0) < 0)
		return -ESRCH;
	for (;;) {
		int st;

		if (remote_waitpid(tid, &st, __WALL) < 0)
			return -ESRCH;
		if (WIFEXITED(st) || WIFSIGNALED(st))
			return -ESRCH;
		if (!WIFSTOPPED(st))
			continue;
		if (WSTOPSIG(st) == (SIGTRAP | 0x80) || (st >> 16) == PTRACE_EVENT_STOP)
			return 0;
		if ((st >> 16) == 0) {	/* a signal: kept; the interrupt is still to come */
			struct remote_task *k = &r->tasks[t];
			siginfo_t si;

			if (ptrace(PTRACE_GETSIGINFO, tid, 0, &si) == 0 && k->nheld < REMOTE_MAX_HELD)
				k->held[k->nheld++] = si;
		}
		if (ptrace(PTRACE_SYSCALL, tid, 0, 0) < 0)
			return -ESRCH;
	}
}

/* Set for a step of task t: its registers and mask saved (in the process
 * too), signals blocked, the stub in place. 0 or -errno. */
static int step_begin(struct remote *r, size_t t, uint64_t scratch, uint64_t callret,
		      struct user_regs_struct *saved, struct user_regs_struct *user,
		      uint64_t *mask)
{
	const struct vdso_geom *g = vdso_geom();
	static const uint64_t all = ~0ULL;
	pid_t tid = r->tasks[t].tid;
	uint64_t d[D_N];
	int err;

	if ((err = remote_get_regs(r, t, saved)))
		return err;
	if (ptrace(PTRACE_GETSIGMASK, tid, (void *)8, mask) < 0)
		return -errno;
	user_form(saved, user);
	if (!r->step_code) {
		/* (a dead uscope's block there was dealt with at the stop) */
		r->step_placed = true;
		err = remote_write(r, r->step_at + CODE_OFF, g->code, g->code_len);
		if (err)
			return err;
		r->step_code = true;
	}
	block_fill(d, tid, *mask, user, scratch, callret);
	if ((err = remote_write(r, r->step_at, d, sizeof(d))))
		return err;
	if (ptrace(PTRACE_SETSIGMASK, tid, (void *)8, &all) < 0)
		return -errno;
	r->tasks[t].stepped = true;
	return 0;
}

/* The step is over: the thread as it was (as it goes on from user space),
 * the block marked done. */
static int step_end(struct remote *r, size_t t, const struct user_regs_struct *user,
		    uint64_t mask)
{
	uint64_t none = 0;
	int err = remote_set_regs(r, t, user);

	if (ptrace(PTRACE_SETSIGMASK, r->tasks[t].tid, (void *)8, &mask) < 0 && !err)
		err = -errno;
	if (!err)
		remote_write(r, r->step_at + D_TID * 8, &none, 8);
	return err;
}

long remote_step_syscall(struct remote *r, bool *ok, long nr, const long *a)
{
	struct user_regs_struct saved, user, regs;
	size_t t = stepper(r);
	uint64_t mask, scratch;
	int err, stop = -1;

	*ok = false;
	if (area_find(r))
		return -ENOTSUP;
	if ((err = remote_get_regs(r, t, &regs)))
		return err;
	scratch = (regs.rsp - 256) & ~15ULL;
	if ((err = step_begin(r, t, scratch, 0, &saved, &user, &mask)))
		return err;
	regs = saved;
	regs.rax = (unsigned long long)nr;
	regs.orig_rax = (unsigned long long)-1;	/* no restart into the step */
	regs.rdi = (unsigned long long)a[0];
	regs.rsi = (unsigned long long)a[1];
	regs.rdx = (unsigned long long)a[2];
	regs.r10 = (unsigned long long)a[3];
	regs.r8 = (unsigned long long)a[4];
	regs.r9 = (unsigned long long)a[5];
	regs.rip = r->step_at + CODE_OFF + C_SYS;
	regs.rsp = scratch;
	err = remote_set_regs(r, t, &regs);
	die_at(++nsteps, "set");
	/* its entry, then its exit */
	while (!err && stop != STOP_EXIT) {
		if (ptrace(PTRACE_SYSCALL, r->tasks[t].tid, 0, 0) < 0)
			err = -errno;
		else if ((stop = step_wait(r, t, &regs, 0)) < 0)
			err = stop;
		else if (regs.rip != r->step_at + CODE_OFF + C_SYS + 2)
			err = -EIO;	/* not ours: cannot be */
		else
			die_at(nsteps, stop == STOP_ENTRY ? "entry" : "exit");
	}
	if (err == -ESRCH)
		return err;
	{
		long res = (long)regs.rax;
		int e2 = step_end(r, t, &user, mask);

		if (err || e2)
			return err ? err : e2;
		*ok = true;
		return res;
	}
}

int remote_step_call(struct remote *r, size_t task, uint64_t fn, uint64_t a1, uint64_t a2,
		     unsigned timeout_ms, uint64_t *ret)
{
	struct user_regs_struct saved, user, regs;
	uint64_t mask, scratch, mark, deadline;
	struct timespec ts;
	int err, stop;

	if (area_find(r))
		return -ENOTSUP;
	if ((err = remote_get_regs(r, task, &regs)))
		return err;
	/* below the red zone, aligned as at a call (the call pushes) */
	scratch = (regs.rsp - 1024) & ~15ULL;
	mark = r->step_at + CODE_OFF + C_MARK_END;
	if ((err = step_begin(r, task, scratch, r->step_at + CODE_OFF + C_RET, &saved, &user,
			      &mask)))
		return err;
	regs = saved;
	regs.rsp = scratch;
	regs.rip = r->step_at + CODE_OFF + C_CALL;
	regs.rax = fn;
	regs.rdi = a1;
	regs.rsi = a2;
	regs.orig_rax = (unsigned long long)-1;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	deadline = (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec +
		   (uint64_t)timeout_ms * 1000000ULL;
	err = remote_set_regs(r, task, &regs);
	die_at(++nsteps, "set");
	/* through the function's own system calls to the marker's entry,
	 * then its exit */
	for (bool marked = false; !err;) {
		if (ptrace(PTRACE_SYSCALL, r->tasks[task].tid, 0, 0) < 0) {
			err = -errno;
			break;
		}
		stop = step_wait(r, task, &regs, deadline);
		if (stop < 0) {
			err = stop;
			break;
		}
		die_at(nsteps, "inside");
		if (regs.rip != mark)
			continue;
		if (stop == STOP_ENTRY) {
			*ret = regs.rdi;
			marked = true;
		} else if (stop == STOP_EXIT && marked) {
			break;
		}
	}
	if (err == -ETIMEDOUT && step_interrupt(r, task))
		return -ESRCH;	/* (stopped where it waits: a lock a stopped thread holds) */
	if (err == -ESRCH)
		return err;
	{
		int e2 = step_end(r, task, &user, mask);

		return err ? err : e2;
	}
}
