/* ELF files: symbols, segments, file offsets (libelf).
 *
 * The file is mmap'd read-only for the life of the elf_file; libelf is used
 * while indexing (program headers, section headers, symbol tables, symbol
 * versions) and released afterwards. Everything the caller sees (names,
 * versions, paths) is a private copy owned by the elf_file. */
#include "elf/elf.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <gelf.h>
#include <inttypes.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/log.h"
#include "elf/demangle.h"
#include "go/gopclntab.h"

struct elf_priv {
	const unsigned char *map;	/* the whole file, read-only */
	size_t mapsz;
	int fd;				/* kept open for elf, for section lookups */
	Elf *elf;
	const struct elf_sym **byaddr;	/* syms sorted by vaddr, then name */
	uint64_t maxsize;		/* largest st_size, bounds elf_func_at */
	Dwarf_CFI *cfi;			/* .eh_frame, read when first asked (elf_fde_at) */
	bool cfi_tried;
};

/* ---- raw file access ------------------------------------------------- */

static int seg_find_vaddr(const struct elf_file *ef, uint64_t vaddr)
{
	for (size_t i = 0; i < ef->nsegs; i++) {
		const struct elf_seg *s = &ef->segs[i];
		if (vaddr >= s->vaddr && vaddr - s->vaddr < s->filesz)
			return (int)i;
	}
	return -1;
}

int elf_vaddr_to_offset(const struct elf_file *ef, uint64_t vaddr, uint64_t *off)
{
	int i = seg_find_vaddr(ef, vaddr);

	if (i < 0)
		return -ENOENT;
	*off = vaddr - ef->segs[i].vaddr + ef->segs[i].offset;
	return 0;
}

int elf_offset_to_vaddr(const struct elf_file *ef, uint64_t off, uint64_t *vaddr)
{
	for (size_t i = 0; i < ef->nsegs; i++) {
		const struct elf_seg *s = &ef->segs[i];
		if (off >= s->offset && off - s->offset < s->filesz) {
			*vaddr = off - s->offset + s->vaddr;
			return 0;
		}
	}
	return -ENOENT;
}

bool elf_vaddr_is_exec(const struct elf_file *ef, uint64_t vaddr)
{
	for (size_t i = 0; i < ef->nsegs; i++) {
		const struct elf_seg *s = &ef->segs[i];
		if ((s->flags & PF_X) && vaddr >= s->vaddr && vaddr - s->vaddr < s->memsz)
			return true;
	}
	return false;
}

/* Bytes [off, off+len) of the file, or NULL. */
static const void *raw_at(const struct elf_priv *p, uint64_t off, uint64_t len)
{
	if (off > p->mapsz || len > p->mapsz - off)
		return NULL;
	return p->map + off;
}

/* A NUL-terminated string at off, not crossing limit (file offset), or NULL. */
static const char *raw_str(const struct elf_priv *p, uint64_t off, uint64_t limit)
{
	if (limit > p->mapsz)
		limit = p->mapsz;
	if (off >= limit)
		return NULL;
	if (!memchr(p->map + off, 0, limit - off))
		return NULL;
	return (const char *)p->map + off;
}

