/* A Go program's ELF file, while src/objfile/ indexes it: is it Go (its build id
 * note, its build info, its function table), which Go built it (the build
 * info's version), and, stripped, its functions from Go's own function table
 * (gopclntab.c reads the table). */
#include "objfile/gofile.h"

#include <errno.h>
#include <gelf.h>
#include <inttypes.h>
#include <libelf.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "objfile/objfile_int.h"
#include "objfile/gopclntab.h"

/* A Go build id note ("Go", type 4) in a PT_NOTE segment. */
static bool has_go_note(const struct objfile *ef, Elf *elf)
{
	const struct objfile_priv *p = ef->priv;
	size_t phnum;

	if (elf_getphdrnum(elf, &phnum))
		return false;
	for (size_t i = 0; i < phnum; i++) {
		GElf_Phdr ph;
		const unsigned char *b;
		uint64_t off = 0;

		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_NOTE ||
		    !(b = objfile_raw_at(p, ph.p_offset, ph.p_filesz)))
			continue;
		while (ph.p_filesz - off >= 12) {
			uint32_t nsz, dsz, type;
			uint64_t nalign, dalign;

			memcpy(&nsz, b + off, 4);
			memcpy(&dsz, b + off + 4, 4);
			memcpy(&type, b + off + 8, 4);
			nalign = ((uint64_t)nsz + 3) & ~3ull;
			dalign = ((uint64_t)dsz + 3) & ~3ull;
			if (nalign + dalign > ph.p_filesz - off - 12)
				break;
			if (type == 4 && nsz == 3 && !memcmp(b + off + 12, "Go", 3))
				return true;
			off += 12 + nalign + dalign;
		}
	}
	return false;
}

#define GO_BUILDINFO_MAGIC "\xff Go buildinf:"
#define GO_VERSION_MAX 64

/* The Go version from the build info b[0..len) ("go1.19.8"): inline since
 * Go 1.18 (flag 2: a varint length and the bytes at offset 32), before that
 * a pointer at offset 16 to a Go string header (pointer, length). */
static char *go_buildinfo_version(const struct objfile *ef, const unsigned char *b, size_t len)
{
	char ver[GO_VERSION_MAX + 1];
	uint64_t n = 0;
	const unsigned char *s = NULL;
	unsigned ptrsize, flags;

	if (len < 32 || memcmp(b, GO_BUILDINFO_MAGIC, 14))
		return NULL;
	ptrsize = b[14];
	flags = b[15];
	if (flags & 1)
		return NULL;	/* big-endian: not an x86-64 program */
	if (flags & 2) {
		size_t off = 32;

		for (unsigned shift = 0; off < len && shift < 64; shift += 7) {
			n |= (uint64_t)(b[off] & 0x7f) << shift;
			if (!(b[off++] & 0x80)) {
				s = b + off;
				break;
			}
		}
		if (!s || n > len - off)
			return NULL;
	} else if (ptrsize == 8) {
		uint64_t hdr, str;
		const unsigned char *h;

		memcpy(&hdr, b + 16, 8);
		if (!(h = objfile_image_at(ef, hdr, 16)))
			return NULL;
		memcpy(&str, h, 8);
		memcpy(&n, h + 8, 8);
		if (n > GO_VERSION_MAX || !(s = objfile_image_at(ef, str, n)))
			return NULL;
	} else {
		return NULL;
	}
	if (n < 3 || n > GO_VERSION_MAX)
		return NULL;
	for (uint64_t i = 0; i < n; i++)
		if (s[i] <= ' ' || s[i] >= 0x7f)
			return NULL;
	memcpy(ver, s, n);
	ver[n] = 0;
	return strdup(ver);
}

/* Which version of Go built it: from the build info, by its section, else
 * (a Go program only) searched for in the writable segments as Go's
 * debug/buildinfo does. Sets is_go when the section is there. */
