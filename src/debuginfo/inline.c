/* Inlined copies of functions: one pass over every compilation unit's DIEs
 * collects the DW_TAG_inlined_subroutine entries with the identity of the
 * function each copies (its name or linkage name and declaration, through
 * DW_AT_abstract_origin and DW_AT_specification); lookups compare those. */
#include <dwarf.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/grow.h"
#include "debuginfo/debuginfo_int.h"
#include "debuginfo/inline.h"
#include "objfile/demangle.h"

/* Who a subprogram or an inlined copy is. */
struct func_id {
	const char *name;	/* DW_AT_name */
	const char *linkage;	/* DW_AT_linkage_name (C++), or NULL */
	const char *decl_file;
	int decl_line;
};

struct inl_ent {
	struct func_id id;
	struct debuginfo_inline_site site;
};

struct inline_index {
	struct inl_ent *v;
	size_t n, cap;
};

void debuginfo_inline_free(struct debuginfo *m)
{
	if (!m->inl)
		return;
	free(m->inl->v);
	free(m->inl);
	m->inl = NULL;
}

static const char *attr_str(Dwarf_Die *die, unsigned name)
{
	Dwarf_Attribute a;

	return dwarf_attr_integrate(die, name, &a) ? dwarf_formstring(&a) : NULL;
}

static bool func_id_of(Dwarf_Die *die, struct func_id *id)
{
	id->name = attr_str(die, DW_AT_name);
	id->linkage = attr_str(die, DW_AT_linkage_name);
	if (!id->linkage)
		id->linkage = attr_str(die, DW_AT_MIPS_linkage_name);
	id->decl_file = dwarf_decl_file(die);
	if (dwarf_decl_line(die, &id->decl_line))
		id->decl_line = 0;
	return id->name || id->linkage;
}

static bool str_eq(const char *a, const char *b)
{
	return a && b ? !strcmp(a, b) : a == b;
}

static bool func_id_same(const struct func_id *a, const struct func_id *b)
{
	if (a->linkage && b->linkage)
		return !strcmp(a->linkage, b->linkage);
	return str_eq(a->name, b->name) && str_eq(a->decl_file, b->decl_file) &&
	       a->decl_line == b->decl_line;
}

/* The copy's entry: DW_AT_entry_pc, else DW_AT_low_pc, else the lowest
 * address of its ranges. */
static bool entry_of(Dwarf_Die *die, Dwarf_Addr *pc)
{
	Dwarf_Addr base, s, e, lo = (Dwarf_Addr)-1;
	ptrdiff_t it = 0;

	if (dwarf_entrypc(die, pc) == 0)
		return true;
	while ((it = dwarf_ranges(die, it, &base, &s, &e)) > 0)
		if (s < lo)
			lo = s;
	*pc = lo;
	return lo != (Dwarf_Addr)-1;
}

static int index_add(struct inline_index *ix, Dwarf_Die *die, Dwarf_Files *files)
{
	struct inl_ent *e;
	Dwarf_Attribute a;
	Dwarf_Word w;
	Dwarf_Addr pc;

	if (!entry_of(die, &pc))
		return 0;	/* an abstract instance's copy: no code */
	if (core_reserve(ix->v, ix->cap, ix->n + 1, 64))
		return -ENOMEM;
	e = &ix->v[ix->n];
	memset(e, 0, sizeof(*e));
	if (!func_id_of(die, &e->id))
		return 0;
	e->site.pc = pc;	/* Dwarf addresses are link-time addresses */
	if (files && dwarf_attr(die, DW_AT_call_file, &a) && !dwarf_formudata(&a, &w))
		e->site.call_file = dwarf_filesrc(files, w, NULL, NULL);
	if (dwarf_attr(die, DW_AT_call_line, &a) && !dwarf_formudata(&a, &w))
		e->site.call_line = (unsigned)w;
	ix->n++;
	return 0;
}

