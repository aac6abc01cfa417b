/* Patchability of an ELF file's functions: see patchable.h. */
#include "resolve/patchable.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <elf.h>

static int32_t le32s(const uint8_t *p)
{
	return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
			 (uint32_t)p[3] << 24);
}

/* Is the first call-frame instruction of an FDE (at p, n bytes) one that
 * changes the state before the first instruction of its range? Then the range
 * does not start as a function does (CFA = rsp+8, as the CIE says): it is
 * code jumped to from the middle of a function. DW_CFA_nop is skipped;
 * DW_CFA_advance_loc* (0x40-0x7f, 0x02-0x04), or no instruction, is the
 * entry state. */
static bool cfa_starts_mid_function(const uint8_t *p, size_t n)
{
	while (n && *p == 0x00) {
		p++;
		n--;
	}
	if (!n)
		return false;
	return !((*p & 0xc0) == 0x40 || (*p >= 0x02 && *p <= 0x04));
}

/* The FDE (from .eh_frame_hdr's sorted table) whose range holds pc: its
 * range in [*start, *end). Only the layout GCC and binutils write:
 * version 1, pcrel sdata4 pointers, a datarel sdata4 table, 32-bit lengths,
 * 'z' augmentations. 0 if pc is in a range that starts mid-function (see
 * above), -ENOENT otherwise. */
static int fde_fragment(const struct elf_file *ef, uint64_t pc, uint64_t *start, uint64_t *end)
{
	const uint8_t *h;
	size_t hlen, lo, hi, count;
	uint64_t hdr, fde, cie;
	uint8_t f[64], c[16];
	uint32_t flen, range;
	size_t aug, ilen;

	if (elf_section_data(ef, ".eh_frame_hdr", (const void **)&h, &hlen, &hdr) || !h ||
	    hlen < 12 || h[0] != 1 || h[1] != 0x1b || h[2] != 0x03 || h[3] != 0x3b)
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
	*start = hdr + (uint64_t)(int64_t)le32s(h + 12 + 8 * (lo - 1));
	fde = hdr + (uint64_t)(int64_t)le32s(h + 12 + 8 * (lo - 1) + 4);
	if (elf_read(ef, fde, f, 18))
		return -ENOENT;
	flen = (uint32_t)le32s(f);
	range = (uint32_t)le32s(f + 12);
	/* the FDE's own start (pcrel sdata4) must agree with the table */
	if (flen < 14 || flen == 0xffffffff || le32s(f + 4) == 0 ||
	    fde + 8 + (uint64_t)(int64_t)le32s(f + 8) != *start)
		return -ENOENT;
	*end = *start + range;
	if (pc >= *end)
		return -ENOENT;
	/* its CIE, for the 'z' augmentation: version, then "z..." */
	cie = fde + 4 - (uint32_t)le32s(f + 4);
	if (elf_read(ef, cie, c, 10) || le32s(c + 4) != 0 || c[9] != 'z')
		return -ENOENT;
	/* augmentation data length (a one-byte uleb128 here), then instructions */
	if (f[16] & 0x80)
		return -ENOENT;
	aug = f[16];
	if (17 + aug > (size_t)flen + 4)
		return -ENOENT;
	ilen = (size_t)flen + 4 - 17 - aug;
	if (ilen > sizeof(f) - 17 - aug)
		ilen = sizeof(f) - 17 - aug;
	if (aug > sizeof(f) - 17 || elf_read(ef, fde + 17 + aug, f, ilen))
		return -ENOENT;
	return cfa_starts_mid_function(f, ilen) ? 0 : -ENOENT;
}

/* Parts of the function that a stripped file names not (no NAME.cold
 * symbol): code its jmp/jcc reach outside its regions and outside every
 * known function, whose FDE starts mid-function. Adds them to rg. */