int elf_read(const struct elf_file *ef, uint64_t vaddr, void *buf, size_t len)
{
	const struct elf_priv *p = ef->priv;
	unsigned char *dst = buf;

	while (len) {
		int i = seg_find_vaddr(ef, vaddr);
		const struct elf_seg *s;
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
		src = raw_at(p, s->offset + in, n);
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

/* ---- symbol collection ----------------------------------------------- */

struct symvec {
	struct elf_sym *v;
	size_t n, cap;
};

static int symvec_add(struct symvec *sv, const char *name, size_t namelen,
		      const char *version, uint64_t vaddr, uint64_t size,
		      unsigned flags)
{
	struct elf_sym *s;

	if (!namelen)
		return 0;
	if (sv->n == sv->cap) {
		size_t cap = sv->cap ? sv->cap * 2 : 256;
		struct elf_sym *v = realloc(sv->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		sv->v = v;
		sv->cap = cap;
	}
	s = &sv->v[sv->n];
	s->name = strndup(name, namelen);
	s->version = version ? strdup(version) : NULL;
	if (!s->name || (version && !s->version)) {
		free((char *)s->name);
		free((char *)s->version);
		return -ENOMEM;
	}
	s->vaddr = vaddr;
	s->size = size;
	s->flags = flags;
	s->demangled = s->qualname = NULL;
	sv->n++;
	return 0;
}

static void sym_free_strings(struct elf_sym *s)
{
	free((char *)s->name);
	free((char *)s->version);
	free((char *)s->demangled);
	free((char *)s->qualname);
	s->name = s->version = s->demangled = s->qualname = NULL;
}

/* Add one symbol table entry if it is a defined function. In .symtab the
 * name may carry its version ("foo@VER" / "foo@@VER"); in .dynsym the
 * version comes from the versym table (version/hidden). */
static int add_gsym(struct symvec *sv, const GElf_Sym *sym, const char *name,
		    bool dynsym, const char *version, bool hidden)
{
	int type = GELF_ST_TYPE(sym->st_info);
	int bind = GELF_ST_BIND(sym->st_info);
	unsigned flags = dynsym ? ELF_SYM_DYNSYM : ELF_SYM_SYMTAB;
	size_t namelen;

	if (type != STT_FUNC && type != STT_GNU_IFUNC)
		return 0;
	if (sym->st_shndx == SHN_UNDEF || !name || !*name)
		return 0;
	if (type == STT_GNU_IFUNC)
		flags |= ELF_SYM_IFUNC;
	if (bind == STB_WEAK)
		flags |= ELF_SYM_WEAK;
	else if (bind == STB_LOCAL)
		flags |= ELF_SYM_LOCAL;

	namelen = strlen(name);
	if (!dynsym) {
		const char *at = strchr(name, '@');
		if (at) {
			namelen = (size_t)(at - name);
			if (at[1] == '@') {
				version = at + 2;
				hidden = false;
			} else {
				version = at + 1;
				hidden = true;
			}
			if (!*version)
				version = NULL;
		}
	}
	if (version)
		flags |= hidden ? ELF_SYM_HIDDEN_VER : ELF_SYM_DEFAULT_VER;
	return symvec_add(sv, name, namelen, version, sym->st_value, sym->st_size,
			  flags);
}

/* Version index -> name, from a verdef table. */
struct vertab {
	const char **names;	/* indexed by vd_ndx, NULL for none/base */
	size_t n;
};

static int vertab_set(struct vertab *vt, unsigned ndx, const char *name)
{
	if (ndx >= 0x8000)
		return 0;
	if (ndx >= vt->n) {
		size_t n = ndx + 1;
		const char **v = realloc(vt->names, n * sizeof(*v));
		if (!v)
			return -ENOMEM;
		for (size_t i = vt->n; i < n; i++)
			v[i] = NULL;
		vt->names = v;
		vt->n = n;
	}
	vt->names[ndx] = name;
	return 0;
}

static const char *vertab_get(const struct vertab *vt, unsigned versym, bool *hidden)
{
	unsigned ndx = versym & 0x7fff;

	*hidden = versym & 0x8000;
	if (ndx <= VER_NDX_GLOBAL || ndx >= vt->n)
		return NULL;
	return vt->names[ndx];
}

static int load_verdef_scn(Elf *elf, Elf_Scn *scn, struct vertab *vt)
{
	GElf_Shdr sh;
	Elf_Data *d;
	size_t off = 0;

	if (!gelf_getshdr(scn, &sh) || !(d = elf_getdata(scn, NULL)) || !d->d_buf)
		return 0;
	for (size_t i = 0; i < 0x8000; i++) {
		GElf_Verdef vd;
		GElf_Verdaux vda;
		if (!gelf_getverdef(d, (int)off, &vd))
			break;
		if (!(vd.vd_flags & VER_FLG_BASE) && vd.vd_cnt &&
		    gelf_getverdaux(d, (int)(off + vd.vd_aux), &vda)) {
			const char *nm = elf_strptr(elf, sh.sh_link, vda.vda_name);
			if (nm && vertab_set(vt, vd.vd_ndx, nm) < 0)
				return -ENOMEM;
		}
		if (!vd.vd_next)
			break;
		off += vd.vd_next;
	}
	return 0;
}

static int load_symtab_scn(Elf *elf, Elf_Scn *scn, const GElf_Shdr *sh,
			   Elf_Data *versym, const struct vertab *vt,
			   struct symvec *sv)
{
	bool dyn = sh->sh_type == SHT_DYNSYM;
	Elf_Data *d = elf_getdata(scn, NULL);
	size_t n;

	if (!d || !d->d_buf || !sh->sh_entsize)
		return 0;
	n = sh->sh_size / sh->sh_entsize;
	for (size_t i = 1; i < n; i++) {
		GElf_Sym sym;
		const char *name, *ver = NULL;
		bool hidden = false;
		int err;

		if (!gelf_getsym(d, (int)i, &sym))
			break;
		if (GELF_ST_TYPE(sym.st_info) != STT_FUNC &&
		    GELF_ST_TYPE(sym.st_info) != STT_GNU_IFUNC)
			continue;
		name = elf_strptr(elf, sh->sh_link, sym.st_name);
		if (dyn && versym) {
			GElf_Versym vs;
			if (gelf_getversym(versym, (int)i, &vs))
				ver = vertab_get(vt, vs, &hidden);
		}
		err = add_gsym(sv, &sym, name, dyn, ver, hidden);
		if (err)
			return err;
	}
	return 0;
}

/* Dynamic-segment values used for the no-section-header fallback. */
struct dyninfo {
	uint64_t strtab, strsz, symtab, syment, hash, gnu_hash, versym, verdef,
		 verdefnum;
};

static uint64_t dyn_count_syms(const struct elf_file *ef, const struct dyninfo *di)
{
	const struct elf_priv *p = ef->priv;
	uint64_t off;
	const uint32_t *w;

	if (di->hash && !elf_vaddr_to_offset(ef, di->hash, &off) &&
	    (w = raw_at(p, off, 8)) && !((uintptr_t)w & 3))
		return w[1];	/* nchain */
	if (di->gnu_hash && !elf_vaddr_to_offset(ef, di->gnu_hash, &off) &&
	    (w = raw_at(p, off, 16)) && !((uintptr_t)w & 3)) {
		uint32_t nbuckets = w[0], symoffset = w[1], bloom = w[2];
		uint64_t boff = off + 16 + (uint64_t)bloom * 8;
		const uint32_t *buckets = raw_at(p, boff, (uint64_t)nbuckets * 4);
		uint32_t max = 0;
		uint64_t coff;

		if (!buckets)
			return 0;
		for (uint32_t i = 0; i < nbuckets; i++)
			if (buckets[i] > max)
				max = buckets[i];
		if (max < symoffset)
			return symoffset;
		coff = boff + (uint64_t)nbuckets * 4;
		for (uint64_t i = max; i < (1u << 24); i++) {
			const uint32_t *c = raw_at(p, coff + (i - symoffset) * 4, 4);
			if (!c)
				return 0;
			if (*c & 1)
				return i + 1;
		}
	}
	return 0;
}

/* .dynsym through DT_SYMTAB & co., for files without section headers. */
static int load_dynsym_from_dynamic(const struct elf_file *ef,
				    const struct dyninfo *di, struct symvec *sv)
{
	const struct elf_priv *p = ef->priv;
	uint64_t symoff, stroff, versymoff = 0, nsyms;
	struct vertab vt = { 0 };
	const uint16_t *versym = NULL;
	int err = 0;

	if (!di->symtab || !di->strtab ||
	    elf_vaddr_to_offset(ef, di->symtab, &symoff) ||
	    elf_vaddr_to_offset(ef, di->strtab, &stroff))
		return 0;
	if (di->syment && di->syment != sizeof(Elf64_Sym))
		return 0;
	nsyms = dyn_count_syms(ef, di);
	if (!nsyms || !raw_at(p, symoff, nsyms * sizeof(Elf64_Sym))) {
		log_debug("%s: cannot size the dynamic symbol table", ef->path);
		return 0;
	}
	if (di->versym && !elf_vaddr_to_offset(ef, di->versym, &versymoff))
		versym = raw_at(p, versymoff, nsyms * 2);
	if (versym && ((uintptr_t)versym & 1))
		versym = NULL;
	if (versym && di->verdef) {
		uint64_t off;
		if (!elf_vaddr_to_offset(ef, di->verdef, &off)) {
			for (uint64_t i = 0; i < (di->verdefnum ? di->verdefnum : 0x7fff); i++) {
				Elf64_Verdef vd;
				Elf64_Verdaux vda;
				const void *r = raw_at(p, off, sizeof(vd));
				if (!r)
					break;
				memcpy(&vd, r, sizeof(vd));
				r = raw_at(p, off + vd.vd_aux, sizeof(vda));
				if (r && !(vd.vd_flags & VER_FLG_BASE) && vd.vd_cnt) {
					const char *nm;
					memcpy(&vda, r, sizeof(vda));
					nm = raw_str(p, stroff + vda.vda_name,
						     di->strsz ? stroff + di->strsz : p->mapsz);
					if (nm && (err = vertab_set(&vt, vd.vd_ndx, nm)) < 0)
						goto out;
				}
				if (!vd.vd_next)
					break;
				off += vd.vd_next;
			}
		}
	}
	for (uint64_t i = 1; i < nsyms; i++) {
		Elf64_Sym raw;
		GElf_Sym sym;
		const char *name, *ver = NULL;
		bool hidden = false;

		memcpy(&raw, p->map + symoff + i * sizeof(raw), sizeof(raw));
		sym.st_name = raw.st_name;
		sym.st_info = raw.st_info;
		sym.st_other = raw.st_other;
		sym.st_shndx = raw.st_shndx;
		sym.st_value = raw.st_value;
		sym.st_size = raw.st_size;
		name = raw_str(p, stroff + sym.st_name,
			       di->strsz ? stroff + di->strsz : p->mapsz);
		if (versym)
			ver = vertab_get(&vt, versym[i], &hidden);
		if ((err = add_gsym(sv, &sym, name, true, ver, hidden)))
			goto out;
	}
out:
	free(vt.names);
	return err;
}

static int cmp_str_null_first(const char *a, const char *b)
{
	if (!a || !b)
		return (a != NULL) - (b != NULL);
	return strcmp(a, b);
}

static int cmp_sym_name_addr(const void *pa, const void *pb)
{
	const struct elf_sym *a = pa, *b = pb;
	int c = strcmp(a->name, b->name);

	if (c)
		return c;
	if (a->vaddr != b->vaddr)
		return a->vaddr < b->vaddr ? -1 : 1;
	return cmp_str_null_first(a->version, b->version);
}

static int cmp_symp_addr(const void *pa, const void *pb)
{
	const struct elf_sym *a = *(const struct elf_sym *const *)pa;
	const struct elf_sym *b = *(const struct elf_sym *const *)pb;

	if (a->vaddr != b->vaddr)
		return a->vaddr < b->vaddr ? -1 : 1;
	/* same order as ef->syms (pointers into one array) */
	return a < b ? -1 : a > b;
}

/* LOCAL and WEAK only survive a merge if both entries have them. */
static unsigned merge_flags(unsigned a, unsigned b)
{
	unsigned both = ELF_SYM_LOCAL | ELF_SYM_WEAK;

	return ((a | b) & ~both) | (a & b & both);
}

/* Sort, then merge (name, version, vaddr) duplicates, and fold unversioned
 * entries (typically .symtab copies of .dynsym symbols) into a versioned
 * entry of the same name at the same address. */
static void syms_normalize(struct symvec *sv)
{
	size_t w = 0;

	if (!sv->n)
		return;
	qsort(sv->v, sv->n, sizeof(*sv->v), cmp_sym_name_addr);
	for (size_t i = 0; i < sv->n;) {
		size_t j = i, k, keep;
		/* run of the same (name, vaddr) */
		while (j < sv->n && !strcmp(sv->v[j].name, sv->v[i].name) &&
		       sv->v[j].vaddr == sv->v[i].vaddr)
			j++;
		/* unversioned entries sort first; pick a versioned target */
		keep = j;
		for (k = i; k < j; k++) {
			if (sv->v[k].version && (keep == j ||
			    (sv->v[k].flags & ELF_SYM_DEFAULT_VER)))
				keep = k;
			if (keep != j && (sv->v[keep].flags & ELF_SYM_DEFAULT_VER))
				break;
		}
		for (k = i; k < j; k++) {
			struct elf_sym *s = &sv->v[k];
			struct elf_sym *into = NULL;

			if (!s->version && keep != j)
				into = &sv->v[keep];
			else if (w > 0 && !strcmp(sv->v[w - 1].name, s->name) &&
				 sv->v[w - 1].vaddr == s->vaddr &&
				 !cmp_str_null_first(sv->v[w - 1].version, s->version))
				into = &sv->v[w - 1];
			if (into) {
				into->flags = merge_flags(into->flags, s->flags);
				if (!into->size)
					into->size = s->size;
				sym_free_strings(s);
				continue;
			}
			sv->v[w++] = *s;
		}
		i = j;
	}
	sv->n = w;
}

/* ---- open/close ---------------------------------------------------- */

static char *xstrdup_opt(const char *s)
{
	return s ? strdup(s) : NULL;
}

void elf_close(struct elf_file *ef)
{
	struct elf_priv *p;

	if (!ef)
		return;
	p = ef->priv;
	for (size_t i = 0; i < ef->nsyms; i++)
		sym_free_strings(&ef->syms[i]);
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

static int load_dynamic(struct elf_file *ef, const GElf_Phdr *dynph,
			struct dyninfo *di)
{
	const struct elf_priv *p = ef->priv;
	uint64_t n, stroff = 0, strend;
	const unsigned char *base;
	uint64_t soname = UINT64_MAX, rpath = UINT64_MAX, runpath = UINT64_MAX;
	size_t nneeded = 0;

	if (!(base = raw_at(p, dynph->p_offset, dynph->p_filesz)))
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
	if (!di->strtab || elf_vaddr_to_offset(ef, di->strtab, &stroff)) {
		if (nneeded || soname != UINT64_MAX)
			log_warn("%s: dynamic string table not found", ef->path);
		return 0;
	}
	strend = di->strsz ? stroff + di->strsz : p->mapsz;
#define DSTR(v) ((v) == UINT64_MAX ? NULL : raw_str(p, stroff + (v), strend))
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

/* ---- Go programs ------------------------------------------------------ */

/* The section named name, through the section headers, with its bytes in
 * the mapped file (*len 0 and NULL for SHT_NOBITS). NULL if none. */
static const unsigned char *scn_named(const struct elf_file *ef, Elf *elf, const char *name,
				      size_t *len, uint64_t *addr)
{
	const struct elf_priv *p = ef->priv;
	Elf_Scn *scn = NULL;
	size_t shstrndx;

	if (elf_getshdrstrndx(elf, &shstrndx))
		return NULL;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		const char *nm;
		const unsigned char *b;

		if (!gelf_getshdr(scn, &sh) || !(nm = elf_strptr(elf, shstrndx, sh.sh_name)) ||
		    strcmp(nm, name) || sh.sh_type == SHT_NOBITS)
			continue;
		b = raw_at(p, sh.sh_offset, sh.sh_size);
		if (!b) {
			log_warn("%s: section %s runs past the end of the file", ef->path, name);
			return NULL;
		}
		*len = sh.sh_size;
		if (addr)
			*addr = sh.sh_addr;
		return b;
	}
	return NULL;
}

/* A Go build id note ("Go", type 4) in a PT_NOTE segment. */
static bool has_go_note(const struct elf_file *ef, Elf *elf)
{
	const struct elf_priv *p = ef->priv;
	size_t phnum;

	if (elf_getphdrnum(elf, &phnum))
		return false;
	for (size_t i = 0; i < phnum; i++) {
		GElf_Phdr ph;
		const unsigned char *b;
		uint64_t off = 0;

		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_NOTE ||
		    !(b = raw_at(p, ph.p_offset, ph.p_filesz)))
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

/* len bytes at vaddr, within one segment's file image, or NULL. */
static const unsigned char *image_at(const struct elf_file *ef, uint64_t vaddr, uint64_t len)
{
	int i = seg_find_vaddr(ef, vaddr);
	const struct elf_seg *s;

	if (i < 0)
		return NULL;
	s = &ef->segs[i];
	if (len > s->filesz - (vaddr - s->vaddr))
		return NULL;
	return raw_at(ef->priv, s->offset + (vaddr - s->vaddr), len);
}

#define GO_BUILDINFO_MAGIC "\xff Go buildinf:"
#define GO_VERSION_MAX 64

/* The Go version from the build info b[0..len) ("go1.19.8"): inline since
 * Go 1.18 (flag 2: a varint length and the bytes at offset 32), before that
 * a pointer at offset 16 to a Go string header (pointer, length). */
static char *go_buildinfo_version(const struct elf_file *ef, const unsigned char *b, size_t len)
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
		if (!(h = image_at(ef, hdr, 16)))
			return NULL;
		memcpy(&str, h, 8);
		memcpy(&n, h + 8, 8);
		if (n > GO_VERSION_MAX || !(s = image_at(ef, str, n)))
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
static int go_version(struct elf_file *ef, Elf *elf)
{
	const unsigned char *b;
	size_t len = 0;

	b = scn_named(ef, elf, ".go.buildinfo", &len, NULL);
	if (b) {
		ef->is_go = true;
	} else if (ef->is_go) {
		/* linked externally the section may be merged away: the build
		 * info is 16-byte aligned in a writable segment */
		for (size_t i = 0; i < ef->nsegs && !b; i++) {
			const struct elf_seg *s = &ef->segs[i];
			const unsigned char *seg;

			if (!(s->flags & PF_W) || !(seg = raw_at(ef->priv, s->offset, s->filesz)))
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
 * load_gopclntab). */
static int go_detect(struct elf_file *ef, Elf *elf)
{
	size_t len;

	ef->is_go = has_go_note(ef, elf) || scn_named(ef, elf, ".gopclntab", &len, NULL) ||
		    scn_named(ef, elf, ".data.rel.ro.gopclntab", &len, NULL);
	return go_version(ef, elf);
}

/* The address of a R_X86_64_RELATIVE relocation's target at vaddr (what a
 * PIE's word there holds once loaded), from the SHT_RELA sections. */
static bool relative_reloc_at(Elf *elf, uint64_t vaddr, uint64_t *val)
{
	Elf_Scn *scn = NULL;

	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_RELA || !sh.sh_entsize ||
		    !(d = elf_getdata(scn, NULL)))
			continue;
		for (size_t i = 0; i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Rela r;

			if (!gelf_getrela(d, (int)i, &r))
				break;
			if (r.r_offset == vaddr && GELF_R_TYPE(r.r_info) == R_X86_64_RELATIVE) {
				*val = (uint64_t)r.r_addend;
				return true;
			}
		}
	}
	return false;
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

/* The function table at tab[0..len) (link-time address vaddr) into sv.
 * false if it is not a table whose functions lie in this file's code. */
static bool try_gopclntab(const struct elf_file *ef, Elf *elf, const unsigned char *tab,
			  size_t len, uint64_t vaddr, bool quiet, struct symvec *sv, int *err)
{
	struct gopclntab_hdr h;
	struct gopclntab_func *f = NULL;
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
	if (h.version >= GOPCLNTAB_118 && !elf_vaddr_is_exec(ef, h.text_start) &&
	    relative_reloc_at(elf, vaddr + h.text_start_off, &h.text_start))
		log_debug("%s: Go's text start from its relocation: 0x%" PRIx64, ef->path,
			  h.text_start);
	n = gopclntab_funcs(tab, len, &h, &f);
	if (n == -ENOMEM) {
		*err = -ENOMEM;
		return false;
	}
	if (n <= 0 || !elf_vaddr_is_exec(ef, f[0].entry)) {
		if (!quiet)
			log_warn("%s: Go's function table (.gopclntab) is corrupt or does not "
				 "describe this file's code: no functions from it", ef->path);
		free(f);
		return false;
	}
	for (ssize_t i = 0; i < n; i++) {
		if (!elf_vaddr_is_exec(ef, f[i].entry))
			continue;
		*err = symvec_add(sv, f[i].name, strlen(f[i].name), NULL, f[i].entry,
				  f[i].end - f[i].entry,
				  ELF_SYM_GOPCLNTAB | (f[i].asm_abi0 ? ELF_SYM_GO_ABI0 : 0));
		if (*err)
			break;
		go_middle_dot(sv->v[sv->n - 1].name);
		added++;
	}
	free(f);
	if (!*err)
		log_debug("%s: %zu functions from Go's function table (format of Go %s)", ef->path,
			  added, h.version == GOPCLNTAB_12 ? "1.2-1.15" : h.version == GOPCLNTAB_116 ?
			  "1.16-1.17" : h.version == GOPCLNTAB_118 ? "1.18-1.19" : "1.20+");
	return !*err;
}

/* The functions of a Go program whose .symtab has none (stripped), from
 * its function table. The table is found by its section: .gopclntab, or
 * .data.rel.ro.gopclntab in a PIE Go's own linker made. An external linker
 * (cgo, -linkmode=external) merges the latter into .data.rel.ro, and a file
 * may have lost its section headers (sstrip): then the table is searched
 * for by its header in the read-only and RELRO segments, 8-byte aligned,
 * and taken only if its functions are this file's code. */
static int load_gopclntab(struct elf_file *ef, Elf *elf, struct symvec *sv)
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
		const unsigned char *tab = scn_named(ef, elf, names[i], &len, &addr);

		if (tab) {
			ef->is_go = true;
			try_gopclntab(ef, elf, tab, len, addr, false, sv, &err);
			return err;
		}
	}
	if (!ef->is_go && !elf_getshdrnum(elf, &shnum) && shnum)
		return 0;
	for (size_t i = 0; i < ef->nsegs; i++) {
		const struct elf_seg *s = &ef->segs[i];
		const unsigned char *seg;

		if ((s->flags & PF_X) || !(seg = raw_at(ef->priv, s->offset, s->filesz)))
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

static int load_syms(struct elf_file *ef, Elf *elf, const struct dyninfo *di)
{
	struct symvec sv = { 0 };
	struct vertab vt = { 0 };
	Elf_Scn *scn = NULL, *versym_scn = NULL, *verdef_scn = NULL;
	Elf_Data *versym = NULL;
	bool have_tables = false;
	struct elf_priv *p = ef->priv;
	int err = 0;

	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh))
			continue;
		if (sh.sh_type == SHT_GNU_versym && !versym_scn)
			versym_scn = scn;
		else if (sh.sh_type == SHT_GNU_verdef && !verdef_scn)
			verdef_scn = scn;
	}
	if (versym_scn && verdef_scn) {
		versym = elf_getdata(versym_scn, NULL);
		if (versym && !versym->d_buf)
			versym = NULL;
		if ((err = load_verdef_scn(elf, verdef_scn, &vt)))
			goto out;
	}
	scn = NULL;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh))
			continue;
		if (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM)
			continue;
		have_tables = true;
		err = load_symtab_scn(elf, scn, &sh,
				      sh.sh_type == SHT_DYNSYM ? versym : NULL, &vt, &sv);
		if (err)
			goto out;
	}
	if (!have_tables && di->symtab) {
		log_debug("%s: no symbol table sections, reading DT_SYMTAB", ef->path);
		if ((err = load_dynsym_from_dynamic(ef, di, &sv)))
			goto out;
	}
	/* a stripped Go program: its names from Go's own function table */
	bool symtab_funcs = false;

	for (size_t i = 0; i < sv.n && !symtab_funcs; i++)
		symtab_funcs = sv.v[i].flags & ELF_SYM_SYMTAB;
	if (!symtab_funcs && (err = load_gopclntab(ef, elf, &sv)))
		goto out;
	/* a Go program known by its table alone: its version now */
	if (ef->is_go && !ef->go_version && (err = go_version(ef, elf)))
		goto out;
	if (ef->is_go)
		log_debug("%s: a Go program%s%s", ef->path, ef->go_version ? ", built by " : "",
			  ef->go_version ? ef->go_version : "");
	syms_normalize(&sv);
	ef->syms = sv.v;
	ef->nsyms = sv.n;
	sv.v = NULL;
	sv.n = 0;
	if (ef->nsyms) {
		p->byaddr = malloc(ef->nsyms * sizeof(*p->byaddr));
		if (!p->byaddr) {
			err = -ENOMEM;
			goto out;
		}
		for (size_t i = 0; i < ef->nsyms; i++) {
			struct elf_sym *sy = &ef->syms[i];
			char *full, *qual;

			if (demangle_name(sy->name, &full, &qual) == -ENOMEM) {
				err = -ENOMEM;
				goto out;
			}
			sy->demangled = full;
			sy->qualname = qual;
			p->byaddr[i] = &ef->syms[i];
			if (ef->syms[i].size > p->maxsize)
				p->maxsize = ef->syms[i].size;
		}
		qsort(p->byaddr, ef->nsyms, sizeof(*p->byaddr), cmp_symp_addr);
	}
out:
	for (size_t i = 0; i < sv.n; i++)
		sym_free_strings(&sv.v[i]);
	free(sv.v);
	free(vt.names);
	return err;
}

