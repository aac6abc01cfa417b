/* Line tables: where a function's prologue ends, a function's declaration
 * line, the addresses of FILE:LINE, and the lines of a function (list
 * --lines). */
#include <dwarf.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "debuginfo/debuginfo.h"
#include "debuginfo/debuginfo_int.h"

int debuginfo_after_prologue(struct debuginfo *m, uint64_t func_vaddr, uint64_t *pc)
{
	Dwarf_Addr lo = 0, hi = 0, base, s, e, entry, addr;
	Dwarf_Die cud, *cu = &cud, *scopes = NULL, *fn = NULL;
	Dwarf_Lines *lines;
	size_t nlines, first = SIZE_MAX;
	ptrdiff_t it = 0;
	int n;

	*pc = func_vaddr;
	if (!debuginfo_cu_at(m, func_vaddr, &cud, &entry))	/* entry: in the CU's addresses */
		return 0;
	n = dwarf_getscopes(cu, entry, &scopes);
	for (int i = 0; i < n && !fn; i++)
		if (dwarf_tag(&scopes[i]) == DW_TAG_subprogram)
			fn = &scopes[i];
	/* the function's range that starts at the entry */
	while (fn && (it = dwarf_ranges(fn, it, &base, &s, &e)) > 0)
		if (entry >= s && entry < e) {
			lo = s;
			hi = e;
			break;
		}
	free(scopes);
	if (!hi || lo != entry)
		return 0;	/* not the start of a function we know */
	if (dwarf_getsrclines(cu, &lines, &nlines))
		return 0;
	for (size_t i = 0; i < nlines; i++) {
		Dwarf_Line *l = dwarf_onesrcline(lines, i);
		bool end = false, pe = false;

		if (!l || dwarf_lineaddr(l, &addr) || dwarf_lineendsequence(l, &end))
			continue;
		if (end || addr < entry || addr >= hi)
			continue;
		if (first == SIZE_MAX) {
			if (addr != entry)
				return 0;	/* no row at the entry */
			first = i;
		}
		if (addr > entry && !dwarf_lineprologueend(l, &pe) && pe) {
			*pc = addr - entry + func_vaddr;
			return 0;
		}
	}
	/* Go marks the end of its prologue (the stack check) where it has one;
	 * a function without is a leaf whose parameters are in their registers
	 * from its first instruction (Go's location lists say where each one
	 * is at every pc), which a later line may have reused already */
	if (dwarf_srclang(cu) == DW_LANG_Go)
		return 0;
	for (size_t i = first == SIZE_MAX ? nlines : first; i < nlines; i++) {
		Dwarf_Line *l = dwarf_onesrcline(lines, i);
		bool end = false;

		if (!l || dwarf_lineaddr(l, &addr) || dwarf_lineendsequence(l, &end) || end)
			continue;
		if (addr > entry && addr < hi) {
			*pc = addr - entry + func_vaddr;
			break;
		}
	}
	return 0;
}

int debuginfo_func_line(struct debuginfo *m, uint64_t func_vaddr, const char **file,
		    unsigned *line)
{
	Dwarf_Addr dwpc;
	Dwarf_Die cu, *scopes = NULL;
	int n, ret = -ENOENT;

	if (!debuginfo_cu_at(m, func_vaddr, &cu, &dwpc))
		return -ENOENT;
	n = dwarf_getscopes(&cu, dwpc, &scopes);
	for (int i = 0; i < n; i++) {
		int l;

		if (dwarf_tag(&scopes[i]) != DW_TAG_subprogram)
			continue;
		*file = dwarf_decl_file(&scopes[i]);
		if (*file && dwarf_decl_line(&scopes[i], &l) == 0 && l > 0) {
			*line = (unsigned)l;
			ret = 0;
		}
		break;
	}
	free(scopes);
	return ret;
}

