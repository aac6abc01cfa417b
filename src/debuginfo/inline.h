/* Inlined copies of functions (DW_TAG_inlined_subroutine), as perf probe
 * finds them: in every compilation unit, the copies whose abstract origin
 * is the function (same name, or linkage name, and declaration). */
#ifndef USC_DEBUGINFO_INLINE_H
#define USC_DEBUGINFO_INLINE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct debuginfo;

struct debuginfo_inline_site {
	uint64_t pc;		/* link-time entry of the copy (DW_AT_entry_pc, else
				 * its lowest address) */
	const char *call_file;	/* where it was inlined (DW_AT_call_file), or NULL */
	unsigned call_line;
};

/* The inlined copies of the function whose out-of-line entry is func_vaddr,
 * sorted by pc, unique, without func_vaddr itself, and without the copies
 * that sit in the function's own code (in its out-of-line body, which
 * aliases share, or in another copy of it): those are not calls. With func_vaddr 0, the
 * copies of every function named name (the C name, or a C++ name as
 * "ns::Class::method", or with its parameters) - a function that has no
 * out-of-line copy. Returns the count (*out malloc'd, strings valid while m
 * is open), -ENOENT (no debug info for that function), -ENOMEM. */
ssize_t debuginfo_inline_sites(struct debuginfo *m, uint64_t func_vaddr, const char *name,
			   struct debuginfo_inline_site **out);

#endif
