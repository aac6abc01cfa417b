/* The functions of an ELF file, collected when it is opened: .symtab and
 * .dynsym with their symbol versions, or the dynamic symbol table through
 * DT_SYMTAB when there are no section headers, or (a stripped Go program)
 * Go's function table through src/go/gofile.c; then merged, sorted by name,
 * demangled and indexed by address. */
#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/grow.h"
#include "objfile/demangle.h"
#include "objfile/objfile_int.h"
#include "objfile/gofile.h"

/* ---- symbol collection ----------------------------------------------- */

int objfile_symvec_add(struct objfile_symvec *sv, const char *name, size_t namelen,
		       const char *version, uint64_t vaddr, uint64_t size,
		       unsigned flags)
{
	struct objfile_sym *s;

	if (!namelen)
		return 0;
	if (core_reserve(sv->v, sv->cap, sv->n + 1, 256))
		return -ENOMEM;
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

void objfile_sym_free(struct objfile_sym *s)
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
static int add_gsym(struct objfile_symvec *sv, const GElf_Sym *sym, const char *name,
		    bool dynsym, const char *version, bool hidden)
{
	int type = GELF_ST_TYPE(sym->st_info);
	int bind = GELF_ST_BIND(sym->st_info);
	unsigned flags = dynsym ? OBJFILE_SYM_DYNSYM : OBJFILE_SYM_SYMTAB;
	size_t namelen;

	if (type != STT_FUNC && type != STT_GNU_IFUNC)
		return 0;
	if (sym->st_shndx == SHN_UNDEF || !name || !*name)
		return 0;
	if (type == STT_GNU_IFUNC)
		flags |= OBJFILE_SYM_IFUNC;
	if (bind == STB_WEAK)
		flags |= OBJFILE_SYM_WEAK;
	else if (bind == STB_LOCAL)
		flags |= OBJFILE_SYM_LOCAL;

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
		flags |= hidden ? OBJFILE_SYM_HIDDEN_VER : OBJFILE_SYM_DEFAULT_VER;
	return objfile_symvec_add(sv, name, namelen, version, sym->st_value, sym->st_size,
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
			   struct objfile_symvec *sv)
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

static uint64_t dyn_count_syms(const struct objfile *ef, const struct objfile_dyninfo *di)
{
	const struct objfile_priv *p = ef->priv;
	uint64_t off;
	const uint32_t *w;

	if (di->hash && !objfile_vaddr_to_offset(ef, di->hash, &off) &&
	    (w = objfile_raw_at(p, off, 8)) && !((uintptr_t)w & 3))
		return w[1];	/* nchain */
	if (di->gnu_hash && !objfile_vaddr_to_offset(ef, di->gnu_hash, &off) &&
	    (w = objfile_raw_at(p, off, 16)) && !((uintptr_t)w & 3)) {
		uint32_t nbuckets = w[0], symoffset = w[1], bloom = w[2];
		uint64_t boff = off + 16 + (uint64_t)bloom * 8;
		const uint32_t *buckets = objfile_raw_at(p, boff, (uint64_t)nbuckets * 4);
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
			const uint32_t *c = objfile_raw_at(p, coff + (i - symoffset) * 4, 4);
			if (!c)
				return 0;
			if (*c & 1)
				return i + 1;
		}
	}
	return 0;
}

/* .dynsym through DT_SYMTAB & co., for files without section headers. */
static int load_dynsym_from_dynamic(const struct objfile *ef,
				    const struct objfile_dyninfo *di, struct objfile_symvec *sv)
{
	const struct objfile_priv *p = ef->priv;
	uint64_t symoff, stroff, versymoff = 0, nsyms;
	struct vertab vt = { 0 };
	const uint16_t *versym = NULL;
	int err = 0;

	if (!di->symtab || !di->strtab ||
	    objfile_vaddr_to_offset(ef, di->symtab, &symoff) ||
	    objfile_vaddr_to_offset(ef, di->strtab, &stroff))
		return 0;
	if (di->syment && di->syment != sizeof(Elf64_Sym))
		return 0;
	nsyms = dyn_count_syms(ef, di);
	if (!nsyms || !objfile_raw_at(p, symoff, nsyms * sizeof(Elf64_Sym))) {
		log_debug("%s: cannot size the dynamic symbol table", ef->path);
		return 0;
	}
	if (di->versym && !objfile_vaddr_to_offset(ef, di->versym, &versymoff))
		versym = objfile_raw_at(p, versymoff, nsyms * 2);
	if (versym && ((uintptr_t)versym & 1))
		versym = NULL;
	if (versym && di->verdef) {
		uint64_t off;
		if (!objfile_vaddr_to_offset(ef, di->verdef, &off)) {
			for (uint64_t i = 0; i < (di->verdefnum ? di->verdefnum : 0x7fff); i++) {
				Elf64_Verdef vd;
				Elf64_Verdaux vda;
				const void *r = objfile_raw_at(p, off, sizeof(vd));
				if (!r)
					break;
				memcpy(&vd, r, sizeof(vd));
				r = objfile_raw_at(p, off + vd.vd_aux, sizeof(vda));
				if (r && !(vd.vd_flags & VER_FLG_BASE) && vd.vd_cnt) {
					const char *nm;
					memcpy(&vda, r, sizeof(vda));
					nm = objfile_raw_str(p, stroff + vda.vda_name,
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
		name = objfile_raw_str(p, stroff + sym.st_name,
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
	const struct objfile_sym *a = pa, *b = pb;
	int c = strcmp(a->name, b->name);

	if (c)
		return c;
	if (a->vaddr != b->vaddr)
		return a->vaddr < b->vaddr ? -1 : 1;
	return cmp_str_null_first(a->version, b->version);
}

int objfile_cmp_symp_addr(const void *pa, const void *pb)
{
	const struct objfile_sym *a = *(const struct objfile_sym *const *)pa;
	const struct objfile_sym *b = *(const struct objfile_sym *const *)pb;

	if (a->vaddr != b->vaddr)
		return a->vaddr < b->vaddr ? -1 : 1;
	/* same order as ef->syms (pointers into one array) */
	return a < b ? -1 : a > b;
}

/* LOCAL and WEAK only survive a merge if both entries have them. */
static unsigned merge_flags(unsigned a, unsigned b)
{
	unsigned both = OBJFILE_SYM_LOCAL | OBJFILE_SYM_WEAK;

	return ((a | b) & ~both) | (a & b & both);
}

/* Sort, then merge (name, version, vaddr) duplicates, and fold unversioned
 * entries (typically .symtab copies of .dynsym symbols) into a versioned
 * entry of the same name at the same address. */
static void syms_normalize(struct objfile_symvec *sv)
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
			    (sv->v[k].flags & OBJFILE_SYM_DEFAULT_VER)))
				keep = k;
			if (keep != j && (sv->v[keep].flags & OBJFILE_SYM_DEFAULT_VER))
				break;
		}
		for (k = i; k < j; k++) {
			struct objfile_sym *s = &sv->v[k];
			struct objfile_sym *into = NULL;

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
				objfile_sym_free(s);
				continue;
			}
			sv->v[w++] = *s;
		}
		i = j;
	}
	sv->n = w;
}

int objfile_load_syms(struct objfile *ef, Elf *elf, const struct objfile_dyninfo *di)
{
	struct objfile_symvec sv = { 0 };
	struct vertab vt = { 0 };
	Elf_Scn *scn = NULL, *versym_scn = NULL, *verdef_scn = NULL;
	Elf_Data *versym = NULL;
	bool have_tables = false;
	struct objfile_priv *p = ef->priv;
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
		symtab_funcs = sv.v[i].flags & OBJFILE_SYM_SYMTAB;
	/* and an unstripped one's table (for its stacks where it has no CFI) */
	if ((!symtab_funcs || ef->is_go) &&
	    (err = gofile_load_funcs(ef, elf, symtab_funcs ? NULL : &sv)))
		goto out;
	/* a Go program known by its table alone: its version now */
	if (ef->is_go && !ef->go_version && (err = gofile_version(ef, elf)))
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
			struct objfile_sym *sy = &ef->syms[i];
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
		qsort(p->byaddr, ef->nsyms, sizeof(*p->byaddr), objfile_cmp_symp_addr);
	}
out:
	for (size_t i = 0; i < sv.n; i++)
		objfile_sym_free(&sv.v[i]);
	free(sv.v);
	free(vt.names);
	return err;
}
