/* x86-64 code relocation for the inject engine: plan a 5-byte `jmp rel32`
 * patch over whole instructions, and move the instructions it displaces into
 * a trampoline (Zydis decodes and encodes).
 *
 * Addresses: the regions, the patch and the reader all use one address space
 * (link-time or runtime, the caller's choice), except x86_relocate's `to`,
 * which is where the copy will run. */
#ifndef USC_X86_RELOC_H
#define USC_X86_RELOC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "x86/insn.h"

/* The size of the patch: a `jmp rel32`. */
#define X86_JMP_LEN 5
/* The size of a springboard's first jump: a `jmp rel8` (EB rel8). */
#define X86_JMP8_LEN 2

/* The most bytes x86_relocate writes for len input bytes: a jcc rel8 (2
 * bytes) becomes a jcc rel32 (6), at most 3x; a call becomes a push of its
 * return address (at most 13 bytes) and a jmp (at most 15), once, as the last
 * instruction. Add X86_JMP_LEN for the jump back. */
#define X86_RELOC_MAX(len) (3 * (size_t)(len) + 28)

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

/* Reads memory outside the code regions: jump tables (.rodata). len bytes
 * at vaddr (the regions' address space) into buf; 0 or -errno. The inject
 * engine can pass one backed by the ELF file (elf_read). */
struct x86_reader {
	int (*read)(void *ctx, uint64_t vaddr, void *buf, size_t len);
	void *ctx;
	/* Optional (may be NULL): how many bytes after `end`, the end of a
	 * region, are alignment filler that no code runs and nothing branches
	 * to, up to (not into) the next function, the next symbol or the end
	 * of the section. A return at the very end of its region whose block
	 * is too short (or is a branch target) may then displace whole NOPs of
	 * that filler: they are relocated as NOPs and never reached. Returns
	 * whose block is shorter still get springboard slots there (see
	 * struct x86_patch); only the whole NOPs and int3s at its start are
	 * used, read through `read`. */
	size_t (*filler)(void *ctx, uint64_t end);
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

/* Plan a patch for a return site (a ret, or a tail-call jmp, at ret_addr, as
 * x86_return_sites finds them): displace the ret plus as many preceding
 * instructions of its block as needed to reach 5 bytes, or else whole NOPs
 * after it up to 5 bytes, or else (its block is 2 to 4 bytes) as many as
 * needed to reach 2 bytes, with a springboard (out->spring != 0, see struct
 * x86_patch). Same returns. */
int x86_plan_return(const struct x86_region *regions, size_t nregions,
		    const struct x86_reader *rd, uint64_t ret_addr,
		    struct x86_patch *out, const char **why);

/* Relocate the instructions code[0..len) (loaded at `from`) to run at `to`.
 * Writes at most cap bytes to out (X86_RELOC_MAX(len) always suffices);
 * returns bytes written or -errno: -ENOTSUP with *why for an instruction
 * that cannot be relocated (not on the allow-list, or a call/syscall that is
 * not the last instruction), -ERANGE if a rel32/disp32 no longer reaches,
 * -ENOEXEC for undecodable or truncated code, -ENOSPC if cap is too small.
 * No jmp back is appended. */
ssize_t x86_relocate(const uint8_t *code, size_t len, uint64_t from, uint64_t to,
		     uint8_t *out, size_t cap, const char **why);

/* Encode a jmp rel32 from `from` to `to` into out[5]; 0, or -ERANGE if too
 * far. */
int x86_encode_jmp(uint64_t from, uint64_t to, uint8_t out[5]);

/* Encode a jmp rel8 (EB rel8) from `from` to `to` into out[2]; 0, or
 * -ERANGE if to - (from + 2) is outside [-128, 127]. */
int x86_encode_jmp8(uint64_t from, uint64_t to, uint8_t out[2]);

/* x86_return_sites (insn.h), with jump tables resolved through rd (may be
 * NULL): the jmp of a jump table is no return site, and any other indirect
 * jmp is taken for a tail call through a pointer (X86_TAIL_JMP). Refuses
 * (-ENOTSUP) a jump table whose targets are unknown and a conditional jump
 * out of the function; -ENOENT: no return site. */
ssize_t x86_return_sites_rd(const struct x86_region *regions, size_t nregions,
			    const struct x86_reader *rd, struct x86_ret_site **out,
			    const char **why);

/* The targets of the direct jmp and jcc instructions of the regions that
 * are in none of them (tail calls, or parts of the function not known yet:
 * a stripped file's NAME.cold), up to max, into targets. Returns the count,
 * or -ENOEXEC, -ENOMEM. */
ssize_t x86_branches_out(const struct x86_region *regions, size_t nregions,
			 uint64_t *targets, size_t max);

/* Whether the inject engine can probe a function: its entry (x86_plan_probe
 * at regions[0].addr) and all its returns (x86_return_sites_rd, then
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
