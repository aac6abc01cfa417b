/* ELF files: opening, segments, file offsets (libelf).
 *
 * The file is mmap'd read-only for the life of the struct objfile; libelf is used
 * while indexing (program headers, section headers, symbol tables, symbol
 * versions) and released afterwards. Everything the caller sees (names,
 * versions, paths) is a private copy owned by the struct objfile. Here: open and
 * close, the program headers and the dynamic segment, vaddr <-> file offset
 * and reads of the file image; the symbols are symtab.c's and symbols.c's. */
#include "objfile/objfile.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <libelf.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/log.h"
#include "objfile/objfile_int.h"
#include "objfile/gofile.h"

/* ---- raw file access ------------------------------------------------- */

static int seg_find_vaddr(const struct objfile *ef, uint64_t vaddr)
{
	for (size_t i = 0; i < ef->nsegs; i++) {
		const struct objfile_seg *s = &ef->segs[i];
		if (vaddr >= s->vaddr && vaddr - s->vaddr < s->filesz)
			return (int)i;
	}
	return -1;
}

int objfile_vaddr_to_offset(const struct objfile *ef, uint64_t vaddr, uint64_t *off)
{
	int i = seg_find_vaddr(ef, vaddr);

	if (i < 0)
		return -ENOENT;
	*off = vaddr - ef->segs[i].vaddr + ef->segs[i].offset;
	return 0;
}

int objfile_offset_to_vaddr(const struct objfile *ef, uint64_t off, uint64_t *vaddr)
{
	for (size_t i = 0; i < ef->nsegs; i++) {
		const struct objfile_seg *s = &ef->segs[i];
		if (off >= s->offset && off - s->offset < s->filesz) {
			*vaddr = off - s->offset + s->vaddr;
			return 0;
		}
	}
	return -ENOENT;
}

bool objfile_vaddr_is_exec(const struct objfile *ef, uint64_t vaddr)
{
	for (size_t i = 0; i < ef->nsegs; i++) {
		const struct objfile_seg *s = &ef->segs[i];
		if ((s->flags & PF_X) && vaddr >= s->vaddr && vaddr - s->vaddr < s->memsz)
			return true;
	}
	return false;
}

const void *objfile_raw_at(const struct objfile_priv *p, uint64_t off, uint64_t len)
{
	if (off > p->mapsz || len > p->mapsz - off)
		return NULL;
	return p->map + off;
}

const char *objfile_raw_str(const struct objfile_priv *p, uint64_t off, uint64_t limit)
{
	if (limit > p->mapsz)
		limit = p->mapsz;
	if (off >= limit)
		return NULL;
	if (!memchr(p->map + off, 0, limit - off))
		return NULL;
	return (const char *)p->map + off;
}

int objfile_read(const struct objfile *ef, uint64_t vaddr, void *buf, size_t len)
{
	const struct objfile_priv *p = ef->priv;
	unsigned char *dst = buf;

	while (len) {
		int i = seg_find_vaddr(ef, vaddr);
		const struct objfile_seg *s;
		uint64_t in, n;
		const void *src;

		if (i < 0) {
			log_error("%s: address 0x%" PRIx64 " is not in the file image",
				  ef->path, vaddr);
			return -ENOENT;
		}
		s = &ef->segs[i];
		in = vaddr - s->vaddr;
		n = s->filesz - in;
		if (n > len)
			n = len;
		src = objfile_raw_at(p, s->offset + in, n);
		if (!src) {
			log_error("%s: segment at 0x%" PRIx64 " is truncated", ef->path,
				  s->vaddr);
			return -EIO;
		}
		memcpy(dst, src, n);
		dst += n;
		vaddr += n;
		len -= n;
	}
	return 0;
}

const unsigned char *objfile_image_at(const struct objfile *ef, uint64_t vaddr,
				      uint64_t len)
{
	int i = seg_find_vaddr(ef, vaddr);
	const struct objfile_seg *s;

	if (i < 0)
		return NULL;
	s = &ef->segs[i];
	if (len > s->filesz - (vaddr - s->vaddr))
		return NULL;
	return objfile_raw_at(ef->priv, s->offset + (vaddr - s->vaddr), len);
}

/* ---- open/close ---------------------------------------------------- */

static char *xstrdup_opt(const char *s)
{
	return s ? strdup(s) : NULL;
}