static int cmp_u32(const void *a, const void *b)
{
	unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;

	return x < y ? -1 : x > y;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* The DIE offset of the innermost scope at the link-time pc: a lexical
 * block, an inlined copy or the function; 0 if none is known. */
static Dwarf_Off innermost_scope(struct debuginfo *m, uint64_t pc)
{
	Dwarf_Die cu, *scopes = NULL;
	Dwarf_Addr dwpc;
	Dwarf_Off off = 0;
	int n;

	if (!debuginfo_cu_at(m, pc, &cu, &dwpc))
		return 0;
	n = dwarf_getscopes(&cu, dwpc, &scopes);
	if (n > 0)
		off = dwarf_dieoffset(&scopes[0]);
	free(scopes);
	return off;
}

ssize_t debuginfo_line_addrs(struct debuginfo *m, const char *file, unsigned line, bool all,
			 uint64_t **out, unsigned *nearest)
{
	Dwfl_Line **srcs = NULL;
	size_t nsrcs = 0, n = 0;
	uint64_t *v;

	*out = NULL;
	*nearest = 0;
	/* a relative FILE matches the end of the line table's names */
	if (dwfl_module_getsrc_file(m->mod, file, (int)line, 0, &srcs, &nsrcs) != 0 || !nsrcs)
		return 0;
	v = calloc(nsrcs, sizeof(*v));
	if (!v) {
		free(srcs);
		return -ENOMEM;
	}
	for (size_t i = 0; i < nsrcs; i++) {
		Dwarf_Addr addr, lbias;
		int lno = 0;
		bool stmt = true;
		Dwarf_Line *dl = dwfl_dwarf_line(srcs[i], &lbias);

		if (!dwfl_lineinfo(srcs[i], &addr, &lno, NULL, NULL, NULL))
			continue;
		if (dl)
			dwarf_linebeginstatement(dl, &stmt);
		if ((unsigned)lno != line) {
			/* libdw gives the next line with code when LINE has none */
			if (!*nearest || (unsigned)lno < *nearest)
				*nearest = (unsigned)lno;
			continue;
		}
		if (stmt)
			v[n++] = addr - m->bias;
	}
	free(srcs);
	qsort(v, n, sizeof(*v), cmp_u64);
	size_t u = 0;

	for (size_t i = 0; i < n; i++)
		if (!u || v[u - 1] != v[i])
			v[u++] = v[i];
	if (!u) {
		free(v);
		return 0;
	}
	if (!all) {
		/* once per execution of the line, as gdb's break: the lowest
		 * address of the line in each innermost scope (a block, an
		 * inlined copy, the function) */
		Dwarf_Off *key = calloc(u, sizeof(*key));
		size_t k = 0;

		if (!key) {
			free(v);
			return -ENOMEM;
		}
		for (size_t i = 0; i < u; i++) {
			Dwarf_Off o = innermost_scope(m, v[i]);
			bool seen = false;

			for (size_t j = 0; j < k && o && !seen; j++)
				seen = key[j] == o;
			if (seen)
				continue;
			key[k] = o;
			v[k++] = v[i];
		}
		free(key);
		u = k;
	}
	*out = v;
	return (ssize_t)u;
}

ssize_t debuginfo_func_lines(struct debuginfo *m, uint64_t func_vaddr, uint64_t size,
			 const char **file, unsigned **out)
{
	Dwarf_Addr lo = 0, hi;
	Dwarf_Die cud, *cu = debuginfo_cu_at(m, func_vaddr, &cud, &lo) ? &cud : NULL;
	Dwarf_Lines *lines;
	size_t nlines, n = 0;
	unsigned *v;

	*out = NULL;
	hi = lo + size;
	if (!cu || debuginfo_func_line(m, func_vaddr, file, &(unsigned){0}) ||
	    dwarf_getsrclines(cu, &lines, &nlines))
		return -ENOENT;
	v = calloc(nlines + 1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < nlines; i++) {
		Dwarf_Line *l = dwarf_onesrcline(lines, i);
		Dwarf_Addr a;
		const char *src;
		int lno;
		bool stmt = false;

		if (!l || dwarf_lineaddr(l, &a) || a < lo || a >= hi || dwarf_lineno(l, &lno) ||
		    dwarf_linebeginstatement(l, &stmt) || !stmt)
			continue;
		src = dwarf_linesrc(l, NULL, NULL);
		if (src && !strcmp(src, *file) && lno > 0)
			v[n++] = (unsigned)lno;
	}
	qsort(v, n, sizeof(*v), cmp_u32);
	size_t u = 0;

	for (size_t i = 0; i < n; i++)
		if (!u || v[u - 1] != v[i])
			v[u++] = v[i];
	*out = v;
	return (ssize_t)u;
}
