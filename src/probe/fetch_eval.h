/* The fetch interpreter, written once: one step of a fetch program
 * (fetch.h). The inject engine's agent and the bpf engine's program both
 * include this file, as the kernel keeps the stages of its fetch programs in
 * one template (trace_probe_tmpl.h), so the two cannot drift apart. The
 * tracefs engine has the kernel run the same program, lowered to text.
 *
 * The includer defines, before each inclusion:
 *   FETCH_STEP                        the function's name
 *   FETCH_INLINE                      its storage and inlining
 *   FETCH_READ(env, dst, addr, len)   read len (1..8) bytes of user memory
 *                                     at addr: 0, or non-zero when unreadable
 *   FETCH_READ_STACK(env, dst, addr)  optional: 8 bytes of the stack
 *   FETCH_PID(env), FETCH_TID(env), FETCH_CPU(env)  the hit's process,
 *                                     thread and CPU ($pid, $tid, $cpu)
 * and may include it several times (the bpf program builds one step for its
 * sleepable program and one for the other); the macros are undefined at
 * the end.
 *
 * A step computes into *val; what it returns says what to do next. A
 * string is left to the includer (where it goes differs): FETCH_STRING
 * with its address in *val, FETCH_COMM for the task's name, FETCH_NULL for
 * a string behind a NULL pointer (shown as such, not as a fault),
 * FETCH_BYTES for fetch_bytes_len() bytes at *val (FOP_ST_BYTES), and
 * FETCH_STACK for $ustack (the includer copies the registers and stack),
 * FETCH_PYSTACK for $pystack (the includer walks the Python frames). */
#ifndef USC_PROBE_FETCH_EVAL_ONCE
#define USC_PROBE_FETCH_EVAL_ONCE

#include "probe/fetch.h"

enum fetch_status {
	FETCH_NEXT,	/* go on with the next instruction */
	FETCH_DONE,	/* FOP_END: *val is the value */
	FETCH_FAULT,	/* memory could not be read */
	FETCH_STRING,	/* store the string at *val */
	FETCH_COMM,	/* store the task's name */
	FETCH_NULL,	/* a string at a NULL pointer */
	FETCH_STACK,	/* store the registers and the stack (fetch_stack_hdr) */
	FETCH_BYTES,	/* store fetch_bytes_len() bytes at *val */
	FETCH_PYSTACK,	/* store the thread's Python frames (python/frame.h) */
	FETCH_PYVALUE,	/* a py: probe's value (FOP_PYFUNC ... FOP_PYRETVAL) */
};

/* Where the probe is, for FOP_FOFFS and FOP_VADDR: its runtime address,
 * its file offset and its link-time address. */
struct fetch_where {
	uint64_t ip, offset, vaddr;
};

#endif

#ifndef FETCH_READ_STACK
#define FETCH_READ_STACK(env, dst, addr) FETCH_READ(env, dst, addr, 8)
#endif
/* FETCH_OP_USED(op): may an instruction of op come (default: any)? The bpf
 * program says no for the ops none of its sites has, by a constant set
 * before load: the verifier then skips their code (its time is the bpf
 * engine's readiness). An op said not used faults. */
#ifndef FETCH_OP_USED
#define FETCH_OP_USED(op) 1
#endif
#define FETCH_GATE_(op) \
	case op:        \
		if (!FETCH_OP_USED(op)) \
			return FETCH_FAULT;

