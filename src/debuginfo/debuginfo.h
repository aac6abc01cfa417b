/* DWARF front end: C expressions over a function's variables -> fetch programs.
 *
 * A module is one ELF file's debug info, found through libdwfl: in the file
 * itself, or in a separate debug file by build-id or .gnu_debuglink. All
 * addresses in and out are link-time addresses of that file. */
#ifndef USC_DEBUGINFO_DEBUGINFO_H
#define USC_DEBUGINFO_DEBUGINFO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "probe/probe.h"

struct debuginfo;

/* Open the debug info of the ELF file at path; root (or NULL: the host's)
 * is the root path lies under, whose debug directories are searched
 * instead of the host's. 0, -ENODATA (no DWARF anywhere), -ENOENT / -EIO
 * (cannot read the file), -ENOMEM. */
int debuginfo_open(const char *path, const char *root, struct debuginfo **out);
void debuginfo_close(struct debuginfo *m);

/* Where a probe on the function starting at func_vaddr sees its parameters
 * in their home locations: the DW_LNS prologue_end row if the function has
 * one, else the second line-table address of the function (as perf probe and
 * gdb do); func_vaddr itself when there is no line info. Always inside the
 * function. 0 or -errno. */
int debuginfo_after_prologue(struct debuginfo *m, uint64_t func_vaddr, uint64_t *pc);

struct debuginfo_error {
	size_t pos;		/* byte offset into the expression */
	char msg[160];
};

/* Lower the C expression expr[0..len) as seen at pc:
 *   ['*'] NAME { '->' FIELD | '.' FIELD | '[' CONST ']' }
 * NAME is a parameter or local of the scopes at pc, else a global. Fills
 * out->type, out->ninsn and out->insn (name, type_given and the rest are
 * left for the caller). The type comes from DWARF: char * and char[N] are
 * strings, integers/enums sN/uN of their size (bool u8), pointers and other
 * 8-byte values x64, bitfields USC_T_BITFIELD with FOP_MOD_BF. Enums also get
 * out->show USC_SHOW_ENUM and out->enums (valid while m is open), bools
 * USC_SHOW_BOOL.
 * 0; -ENOENT (no such variable or member); -ENODATA (the variable is
 * optimized out at pc: no location there); -EINVAL
 * (syntax, wrong operator for the type, a struct/array left without a
 * member, a DWARF location form not supported); -E2BIG (program too long).
 * Errors fill *err (if not NULL) and are not logged. */
int debuginfo_lower_expr(struct debuginfo *m, uint64_t pc, const char *expr, size_t len,
		     struct usc_fetcharg *out, struct debuginfo_error *err);

/* As debuginfo_lower_expr, into out[0..max), but an expression that names a
 * struct or union (no member chosen) lowers to its members, one level deep:
 * out[i].name "GROUP__MEMBER", group_len strlen(GROUP), group_first on
 * out[0]; a char array member is a string, a nested struct/union or other
 * array a placeholder (USC_SHOW_STRUCT / USC_SHOW_ARRAY, an immediate
 * program); members uscope cannot fetch are left out. A scalar fills out[0]
 * alone with its name untouched (group NULL: as debuginfo_lower_expr, a struct
 * is an error, 0 for success). The count; or -errno as debuginfo_lower_expr,
 * -E2BIG with more members than max. On -ENODATA out[0] is still filled: an
 * immediate program with optimized_out set, its name untouched. */
int debuginfo_lower_var(struct debuginfo *m, uint64_t pc, const char *expr, size_t len,
		    const char *group, struct usc_fetcharg *out, unsigned max,
		    struct debuginfo_error *err);

/* Every formal parameter of the innermost function at pc, lowered as by
 * debuginfo_lower_var and named after it (out[i].name; a struct by value in
 * memory as its members). A parameter optimized out at pc is kept, with
 * optimized_out set. Parameters that cannot be fetched (an unsupported
 * location, a struct in registers) are skipped with a log_warn. The count,
 * or -errno (-ENOENT: no function at pc, -ENOSPC: more than max parameters,
 * the first ones filled). */
int debuginfo_params(struct debuginfo *m, uint64_t pc, struct usc_fetcharg *out, unsigned max);

/* The declaration of the function whose entry is func_vaddr: its source file
 * (as the debug info names it; valid while m is open) and line. 0 or -ENOENT. */
int debuginfo_func_line(struct debuginfo *m, uint64_t func_vaddr, const char **file,
		    unsigned *line);

/* The link-time addresses of FILE:LINE (FILE may be a trailing part of the
 * path the debug info records), sorted and unique: with all, every
 * statement (is_stmt row) of the line; else, as gdb's break, the lowest
 * address of the line in each innermost scope (lexical block, inlined copy,
 * function), so that a probe fires once per execution of the line.
 * Returns the count (0: no code at that line, with *nearest the next line
 * that has code, or 0), *out malloc'd; or -errno. */
ssize_t debuginfo_line_addrs(struct debuginfo *m, const char *file, unsigned line, bool all,
			 uint64_t **out, unsigned *nearest);

/* The program of the value the function at func_vaddr returns, typed from
 * its DWARF return type (integers and enums by size and sign, char * as a
 * string, other pointers x64), loading FOP_RETVAL. -ENOENT (void, unknown),
 * -ENOTSUP (a float or struct: not in %rax). */
int debuginfo_func_rettype(struct debuginfo *m, uint64_t func_vaddr, struct usc_fetcharg *out);

/* The SysV integer argument registers (bit 0 rdi ... bit 5 r9) in which the
 * function at func_vaddr receives a pointer, by its parameters' types: 0
 * and *mask. -ENOENT when the debug info has no such function; -ENOTSUP
 * when its registers cannot be told from its parameters (a struct or a
 * 16-byte integer by value, a variadic function, a struct returned through
 * %rdi, Go's ABI, a convention the compiler changed): then any register
 * may hold one. */
int debuginfo_param_ptr_regs(struct debuginfo *m, uint64_t func_vaddr, uint8_t *mask);

/* The lines of the function at func_vaddr..+size that begin a statement, in
 * the function's own source file (*file), sorted and unique. Count or -errno. */
ssize_t debuginfo_func_lines(struct debuginfo *m, uint64_t func_vaddr, uint64_t size,
			 const char **file, unsigned **out);

/* The parameters and locals visible at pc, innermost scope first, with their
 * C types ("struct req *"). 0 or -ENOENT. */
int debuginfo_vars_at(struct debuginfo *m, uint64_t pc,
		  void (*fn)(const char *name, const char *type, bool param, void *ctx),
		  void *ctx);

/* The source at link-time address pc: the function, and the functions
 * inlined into it there, innermost first (out[0] the innermost inlined
 * copy, the last the function itself, not inlined). name is demangled
 * (owned is then the caller's to free) or the DWARF name; file and line
 * are where that level runs at pc (the line table's for the innermost, the
 * inlined call's for the others), NULL/0 when unknown; file and name point
 * into the debug info (valid until debuginfo_close). The count, 0 when no
 * debug info covers pc. */
struct debuginfo_scope {
	const char *name;
	char *owned;
	const char *file;
	unsigned line;
	bool inlined;
	bool has_off;		/* the function itself: pc - its entry is off */
	uint64_t off;
};
ssize_t debuginfo_pc_scopes(struct debuginfo *m, uint64_t pc, struct debuginfo_scope *out,
			size_t max);
/* The byte offset of member in the struct named type (its first complete
 * definition in any unit: "runtime.g", "goid"). 0 or -ENOENT. */
int debuginfo_struct_member_offset(struct debuginfo *m, const char *type, const char *member,
			       uint64_t *off);

#endif
