/* Inlined copies of functions: one pass over every compilation unit's DIEs
 * collects the DW_TAG_inlined_subroutine entries with the identity of the
 * function each copies (its name or linkage name and declaration, through
 * DW_AT_abstract_origin and DW_AT_specification); lookups compare those.
 *
 * A copy of F nested in F's own code, "called" at F's own declaration, is
 * not a call of F: GCC splits a function's cold tail into F.part.0 and, F
 * being its one caller, inlines it back, so glibc's out-of-line
 * __libc_write (write, __write) holds an inlined __libc_write at its
 * multi-threaded path (361 such copies in Debian 12's libc). Probing that
 * copy counts one call twice. So the pass notes, for each copy, the entry
 * of the out-of-line function it sits in and whether one of its enclosing
 * instances (that function, or an inlined copy around it) is F itself;
 * lookups leave such copies out. A recursive call inlined into F (glibc's
 * msort_with_tmp) is a call: its call site is a line of F's body, and it
 * stays. */
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
	int decl_line, decl_col;
};

struct inl_ent {
	struct func_id id;
	struct debuginfo_inline_site site;
	Dwarf_Addr outer;	/* the entry of the out-of-line function it is in,
				 * or -1 */
	bool at_decl;		/* its call site is the function's declaration */
	bool in_self;		/* at_decl, inside an instance of the same function */
};

/* The instances enclosing a DIE in the walk, innermost first, up to the
 * out-of-line function that holds them. */
struct walk_up {
	struct func_id id;
	bool has_id;
	const struct walk_up *up;
};