int gofile_version(struct objfile *ef, Elf *elf)
{
	const unsigned char *b;
	size_t len = 0;

	b = objfile_scn_named(ef, elf, ".go.buildinfo", &len, NULL);
	if (b) {
		ef->is_go = true;
	} else if (ef->is_go) {
		/* linked externally the section may be merged away: the build
		 * info is 16-byte aligned in a writable segment */
		for (size_t i = 0; i < ef->nsegs && !b; i++) {
			const struct objfile_seg *s = &ef->segs[i];
			const unsigned char *seg;

			if (!(s->flags & PF_W) ||
			    !(seg = objfile_raw_at(ef->priv, s->offset, s->filesz)))
				continue;
			for (uint64_t off = (16 - (s->vaddr & 15)) & 15; off + 32 <= s->filesz;
			     off += 16)
				if (!memcmp(seg + off, GO_BUILDINFO_MAGIC, 14)) {
					b = seg + off;
					len = s->filesz - off;
					break;
				}
		}
	}
	if (b && !(ef->go_version = go_buildinfo_version(ef, b, len)) && errno == ENOMEM)
		return -ENOMEM;
	return 0;
}

/* Is this a Go program? From the build id note, the build info and the
 * function table's section (or, later, the table found in the segments:
 * gofile_load_funcs). */
int gofile_detect(struct objfile *ef, Elf *elf)
{
	size_t len;

	ef->is_go = has_go_note(ef, elf) ||
		    objfile_scn_named(ef, elf, ".gopclntab", &len, NULL) ||
		    objfile_scn_named(ef, elf, ".data.rel.ro.gopclntab", &len, NULL);
	return gofile_version(ef, elf);
}

/* Go's linker writes the '·' (U+00B7) of a name as '.' in the ELF symbol
 * table ("type:.eq.net.dialResult·2" is "type:.eq.net.dialResult.2"): the
 * same here, so that a function has one name, stripped or not. */
static void go_middle_dot(const char *name)
{
	char *w = (char *)name;

	for (const char *r = name; *r; r++) {
		if (r[0] == '\xc2' && r[1] == '\xb7') {
			*w++ = '.';
			r++;
			continue;
		}
		*w++ = *r;
	}
	*w = 0;
}

/* Go's linker names a function of Go's stack ABI0 NAME.abi0 in .symtab
 * when one of the register ABI (ABIInternal) has the same name, as a
 * wrapper of one by the other: so does this, from the table's two
 * functions of that name, so that a function has one name stripped or not
 * ("runtime.goexit.abi0", assembly; "runtime.cgocallbackg.abi0", the
 * wrapper through which assembly calls the Go function). Of the two, the
 * ABI0 one is in assembly, else it is the wrapper: the greater funcID
 * (the wrapper's is the last of the runtime's values). An assembly
 * function alone of its name keeps it: the linker adds .abi0 where the
 * register-ABI symbol of the name exists, even if it was then dropped,
 * which the table does not say (Go's own tracebacks print the table's
 * name). */
static int name_cmp(const void *a, const void *b)
{
	const struct gopclntab_func *x = *(const struct gopclntab_func *const *)a,
				    *y = *(const struct gopclntab_func *const *)b;
	int c = strcmp(x->name, y->name);

	return c ? c : x->entry < y->entry ? -1 : x->entry > y->entry;
}

static int mark_abi0(struct gopclntab_func *f, size_t n, bool *abi0)
{
	struct gopclntab_func **by = malloc((n ? n : 1) * sizeof(*by));

	if (!by)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		by[i] = &f[i];
	qsort(by, n, sizeof(*by), name_cmp);
	for (size_t i = 0, j; i < n; i = j) {
		for (j = i + 1; j < n && !strcmp(by[j]->name, by[i]->name); j++)
			;
		if (j - i != 2)
			continue;
		if (by[i]->asm_abi0 != by[i + 1]->asm_abi0)
			abi0[(by[i]->asm_abi0 ? by[i] : by[i + 1]) - f] = true;
		else if (!by[i]->asm_abi0 && by[i]->funcid != by[i + 1]->funcid)
			abi0[(by[i]->funcid > by[i + 1]->funcid ? by[i] : by[i + 1]) - f] = true;
	}
	free(by);
	return 0;
}

