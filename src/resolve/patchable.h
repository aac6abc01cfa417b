/* Whether the inject engine can patch a function of an ELF file: its code
 * and NAME.cold parts read from the file, checked by src/x86/reloc. */
#ifndef USC_RESOLVE_PATCHABLE_H
#define USC_RESOLVE_PATCHABLE_H

#include <stddef.h>
#include <sys/types.h>

#include "elf/elf.h"
#include "x86/reloc.h"

/* The most regions patchable_regions returns: the body and 7 cold parts. */
#define PATCHABLE_MAX_REGIONS 8

/* The regions of fn: rg[0] its body, then the fragments GCC split off it
 * (NAME.cold, NAME.cold.N), each with its code read from ef (malloc'd; free
 * with patchable_regions_free). Link-time addresses. In a stripped file,
 * where those have no symbol, a fragment is found as code the function's
 * jmp/jcc reach outside any known function whose FDE (.eh_frame) starts
 * mid-function (its CFA is not the entry's). Returns the count, or -errno
 * (-EINVAL: fn has no size). */
ssize_t patchable_regions(const struct elf_file *ef, const struct elf_sym *fn,
			  struct x86_region rg[PATCHABLE_MAX_REGIONS]);
void patchable_regions_free(struct x86_region *rg, size_t n);

/* A reader of ef's read-only file-backed bytes at link-time addresses, for
 * jump tables (writable segments are refused: their file bytes may not be
 * what runs). ef must outlive it. */
struct x86_reader patchable_reader(const struct elf_file *ef);

/* x86_func_patchable on fn. 0 or -errno (-ENOMEM, a read error). */
int patchable_func(const struct elf_file *ef, const struct elf_sym *fn,
		   struct x86_patchability *out);

#endif
