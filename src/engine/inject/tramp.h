/* Trampolines of the inject engine, encoded with Zydis. */
#ifndef USC_ENGINE_INJECT_TRAMP_H
#define USC_ENGINE_INJECT_TRAMP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define TRAMP_MAX 512	/* bytes of one site's trampoline, at most */

#define TRAMP_FAST_RETADDR 0xfe

struct tramp_spec {
	uint64_t at;		/* the trampoline's runtime address */
	const uint8_t *pre;	/* relocated instructions before the probe */
	size_t npre;		/*   (already encoded for their place: at) */
	uint64_t probe_at;	/* where the probe's code starts: at + npre */
	bool save_flags;	/* the flags may be live here */
	/* a recording probe: call hit(regs, site) (every probe has them) */
	uint64_t hit;		/* the agent's entry point */
	uint64_t site;		/* the site's struct inj_site */
	/* a site on the agent's fast path (fast != 0): fast(site, a, b), with
	 * the registers of enum usc_reg fast_a and fast_b (0xff: none); when it
	 * returns non-zero, hit(regs, site) as above */
	uint64_t fast;
	uint8_t fast_a, fast_b;	/* or TRAMP_FAST_RETADDR: the word at the probe's
				 * stack pointer (at a ret, where it returns to) */
	/* objtrace: a site that follows objects tests the set's filter
	 * (objset.h: counters at obj_filter, indexed by a hash >> obj_shift)
	 * on the argument registers first: all 0 ends the hit, else
	 * hit(regs, site) */
	uint64_t obj_filter;
	uint8_t obj_shift;
	uint8_t obj_regs;		/* the argument registers tested (bit 0 rdi) */
	/* a count-only probe (counter != 0): an increment of a per-CPU counter
	 * at counter + (cpu % 64) * stride, the CPU from the thread's rseq area
	 * (%fs:rseq_cpu_off, where not 0) or rdpid; without either, CPU 0's */
	uint64_t counter;
	uint32_t stride;
	uint64_t self;		/* ... counted only where the self word there is
				 * not 0 (a forked child not followed); 0: always */
	bool have_rdpid;
	/* the thread's struct rseq: its cpu_id at %fs:rseq_cpu_off, rseq_cs
	 * 4 bytes on; the signature its abort handlers follow. Where set, a
	 * count-only probe increments its CPU's counter in a restartable
	 * sequence: no lock (one costs 5 ns on this machine's CPU) */
	uint32_t rseq_cpu_off, rseq_sig;
	/* the tracer's life (inject_shared.h): a probe that does not call the
	 * agent (count-only, objtrace's test) tests INJ_OWNER_DIED in the
	 * owner word first, and when it is set calls hit(regs, site), which
	 * lets go, unless the process's let-go state (at letgo) says it is
	 * done: then the probe passes through */
	uint64_t owner, letgo;
};

/* Encode the probe part of a trampoline at spec->probe_at into out:
 * everything between the relocated instructions before and after the probe.
 * Returns its length or -errno. */
ssize_t tramp_encode_probe(const struct tramp_spec *spec, uint8_t *out, size_t cap);

#endif