static int add_unnamed_parts(const struct elf_file *ef, struct x86_region *rg, size_t *n)
{
	bool added = true;

	while (added && *n < PATCHABLE_MAX_REGIONS) {
		uint64_t t[64], s, e;
		ssize_t nt = x86_branches_out(rg, *n, t, 64);

		added = false;
		for (ssize_t i = 0; i < nt && *n < PATCHABLE_MAX_REGIONS; i++) {
			bool known = false;
			uint8_t *code;
			int ret;

			for (size_t r = 0; r < *n; r++)
				known |= t[i] >= rg[r].addr && t[i] - rg[r].addr < rg[r].len;
			if (known || elf_func_at(ef, t[i]) || fde_fragment(ef, t[i], &s, &e) ||
			    elf_func_at(ef, s) || elf_func_at(ef, e - 1) || e - s > (1u << 20))
				continue;
			code = malloc(e - s);
			if (!code)
				return -ENOMEM;
			ret = elf_read(ef, s, code, e - s);
			if (ret) {
				free(code);
				return ret;
			}
			rg[(*n)++] = (struct x86_region){code, e - s, s};
			added = true;
		}
	}
	return 0;
}

ssize_t patchable_regions(const struct elf_file *ef, const struct elf_sym *fn,
			  struct x86_region rg[PATCHABLE_MAX_REGIONS])
{
	const struct elf_sym **cold = NULL;
	char glob[1024];
	ssize_t ncold;
	size_t n = 0;
	int ret = 0;

	if (!fn->size)
		return -EINVAL;
	rg[n++] = (struct x86_region){NULL, fn->size, fn->vaddr};
	if ((size_t)snprintf(glob, sizeof(glob), "%s.cold*", fn->name) < sizeof(glob)) {
		ncold = elf_func_match(ef, glob, &cold);
		for (ssize_t i = 0; i < ncold && n < PATCHABLE_MAX_REGIONS; i++)
			if (cold[i]->size)
				rg[n++] = (struct x86_region){NULL, cold[i]->size, cold[i]->vaddr};
		free(cold);
	}
	for (size_t i = 0; i < n && !ret; i++) {
		uint8_t *code = malloc(rg[i].len);

		ret = code ? elf_read(ef, rg[i].addr, code, rg[i].len) : -ENOMEM;
		rg[i].code = code;
	}
	if (!ret)
		ret = add_unnamed_parts(ef, rg, &n);
	if (ret) {
		patchable_regions_free(rg, n);
		return ret;
	}
	return (ssize_t)n;
}

void patchable_regions_free(struct x86_region *rg, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free((void *)rg[i].code);
		rg[i].code = NULL;
	}
}

static int read_ro(void *ctx, uint64_t vaddr, void *buf, size_t len)
{
	const struct elf_file *ef = ctx;

	for (size_t i = 0; i < ef->nsegs; i++) {
		const struct elf_seg *s = &ef->segs[i];

		if (vaddr >= s->vaddr && vaddr - s->vaddr < s->filesz) {
			if (s->flags & PF_W || len > s->filesz - (vaddr - s->vaddr))
				return -EACCES;
			return elf_read(ef, vaddr, buf, len);
		}
	}
	return -ENOENT;
}

/* Filler after a function: up to the next function symbol, and at most to
 * the next 16-byte boundary (where GCC and Clang align functions: in a
 * stripped file the next function may have no symbol). */
static size_t filler(void *ctx, uint64_t end)
{
	const struct elf_file *ef = ctx;
	uint64_t next = (end + 15) & ~(uint64_t)15;

	for (size_t i = 0; i < ef->nsyms; i++)
		if (ef->syms[i].vaddr >= end && ef->syms[i].vaddr < next)
			next = ef->syms[i].vaddr;
	return (size_t)(next - end);
}

struct x86_reader patchable_reader(const struct elf_file *ef)
{
	return (struct x86_reader){read_ro, (void *)ef, filler};
}

int patchable_func(const struct elf_file *ef, const struct elf_sym *fn,
		   struct x86_patchability *out)
{
	struct x86_region rg[PATCHABLE_MAX_REGIONS];
	struct x86_reader rd = patchable_reader(ef);
	ssize_t n = patchable_regions(ef, fn, rg);
	int ret;

	if (n < 0)
		return (int)n;
	ret = x86_func_patchable(rg, (size_t)n, &rd, out);
	patchable_regions_free(rg, (size_t)n);
	return ret;
}
