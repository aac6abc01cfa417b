/* Patchability of an ELF file's functions: see patchable.h. */
#include "resolve/patchable.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <elf.h>

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