/* The function table at tab[0..len) (link-time address vaddr): checked,
 * its text start corrected, into ef's private state; its functions into
 * sv when sv is not NULL. false if it is not a table whose functions lie in
 * this file's code. */
static bool try_gopclntab(const struct objfile *ef, Elf *elf, const unsigned char *tab,
			  size_t len, uint64_t vaddr, bool quiet, struct objfile_symvec *sv, int *err)
{
	struct objfile_priv *p = ef->priv;
	struct gopclntab_hdr h;
	struct gopclntab_func *f = NULL;
	bool *abi0 = NULL;
	ssize_t n;
	size_t added = 0;

	*err = 0;
	if (gopclntab_header(tab, len, &h)) {
		if (!quiet)
			log_warn("%s: .gopclntab is not a Go function table uscope can read",
				 ef->path);
		return false;
	}
	/* a PIE linker may leave the relocated word 0 in the file */
	if (h.version >= GOPCLNTAB_118 && !objfile_vaddr_is_exec(ef, h.text_start) &&
	    objfile_relative_reloc_at(elf, vaddr + h.text_start_off, &h.text_start))
		log_debug("%s: Go's text start from its relocation: 0x%" PRIx64, ef->path,
			  h.text_start);
	n = gopclntab_funcs(tab, len, &h, &f);
	if (n == -ENOMEM) {
		*err = -ENOMEM;
		return false;
	}
	if (n <= 0 || !objfile_vaddr_is_exec(ef, f[0].entry)) {
		if (!quiet)
			log_warn("%s: Go's function table (.gopclntab) is corrupt or does not "
				 "describe this file's code: no functions from it", ef->path);
		free(f);
		return false;
	}
	p->go_tab = tab;
	p->go_tablen = len;
	p->go_hdr = h;
	if (!sv) {
		free(f);
		return true;
	}
	abi0 = calloc((size_t)n, sizeof(*abi0));
	if (!abi0 || mark_abi0(f, (size_t)n, abi0)) {
		free(abi0);
		free(f);
		*err = -ENOMEM;
		return false;
	}
	for (ssize_t i = 0; i < n; i++) {
		size_t nl = strlen(f[i].name);
		char *nm;

		if (!objfile_vaddr_is_exec(ef, f[i].entry))
			continue;
		nm = malloc(nl + sizeof(".abi0"));
		if (!nm) {
			*err = -ENOMEM;
			break;
		}
		memcpy(nm, f[i].name, nl + 1);
		if (abi0[i])
			memcpy(nm + nl, ".abi0", sizeof(".abi0"));
		*err = objfile_symvec_add(sv, nm, strlen(nm), NULL, f[i].entry,
				  f[i].end - f[i].entry,
				  OBJFILE_SYM_GOPCLNTAB | (f[i].asm_abi0 ? OBJFILE_SYM_GO_ABI0 : 0));
		free(nm);
		if (*err)
			break;
		go_middle_dot(sv->v[sv->n - 1].name);
		added++;
	}
	free(abi0);
	free(f);
	if (!*err)
		log_debug("%s: %zu functions from Go's function table (format of Go %s)", ef->path,
			  added, h.version == GOPCLNTAB_12 ? "1.2-1.15" : h.version == GOPCLNTAB_116 ?
			  "1.16-1.17" : h.version == GOPCLNTAB_118 ? "1.18-1.19" : "1.20+");
	return !*err;
}

