/* Variables by name: the variable an expression names at a pc (the
 * scopes there, innermost first, then the globals of every unit), and the
 * parameters and locals visible at a pc with their C types (list --vars). */
#include <dwarf.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "debuginfo/debuginfo.h"
#include "debuginfo/debuginfo_int.h"
#include "debuginfo/go.h"

static bool is_var_tag(int tag)
{
	return tag == DW_TAG_formal_parameter || tag == DW_TAG_variable;
}

/* A top-level DW_TAG_variable definition named name among the children of
 * die; false if none. Declarations (extern) are skipped. */
static bool find_child(Dwarf_Die *scope, const char *name, bool globals, Dwarf_Die *out,
		       struct debuginfo_names *nm)
{
	Dwarf_Die child;

	if (dwarf_child(scope, &child) != 0)
		return false;
	do {
		const char *n;

		if (!is_var_tag(dwarf_tag(&child)) || dwarf_hasattr(&child, DW_AT_declaration))
			continue;
		if (globals && !dwarf_hasattr(&child, DW_AT_location) &&
		    !dwarf_hasattr_integrate(&child, DW_AT_const_value))
			continue;
		n = debuginfo_die_name(&child);
		if (!n)
			continue;
		if (!strcmp(n, name)) {
			*out = child;
			return true;
		}
		if (nm)
			debuginfo_names_add(nm, n);
	} while (dwarf_siblingof(&child, &child) == 0);
	return false;
}

int debuginfo_find_var(struct debuginfo_lower *c, const char *name, Dwarf_Die *out)
{
	struct debuginfo_names nm = {.buf = ""};
	bool in_func = true;
	Dwarf_Off off = 0, next;
	size_t hsize;

	for (int i = 0; i < c->nscopes; i++) {
		int tag = dwarf_tag(&c->scopes[i]);

		if (tag == DW_TAG_compile_unit || tag == DW_TAG_partial_unit) {
			if (find_child(&c->scopes[i], name, true, out, &nm))
				return 0;
			continue;
		}
		if (!in_func)
			continue;	/* the callers of an inlined function */
		if (find_child(&c->scopes[i], name, false, out, &nm))
			return 0;
		if (tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine)
			in_func = false;
	}
	/* a global of another compilation unit */
	while (dwarf_nextcu(c->m->dw, off, &next, &hsize, NULL, NULL, NULL) == 0) {
		Dwarf_Die cu;

		if (dwarf_offdie(c->m->dw, off + hsize, &cu) &&
		    find_child(&cu, name, true, out, NULL))
			return 0;
		off = next;
	}
	return debuginfo_fail(c, -ENOENT, 0, "no variable '%s' at 0x%" PRIx64 "%s%s", name, c->pc,
			      nm.n ? "; visible: " : "", nm.buf);
}

int debuginfo_vars_at(struct debuginfo *m, uint64_t pc,
		  void (*fn)(const char *name, const char *type, bool param, void *ctx), void *ctx)
{
	Dwarf_Addr dwpc;
	Dwarf_Die cu, *scopes = NULL;
	int n;

	bool go;

	if (!debuginfo_cu_at(m, pc, &cu, &dwpc))
		return -ENOENT;
	go = dwarf_srclang(&cu) == DW_LANG_Go;
	n = dwarf_getscopes(&cu, dwpc, &scopes);
	if (n <= 0)
		return -ENOENT;
	for (int i = 0; i < n; i++) {
		Dwarf_Die child;
		int tag = dwarf_tag(&scopes[i]);

		if (tag == DW_TAG_compile_unit)
			break;	/* globals: too many to list */
		if (dwarf_child(&scopes[i], &child) != 0)
			continue;
		do {
			int ct = dwarf_tag(&child);
			const char *nm = debuginfo_die_name(&child);
			char tn[320];
			Dwarf_Die t;

			if ((ct != DW_TAG_formal_parameter && ct != DW_TAG_variable) || !nm)
				continue;
			debuginfo_type_name(&t, debuginfo_die_type(&child, &t), tn, sizeof(tn));
			/* a Go result is no parameter (see go_dwarf_is_result) */
			fn(nm, tn, ct == DW_TAG_formal_parameter &&
			   !(go && go_dwarf_is_result(&child)), ctx);
		} while (dwarf_siblingof(&child, &child) == 0);
		if (tag == DW_TAG_subprogram)
			break;	/* the function's own scope is the last we show */
	}
	free(scopes);
	return 0;
}