struct walk_ctx {
	Dwarf_Files *files;
	Dwarf_Addr outer;
	const struct walk_up *up;
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
	if (dwarf_decl_column(die, &id->decl_col))
		id->decl_col = 0;
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

/* The same source file, however the line table spells its directory. */
static bool same_file(const char *a, const char *b)
{
	const char *sa, *sb;

	if (!a || !b)
		return a == b;
	sa = strrchr(a, '/');
	sb = strrchr(b, '/');
	return !strcmp(sa ? sa + 1 : a, sb ? sb + 1 : b);
}

static bool in_self(const struct walk_up *up, const struct func_id *id)
{
	for (; up; up = up->up)
		if (up->has_id && func_id_same(&up->id, id))
			return true;
	return false;
}

static int index_add(struct inline_index *ix, Dwarf_Die *die, const struct walk_ctx *wc)
{
	Dwarf_Files *files = wc->files;
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
	e->outer = wc->outer;
	if (files && dwarf_attr(die, DW_AT_call_file, &a) && !dwarf_formudata(&a, &w))
		e->site.call_file = dwarf_filesrc(files, w, NULL, NULL);
	if (dwarf_attr(die, DW_AT_call_line, &a) && !dwarf_formudata(&a, &w))
		e->site.call_line = (unsigned)w;
	if (!dwarf_attr(die, DW_AT_call_column, &a) || dwarf_formudata(&a, &w))
		w = 0;
	e->at_decl = e->site.call_line && (int)e->site.call_line == e->id.decl_line &&
		     same_file(e->site.call_file, e->id.decl_file) &&
		     (!w || !e->id.decl_col || (int)w == e->id.decl_col);
	e->in_self = e->at_decl && in_self(wc->up, &e->id);
	ix->n++;
	return 0;
}

/* Into a DIE's children: a subprogram with code starts a new chain of
 * enclosing instances (a nested function's body is its own), an inlined
 * copy adds itself to the chain. */
static int index_walk(struct inline_index *ix, Dwarf_Die *parent, const struct walk_ctx *w,
		      unsigned depth);

static int index_into(struct inline_index *ix, Dwarf_Die *die, int tag, const struct walk_ctx *w,
		      unsigned depth)
{
	struct walk_up me = {.up = w->up};
	struct walk_ctx in = *w;
	Dwarf_Addr pc;

	if (tag == DW_TAG_subprogram && entry_of(die, &pc)) {
		me.up = NULL;
		in.outer = pc;
	}
	if (tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine) {
		me.has_id = func_id_of(die, &me.id);
		in.up = &me;
	}
	return index_walk(ix, die, &in, depth + 1);
}

static int index_walk(struct inline_index *ix, Dwarf_Die *parent, const struct walk_ctx *w,
		      unsigned depth)
{
	Dwarf_Die child;
	int ret = 0;

	if (depth > 64 || dwarf_child(parent, &child) != 0)
		return 0;
	do {
		int tag = dwarf_tag(&child);

		if (tag == DW_TAG_inlined_subroutine)
			ret = index_add(ix, &child, w);
		if (!ret && dwarf_haschildren(&child) &&
		    (tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine ||
		     tag == DW_TAG_lexical_block || tag == DW_TAG_namespace ||
		     tag == DW_TAG_class_type || tag == DW_TAG_structure_type ||
		     tag == DW_TAG_try_block || tag == DW_TAG_catch_block))
			ret = index_into(ix, &child, tag, w, depth);
	} while (!ret && dwarf_siblingof(&child, &child) == 0);
	return ret;
}

static int index_build(struct debuginfo *m)
{
	struct inline_index *ix;
	Dwarf_Off off = 0, next;
	size_t hsize, nself = 0;
	int ret = 0;

	if (m->inl)
		return 0;
	ix = calloc(1, sizeof(*ix));
	if (!ix)
		return -ENOMEM;
	while (!ret && dwarf_nextcu(m->dw, off, &next, &hsize, NULL, NULL, NULL) == 0) {
		Dwarf_Die cu;
		struct walk_ctx w = {.outer = (Dwarf_Addr)-1};
		size_t nfiles;

		if (dwarf_offdie(m->dw, off + hsize, &cu)) {
			if (dwarf_getsrcfiles(&cu, &w.files, &nfiles))
				w.files = NULL;
			ret = index_walk(ix, &cu, &w, 0);
		}
		off = next;
	}
	if (ret) {
		free(ix->v);
		free(ix);
		return ret;
	}
	for (size_t i = 0; i < ix->n; i++)
		nself += ix->v[i].in_self;
	log_debug("dwarf: %zu inlined copies (%zu of them inlined back into their own function)",
		  ix->n, nself);
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
static bool func_at(struct debuginfo *m, uint64_t func_vaddr, struct func_id *id,
		    Dwarf_Addr *entry)
{
	Dwarf_Die cu;
	struct func_find ff = {.id = id};

	if (!debuginfo_cu_at(m, func_vaddr, &cu, &ff.entry))
		return false;
	dwarf_getfuncs(&cu, func_cb, &ff, 0);
	*entry = ff.entry;
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
	Dwarf_Addr entry = (Dwarf_Addr)-1;
	size_t n = 0, w = 0;
	int ret;

	*out = NULL;
	if (func_vaddr && !func_at(m, func_vaddr, &id, &entry))
		return -ENOENT;
	ret = index_build(m);
	if (ret)
		return ret;
	v = malloc((m->inl->n ? m->inl->n : 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < m->inl->n; i++) {
		const struct inl_ent *e = &m->inl->v[i];

		if (!(func_vaddr ? func_id_same(&e->id, &id) && e->site.pc != func_vaddr :
		      named(&e->id, name)))
			continue;
		if (e->in_self || (func_vaddr && e->outer == entry && e->at_decl)) {
			log_debug("dwarf: the copy of %s at 0x%llx is inside %s's own code, "
				  "not a call of it", name, (unsigned long long)e->site.pc, name);
			continue;
		}
		v[n++] = e->site;
	}
	qsort(v, n, sizeof(*v), cmp_site);
	for (size_t i = 0; i < n; i++)
		if (!w || v[w - 1].pc != v[i].pc)
			v[w++] = v[i];
	*out = v;
	return (ssize_t)w;
}
