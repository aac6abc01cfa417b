/* What the agent's files share (agent.c: the hits; tracer.c: the tracer's
 * life, seen from the process). Freestanding: system calls are made here. */
#ifndef USC_ENGINE_INJECT_AGENT_AGENT_H
#define USC_ENGINE_INJECT_AGENT_AGENT_H

#include "engine/inject/inject_shared.h"

#define HIDDEN __attribute__((visibility("hidden")))

static inline long sys6(long n, long a, long b, long c, long d, long e, long f)
{
	register long r10 __asm__("r10") = d;
	register long r8 __asm__("r8") = e;
	register long r9 __asm__("r9") = f;
	long r;

	__asm__ volatile("syscall"
			 : "=a"(r)
			 : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
	return r;
}

#define SYS_mprotect 10
#define SYS_gettid 186
#define SYS_prctl 157
#define SYS_arch_prctl 158
#define SYS_futex 202
#define SYS_clock_gettime 228
#define SYS_process_vm_readv 310
#define SYS_membarrier 324
#define SYS_futex_waitv 449
#define PR_GET_NAME 16
#define ARCH_GET_FS 0x1003
#define FUTEX_WAIT 0
#define FUTEX_WAKE 1
#define PROT_WRITE 2
#define ENOSYS 38
#define ETIMEDOUT 110
#define MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE 32

/* Room in the slot's ring for want bytes after head: the tracer is asked
 * for it and waited for, within the bound (inj_ctl.max_wait_ns). 1: room;
 * 0: none, the record is lost (counted in counts, INJ_C_LOST_WAIT when it
 * is the bound's). */
int agent_wait_room(struct inj_ctl *c, struct inj_slot *s, uint64_t head, uint64_t want,
		    uint64_t *counts) HIDDEN;
/* Wake the tracer if it sleeps: a ring is past its watermark. */
void agent_ring(struct inj_ctl *c) HIDDEN;
/* The tracer has died: take this process's patches out (once). */
void agent_let_go(struct inj_ctl *c) HIDDEN;
/* A forked child's first hit (its self word 0): its own pid claimed and
 * listed for the tracer when it follows forks, else 0 (not traced). */
uint32_t agent_claim(struct inj_ctl *c) HIDDEN;

/* $ustack walked where the probe runs (agent/ustack.c): the stack of the
 * hit (regs) of thread slot s of process tgid, up to frames frames, into h
 * and pcs. STACK_FB_NONE, or why the walk falls back to a copy (h and
 * pcs then mean nothing). */
uint8_t agent_ustack_walk(struct inj_ctl *c, struct inj_slot *s, uint32_t tgid,
			  const uint64_t *regs, uint32_t frames, struct fetch_walk_hdr *h,
			  uint64_t *pcs) HIDDEN;
/* The same for a count: the walk's id in the image's table of counted
 * stacks (> 0), added if it is new (*id 0: no room for it). */
uint8_t agent_ustack_count(struct inj_ctl *c, struct inj_slot *s, uint32_t tgid,
			   const uint64_t *regs, uint32_t frames, uint64_t *id) HIDDEN;
#define ALWAYS static inline __attribute__((always_inline))

/* The thread pointer: rdfsbase where the kernel allows it, else the TCB's
 * self-pointer at %fs:0 where the threads have one, else arch_prctl's (0
 * when it fails: the hit finds no slot, and is counted lost). */
ALWAYS uint64_t fs_base(const struct inj_ctl *c)
{
	uint64_t v = 0;

	if (c->use_rdfsbase)
		__asm__ volatile("rdfsbase %0" : "=r"(v));
	else if (c->fs_self)
		__asm__ volatile("mov %%fs:0, %0" : "=r"(v));	/* the TCB's self-pointer */
	else if (sys6(SYS_arch_prctl, ARCH_GET_FS, (long)&v, 0, 0, 0, 0))
		v = 0;
	return v;
}

/* $pystack: the thread's Python frames into the record at *off (struct
 * python_stack_hdr, then the frames; at most imm of them), v says where; the
 * code objects s has not seen described are. */
void agent_pystack(const struct inj_ctl *c, struct inj_slot *s, int64_t imm, char *rec,
		   uint32_t *off, struct inj_val *v) HIDDEN;

/* py: probes (agent/python.c). A Python call or return of a function a
 * py: probe matches, as agent_hit hands a site to deliver: */
struct py_hit {
	uint64_t frame;		/* the PyFrameObject CPython passed */
	uint64_t iframe;	/* its _PyInterpreterFrame */
	uint64_t code;		/* its code object */
	uint64_t retval;	/* PyTrace_RETURN: the value returned (0: an exception) */
	const struct inj_py *py;
	struct inj_py_code *verdict;	/* its code object's (a row kept there), or 0 */
};
/* A py: probe's function as its events and rows name it: the code
 * object's address, and which object at that address (its verdict's
 * generation: python/frame.h's PY_GEN_SHIFT). */
static inline __attribute__((always_inline)) uint64_t py_func_key(const struct py_hit *h)
{
	return h->code | (h->verdict ? (uint64_t)h->verdict->gen << PY_GEN_SHIFT : 0);
}

/* Site idx of c fires for h (agent.c): counted, recorded or aggregated. */
void agent_py_hit(struct inj_ctl *c, uint32_t idx, const struct py_hit *h) HIDDEN;
/* A py: probe's value (FOP_PYFUNC ... FOP_PYRETVAL) into v, its text into
 * the record at *off. */
void agent_py_value(const struct inj_ctl *c, const struct py_hit *h, const struct fetch_insn *in,
		    struct inj_val *v, char *rec, uint32_t *off) HIDDEN;
/* A thread took the GIL (INJ_PYHOOK): every thread state gets the profile
 * function, unless this one has it already. */
void agent_py_hook(struct inj_ctl *c) HIDDEN;
/* CPython finalizes (INJ_PYSYNC): wait for the tracer to drain once more,
 * at most max_wait_ns (a dead or stopped tracer: not at all), so that the
 * code objects the records name are read before CPython frees them. */
void agent_py_sync(struct inj_ctl *c) HIDDEN;
/* Py_AddPendingCall's function (arg: the control block): the profile
 * function in, or (detached) out of, every thread state. */
int agent_py_pending(uint64_t arg) HIDDEN;
/* uscope script (agent/script.c): site fires with a program's probe
 * (inj_site.script) for thread slot s. */
void agent_script(struct inj_ctl *c, struct inj_slot *s, uint64_t slot, uint64_t *counts,
		  const struct inj_site *site, uint64_t *regs, uint32_t tgid) HIDDEN;
/* Argument i of the site, as record() fetches it (agent.c): v, a string's
 * bytes at buf + *off. */
void agent_arg(const struct inj_ctl *c, struct inj_slot *s, const struct inj_site *site,
	       const uint64_t *regs, uint32_t tgid, uint32_t i, struct inj_val *v, char *buf,
	       uint32_t *off) HIDDEN;
/* A script's output record (n bytes at p) into the slot's ring as site's
 * (nvals INJ_NVALS_SCRIPT); no room: lost and counted. */
void agent_script_rec(struct inj_ctl *c, struct inj_slot *s, uint64_t *counts,
		      const struct inj_site *site, const void *p, uint32_t n) HIDDEN;
/* An int3: a call the tracer makes in the process returns here. */
void agent_trap(void) HIDDEN;

/* The owner word at owner (inj_ctl.owner, inj_site.owner): has the tracer
 * gone? */
static inline __attribute__((always_inline)) int owner_died(uint64_t owner)
{
	return (*(volatile const uint32_t *)owner & INJ_OWNER_DIED) != 0;
}

/* The process's id as its records carry it (the self word); a forked
 * child's first hit claims it (agent_claim). 0: not traced. */
static inline __attribute__((always_inline)) uint32_t agent_self(struct inj_ctl *c)
{
	uint32_t t = *(volatile const uint32_t *)c->self;

	return t ? t : agent_claim(c);
}

#endif