/* Go's function table of the file, found and kept (objfile_go_pclntab);
 * with sv, the functions of a Go program whose .symtab has none (stripped)
 * from it. The table is found by its section: .gopclntab, or
 * .data.rel.ro.gopclntab in a PIE Go's own linker made. An external linker
 * (cgo, -linkmode=external) merges the latter into .data.rel.ro, and a file
 * may have lost its section headers (sstrip): then the table is searched
 * for by its header in the read-only and RELRO segments, 8-byte aligned,
 * and taken only if its functions are this file's code. */
int gofile_load_funcs(struct objfile *ef, Elf *elf, struct objfile_symvec *sv)
{
	static const char *const names[] = {".gopclntab", ".data.rel.ro.gopclntab"};
	static const unsigned char magics[4][4] = {
		{0xfb, 0xff, 0xff, 0xff}, {0xfa, 0xff, 0xff, 0xff},
		{0xf0, 0xff, 0xff, 0xff}, {0xf1, 0xff, 0xff, 0xff},
	};
	size_t shnum = 0;
	int err;

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		uint64_t addr = 0;
		size_t len = 0;
		const unsigned char *tab = objfile_scn_named(ef, elf, names[i], &len, &addr);

		if (tab) {
			ef->is_go = true;
			try_gopclntab(ef, elf, tab, len, addr, false, sv, &err);
			return err;
		}
	}
	if (!ef->is_go && !elf_getshdrnum(elf, &shnum) && shnum)
		return 0;
	for (size_t i = 0; i < ef->nsegs; i++) {
		const struct objfile_seg *s = &ef->segs[i];
		const unsigned char *seg;

		if ((s->flags & PF_X) || !(seg = objfile_raw_at(ef->priv, s->offset, s->filesz)))
			continue;
		for (uint64_t off = (8 - (s->vaddr & 7)) & 7; off + 16 <= s->filesz; off += 8) {
			const unsigned char *c = seg + off;
			bool magic = false;

			if (c[4] || c[5] || c[6] != 1 || c[7] != 8)
				continue;
			for (int k = 0; k < 4; k++)
				magic |= !memcmp(c, magics[k], 4);
			if (!magic)
				continue;
			if (try_gopclntab(ef, elf, c, s->filesz - off, s->vaddr + off, true, sv,
					  &err)) {
				log_debug("%s: Go's function table found at 0x%" PRIx64, ef->path,
					  s->vaddr + off);
				ef->is_go = true;
				return 0;
			}
			if (err)
				return err;
		}
	}
	return 0;
}

const void *objfile_go_pclntab(const struct objfile *ef, size_t *len, struct gopclntab_hdr *h)
{
	const struct objfile_priv *p = ef->priv;

	if (!p || !p->go_tab)
		return NULL;
	*len = p->go_tablen;
	*h = p->go_hdr;
	return p->go_tab;
}

int objfile_go_line(const struct objfile *ef, uint64_t vaddr, const char **file,
		    unsigned *line)
{
	struct gopclntab_hdr h;
	struct gopclntab_func f;
	size_t len = 0;
	const void *t = objfile_go_pclntab(ef, &len, &h);
	int32_t fno, ln, inl = -1;

	/* code inlined into the function: pcln has the inlined function's
	 * position, which is not the function's own (the inlined calls are in
	 * a table outside .gopclntab), so none */
	if (!t || gopclntab_func_at(t, len, &h, vaddr, &f) || !f.pcfile || !f.pcln ||
	    (f.inltree && !gopclntab_pcvalue(t, len, &h, f.inltree, f.entry, f.end, vaddr, &inl) &&
	     inl >= 0) ||
	    gopclntab_pcvalue(t, len, &h, f.pcfile, f.entry, f.end, vaddr, &fno) ||
	    gopclntab_pcvalue(t, len, &h, f.pcln, f.entry, f.end, vaddr, &ln) || ln <= 0 ||
	    !(*file = gopclntab_file(t, len, &h, &f, fno)))
		return -ENOENT;
	*line = (unsigned)ln;
	return 0;
}
