/* The shape of a function in an ELF file: the regions of code that make it
 * up, where it returns, and whether the inject engine can patch it. The one
 * place that decides what a function is, for resolve (return probes, tail
 * calls), the inject engine's planner and `list --patchable` alike.
 *
 * A function is its symbol's bytes, or in a stripped file the range of the
 * call-frame description (FDE) that covers it; plus the parts the compiler
 * split off it (GCC's NAME.cold, NAME.cold.N), found by name, or in a
 * stripped file as code its jumps reach whose FDE starts mid-function. All
 * addresses are link-time addresses of the file. */
#ifndef USC_RESOLVE_SHAPE_H
#define USC_RESOLVE_SHAPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "objfile/objfile.h"
#include "x86/plan.h"

/* The most regions a function has here: its body and 7 cold parts. */
#define SHAPE_MAX_REGIONS 8

struct func_shape {
	uint64_t entry;			/* where the function starts */
	const struct objfile_sym *sym;	/* its symbol; NULL: known by its FDE only */
	size_t n;
	/* rg[0] is the body, then the parts split off it; each region's code
	 * is read from the file (malloc'd) */
	struct x86_region rg[SHAPE_MAX_REGIONS];
};

/* Is fn a part split off a function (NAME.cold, NAME.cold.N), not a
 * function of its own? */
bool shape_is_part(const struct objfile_sym *fn);

/* The function fn. A NAME.cold symbol is a part of NAME: its shape is
 * NAME's. 0, -EINVAL (fn has no size), -errno (a read error). */
int shape_of(const struct objfile *ef, const struct objfile_sym *fn, struct func_shape *out);

/* The function whose code holds vaddr: by its symbol, or (no symbol covers
 * vaddr, as in a stripped file) by the FDE that covers vaddr: a function's
 * if that FDE starts as a function does; else a part split off a function,
 * whose function is the one its jumps go back into. -ENOENT: no function
 * is known around vaddr (no symbol, no FDE, or a part whose function cannot
 * be found). */
int shape_at(const struct objfile *ef, uint64_t vaddr, struct func_shape *out);

void shape_free(struct func_shape *s);

/* Reads the file's read-only bytes (jump tables) and bounds the filler after
 * a function (springboard slots): see struct x86_reader. ef must outlive it. */
struct x86_reader shape_reader(const struct objfile *ef);

/* x86_return_sites over the function, jump tables read from the file. */
ssize_t shape_returns(const struct objfile *ef, const struct func_shape *s,
		      struct x86_ret_site **out, const char **why);

/* x86_plan_probe / x86_plan_return over the function. */
int shape_plan_probe(const struct objfile *ef, const struct func_shape *s, uint64_t vaddr,
		     struct x86_patch *out, const char **why);
int shape_plan_return(const struct objfile *ef, const struct func_shape *s, uint64_t ret_addr,
		      struct x86_patch *out, const char **why);

/* x86_branch_target over the function. */
int shape_branch_target(const struct objfile *ef, const struct func_shape *s, uint64_t vaddr);

/* x86_func_patchable on fn. 0 or -errno (-ENOMEM, a read error). */
int shape_patchable(const struct objfile *ef, const struct objfile_sym *fn,
		    struct x86_patchability *out);

#endif
