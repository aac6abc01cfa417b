/* The DWARF front end's private parts, shared by its files (each file is
 * one pass; the functions shared between them are debuginfo_*). Each file
 * calls only files listed after it:
 *   module.c        debuginfo_open, debuginfo_close (frees what the others cache)
 *   lower.c         an expression to a fetch program: debuginfo_lower_expr,
 *                   debuginfo_lower_var, debuginfo_params
 *   cexpr.c         the C expression, step by step, into a struct debuginfo_lval
 *   vars.c          variables by name; debuginfo_vars_at
 *   location.c      where a variable lives at a pc
 *   src/debuginfo/go.c  Go's values in several words, Go's results
 *   lval.c          errors and dereferences on a struct debuginfo_lval
 *   types.c         enums, members, C type names; debuginfo_func_rettype,
 *                   debuginfo_struct_member_offset
 *   lines.c         line tables: debuginfo_after_prologue, debuginfo_func_line,
 *                   debuginfo_line_addrs, debuginfo_func_lines
 *   scopes.c        debuginfo_pc_scopes
 *   inline.c        debuginfo_inline_sites
 *   die.c           small DIE helpers
 *   units.c         the compilation unit at an address
 *
 * Everything is done in link-time addresses. libdwfl reports an offline
 * module at some bias (0 for ET_EXEC and ET_DYN alike, in practice); the
 * Dwfl calls take link + bias, the Dwarf calls take link-time addresses and
 * the CFI tables their own bias. */
#ifndef USC_DEBUGINFO_DWARF_INT_H
#define USC_DEBUGINFO_DWARF_INT_H

#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <stdbool.h>
#include <stdint.h>

#include "debuginfo/debuginfo.h"
#include "probe/fetch.h"

struct inline_index;
struct enum_ent;
struct cu_range;

struct debuginfo_root;

struct debuginfo {
	struct debuginfo_root *root;	/* under another root: its search (module.c) */
	Dwfl *dwfl;
	Dwfl_Module *mod;
	Dwarf *dw;
	Dwarf_Addr bias;	/* Dwfl address = link-time address + bias */
	struct inline_index *inl;	/* built on first use (inline.c) */
	struct enum_ent **enums;	/* enum tables made for output (types.c) */
	size_t nenums;
	/* The compilation units' address ranges, sorted, built on first use
	 * when the file has no .debug_aranges (Go, clang's default; units.c) */
	struct cu_range *cur;
	size_t ncur;
	bool cur_built;
};

/* ---- units.c: compilation units by address ------------------------------ */

/* The compilation unit whose code holds the link-time address pc: *cu its
 * DIE, *dwpc the pc in the unit's own addresses. libdwfl answers through
 * .debug_aranges; without them (Go writes none, nor does clang by default)
 * the units' own DW_AT_ranges or DW_AT_low_pc/high_pc are searched. */
bool debuginfo_cu_at(struct debuginfo *m, uint64_t pc, Dwarf_Die *cu, Dwarf_Addr *dwpc);

/* ---- inline.c: inlined copies ------------------------------------------- */

/* Free the index of inlined copies (debuginfo_close). */
void debuginfo_inline_free(struct debuginfo *m);

/* ---- die.c: small DIE helpers ------------------------------------------- */

/* The DIE's DW_AT_name (through DW_AT_abstract_origin/specification), or
 * NULL. */
const char *debuginfo_die_name(Dwarf_Die *die);
/* The DIE's DW_AT_type; false for none (void). */
bool debuginfo_die_type(Dwarf_Die *die, Dwarf_Die *type);
/* Strip typedefs and qualifiers: false for void. */
bool debuginfo_strip_type(Dwarf_Die *t);
/* A 1-byte character type (signed or unsigned char). */
bool debuginfo_is_char(Dwarf_Die *t);
/* A struct, union or class tag. */
bool debuginfo_is_aggregate(int tag);

/* The names visible where a lookup failed, for its error message: up to 8,
 * comma-separated, each once. */
struct debuginfo_names {
	char buf[120];
	unsigned n;
};

void debuginfo_names_add(struct debuginfo_names *nm, const char *name);

/* ---- types.c: types and members ----------------------------------------- */

/* The enumerators of the enum type t (stripped), for output: made once per
 * type and kept with the module. NULL if it has none or memory is short. */
