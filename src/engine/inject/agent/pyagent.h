/* The agent's Python, its files' shared part: python.c ($pystack, 3.11's
 * profile function, the verdicts, the values), pymon.c (sys.monitoring,
 * 3.12 on), pyeval.c (3.11's frame evaluator). What a hit of either path
 * calls is here, inline: the walker (python/walk.h) and the hits of a
 * verdict's probes. */
#ifndef USCOPE_INJECT_AGENT_PYAGENT_H
#define USCOPE_INJECT_AGENT_PYAGENT_H

#include "engine/inject/agent/agent.h"

#define PYTRACE_CALL 0
#define PYTRACE_RETURN 3

/* Guarded plain loads of whole words. */
ALWAYS int load(void *dst, uint64_t addr, uint32_t len)
{
	if (addr < 4096 || addr + len > (1ULL << 47) || (addr & 7) || (len & 7))
		return -1;
	for (uint32_t i = 0; i < len / 8; i++)
		((uint64_t *)dst)[i] = ((volatile const uint64_t *)addr)[i];
	return 0;
}

struct py_iov {
	void *base;
	uint64_t len;
};

/* Read len bytes of this process without faulting (env: the inj_ctl). */
static inline int self_read(const void *env, void *dst, uint64_t addr, uint32_t len)
{
	const struct inj_ctl *c = env;
	struct py_iov l = {dst, len}, r = {(void *)addr, len};
	uint32_t tgid = *(volatile const uint32_t *)c->self;

	return !tgid || sys6(SYS_process_vm_readv, tgid, (long)&l, 1, (long)&r, 1, 0) != (long)len;
}

#define PYWALK_FN(n) pw_##n
#define PYWALK_INLINE ALWAYS
#define PYWALK_READ(env, dst, addr, len) ((void)(env), load((dst), (addr), (len)))
#define PYWALK_LIST_READ(env, dst, addr, len) self_read((env), (dst), (addr), (len))
#define PYWALK_FIELDS
#include "python/walk.h"

ALWAYS uint64_t ld64(uint64_t a)
{
	return *(volatile const uint64_t *)a;
}

ALWAYS uint32_t ld32(uint64_t a)
{
	return *(volatile const uint32_t *)a;
}

ALWAYS uint8_t ld8(uint64_t a)
{
	return *(volatile const uint8_t *)a;
}

/* What a frame's f_executable and localsplus hold is a pointer, or (3.14)
 * a _PyStackRef: a pointer tagged in its low two bits. */
ALWAYS uint64_t ref_mask(const struct inj_py *py)
{
	return (py->off.flags & PYOFF_STACKREF) ? ~(uint64_t)3 : ~(uint64_t)0;
}

ALWAYS struct inj_py *py_mut(struct inj_ctl *c)
{
	return c->py_off ? (struct inj_py *)((char *)c + c->py_off) : 0;
}

ALWAYS struct inj_ctl *my_ctl(void)
{
	extern const struct agent_hdr agent_hdr HIDDEN;

	return (struct inj_ctl *)*(volatile const uint64_t *)&agent_hdr.ctl;
}

/* A call (or return) of code whose probes are mask: a hit of each probe's
 * entry (or return) site. */
static inline __attribute__((always_inline)) void py_hits(struct inj_ctl *c,
							  const struct inj_py *py,
							  uint64_t mask, int what,
							  const struct py_hit *h)
{
	while (mask) {
		uint32_t k = (uint32_t)__builtin_ctzll(mask);
		uint32_t site = what == PYTRACE_CALL ? py->probes[k].entry : py->probes[k].ret;

		mask &= mask - 1;
		if (site != ~0u && site < c->nsites)
			agent_py_hit(c, site, h);
	}
}

/* A code object's identity beside its address: its co_qualname and
 * co_filename (pointers) and co_firstlineno. A code object made later at
 * the address of a freed one has all three only where it is the same
 * function made again (exec'd again): an interned name alone ("<module>",
 * a class's name) is shared with other modules' code. */
ALWAYS uint64_t py_code_ident(const struct inj_py *py, uint64_t code)
{
	uint64_t f = ld64(code + py->off.co_filename);

	return ld64(code + py->off.co_qualname) ^ (f << 32 | f >> 32) ^
	       ld32(code + py->off.co_firstlineno);
}

/* python.c */
/* The thread's PyThreadState (s: its slot, where the state is kept), or 0. */
uint64_t agent_py_tstate(const struct inj_ctl *c, const struct inj_py *py, struct inj_slot *s) HIDDEN;
/* The probes code matches: kept (*ep: where), or decided now. */
uint64_t agent_py_verdict(struct inj_py *py, uint64_t code, uint64_t iframe,
			  struct inj_py_code **ep) HIDDEN;
/* The verdict kept for code, or 0 (none yet). */
struct inj_py_code *agent_py_verdict_kept(const struct inj_py *py, uint64_t code) HIDDEN;
/* Do the sites of mask count by function alone (no hit reads the frame)? */
int agent_py_count_only(const struct inj_ctl *c, const struct inj_py *py, uint64_t mask,
			int what) HIDDEN;

/* pymon.c: sys.monitoring (3.12 and later), the GIL held */
void agent_pymon_arm(struct inj_py *py) HIDDEN;
void agent_pymon_disarm(struct inj_py *py, int in_cb) HIDDEN;
void agent_pymon_hook(struct inj_ctl *c, struct inj_py *py) HIDDEN;

/* 3.11: the profile function in every thread state (on), or ours out (off). */
void agent_py_profile_all(struct inj_py *py, int on) HIDDEN;

/* pyeval.c: 3.11's frame evaluator in every interpreter (on), or out of
 * them (off), the GIL held: 0, or -1 (the profile function serves instead:
 * py->eval_off says why) */
int agent_pyeval_set(struct inj_py *py, int on) HIDDEN;

#endif
