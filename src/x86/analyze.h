/* x86-64 function analysis (Zydis): the shape of a function's code.
 *
 * A function is one or more regions (its body, and the parts the compiler
 * split off it); they are decoded whole, with jump tables read through a
 * reader, to find where control leaves the function (its return sites) and
 * where its branches land (plan.h checks patches against those). Addresses
 * are the caller's choice (link-time or runtime), the same for the regions
 * and the reader. */
#ifndef USC_X86_ANALYZE_H
#define USC_X86_ANALYZE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* One piece of a function: its hot body, or a fragment the compiler split
 * off (GCC's NAME.cold), which belongs to the same function. */
struct x86_region {
	const uint8_t *code;
	size_t len;
	uint64_t addr;
};

enum x86_ret_kind { X86_RET, X86_TAIL_JMP };

struct x86_ret_site {
	uint64_t addr;		/* address of the ret or jmp */
	enum x86_ret_kind kind;
	uint64_t target;	/* X86_TAIL_JMP: the callee's address for a direct
				 * jmp; 0 for a jmp through a pointer */
};

/* Reads memory outside the code regions: jump tables (.rodata). len bytes
 * at vaddr (the regions' address space) into buf; 0 or -errno. The inject
 * engine can pass one backed by the ELF file (objfile_read). */
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

/* Every place control leaves the function (all its regions) for its
 * caller: each `ret`, each direct `jmp` whose target is in none of the
 * regions (a tail call), and each indirect jmp that is not a jump table's
 * (a tail call through a pointer: X86_TAIL_JMP with target 0). Jump tables
 * are resolved through rd (may be NULL: then a jump table is refused).
 * Returns the count (> 0) with *out malloc'd, or:
 *   -ENOTSUP  a site cannot be known: a jump table whose targets are
 *             unknown, or a conditional jump out of the function; *why says
 *             which, and where (a string valid until this thread's next call);
 *   -ENOENT   no return site: the function never returns;
 *   -ENOEXEC  undecodable bytes. */
ssize_t x86_return_sites(const struct x86_region *regions, size_t nregions,
			 const struct x86_reader *rd, struct x86_ret_site **out,
			 const char **why);

/* The targets of the direct jmp and jcc instructions of the regions that
 * are in none of them (tail calls, or parts of the function not known yet:
 * a stripped file's NAME.cold), up to max, into targets. Returns the count,
 * or -ENOEXEC, -ENOMEM. */
ssize_t x86_branches_out(const struct x86_region *regions, size_t nregions,
			 uint64_t *targets, size_t max);

#endif
