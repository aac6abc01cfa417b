/* An ELF file's sections, through its section headers: a section's bytes
 * by name, the executable section around an address, whether an address is
 * in the PLT, and a relative relocation's target. */
#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <string.h>

#include "core/log.h"
#include "objfile/objfile_int.h"

/* ---- raw section headers ---------------------------------------------- */

/* Section header i, bounds-checked against the mapped file. */
int objfile_section_data(const struct objfile *ef, const char *name, const void **data,
		     size_t *len, uint64_t *addr)
{
	Elf *elf = ((const struct objfile_priv *)ef->priv)->elf;
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

int objfile_exec_section_at(const struct objfile *ef, uint64_t vaddr, uint64_t *start,
			uint64_t *end)
{
	Elf *elf = ((const struct objfile_priv *)ef->priv)->elf;
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

bool objfile_in_plt(const struct objfile *ef, uint64_t vaddr)
{
	static const char *const names[] = {".plt", ".plt.got", ".plt.sec", ".iplt"};
	Elf *elf = ((const struct objfile_priv *)ef->priv)->elf;
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

const unsigned char *objfile_scn_named(const struct objfile *ef, Elf *elf, const char *name,
				       size_t *len, uint64_t *addr)
{
	const struct objfile_priv *p = ef->priv;
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
		b = objfile_raw_at(p, sh.sh_offset, sh.sh_size);
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

bool objfile_relative_reloc_at(Elf *elf, uint64_t vaddr, uint64_t *val)
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