void objfile_close(struct objfile *ef)
{
	struct objfile_priv *p;

	if (!ef)
		return;
	p = ef->priv;
	for (size_t i = 0; i < ef->nsyms; i++)
		objfile_sym_free(&ef->syms[i]);
	free(ef->syms);
	for (size_t i = 0; i < ef->nneeded; i++)
		free(ef->needed[i]);
	free(ef->needed);
	free(ef->segs);
	free(ef->path);
	free(ef->soname);
	free(ef->runpath);
	free(ef->rpath);
	free(ef->interp);
	free(ef->go_version);
	if (p) {
		if (p->cfi)
			dwarf_cfi_end(p->cfi);
		if (p->elf)
			elf_end(p->elf);
		if (p->fd >= 0)
			close(p->fd);
		if (p->map)
			munmap((void *)p->map, p->mapsz);
		free(p->byaddr);
		free(p);
	}
	free(ef);
}

static int load_dynamic(struct objfile *ef, const GElf_Phdr *dynph,
			struct objfile_dyninfo *di)
{
	const struct objfile_priv *p = ef->priv;
	uint64_t n, stroff = 0, strend;
	const unsigned char *base;
	uint64_t soname = UINT64_MAX, rpath = UINT64_MAX, runpath = UINT64_MAX;
	size_t nneeded = 0;

	if (!(base = objfile_raw_at(p, dynph->p_offset, dynph->p_filesz)))
		return 0;
	n = dynph->p_filesz / sizeof(Elf64_Dyn);
	for (uint64_t i = 0; i < n; i++) {
		Elf64_Dyn d;
		memcpy(&d, base + i * sizeof(d), sizeof(d));
		if (d.d_tag == DT_NULL)
			break;
		switch (d.d_tag) {
		case DT_NEEDED: nneeded++; break;
		case DT_STRTAB: di->strtab = d.d_un.d_ptr; break;
		case DT_STRSZ: di->strsz = d.d_un.d_val; break;
		case DT_SYMTAB: di->symtab = d.d_un.d_ptr; break;
		case DT_SYMENT: di->syment = d.d_un.d_val; break;
		case DT_HASH: di->hash = d.d_un.d_ptr; break;
		case DT_GNU_HASH: di->gnu_hash = d.d_un.d_ptr; break;
		case DT_VERSYM: di->versym = d.d_un.d_ptr; break;
		case DT_VERDEF: di->verdef = d.d_un.d_ptr; break;
		case DT_VERDEFNUM: di->verdefnum = d.d_un.d_val; break;
		case DT_SONAME: soname = d.d_un.d_val; break;
		case DT_RPATH: rpath = d.d_un.d_val; break;
		case DT_RUNPATH: runpath = d.d_un.d_val; break;
		default: break;
		}
	}
	if (!di->strtab || objfile_vaddr_to_offset(ef, di->strtab, &stroff)) {
		if (nneeded || soname != UINT64_MAX)
			log_warn("%s: dynamic string table not found", ef->path);
		return 0;
	}
	strend = di->strsz ? stroff + di->strsz : p->mapsz;
#define DSTR(v) ((v) == UINT64_MAX ? NULL : objfile_raw_str(p, stroff + (v), strend))
	if (soname != UINT64_MAX && !(ef->soname = xstrdup_opt(DSTR(soname))) &&
	    DSTR(soname))
		return -ENOMEM;
	if (rpath != UINT64_MAX && !(ef->rpath = xstrdup_opt(DSTR(rpath))) &&
	    DSTR(rpath))
		return -ENOMEM;
	if (runpath != UINT64_MAX && !(ef->runpath = xstrdup_opt(DSTR(runpath))) &&
	    DSTR(runpath))
		return -ENOMEM;
	if (nneeded) {
		ef->needed = calloc(nneeded, sizeof(char *));
		if (!ef->needed)
			return -ENOMEM;
		for (uint64_t i = 0; i < n && ef->nneeded < nneeded; i++) {
			Elf64_Dyn d;
			const char *s;
			memcpy(&d, base + i * sizeof(d), sizeof(d));
			if (d.d_tag == DT_NULL)
				break;
			if (d.d_tag != DT_NEEDED)
				continue;
			if (!(s = DSTR(d.d_un.d_val))) {
				log_warn("%s: bad DT_NEEDED string", ef->path);
				continue;
			}
			if (!(ef->needed[ef->nneeded] = strdup(s)))
				return -ENOMEM;
			ef->nneeded++;
		}
	}
#undef DSTR
	return 0;
}

