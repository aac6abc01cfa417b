/* Private to the object-file reader: what its files (src/objfile/file.c,
 * symtab.c, symbols.c, sections.c, fde.c) share, and what the Go side of
 * reading a file (src/go/gofile.c) uses while the file is indexed. Callers
 * elsewhere use elf.h only.
 *
 *   file.c      open/close, program headers, the dynamic segment; vaddr <->
 *               file offset, reads of the image
 *   symtab.c    the function symbols collected at open: .symtab, .dynsym
 *               (or DT_SYMTAB), versions, merged and sorted
 *   symbols.c   lookups: by name (C++ demangled too), glob, address,
 *               "did you mean", any symbol's address
 *   sections.c  sections by name, executable sections, the PLT, relocations
 *   fde.c       the FDE (.eh_frame_hdr) that holds an address */
#ifndef USC_OBJFILE_OBJFILE_INT_H
#define USC_OBJFILE_OBJFILE_INT_H

#include <elfutils/libdw.h>
#include <gelf.h>
#include <libelf.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "objfile/gopclntab.h"
#include "objfile/objfile.h"

/* ef->priv */
struct objfile_priv {
	const unsigned char *map;	/* the whole file, read-only */
	size_t mapsz;
	int fd;				/* kept open for elf, for section lookups */
	Elf *elf;
	const struct objfile_sym **byaddr;	/* syms sorted by vaddr, then name */
	uint64_t maxsize;		/* largest st_size, bounds objfile_func_at */
	Dwarf_CFI *cfi;			/* .eh_frame, read when first asked (objfile_fde_at) */
	bool cfi_tried;
	/* a Go program's function table (gofile.c), in map; NULL: none */
	const unsigned char *go_tab;
	size_t go_tablen;
	struct gopclntab_hdr go_hdr;	/* its text start corrected */
};

/* ---- file.c ------------------------------------------------------------ */

/* Bytes [off, off+len) of the file, or NULL. */
const void *objfile_raw_at(const struct objfile_priv *p, uint64_t off, uint64_t len);
/* A NUL-terminated string at off, not crossing limit (file offset), or NULL. */
const char *objfile_raw_str(const struct objfile_priv *p, uint64_t off, uint64_t limit);
/* len bytes at vaddr, within one segment's file image, or NULL. */
const unsigned char *objfile_image_at(const struct objfile *ef, uint64_t vaddr,
				      uint64_t len);

/* ---- symtab.c ---------------------------------------------------------- */

/* The functions being collected while the file is indexed. */
struct objfile_symvec {
	struct objfile_sym *v;
	size_t n, cap;
};

/* Dynamic-segment values used for the no-section-header fallback. */
struct objfile_dyninfo {
	uint64_t strtab, strsz, symtab, syment, hash, gnu_hash, versym, verdef,
		 verdefnum;
};

/* Append a function (name[0..namelen), a copy; version copied too, or
 * NULL). An empty name is skipped. 0 or -ENOMEM. */
int objfile_symvec_add(struct objfile_symvec *sv, const char *name, size_t namelen,
		       const char *version, uint64_t vaddr, uint64_t size, unsigned flags);
/* Free a symbol's strings (not the symbol). */
void objfile_sym_free(struct objfile_sym *s);
/* qsort order of struct objfile_sym pointers: by address, then array order. */
int objfile_cmp_symp_addr(const void *pa, const void *pb);
/* Collect, merge and sort the file's functions into ef->syms, with the
 * address index; di is the dynamic segment's (for DT_SYMTAB without
 * section headers). Asks src/go/gofile.c for a stripped Go program's. */
int objfile_load_syms(struct objfile *ef, Elf *elf, const struct objfile_dyninfo *di);

/* ---- sections.c -------------------------------------------------------- */

/* The section named name, through the section headers, with its bytes in
 * the mapped file (*len 0 and NULL for SHT_NOBITS). NULL if none. */
const unsigned char *objfile_scn_named(const struct objfile *ef, Elf *elf, const char *name,
				       size_t *len, uint64_t *addr);
/* The address of a R_X86_64_RELATIVE relocation's target at vaddr (what a
 * PIE's word there holds once loaded), from the SHT_RELA sections. */
bool objfile_relative_reloc_at(Elf *elf, uint64_t vaddr, uint64_t *val);

#endif
