/* Call frame information: the FDE of .eh_frame whose range holds an address,
 * from .eh_frame_hdr's table, and whether it starts mid-function (libdw
 * reads the CFA at its start). */
#include <dwarf.h>
#include <errno.h>
#include <elfutils/libdw.h>
#include <stdint.h>
#include <stdlib.h>

#include "objfile/objfile_int.h"

/* ---- call frame information ------------------------------------------- */

/* Is the CFA at the start of a frame the one a function's entry has
 * (%rsp + 8: the return address just pushed), as a call leaves it? */
static bool cfa_is_entry(Dwarf_CFI *cfi, uint64_t pc)
{
	Dwarf_Frame *f = NULL;
	Dwarf_Op *ops;
	size_t nops;
	bool entry = false;

	if (dwarf_cfi_addrframe(cfi, pc, &f) == 0 && dwarf_frame_cfa(f, &ops, &nops) == 0)
		entry = nops == 1 && ops[0].atom == DW_OP_bregx && ops[0].number == 7 /* rsp */ &&
			ops[0].number2 == 8;
	free(f);
	return entry;
}

static int32_t le32s(const uint8_t *b)
{
	return (int32_t)((uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
			 (uint32_t)b[3] << 24);
}

/* The FDE whose range holds pc, found in .eh_frame_hdr's sorted table, the
 * index the dynamic linker's unwinder searches (libdw answers with the CFI
 * row at pc, not the FDE's bounds). Only the layout GCC and binutils write:
 * version 1, a datarel sdata4 table, FDEs with pcrel sdata4 pointers and
 * 32-bit lengths. */
int objfile_fde_at(const struct objfile *ef, uint64_t pc, struct objfile_fde *out)
{
	struct objfile_priv *p = ef->priv;
	const uint8_t *h;
	size_t hlen, lo, hi, count;
	uint64_t hdr, fde, start;
	uint8_t f[16];
	uint32_t flen, range;

	if (objfile_section_data(ef, ".eh_frame_hdr", (const void **)&h, &hlen, &hdr) || !h ||
	    hlen < 12 || h[0] != 1 || h[3] != 0x3b)
		return -ENOENT;
	count = (uint32_t)le32s(h + 8);
	if (count > (hlen - 12) / 8)
		return -ENOENT;
	/* the last entry whose start <= pc */
	lo = 0;
	hi = count;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (hdr + (uint64_t)(int64_t)le32s(h + 12 + 8 * mid) <= pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo)
		return -ENOENT;
	start = hdr + (uint64_t)(int64_t)le32s(h + 12 + 8 * (lo - 1));
	fde = hdr + (uint64_t)(int64_t)le32s(h + 12 + 8 * (lo - 1) + 4);
	if (objfile_read(ef, fde, f, sizeof(f)))
		return -ENOENT;
	flen = (uint32_t)le32s(f);
	range = (uint32_t)le32s(f + 12);
	/* the FDE's own start (pcrel sdata4) must agree with the table */
	if (flen < 12 || flen == 0xffffffff || le32s(f + 4) == 0 ||
	    fde + 8 + (uint64_t)(int64_t)le32s(f + 8) != start || pc >= start + range)
		return -ENOENT;
	if (!p->cfi_tried) {
		p->cfi_tried = true;
		p->cfi = dwarf_getcfi_elf(p->elf);
	}
	out->start = start;
	out->end = start + range;
	out->mid = !p->cfi || !cfa_is_entry(p->cfi, start);
	return 0;
}
