/* A file's GNU build id (the NT_GNU_BUILD_ID note), as pprof's mappings and
 * debuginfod name files by. Read with libelf's note iterator from the
 * PT_NOTE segments, so a file without section headers has it too. */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "objfile/objfile.h"

static size_t note_in(Elf *elf, const GElf_Phdr *ph, char *hex, size_t len)
{
	Elf_Data *d = elf_getdata_rawchunk(elf, (int64_t)ph->p_offset, ph->p_filesz, ELF_T_NHDR);
	size_t off = 0, name_off, desc_off, o = 0;
	GElf_Nhdr nh;

	while (d && (off = gelf_getnote(d, off, &nh, &name_off, &desc_off)) > 0) {
		const unsigned char *desc = (const unsigned char *)d->d_buf + desc_off;

		if (nh.n_type != NT_GNU_BUILD_ID || nh.n_namesz != 4 ||
		    memcmp((const char *)d->d_buf + name_off, "GNU", 4))
			continue;
		for (size_t i = 0; i < nh.n_descsz && o + 3 <= len; i++)
			o += (size_t)snprintf(hex + o, len - o, "%02x", desc[i]);
		return o;
	}
	return 0;
}

size_t objfile_build_id(const char *path, char *hex, size_t len)
{
	size_t phnum, n = 0;
	int fd;
	Elf *elf;

	if (len)
		hex[0] = 0;
	if (elf_version(EV_CURRENT) == EV_NONE || (fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return 0;
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (elf && !elf_getphdrnum(elf, &phnum)) {
		for (size_t i = 0; i < phnum && !n; i++) {
			GElf_Phdr ph;

			if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_NOTE)
				n = note_in(elf, &ph, hex, len);
		}
	}
	elf_end(elf);
	close(fd);
	return n;
}
