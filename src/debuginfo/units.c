/* Finding the compilation unit that holds an address: libdwfl answers
 * through .debug_aranges; without them (Go writes none, nor does clang by
 * default) an index of the units' own address ranges, built on first use. */
#include <stdlib.h>

#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>

#include "core/log.h"
#include "core/grow.h"
#include "debuginfo/debuginfo_int.h"

struct cu_range {
	Dwarf_Addr lo, hi;	/* [lo, hi) in the unit's (link-time) addresses */
	Dwarf_Off die;		/* the unit's DIE */
};

static int cmp_cu_range(const void *pa, const void *pb)
{
	const struct cu_range *a = pa, *b = pb;

	if (a->lo != b->lo)
		return a->lo < b->lo ? -1 : 1;
	return (a->hi > b->hi) - (a->hi < b->hi);
}

/* Every unit's ranges, from its DIE (DW_AT_ranges, or low_pc/high_pc). */
static void cu_index_build(struct debuginfo *m)
{
	Dwarf_Off off = 0, next;
	size_t hsize, cap = 0;

	m->cur_built = true;
	while (dwarf_nextcu(m->dw, off, &next, &hsize, NULL, NULL, NULL) == 0) {
		Dwarf_Die cu;
		Dwarf_Addr base, lo, hi;
		ptrdiff_t it = 0;

		if (!dwarf_offdie(m->dw, off + hsize, &cu)) {
			off = next;
			continue;
		}
		while ((it = dwarf_ranges(&cu, it, &base, &lo, &hi)) > 0) {
			if (hi <= lo)
				continue;
			if (core_reserve(m->cur, cap, m->ncur + 1, 64)) {
				log_warn("dwarf: out of memory indexing the compilation units");
				return;
			}
			m->cur[m->ncur++] = (struct cu_range){lo, hi, dwarf_dieoffset(&cu)};
		}
		off = next;
	}
	qsort(m->cur, m->ncur, sizeof(*m->cur), cmp_cu_range);
	log_debug("dwarf: no .debug_aranges: %zu address ranges from the compilation units",
		  m->ncur);
}

bool debuginfo_cu_at(struct debuginfo *m, uint64_t pc, Dwarf_Die *cu, Dwarf_Addr *dwpc)
{
	Dwarf_Addr b;
	Dwarf_Die *d = dwfl_module_addrdie(m->mod, pc + m->bias, &b);
	size_t lo = 0, hi;

	if (d) {
		*cu = *d;
		*dwpc = pc + m->bias - b;
		return true;
	}
	if (!m->cur_built)
		cu_index_build(m);
	/* the last range starting at or before pc, then back over any that
	 * start earlier and reach further (ranges rarely overlap) */
	hi = m->ncur;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (m->cur[mid].lo <= pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (size_t i = lo; i-- > 0;)
		if (pc < m->cur[i].hi && dwarf_offdie(m->dw, m->cur[i].die, cu)) {
			*dwpc = pc;
			return true;
		}
	return false;
}