static int index_elf(struct elf_file *ef, Elf *elf)
{
	struct elf_priv *p = ef->priv;
	struct dyninfo di = { 0 };
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
			struct elf_seg *s = &ef->segs[nload++];
			s->vaddr = ph.p_vaddr;
			s->memsz = ph.p_memsz;
			s->offset = ph.p_offset;
			s->filesz = ph.p_filesz;
			s->flags = ph.p_flags;
		} else if (ph.p_type == PT_INTERP && !ef->interp) {
			const char *s = raw_str(p, ph.p_offset, ph.p_offset + ph.p_filesz);
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
	if ((err = go_detect(ef, elf)))
		return err;
	return load_syms(ef, elf, &di);
}

int elf_open(const char *path, struct elf_file **out)
{
	struct elf_file *ef;
	struct elf_priv *p;
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
	p->map = mmap(NULL, p->mapsz, PROT_READ, MAP_PRIVATE, fd, 0);
	if (p->map == MAP_FAILED) {
		err = -errno;
		p->map = NULL;
		log_info("cannot map %s: %s", path, strerror(errno));
		close(fd);
		elf_close(ef);
		return err;
	}
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf) {
		log_info("%s: %s", path, elf_errmsg(-1));
		close(fd);
		elf_close(ef);
		return -ENOEXEC;
	}
	err = index_elf(ef, elf);
	p->elf = elf;
	p->fd = fd;
	if (err) {
		elf_close(ef);
		return err;
	}
	*out = ef;
	return 0;
}