static int index_walk(struct inline_index *ix, Dwarf_Die *parent, Dwarf_Files *files,
		      unsigned depth)
{
	Dwarf_Die child;
	int ret = 0;

	if (depth > 64 || dwarf_child(parent, &child) != 0)
		return 0;
	do {
		int tag = dwarf_tag(&child);

		if (tag == DW_TAG_inlined_subroutine)
			ret = index_add(ix, &child, files);
		if (!ret && dwarf_haschildren(&child) &&
		    (tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine ||
		     tag == DW_TAG_lexical_block || tag == DW_TAG_namespace ||
		     tag == DW_TAG_class_type || tag == DW_TAG_structure_type ||
		     tag == DW_TAG_try_block || tag == DW_TAG_catch_block))
			ret = index_walk(ix, &child, files, depth + 1);
	} while (!ret && dwarf_siblingof(&child, &child) == 0);
	return ret;
}

static int index_build(struct debuginfo *m)
{
	struct inline_index *ix;
	Dwarf_Off off = 0, next;
	size_t hsize;
	int ret = 0;

	if (m->inl)
		return 0;
	ix = calloc(1, sizeof(*ix));
	if (!ix)
		return -ENOMEM;
	while (!ret && dwarf_nextcu(m->dw, off, &next, &hsize, NULL, NULL, NULL) == 0) {
		Dwarf_Die cu;
		Dwarf_Files *files = NULL;
		size_t nfiles;

		if (dwarf_offdie(m->dw, off + hsize, &cu)) {
			if (dwarf_getsrcfiles(&cu, &files, &nfiles))
				files = NULL;
			ret = index_walk(ix, &cu, files, 0);
		}
		off = next;
	}
	if (ret) {
		free(ix->v);
		free(ix);
		return ret;
	}
	log_debug("dwarf: %zu inlined copies", ix->n);
	m->inl = ix;
	return 0;
}

struct func_find {
	Dwarf_Addr entry;	/* in the CU's addresses */
	struct func_id *id;
	bool ok;
};

static int func_cb(Dwarf_Die *die, void *arg)
{
	struct func_find *ff = arg;
	Dwarf_Addr lo;

	if (entry_of(die, &lo) && lo == ff->entry && func_id_of(die, ff->id)) {
		ff->ok = true;
		return DWARF_CB_ABORT;
	}
	return DWARF_CB_OK;
}

/* The subprogram whose code starts at func_vaddr: among the CU's
 * functions, not through dwarf_getscopes, which gives an inlined copy's
 * abstract scopes instead of the function it sits in. */
static bool func_at(struct debuginfo *m, uint64_t func_vaddr, struct func_id *id)
{
	Dwarf_Die cu;
	struct func_find ff = {.id = id};

	if (!debuginfo_cu_at(m, func_vaddr, &cu, &ff.entry))
		return false;
	dwarf_getfuncs(&cu, func_cb, &ff, 0);
	return ff.ok;
}

/* Is the copy's function named name (C, or a C++ name with or without its
 * parameters)? */
static bool named(const struct func_id *id, const char *name)
{
	char *full = NULL, *qual = NULL;
	bool ok;

	if (id->linkage && !strcmp(id->linkage, name))
		return true;
	if (!id->linkage || demangle_name(id->linkage, &full, &qual))
		return id->name && !strcmp(id->name, name);
	ok = demangle_same(name, strchr(name, '(') ? full : qual);
	free(full);
	free(qual);
	return ok;
}

static int cmp_site(const void *pa, const void *pb)
{
	const struct debuginfo_inline_site *a = pa, *b = pb;

	return (a->pc > b->pc) - (a->pc < b->pc);
}

ssize_t debuginfo_inline_sites(struct debuginfo *m, uint64_t func_vaddr, const char *name,
			   struct debuginfo_inline_site **out)
{
	struct func_id id;
	struct debuginfo_inline_site *v;
	size_t n = 0, w = 0;
	int ret;

	*out = NULL;
	if (func_vaddr && !func_at(m, func_vaddr, &id))
		return -ENOENT;
	ret = index_build(m);
	if (ret)
		return ret;
	v = malloc((m->inl->n ? m->inl->n : 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < m->inl->n; i++) {
		const struct inl_ent *e = &m->inl->v[i];

		if (func_vaddr ? func_id_same(&e->id, &id) && e->site.pc != func_vaddr :
		    named(&e->id, name))
			v[n++] = e->site;
	}
	qsort(v, n, sizeof(*v), cmp_site);
	for (size_t i = 0; i < n; i++)
		if (!w || v[w - 1].pc != v[i].pc)
			v[w++] = v[i];
	*out = v;
	return (ssize_t)w;
}