FETCH_INLINE int FETCH_STEP(const struct fetch_insn *in, const uint64_t *regs,
			    const struct fetch_where *w, uint64_t *val, void *env)
{
	uint64_t tmp = 0;
	uint32_t sz;

	(void)env;
	switch (in->op) {
	FETCH_GATE_(FOP_END)
		return FETCH_DONE;
	FETCH_GATE_(FOP_REG)
		*val = in->reg < USC_REG_NR ? regs[in->reg] : 0;
		return FETCH_NEXT;
	FETCH_GATE_(FOP_STACK)
		if (in->imm < 0 || in->imm > 4096 ||
		    FETCH_READ_STACK(env, &tmp, regs[USC_REG_SP] + 8 * (uint64_t)in->imm))
			return FETCH_FAULT;
		*val = tmp;
		return FETCH_NEXT;
	FETCH_GATE_(FOP_STACKP)
		*val = regs[USC_REG_SP];
		return FETCH_NEXT;
	FETCH_GATE_(FOP_RETVAL)
		*val = regs[USC_REG_AX];
		return FETCH_NEXT;
	case FOP_IMM:
	case FOP_MEM:
		if (!FETCH_OP_USED(FOP_IMM) && !FETCH_OP_USED(FOP_MEM))
			return FETCH_FAULT;
		*val = (uint64_t)in->imm;
		return FETCH_NEXT;
	FETCH_GATE_(FOP_FOFFS)	/* as the kernel: probe address - probe offset + OFF */
		*val = w->ip - w->offset + (uint64_t)in->imm;
		return FETCH_NEXT;
	FETCH_GATE_(FOP_VADDR)	/* the module's load bias + a link-time address */
		*val = w->ip - w->vaddr + (uint64_t)in->imm;
		return FETCH_NEXT;
	FETCH_GATE_(FOP_ADD_REG)
		*val += (in->reg < USC_REG_NR ? regs[in->reg] : 0) * in->size;
		return FETCH_NEXT;
	FETCH_GATE_(FOP_DEREF)
		if (FETCH_READ(env, &tmp, *val + (uint64_t)in->imm, 8))
			return FETCH_FAULT;
		*val = tmp;
		return FETCH_NEXT;
	FETCH_GATE_(FOP_ST_RAW)
		return FETCH_NEXT;
	FETCH_GATE_(FOP_ST_MEM)
		sz = in->size;
		if (sz == 0 || sz > 8 || FETCH_READ(env, &tmp, *val + (uint64_t)in->imm, sz))
			return FETCH_FAULT;
		*val = tmp;
		return FETCH_NEXT;
	FETCH_GATE_(FOP_ST_STRING)
		*val += (uint64_t)in->imm;
		return *val ? FETCH_STRING : FETCH_NULL;
	FETCH_GATE_(FOP_ST_BYTES)	/* the includer copies fetch_bytes_len() bytes */
		return *val ? FETCH_BYTES : FETCH_NULL;
	FETCH_GATE_(FOP_COMM)
		return FETCH_COMM;
	FETCH_GATE_(FOP_USTACK)
		return FETCH_STACK;
	FETCH_GATE_(FOP_PYSTACK)
		return FETCH_PYSTACK;
	case FOP_PYFUNC:
	case FOP_PYARGS:
	case FOP_PYARG:
	case FOP_PYRETVAL:
		return FETCH_PYVALUE;
	FETCH_GATE_(FOP_PID)
		*val = FETCH_PID(env);
		return FETCH_NEXT;
	FETCH_GATE_(FOP_TID)
		*val = FETCH_TID(env);
		return FETCH_NEXT;
	FETCH_GATE_(FOP_CPU)
		*val = FETCH_CPU(env);
		return FETCH_NEXT;
	FETCH_GATE_(FOP_MOD_BF)
		*val = (*val >> in->bf_offset) &
		       (in->bf_width >= 64 ? ~0ULL : ((1ULL << in->bf_width) - 1));
		return FETCH_NEXT;
	default:		/* FOP_ARG, FOP_VAR, FOP_PARAMS: never bound here */
		return FETCH_FAULT;
	}
}

#undef FETCH_STEP
#undef FETCH_OP_USED
#undef FETCH_GATE_
#undef FETCH_INLINE
#undef FETCH_READ
#undef FETCH_READ_STACK
#undef FETCH_PID
#undef FETCH_TID
#undef FETCH_CPU
