/* Go's pcsp tables as unwind rows (unwgo.h). The Go runtime unwinds its
 * own stacks with them; Go's linker compiles the same tables into the
 * .debug_frame of an unstripped program, a row for each pcsp range, so
 * the rows here are those a -w or -s -w build lost. */
#include <elf.h>
#include <errno.h>
#include <gelf.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "objfile/objfile.h"
#include "stack/unwgo.h"

/* Go's build id note ("Go", type 4), which Go's linker writes into every
 * ELF program, or a section only Go programs have: a Go program, before
 * its file is indexed. */
static bool elf_is_go(Elf *e)
{
	static const char *const scns[] = {".gopclntab", ".data.rel.ro.gopclntab",
					   ".go.buildinfo"};
	size_t n = 0, shstrndx;
	Elf_Scn *scn = NULL;

	if (elf_getphdrnum(e, &n) == 0) {
		for (size_t i = 0; i < n; i++) {
			GElf_Phdr ph;
			Elf_Data *d;
			GElf_Nhdr nh;
			size_t off = 0, noff, doff;

			if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_NOTE ||
			    !(d = elf_getdata_rawchunk(e, (int64_t)ph.p_offset, ph.p_filesz,
						       ELF_T_NHDR)))
				continue;
			while ((off = gelf_getnote(d, off, &nh, &noff, &doff)) > 0)
				if (nh.n_type == 4 && nh.n_namesz == 3 &&
				    !memcmp((const char *)d->d_buf + noff, "Go", 3))
					return true;
		}
	}
	if (elf_getshdrstrndx(e, &shstrndx) != 0)
		return false;
	while ((scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		const char *nm;

		if (!gelf_getshdr(scn, &sh) || !(nm = elf_strptr(e, shstrndx, sh.sh_name)))
			continue;
		for (size_t k = 0; k < sizeof(scns) / sizeof(scns[0]); k++)
			if (!strcmp(nm, scns[k]))
				return true;
	}
	return false;
}

int stack_gotab_open(const char *path, Elf *e, struct stack_gotab *g)
{
	ssize_t n;
	size_t k = 0;
	int err;

	memset(g, 0, sizeof(*g));
	if (!elf_is_go(e))
		return -ENODATA;
	err = objfile_open(path, &g->ef);
	if (err)
		return err == -ENOMEM ? err : -ENODATA;
	g->tab = objfile_go_pclntab(g->ef, &g->len, &g->h);
	n = g->tab ? gopclntab_funcs(g->tab, g->len, &g->h, &g->fn) : 0;
	if (n < 0) {
		err = (int)n;
		goto fail;
	}
	/* those with a pcsp table, in the file's code */
	for (ssize_t i = 0; i < n; i++)
		if (g->fn[i].pcsp && g->fn[i].end > g->fn[i].entry &&
		    objfile_vaddr_is_exec(g->ef, g->fn[i].entry))
			g->fn[k++] = g->fn[i];
	g->n = k;
	if (!k) {
		err = -ENODATA;
		goto fail;
	}
	log_debug("stack: %s: %zu Go functions with pcsp tables", path, k);
	return 0;
fail:
	stack_gotab_close(g);
	return err == -ENOMEM ? err : -ENODATA;
}

void stack_gotab_close(struct stack_gotab *g)
{
	free(g->fn);
	objfile_close(g->ef);
	memset(g, 0, sizeof(*g));
}

struct stack_row stack_go_row(int32_t spdelta)
{
	struct stack_row r = {0, 0, STACK_OP_RSP | (STACK_RBP_SAME << STACK_RBP_SHIFT), 0};
	int64_t off = (int64_t)spdelta + 8;

	if (spdelta < 0) {
		r.op = STACK_OP_BAD;	/* above the entry's rsp: not a table to follow */
	} else if (off <= INT16_MAX) {
		r.cfa_off = (int16_t)off;
	} else if (off % 8 == 0 && off / 8 <= INT16_MAX) {
		r.cfa_off = (int16_t)(off / 8);	/* a frame of 32 KiB or more */
		r.op |= STACK_CFA_X8;
	} else {
		r.op = STACK_OP_RANGE;
	}
	return r;
}
