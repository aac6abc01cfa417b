/* Go's runtime type descriptors in a Go binary.
 *
 * A runtime._type (Go 1.7 to today's abi.Type on 64-bit) holds at 20 its
 * tflag and at 40 its str: the offset of its name from the start of the
 * module's types, moduledata.types. A name is a flags byte, the length (a
 * uvarint since Go 1.17, two big-endian bytes before) and the bytes; with
 * tflagExtraStar (2) the name carries a '*' the type does not have. */
#include "objfile/gotypes.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "objfile/objfile.h"

#define TYPE_TFLAG_OFF 20
#define TYPE_STR_OFF 40
#define TFLAG_EXTRA_STAR 2

int gotypes_minor(const struct objfile *ef)
{
	unsigned major, minor;

	if (!ef->go_version || sscanf(ef->go_version, "go%u.%u", &major, &minor) != 2 ||
	    major != 1)
		return -1;
	return (int)minor;
}

static bool in_image(const struct objfile *ef, uint64_t vaddr, size_t len)
{
	uint64_t off;

	return !objfile_vaddr_to_offset(ef, vaddr, &off) &&
	       !objfile_vaddr_to_offset(ef, vaddr + len - 1, &off);
}

/* moduledata's words, as Go's linker lays them out on 64-bit: pcHeader,
 * six slices (funcnametab ... ftab), findfunctab, minpc, maxpc, text,
 * etext, noptrdata, enoptrdata, data, edata, bss, ebss, noptrbss,
 * enoptrbss, [covctrs, ecovctrs since Go 1.20,] end, gcdata, gcbss, types,
 * etypes. */
static int types_from_moduledata(struct objfile *ef, uint64_t *types, uint64_t *etypes)
{
	const unsigned char *sec;
	uint64_t pcln, base;
	size_t len;
	int minor = gotypes_minor(ef);
	unsigned at = minor >= 20 ? 37 : 35;
	static const char *const where[] = {".noptrdata", ".data", ".data.rel.ro"};

	if (minor >= 0 && minor < 16)
		return -ENOENT;		/* a layout this reader does not know */
	if (objfile_section_data(ef, ".gopclntab", NULL, NULL, &pcln) &&
	    objfile_section_data(ef, ".data.rel.ro.gopclntab", NULL, NULL, &pcln))
		return -ENOENT;
	for (size_t s = 0; s < sizeof(where) / sizeof(where[0]); s++) {
		if (objfile_section_data(ef, where[s], (const void **)&sec, &len, &base) || !sec)
			continue;
		for (size_t off = 0; off + (at + 2) * 8 <= len; off += 8) {
			uint64_t w[40];

			if (memcmp(sec + off, &pcln, 8))
				continue;
			memcpy(w, sec + off, (at + 2) * 8);
			/* text then etext, as minpc and maxpc before them */
			if (w[22] != w[20] || w[23] != w[21] || w[at] > w[at + 1] ||
			    !in_image(ef, w[at], 1))
				continue;
			*types = w[at];
			*etypes = w[at + 1];
			return 0;
		}
	}
	return -ENOENT;
}

int gotypes_name(struct objfile *ef, uint64_t type_vaddr, char *buf, size_t len)
{
	unsigned char hdr[TYPE_STR_OFF + 4], nm[12];
	uint64_t types = 0, etypes = 0, at, n = 0;
	uint32_t str;
	unsigned shift = 0, k;
	int minor = gotypes_minor(ef);
	bool star;

	if (!objfile_symbol_vaddr(ef, "runtime.types", &types)) {
		if (objfile_symbol_vaddr(ef, "runtime.etypes", &etypes))
			etypes = UINT64_MAX;
	} else if (types_from_moduledata(ef, &types, &etypes)) {
		return -ENOENT;
	}
	if (type_vaddr < types || type_vaddr >= etypes || !in_image(ef, type_vaddr, sizeof(hdr)) ||
	    objfile_read(ef, type_vaddr, hdr, sizeof(hdr)))
		return -ENOENT;
	star = hdr[TYPE_TFLAG_OFF] & TFLAG_EXTRA_STAR;
	memcpy(&str, hdr + TYPE_STR_OFF, 4);
	at = types + str;
	if (!in_image(ef, at, 3) || objfile_read(ef, at, nm, in_image(ef, at, sizeof(nm)) ?
					     sizeof(nm) : 3))
		return -EINVAL;
	if (minor >= 0 && minor < 17) {
		n = (uint64_t)nm[1] << 8 | nm[2];
		k = 3;
	} else {
		for (k = 1; k < sizeof(nm); k++) {
			n |= (uint64_t)(nm[k] & 0x7f) << shift;
			shift += 7;
			if (!(nm[k] & 0x80))
				break;
		}
		if (k++ == sizeof(nm))
			return -EINVAL;
	}
	if (!n || n > 4096 || !in_image(ef, at + k, n))
		return -EINVAL;
	char *name = malloc(n + 1);

	if (!name)
		return -ENOMEM;
	if (objfile_read(ef, at + k, name, n)) {
		free(name);
		return -EINVAL;
	}
	name[n] = 0;
	snprintf(buf, len, "%s", name + (star && name[0] == '*'));
	free(name);
	return 0;
}