/* ---- lookups -------------------------------------------------------- */

/* First index whose name's first len bytes are >= key: since the names
 * are sorted, an exact match is the first of the names with that prefix. */
static size_t syms_lower_bound(const struct elf_file *ef, const char *key, size_t len)
{
	size_t lo = 0, hi = ef->nsyms;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const char *n = ef->syms[mid].name;
		if (strncmp(n, key, len) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static bool name_eq(const char *n, const char *key, size_t len)
{
	return !strncmp(n, key, len) && n[len] == 0;
}

/* Preference among aliases at one address. */
static int sym_pref(const struct elf_sym *s)
{
	if (s->flags & ELF_SYM_DEFAULT_VER)
		return 0;
	if (!s->version)
		return 1;
	return 2;
}

/* Of the candidates sel[0..nsel) (in address order), the hidden versions
 * are gone already: strong beats weak, aliases are one. */
static int pick_cands(const struct elf_file *ef, const char *name, const struct elf_sym **sel,
		      size_t nsel, bool any_strong, const struct elf_sym **out,
		      const struct elf_sym ***cands, size_t *ncands)
{
	const struct elf_sym **grp = sel;
	size_t naddr = 0;

	for (size_t i = 0; i < nsel; i++) {
		const struct elf_sym *s = sel[i];
		if (any_strong && (s->flags & ELF_SYM_WEAK))
			continue;
		if (naddr && grp[naddr - 1]->vaddr == s->vaddr) {
			if (sym_pref(s) < sym_pref(grp[naddr - 1]))
				grp[naddr - 1] = s;
			continue;
		}
		grp[naddr++] = s;
	}
	if (naddr == 0) {
		free(sel);
		return -ENOENT;
	}
	if (naddr == 1) {
		if (out)
			*out = grp[0];
		free(sel);
		return 0;
	}
	log_debug("%s: %zu functions named %s", ef->path, naddr, name);
	if (cands && ncands) {
		*cands = grp;
		*ncands = naddr;
	} else {
		free(sel);
	}
	return -EEXIST;
}

/* The C++ functions whose demangled name is name: with its parameters if
 * name has a '(', else without. */
static int lookup_demangled(const struct elf_file *ef, const char *name,
			    const struct elf_sym **out,
			    const struct elf_sym ***cands, size_t *ncands)
{
	bool params = strchr(name, '(') != NULL, any_strong = false, any_visible = false;
	const struct elf_sym **sel;
	size_t nsel = 0;

	sel = malloc((ef->nsyms ? ef->nsyms : 1) * sizeof(*sel));
	if (!sel)
		return -ENOMEM;
	for (size_t i = 0; i < ef->nsyms; i++) {
		const struct elf_sym *s = &ef->syms[i];

		if (s->demangled && demangle_same(name, params ? s->demangled : s->qualname)) {
			sel[nsel++] = s;
			if (!(s->flags & ELF_SYM_HIDDEN_VER))
				any_visible = true;
		}
	}
	size_t w = 0;

	for (size_t i = 0; i < nsel; i++) {
		if (any_visible && (sel[i]->flags & ELF_SYM_HIDDEN_VER))
			continue;
		if (!(sel[i]->flags & (ELF_SYM_WEAK | ELF_SYM_LOCAL)))
			any_strong = true;
		sel[w++] = sel[i];
	}
	qsort(sel, w, sizeof(*sel), cmp_symp_addr);
	return pick_cands(ef, name, sel, w, any_strong, out, cands, ncands);
}

int elf_func_lookup(const struct elf_file *ef, const char *name,
		    const struct elf_sym **out,
		    const struct elf_sym ***cands, size_t *ncands)
{
	const char *at = strchr(name, '@'), *qver = NULL;
	bool qdefault = false, any_strong = false, any_visible = false;
	size_t len = at ? (size_t)(at - name) : strlen(name);
	size_t lo, hi, nsel = 0;
	const struct elf_sym **sel;

	if (out)
		*out = NULL;
	if (cands)
		*cands = NULL;
	if (ncands)
		*ncands = 0;
	if (at) {
		qdefault = at[1] == '@';
		qver = at + (qdefault ? 2 : 1);
		if (!*qver)
			qver = NULL;
	}
	lo = syms_lower_bound(ef, name, len);
	hi = lo;
	while (hi < ef->nsyms && name_eq(ef->syms[hi].name, name, len))
		hi++;
	if (hi == lo)
		return at ? -ENOENT : lookup_demangled(ef, name, out, cands, ncands);

	sel = malloc((hi - lo) * sizeof(*sel));
	if (!sel)
		return -ENOMEM;
	for (size_t i = lo; i < hi; i++)
		if (!(ef->syms[i].flags & ELF_SYM_HIDDEN_VER))
			any_visible = true;
	for (size_t i = lo; i < hi; i++) {
		const struct elf_sym *s = &ef->syms[i];
		if (qver) {
			if (!s->version || strcmp(s->version, qver))
				continue;
			if (qdefault && !(s->flags & ELF_SYM_DEFAULT_VER))
				continue;
		} else if (any_visible && (s->flags & ELF_SYM_HIDDEN_VER)) {
			continue;
		}
		sel[nsel++] = s;
		if (!(s->flags & (ELF_SYM_WEAK | ELF_SYM_LOCAL)))
			any_strong = true;
	}
	/* grouped by address (sel is in address order) */
	return pick_cands(ef, name, sel, nsel, any_strong, out, cands, ncands);
}

struct match_ent {
	uint64_t vaddr;
	size_t idx;
};

static int cmp_match_ent(const void *pa, const void *pb)
{
	const struct match_ent *a = pa, *b = pb;

	if (a->vaddr != b->vaddr)
		return a->vaddr < b->vaddr ? -1 : 1;
	return (a->idx > b->idx) - (a->idx < b->idx);
}

bool elf_sym_match_cxx(const struct elf_sym *s, const char *glob)
{
	const char *dn;
	char *fg, *fs;
	size_t need;
	bool ok;

	if (!s->demangled)
		return false;
	dn = strchr(glob, '(') ? s->demangled : s->qualname;
	need = strlen(dn) + strlen(glob) + 2;
	fg = malloc(need);
	fs = malloc(need);
	if (fg && fs) {
		demangle_fold(glob, fg, need);
		demangle_fold(dn, fs, need);
	}
	ok = fg && fs && fnmatch(fg, fs, 0) == 0;
	free(fg);
	free(fs);
	return ok;
}

ssize_t elf_func_match(const struct elf_file *ef, const char *glob,
		       const struct elf_sym ***out)
{
	bool versioned = strchr(glob, '@') != NULL;
	struct match_ent *m;
	const struct elf_sym **res;
	size_t nm = 0, nres = 0;
	bool *keep;
	char *buf = NULL;
	size_t bufsz = 0;

	*out = NULL;
	if (!ef->nsyms)
		return 0;
	m = malloc(ef->nsyms * sizeof(*m));
	keep = calloc(ef->nsyms, sizeof(*keep));
	if (!m || !keep) {
		free(m);
		free(keep);
		return -ENOMEM;
	}
	for (size_t i = 0; i < ef->nsyms; i++) {
		const struct elf_sym *s = &ef->syms[i];
		const char *subject = s->name;
		int r;

		if (versioned) {
			size_t need = strlen(s->name) + (s->version ? strlen(s->version) : 0) + 3;
			if (need > bufsz) {
				char *nb = realloc(buf, need);
				if (!nb) {
					free(buf);
					free(m);
					free(keep);
					return -ENOMEM;
				}
				buf = nb;
				bufsz = need;
			}
			snprintf(buf, bufsz, "%s%s%s", s->name,
				 !s->version ? "" :
				 (s->flags & ELF_SYM_DEFAULT_VER) ? "@@" : "@",
				 s->version ? s->version : "");
			subject = buf;
		}
		r = fnmatch(glob, subject, 0);
		if (r == FNM_NOMATCH && !versioned && elf_sym_match_cxx(s, glob))
			r = 0;
		if (r == 0) {
			m[nm].vaddr = s->vaddr;
			m[nm].idx = i;
			nm++;
		} else if (r != FNM_NOMATCH) {
			log_error("bad pattern '%s'", glob);
			free(buf);
			free(m);
			free(keep);
			return -EINVAL;
		}
	}
	free(buf);
	qsort(m, nm, sizeof(*m), cmp_match_ent);
	for (size_t i = 0; i < nm; i++)
		if (i == 0 || m[i].vaddr != m[i - 1].vaddr) {
			keep[m[i].idx] = true;
			nres++;
		}
	free(m);
	if (!nres) {
		free(keep);
		return 0;
	}
	res = malloc(nres * sizeof(*res));
	if (!res) {
		free(keep);
		return -ENOMEM;
	}
	nres = 0;
	for (size_t i = 0; i < ef->nsyms; i++)
		if (keep[i])
			res[nres++] = &ef->syms[i];
	free(keep);
	*out = res;
	return (ssize_t)nres;
}

const struct elf_sym *elf_func_at(const struct elf_file *ef, uint64_t vaddr)
{
	const struct elf_priv *p = ef->priv;
	const struct elf_sym *best = NULL;
	size_t lo = 0, hi = ef->nsyms;

	if (!ef->nsyms)
		return NULL;
	/* first entry with start > vaddr */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (p->byaddr[mid]->vaddr <= vaddr)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* walk back: the innermost (highest start) containing function wins,
	 * among aliases the first in name order */
	for (size_t i = lo; i-- > 0;) {
		const struct elf_sym *s = p->byaddr[i];
		bool in;

		if (best && s->vaddr != best->vaddr)
			break;
		if (vaddr - s->vaddr > p->maxsize && !best)
			break;
		in = s->size ? vaddr - s->vaddr < s->size : vaddr == s->vaddr;
		if (in)
			best = s;
	}
	return best;
}

/* Optimal string alignment distance (Damerau-Levenshtein with adjacent
 * transpositions), case-insensitive. */
static size_t edit_distance(const char *a, size_t la, const char *b, size_t lb,
			    size_t *rows)
{
	size_t *r0 = rows, *r1 = rows + lb + 1, *r2 = rows + 2 * (lb + 1);

	for (size_t j = 0; j <= lb; j++)
		r1[j] = j;
	for (size_t i = 1; i <= la; i++) {
		size_t *t;
		r2[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			int ca = tolower((unsigned char)a[i - 1]);
			int cb = tolower((unsigned char)b[j - 1]);
			size_t cost = ca != cb;
			size_t v = r1[j] + 1;
			if (r2[j - 1] + 1 < v)
				v = r2[j - 1] + 1;
			if (r1[j - 1] + cost < v)
				v = r1[j - 1] + cost;
			if (i > 1 && j > 1 &&
			    ca == tolower((unsigned char)b[j - 2]) &&
			    tolower((unsigned char)a[i - 2]) == cb &&
			    r0[j - 2] + 1 < v)
				v = r0[j - 2] + 1;
			r2[j] = v;
		}
		t = r0; r0 = r1; r1 = r2; r2 = t;
	}
	return r1[lb];
}

struct suggest_ent {
	size_t score, dist;
	const char *name;
};

static int cmp_suggest(const void *pa, const void *pb)
{
	const struct suggest_ent *a = pa, *b = pb;

	if (a->score != b->score)
		return a->score < b->score ? -1 : 1;
	if (a->dist != b->dist)
		return a->dist < b->dist ? -1 : 1;
	return strcmp(a->name, b->name);
}

#define SUGGEST_MAXLEN 256

/* Candidates: names within max(2, len/3) edits, or containing the query
 * (case-insensitive; their distance counts half). Ranked by that score, then
 * distance, then name. Each name is suggested once. */
size_t elf_func_suggest(const struct elf_file *ef, const char *name,
			const char **out, size_t max)
{
	size_t qlen = strlen(name), thr, n = 0, nout = 0;
	bool params = strchr(name, '(') != NULL, mangled = !strncmp(name, "_Z", 2);
	struct suggest_ent *e;
	size_t *rows;

	if (!max || !ef->nsyms || !qlen)
		return 0;
	if (qlen > SUGGEST_MAXLEN)
		qlen = SUGGEST_MAXLEN;
	thr = qlen / 3 > 2 ? qlen / 3 : 2;
	e = malloc(ef->nsyms * sizeof(*e));
	rows = malloc(3 * (SUGGEST_MAXLEN + 1) * sizeof(*rows));
	if (!e || !rows) {
		free(e);
		free(rows);
		return 0;
	}
	for (size_t i = 0; i < ef->nsyms; i++) {
		const struct elf_sym *s = &ef->syms[i];
		/* a C++ function by its demangled name, unless asked by the
		 * mangled one */
		const char *nm = s->demangled && !mangled ? (params ? s->demangled : s->qualname) :
				 s->name;
		size_t ln = strlen(nm), d;
		bool sub;

		if (i > 0 && !strcmp(s->name, ef->syms[i - 1].name))
			continue;
		if (ln > SUGGEST_MAXLEN)
			ln = SUGGEST_MAXLEN;
		sub = strcasestr(nm, name) != NULL;
		if (!sub && (ln > qlen ? ln - qlen : qlen - ln) > thr)
			continue;
		d = edit_distance(nm, ln, name, qlen, rows);
		if (!sub && d > thr)
			continue;
		e[n].dist = d;
		e[n].score = sub ? d / 2 : d;
		e[n].name = mangled ? s->name : elf_sym_pretty(s);
		n++;
	}
	qsort(e, n, sizeof(*e), cmp_suggest);
	for (size_t i = 0; i < n && nout < max; i++) {
		bool dup = false;

		for (size_t k = 0; k < nout; k++)
			dup |= !strcmp(out[k], e[i].name);
		if (!dup)
			out[nout++] = e[i].name;
	}
	free(e);
	free(rows);
	return nout;
}

/* ---- raw section headers ---------------------------------------------- */

/* Section header i, bounds-checked against the mapped file. */
int elf_section_data(const struct elf_file *ef, const char *name, const void **data,
		     size_t *len, uint64_t *addr)
{
	Elf *elf = ((const struct elf_priv *)ef->priv)->elf;
	Elf_Scn *scn = NULL;
	size_t shstrndx;

	if (!elf || elf_getshdrstrndx(elf, &shstrndx))
		return -ENOENT;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		const char *nm;
		Elf_Data *d = NULL;

		if (!gelf_getshdr(scn, &sh) || !(nm = elf_strptr(elf, shstrndx, sh.sh_name)) ||
		    strcmp(nm, name))
			continue;
		if (sh.sh_type != SHT_NOBITS && sh.sh_size) {
			d = elf_rawdata(scn, NULL);
			if (!d || d->d_size != sh.sh_size) {
				log_error("%s: section %s runs past the end of the file", ef->path,
					  name);
				return -EIO;
			}
		}
		if (data)
			*data = d ? d->d_buf : NULL;
		if (len)
			*len = d ? d->d_size : 0;
		if (addr)
			*addr = sh.sh_addr;
		return 0;
	}
	return -ENOENT;
}

int elf_exec_section_at(const struct elf_file *ef, uint64_t vaddr, uint64_t *start,
			uint64_t *end)
{
	Elf *elf = ((const struct elf_priv *)ef->priv)->elf;
	Elf_Scn *scn = NULL;

	if (!elf)
		return -ENOENT;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;

		if (!gelf_getshdr(scn, &sh) || (sh.sh_flags & (SHF_ALLOC | SHF_EXECINSTR)) !=
		    (SHF_ALLOC | SHF_EXECINSTR) || sh.sh_type == SHT_NOBITS ||
		    vaddr < sh.sh_addr || vaddr - sh.sh_addr > sh.sh_size)
			continue;
		*start = sh.sh_addr;
		*end = sh.sh_addr + sh.sh_size;
		return 0;
	}
	return -ENOENT;
}

