/* x86-64 patch planning for the inject engine: where a 5-byte `jmp rel32`
 * (or a springboard) can go over whole instructions of a function, checked
 * against the function's analysis (analyze.h): no branch lands inside the
 * displaced bytes, and each of them can be relocated (reloc.h). Addresses
 * as in analyze.h. */
#ifndef USC_X86_PLAN_H
#define USC_X86_PLAN_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "x86/analyze.h"
#include "x86/reloc.h"

/* A planned patch, displacing whole instructions [addr, addr+len) that no
 * branch enters but at addr. The probe fires at addr+probe_off (0 for an
 * entry probe; the return instruction's offset for a return site). The
 * trampoline runs: relocated [addr, addr+probe_off), the probe, relocated
 * [addr+probe_off, addr+len), then jumps back to addr+len (not needed when
 * the last instruction is a ret or a jmp, but harmless).
 *
 * spring == 0: the classic patch, len >= 5: a `jmp rel32` to the trampoline
 * written at addr (x86_encode_jmp(addr, tramp)).
 *
 * spring != 0 (return sites only, whose block is shorter than 5 bytes):
 * len >= 2, and spring is a 5-byte slot of dead alignment filler after the
 * end of the function (or of its cold part holding the return), within a
 * jmp rel8 of addr. The engine writes, in this order:
 *   1. at spring, 5 bytes: a `jmp rel32` to the trampoline
 *      (x86_encode_jmp(spring, tramp); the trampoline must be within rel32
 *      of spring, as of addr for a classic patch);
 *   2. at addr, 2 bytes: `EB rel8` to spring (x86_encode_jmp8(addr, spring)).
 * The slot is never run before step 2, so step 1 needs no care; step 2
 * overwrites only [addr, addr+2), so only a thread stopped at addr+1 could
 * see a torn instruction (bytes [addr+2, addr+len) are displaced but left
 * as they were, and run correctly if a thread was stopped among them).
 * Removal restores both: the 2 bytes at addr first, then the slot's 5 bytes
 * once no thread can be between the jmp rel8 and the jmp rel32 (or leave
 * the slot: it is dead filler either way). The slots of a function's return
 * sites never overlap one another, nor any other patch the planner gives
 * (x86_plan_return assigns them from the function alone: the same slot for
 * a site whichever other sites are asked for), nor another function's bytes. */
struct x86_patch {
	uint64_t addr;
	uint32_t len;
	uint32_t probe_off;
	uint64_t spring;	/* 0, or the slot of the springboard's jmp rel32 */
};

/* Plan an entry/offset probe at `addr` inside the function made of
 * `regions` (regions[0] is the hot body, the others its NAME.cold parts).
 * A leading endbr64 at the function entry stays in place: the patch goes
 * after it (addr+4), so indirect branches still land on endbr64. rd may be
 * NULL; then a function with a jump table is refused.
 * Returns 0, or -ENOTSUP with *why naming the rule that refuses (a string
 * valid until this thread's next call), -ENOEXEC for undecodable code,
 * -EINVAL when addr is not an instruction boundary of the regions, -ENOMEM. */
int x86_plan_probe(const struct x86_region *regions, size_t nregions,
		   const struct x86_reader *rd, uint64_t addr,
		   struct x86_patch *out, const char **why);

/* Does a branch of the function land at addr (an unknown jump table: it
 * may)? 1, 0, or -ENOMEM. For a patch placed after an instruction that
 * stays in place (the inject engine's plan_pre): a branch to the patch's
 * start would run the probe where the site did not run. */
int x86_branch_target(const struct x86_region *regions, size_t nregions,
		      const struct x86_reader *rd, uint64_t addr);

/* Plan a patch for a return site (a ret, or a tail-call jmp, at ret_addr, as
 * x86_return_sites finds them): displace the ret plus as many preceding
 * instructions of its block as needed to reach 5 bytes, or else whole NOPs
 * after it up to 5 bytes, or else (its block is 2 to 4 bytes) as many as
 * needed to reach 2 bytes, with a springboard (out->spring != 0, see struct
 * x86_patch). Same returns. */
int x86_plan_return(const struct x86_region *regions, size_t nregions,
		    const struct x86_reader *rd, uint64_t ret_addr,
		    struct x86_patch *out, const char **why);

/* Whether the inject engine can probe a function: its entry (x86_plan_probe
 * at regions[0].addr) and all its returns (x86_return_sites, then
 * x86_plan_return at each site). */
struct x86_patchability {
	int entry;		/* 0 or -errno */
	int ret;		/* 0 or -errno */
	size_t nret;		/* return sites found */
	size_t nspring;		/* of those, planned with a springboard (until one is refused) */
	/* the rule that refused, a static string (NULL when ok): for counting */
	const char *entry_rule, *ret_rule;
	/* the rule with its details (addresses) */
	char entry_why[192], ret_why[192];
};

/* Fills *out; returns 0, or -ENOMEM (other failures go in *out). */
int x86_func_patchable(const struct x86_region *regions, size_t nregions,
		       const struct x86_reader *rd, struct x86_patchability *out);

#endif
