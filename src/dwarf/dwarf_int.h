/* The DWARF front end's private parts, shared by its files. */
#ifndef USC_DWARF_DWARF_INT_H
#define USC_DWARF_DWARF_INT_H

#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>

struct inline_index;
struct enum_ent;

struct dwarf_module {
	Dwfl *dwfl;
	Dwfl_Module *mod;
	Dwarf *dw;
	Dwarf_Addr bias;	/* Dwfl address = link-time address + bias */
	struct inline_index *inl;	/* built on first use (inline.c) */
	struct enum_ent **enums;	/* enum tables made for output (dwarf.c) */
	size_t nenums;
};

void inline_index_free(struct dwarf_module *m);

#endif
