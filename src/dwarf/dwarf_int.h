/* The DWARF front end's private parts, shared by its files. */
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
	struct enum_ent **enums;	/* enum tables made for output (dwarf.c) */
	size_t nenums;
	/* The compilation units' address ranges, sorted, built on first use
	 * when the file has no .debug_aranges (Go, clang's default) */
	struct cu_range *cur;
	size_t ncur;
	bool cur_built;
};

void inline_index_free(struct dwarf_module *m);

/* The compilation unit whose code holds the link-time address pc: *cu its
 * DIE, *dwpc the pc in the unit's own addresses. libdwfl answers through
 * .debug_aranges; without them (Go writes none, nor does clang by default)
 * the units' own DW_AT_ranges or DW_AT_low_pc/high_pc are searched. */
bool dwmod_cu_at(struct dwarf_module *m, uint64_t pc, Dwarf_Die *cu, Dwarf_Addr *dwpc);

#endif
