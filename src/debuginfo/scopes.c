/* What the code at an address is, in source terms: the function, and the
 * functions inlined into it there, innermost first, each with its file and
 * line (stack frames, src/stack/). The innermost line is the line table's;
 * an outer one is where the inner function was inlined (DW_AT_call_file,
 * DW_AT_call_line), as gdb shows inlined frames. */
#include <dwarf.h>
#include <stdlib.h>
#include <string.h>

#include "debuginfo/debuginfo.h"
#include "debuginfo/debuginfo_int.h"
#include "objfile/demangle.h"

static const char *scope_name(Dwarf_Die *die, char **owned)
{
	Dwarf_Attribute a;
	const char *link = NULL, *name = NULL;
	char *full = NULL, *qual = NULL;

	*owned = NULL;
	if (dwarf_attr_integrate(die, DW_AT_linkage_name, &a) ||
	    dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &a))
		link = dwarf_formstring(&a);
	if (link && !demangle_name(link, &full, &qual) && full) {
		free(qual);
		*owned = full;
		return full;
	}
	free(full);
	free(qual);
	if (dwarf_attr_integrate(die, DW_AT_name, &a))
		name = dwarf_formstring(&a);
	return name;
}

static const char *file_of(Dwarf_Die *cu, Dwarf_Word idx)
{
	Dwarf_Files *files;
	size_t n;

	if (dwarf_getsrcfiles(cu, &files, &n) != 0 || idx >= n)
		return NULL;
	return dwarf_filesrc(files, idx, NULL, NULL);
}

ssize_t debuginfo_pc_scopes(struct debuginfo *m, uint64_t pc, struct debuginfo_scope *out,
			size_t max)
{
	Dwarf_Die cu, *scopes = NULL;
	Dwarf_Addr dwpc;
	Dwarf_Line *line;
	const char *file = NULL;
	unsigned lineno = 0;
	size_t n = 0;
	int ns;

	if (!m || !max || !debuginfo_cu_at(m, pc, &cu, &dwpc))
		return 0;
	line = dwarf_getsrc_die(&cu, dwpc);
	if (line) {
		int l = 0;

		file = dwarf_linesrc(line, NULL, NULL);
		if (dwarf_lineno(line, &l) == 0 && l > 0)
			lineno = (unsigned)l;
	}
	/* the innermost function or inlined copy at pc; then every DIE that
	 * contains it (dwarf_getscopes stops at the innermost inlined copy,
	 * as eu-addr2line --inlines knows) */
	ns = dwarf_getscopes(&cu, dwpc, &scopes);
	for (int i = 0; i < ns; i++) {
		int tag = dwarf_tag(&scopes[i]);

		if (tag == DW_TAG_inlined_subroutine || tag == DW_TAG_subprogram) {
			Dwarf_Die inner = scopes[i];

			free(scopes);
			scopes = NULL;
			ns = dwarf_getscopes_die(&inner, &scopes);
			break;
		}
	}
	for (int i = 0; i < ns && n < max; i++) {
		int tag = dwarf_tag(&scopes[i]);
		Dwarf_Attribute a;
		Dwarf_Word w;

		if (tag != DW_TAG_inlined_subroutine && tag != DW_TAG_subprogram)
			continue;
		out[n].name = scope_name(&scopes[i], &out[n].owned);
		out[n].file = file;
		out[n].line = lineno;
		out[n].inlined = tag == DW_TAG_inlined_subroutine;
		out[n].has_off = false;
		if (tag == DW_TAG_subprogram) {
			Dwarf_Addr lo;

			if ((dwarf_entrypc(&scopes[i], &lo) == 0 || dwarf_lowpc(&scopes[i], &lo) == 0) &&
			    lo <= dwpc) {
				out[n].off = dwpc - lo;
				out[n].has_off = true;
			}
			n++;
			break;
		}
		n++;
		/* the next scope out runs at the inlined call's line */
		file = NULL;
		lineno = 0;
		if (dwarf_attr(&scopes[i], DW_AT_call_file, &a) && dwarf_formudata(&a, &w) == 0)
			file = file_of(&cu, w);
		if (dwarf_attr(&scopes[i], DW_AT_call_line, &a) && dwarf_formudata(&a, &w) == 0)
			lineno = (unsigned)w;
	}
	free(scopes);
	if (!n) {	/* a line without a function DIE (assembly) */
		if (!file)
			return 0;
		out[0] = (struct debuginfo_scope){.file = file, .line = lineno};
		n = 1;
	}
	return (ssize_t)n;
}
