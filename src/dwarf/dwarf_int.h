/* The DWARF front end's private parts, shared by its files (each file is
 * one pass; the functions shared between them are debuginfo_*).
 *
 * Everything is done in link-time addresses. libdwfl reports an offline
 * module at some bias (0 for ET_EXEC and ET_DYN alike, in practice); the
 * Dwfl calls take link + bias, the Dwarf calls take link-time addresses and
 * the CFI tables their own bias. */
#ifndef USC_DWARF_DWARF_INT_H
#define USC_DWARF_DWARF_INT_H

#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <stdbool.h>
#include <stdint.h>

struct inline_index;
struct enum_ent;
struct cu_range;

struct dwarf_module {
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
bool debuginfo_cu_at(struct dwarf_module *m, uint64_t pc, Dwarf_Die *cu, Dwarf_Addr *dwpc);

/* ---- inline.c: inlined copies ------------------------------------------- */

/* Free the index of inlined copies (dwarf_close). */
void debuginfo_inline_free(struct dwarf_module *m);

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
struct names {
	char buf[120];
	unsigned n;
};

void debuginfo_names_add(struct names *nm, const char *name);

/* ---- types.c: types and members ----------------------------------------- */

struct usc_enum;

/* The enumerators of the enum type t (stripped), for output: made once per
 * type and kept with the module. NULL if it has none or memory is short. */
const struct usc_enum *debuginfo_enum_table(struct dwarf_module *m, Dwarf_Die *t);
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
			   unsigned *bit_size, unsigned *bit_pos, struct names *nm);
/* A C type name for DIE t ("const char *", "struct req *", "int[8]"); has
 * false: void. */
void debuginfo_type_name(Dwarf_Die *t, bool has, char *buf, size_t len);

#endif