const struct usc_enum *debuginfo_enum_table(struct debuginfo *m, Dwarf_Die *t);
/* A member's byte offset in its struct; false for a form uscope cannot read. */
bool debuginfo_member_loc(Dwarf_Die *mem, Dwarf_Word *loc);
/* A member at byte loc: its offset, or for a bitfield its geometry in bits
 * from the struct's start (and *off 0). */
bool debuginfo_member_geom(Dwarf_Die *mem, Dwarf_Word loc, int64_t *off, unsigned *bit_size,
			   unsigned *bit_pos);
/* The member named name of the struct/union type t, with its byte offset and
 * bitfield geometry; recursing into anonymous members. The other members'
 * names go to nm (if not NULL) for an error message. */
bool debuginfo_find_member(Dwarf_Die *t, const char *name, Dwarf_Die *mem, int64_t *off,
			   unsigned *bit_size, unsigned *bit_pos, struct debuginfo_names *nm);
/* A C type name for DIE t ("const char *", "struct req *", "int[8]"); has
 * false: void. */
void debuginfo_type_name(Dwarf_Die *t, bool has, char *buf, size_t len);

/* ---- the lowering state (lower.c, cexpr.c, location.c, src/debuginfo/go.c) -- */

enum lv_kind { LV_REG, LV_MEM, LV_CONST };

/* Where the object the expression names so far lives: in a register
 * (prog = [REG]), in memory at val + off (prog = load + derefs), or a
 * constant. */
struct debuginfo_lval {
	enum lv_kind kind;
	struct fetch_insn prog[USC_FETCH_MAX];
	unsigned n;
	int64_t off;
	int64_t cval;
	Dwarf_Die type;		/* stripped; valid when has_type */
	bool has_type;
	/* a bitfield member: bit_size bits at bit_pos from val + off */
	unsigned bit_size, bit_pos;
	/* a value in pieces, a register each (Go's register ABI): word k of
	 * the value is in piece_reg[k] (enum usc_reg) */
	unsigned npieces;
	uint8_t piece_reg[8];
	const char *tname;	/* the type's name as declared ("error"), or NULL */
};

/* One lowering: the expression, where it is seen and the scopes there. */
struct debuginfo_lower {
	struct debuginfo *m;
	uint64_t pc;		/* link-time */
	Dwarf_Addr dwpc;	/* the same in the CU's addresses */
	Dwarf_Die *scopes;	/* innermost first, freed by the caller */
	int nscopes;
	Dwarf_Die cudie;
	bool has_cu;
	Dwarf_Die frame_func;	/* scope_func's answer inside an inlined copy */
	const char *expr;
	size_t len;
	struct debuginfo_error *err;
};

/* ---- lval.c: errors and steps on an lval -------------------------------- */

/* Fill c->err (if not NULL) with pos and the message; return ret. */
__attribute__((format(printf, 4, 5)))
int debuginfo_fail(struct debuginfo_lower *c, int ret, size_t pos, const char *fmt, ...);
/* The memory offset to use for the next access, folding an offset into a
 * bare FOP_VADDR load (whose renderings mean "the memory at" already). */
int64_t debuginfo_access_off(struct debuginfo_lval *lv);
/* The object lv points to (lv has pointer type): its memory; pos for
 * errors. */
int debuginfo_deref(struct debuginfo_lower *c, struct debuginfo_lval *lv, size_t pos);

/* ---- location.c: where a variable lives ---------------------------------- */

/* The location of the variable DIE at c->pc into lv (name and pos for
 * errors). 0; -ENODATA (optimized out there); -EINVAL (a location uscope
 * cannot read). */
int debuginfo_var_location(struct debuginfo_lower *c, Dwarf_Die *var, const char *name, size_t pos,
			   struct debuginfo_lval *lv);

/* ---- vars.c: variables by name ------------------------------------------ */

/* The variable named name visible at c->pc: a parameter or local of the
 * scopes there, else a global. 0 or -ENOENT (c->err lists what is
 * visible). */
int debuginfo_find_var(struct debuginfo_lower *c, const char *name, Dwarf_Die *out);

/* ---- cexpr.c: the C expression ------------------------------------------ */

/* Where the object c->expr names lives, and its type (into *lvp): starting
 * from var if not NULL, else from the variable the expression names.
 * *pos0: where the expression starts, for errors. 0 or -errno (c->err). */
int debuginfo_lower_lval(struct debuginfo_lower *c, Dwarf_Die *var, struct debuginfo_lval *lvp,
			 size_t *pos0);

#endif