bool elf_in_plt(const struct elf_file *ef, uint64_t vaddr)
{
	static const char *const names[] = {".plt", ".plt.got", ".plt.sec", ".iplt"};
	Elf *elf = ((const struct elf_priv *)ef->priv)->elf;
	Elf_Scn *scn = NULL;
	size_t shstrndx;

	if (!elf || elf_getshdrstrndx(elf, &shstrndx))
		return false;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		const char *name;

		if (!gelf_getshdr(scn, &sh) || vaddr < sh.sh_addr || vaddr - sh.sh_addr >= sh.sh_size ||
		    !(sh.sh_flags & SHF_EXECINSTR))
			continue;
		name = elf_strptr(elf, shstrndx, sh.sh_name);
		for (size_t i = 0; name && i < sizeof(names) / sizeof(names[0]); i++)
			if (!strcmp(name, names[i]))
				return true;
	}
	return false;
}

/* Binding preference for elf_symbol_vaddr: lower wins. */
static int bind_rank(int bind)
{
	switch (bind) {
	case STB_GLOBAL:
	case STB_GNU_UNIQUE:
		return 0;
	case STB_WEAK:
		return 1;
	case STB_LOCAL:
		return 2;
	default:
		return 3;
	}
}

int elf_symbol_vaddr(const struct elf_file *ef, const char *name, uint64_t *vaddr)
{
	Elf *elf = ((const struct elf_priv *)ef->priv)->elf;
	Elf_Scn *scn = NULL;
	uint64_t best = 0;
	int best_rank = 4;

	if (!*name)
		return -ENOENT;
	while (elf && (scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM) ||
		    !sh.sh_entsize || !(d = elf_getdata(scn, NULL)))
			continue;
		for (size_t k = 1; k < sh.sh_size / sh.sh_entsize; k++) {
			GElf_Sym sym;
			const char *nm;
			int type, rank;

			if (!gelf_getsym(d, (int)k, &sym))
				break;
			type = GELF_ST_TYPE(sym.st_info);
			if (sym.st_shndx == SHN_UNDEF || sym.st_shndx == SHN_COMMON ||
			    type == STT_SECTION || type == STT_FILE || type == STT_TLS)
				continue;
			nm = elf_strptr(elf, sh.sh_link, sym.st_name);
			if (!nm || strcmp(nm, name))
				continue;
			rank = bind_rank(GELF_ST_BIND(sym.st_info));
			if (rank < best_rank) {
				best_rank = rank;
				best = sym.st_value;
			}
		}
	}
	if (best_rank == 4) {
		/* no section headers: the functions read through DT_SYMTAB */
		const struct elf_sym *s;

		if (elf_func_lookup(ef, name, &s, NULL, NULL))
			return -ENOENT;
		best = s->vaddr;
	}
	*vaddr = best;
	return 0;
}

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
int elf_fde_at(const struct elf_file *ef, uint64_t pc, struct elf_fde *out)
{
	struct elf_priv *p = ef->priv;
	const uint8_t *h;
	size_t hlen, lo, hi, count;
	uint64_t hdr, fde, start;
	uint8_t f[16];
	uint32_t flen, range;

	if (elf_section_data(ef, ".eh_frame_hdr", (const void **)&h, &hlen, &hdr) || !h ||
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
	if (elf_read(ef, fde, f, sizeof(f)))
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