static int index_elf(struct objfile *ef, Elf *elf, bool syms)
{
	struct objfile_priv *p = ef->priv;
	struct objfile_dyninfo di = { 0 };
	GElf_Ehdr eh;
	GElf_Phdr dynph;
	bool have_dyn = false;
	size_t phnum, nload = 0;
	int err;

	if (elf_kind(elf) != ELF_K_ELF || !gelf_getehdr(elf, &eh) ||
	    gelf_getclass(elf) != ELFCLASS64 || eh.e_machine != EM_X86_64 ||
	    eh.e_ident[EI_DATA] != ELFDATA2LSB) {
		log_info("%s: not a 64-bit x86-64 ELF file", ef->path);
		return -ENOEXEC;
	}
	ef->is_dyn = eh.e_type == ET_DYN;
	ef->is_exec_type = eh.e_type == ET_EXEC;
	if (elf_getphdrnum(elf, &phnum)) {
		log_info("%s: bad program headers: %s", ef->path, elf_errmsg(-1));
		return -ENOEXEC;
	}
	ef->segs = calloc(phnum ? phnum : 1, sizeof(*ef->segs));
	if (!ef->segs)
		return -ENOMEM;
	for (size_t i = 0; i < phnum; i++) {
		GElf_Phdr ph;
		if (!gelf_getphdr(elf, (int)i, &ph))
			continue;
		if (ph.p_type == PT_LOAD) {
			struct objfile_seg *s = &ef->segs[nload++];
			s->vaddr = ph.p_vaddr;
			s->memsz = ph.p_memsz;
			s->offset = ph.p_offset;
			s->filesz = ph.p_filesz;
			s->flags = ph.p_flags;
		} else if (ph.p_type == PT_INTERP && !ef->interp) {
			const char *s = objfile_raw_str(p, ph.p_offset, ph.p_offset + ph.p_filesz);
			if (s && !(ef->interp = strdup(s)))
				return -ENOMEM;
		} else if (ph.p_type == PT_DYNAMIC && !have_dyn) {
			dynph = ph;
			have_dyn = true;
		}
	}
	ef->nsegs = nload;
	if (have_dyn && (err = load_dynamic(ef, &dynph, &di)))
		return err;
	if (!syms)
		return 0;
	if ((err = gofile_detect(ef, elf)))
		return err;
	return objfile_load_syms(ef, elf, &di);
}

static int open_file(const char *path, bool syms, struct objfile **out)
{
	struct objfile *ef;
	struct objfile_priv *p;
	struct stat st;
	Elf *elf;
	int fd, err;

	*out = NULL;
	if (elf_version(EV_CURRENT) == EV_NONE) {
		log_error("libelf initialisation failed: %s", elf_errmsg(-1));
		return -ENOSYS;
	}
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		err = -errno;
		log_info("cannot open %s: %s", path, strerror(errno));
		return err;
	}
	if (fstat(fd, &st) < 0) {
		err = -errno;
		close(fd);
		return err;
	}
	if (!S_ISREG(st.st_mode) || st.st_size < (off_t)sizeof(Elf64_Ehdr)) {
		log_info("%s: not a 64-bit x86-64 ELF file", path);
		close(fd);
		return S_ISDIR(st.st_mode) ? -EISDIR : -ENOEXEC;
	}
	ef = calloc(1, sizeof(*ef));
	p = calloc(1, sizeof(*p));
	if (!ef || !p || !(ef->path = strdup(path))) {
		free(ef);
		free(p);
		close(fd);
		return -ENOMEM;
	}
	ef->priv = p;
	p->fd = -1;
	p->mapsz = (size_t)st.st_size;
	/* shared, not private: the kernel places a uprobe's breakpoint in every
	 * private mapping of the file that may be executable (another session's,
	 * bpftrace's, perf's: VM_MAYEXEC), ours too, and the code decoded from
	 * here would have its int3s; a shared mapping it leaves alone */
	p->map = mmap(NULL, p->mapsz, PROT_READ, MAP_SHARED, fd, 0);
	if (p->map == MAP_FAILED) {
		err = -errno;
		p->map = NULL;
		log_info("cannot map %s: %s", path, strerror(errno));
		close(fd);
		objfile_close(ef);
		return err;
	}
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf) {
		log_info("%s: %s", path, elf_errmsg(-1));
		close(fd);
		objfile_close(ef);
		return -ENOEXEC;
	}
	err = index_elf(ef, elf, syms);
	p->elf = elf;
	p->fd = fd;
	if (err) {
		objfile_close(ef);
		return err;
	}
	*out = ef;
	return 0;
}

int objfile_open(const char *path, struct objfile **out)
{
	return open_file(path, true, out);
}

int objfile_open_headers(const char *path, struct objfile **out)
{
	return open_file(path, false, out);
}
