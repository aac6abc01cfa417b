/* x86-64 instruction decoding helpers (Zydis). */
#ifndef USC_X86_INSN_H
#define USC_X86_INSN_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Decode code[0..len) linearly from its start (a function's entry, loaded at
 * runtime address `addr`) and check that byte offset `off` starts an
 * instruction. Returns 0 if it does; -EINVAL if it falls inside one, with
 * *prev and *next set to the boundaries around it; -ENOEXEC if decoding failed
 * before reaching off. */
int x86_check_boundary(const uint8_t *code, size_t len, uint64_t addr,
		       uint64_t off, uint64_t *prev, uint64_t *next);

enum x86_ret_kind { X86_RET, X86_TAIL_JMP };

struct x86_ret_site {
	uint64_t addr;		/* address of the ret or jmp */
	enum x86_ret_kind kind;
};

/* One piece of a function: its hot body, or a fragment the compiler split
 * off (GCC's NAME.cold), which belongs to the same function. */
struct x86_region {
	const uint8_t *code;
	size_t len;
	uint64_t addr;
};

/* Every place control leaves the function (all its regions) for its
 * caller: each `ret`, and each direct `jmp` whose target is in none of the
 * regions (a tail call). Decodes every region whole. Returns the count
 * (> 0) with *out malloc'd, or:
 *   -ENOTSUP  a site cannot be known: an indirect jmp (a jump table or a
 *             tail call through a pointer) or a conditional jump out of the
 *             function; *why says which, and where;
 *   -ENOENT   no return site: the function never returns;
 *   -ENOEXEC  undecodable bytes. */
ssize_t x86_return_sites(const struct x86_region *regions, size_t nregions,
			 struct x86_ret_site **out, const char **why);

#endif
