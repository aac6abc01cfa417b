/* Finding a file's debug info: a module is the DWARF of one ELF file,
 * through libdwfl, in the file itself or in a separate debug file found by
 * build-id or .gnu_debuglink (libdwfl's standard search path). A file
 * under another root (a container's, ns/ns.h) has its debug files looked
 * for under that root only: ROOT/usr/lib/debug/.build-id, its own
 * directory and .debug there, ROOT/usr/lib/debug/DIR. Opening and closing
 * it; what the other passes cache in it is freed here. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <elfutils/libdwelf.h>
#include <elfutils/libdwfl.h>

#include "core/log.h"
#include "debuginfo/debuginfo.h"
#include "debuginfo/debuginfo_int.h"
#include "ns/ns.h"

static char *debuginfo_path;	/* NULL: libdwfl's default search path */

static const Dwfl_Callbacks offline_callbacks = {
	.find_elf = dwfl_build_id_find_elf,
	.find_debuginfo = dwfl_standard_find_debuginfo,
	.section_address = dwfl_offline_section_address,
	.debuginfo_path = &debuginfo_path,
};

/* The search of a file under another root: libdwfl's, with a search path
 * inside the root, then the debuglink under ROOT/usr/lib/debug/DIR (which
 * libdwfl would look for under the path's host directory). */
struct debuginfo_root {
	Dwfl_Callbacks cb;	/* first: dwfl_begin keeps a pointer to it */
	char *path;		/* "+:.debug:ROOT/usr/lib/debug" */
	char *libdebug;		/* ROOT/usr/lib/debug */
	char *cdir;		/* the file's directory as the root names it */
};

/* The CRC-32 of .gnu_debuglink (zlib's) of the file fd. */
static int file_crc32(int fd, uint32_t *out)
{
	static uint32_t table[256];
	unsigned char buf[65536];
	uint32_t crc = 0xffffffffu;
	off_t off = 0;
	ssize_t n;

	if (!table[1])
		for (uint32_t i = 0; i < 256; i++) {
			uint32_t c = i;

			for (int k = 0; k < 8; k++)
				c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
			table[i] = c;
		}
	while ((n = pread(fd, buf, sizeof(buf), off)) > 0) {
		for (ssize_t i = 0; i < n; i++)
			crc = table[(crc ^ buf[i]) & 0xff] ^ (crc >> 8);
		off += n;
	}
	if (n < 0)
		return -errno;
	*out = crc ^ 0xffffffffu;
	return 0;
}

/* Is the file fd the debug file of mod: the same build-id, or without
 * one, the CRC the debuglink gives? */
static bool root_debug_matches(Dwfl_Module *mod, int fd, GElf_Word crc)
{
	const unsigned char *want;
	const void *got;
	GElf_Addr vaddr;
	int wl = dwfl_module_build_id(mod, &want, &vaddr);
	bool ok = false;

	if (wl > 0) {
		Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
		ssize_t gl = elf ? dwelf_elf_gnu_build_id(elf, &got) : -1;

		ok = gl == wl && !memcmp(got, want, (size_t)wl);
		if (elf)
			elf_end(elf);
	} else {
		uint32_t c;

		ok = !file_crc32(fd, &c) && c == crc;
	}
	return ok;
}

static int root_find_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname,
			       Dwarf_Addr base, const char *file_name, const char *debuglink_file,
			       GElf_Word debuglink_crc, char **debuginfo_file_name)
{
	const struct debuginfo_root *r = *userdata;
	char *p;
	int fd = dwfl_standard_find_debuginfo(mod, userdata, modname, base, file_name,
					      debuglink_file, debuglink_crc, debuginfo_file_name);

	if (fd >= 0 || !r || !debuglink_file || !*debuglink_file)
		return fd;
	if (asprintf(&p, "%s%s/%s", r->libdebug, r->cdir, debuglink_file) < 0)
		return -1;
	fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd >= 0 && root_debug_matches(mod, fd, debuglink_crc)) {
		*debuginfo_file_name = p;
		return fd;
	}
	if (fd >= 0)
		close(fd);
	free(p);
	return -1;
}

static void root_free(struct debuginfo_root *r)
{
	if (!r)
		return;
	free(r->path);
	free(r->libdebug);
	free(r->cdir);
	free(r);
}

/* The search for path, under root. NULL: no memory. */
static struct debuginfo_root *root_new(const char *root, const char *path)
{
	struct debuginfo_root *r = calloc(1, sizeof(*r));
	const char *shown = ns_shown_path(root, path), *slash = strrchr(shown, '/');

	if (!r)
		return NULL;
	r->cb = offline_callbacks;
	r->cb.find_debuginfo = root_find_debuginfo;
	r->cb.debuginfo_path = &r->path;
	if (asprintf(&r->libdebug, "%s/usr/lib/debug", root) < 0)
		r->libdebug = NULL;
	if (asprintf(&r->path, "+:.debug:%s", r->libdebug ? r->libdebug : "") < 0)
		r->path = NULL;
	r->cdir = strndup(shown, slash ? (size_t)(slash - shown) : 0);
	if (!r->libdebug || !r->path || !r->cdir) {
		root_free(r);
		return NULL;
	}
	return r;
}

int debuginfo_open(const char *path, const char *root, struct debuginfo **out)
{
	struct debuginfo *m;
	void **ud;
	int fd;

	*out = NULL;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		log_error("dwarf: cannot open %s: %s", path, strerror(e));
		return -e;
	}
	close(fd);
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	if (root && !(m->root = root_new(root, path))) {
		free(m);
		return -ENOMEM;
	}
	m->dwfl = dwfl_begin(m->root ? &m->root->cb : &offline_callbacks);
	if (!m->dwfl) {
		log_error("dwarf: %s", dwfl_errmsg(-1));
		free(m);
		return -ENOMEM;
	}
	dwfl_report_begin(m->dwfl);
	m->mod = dwfl_report_offline(m->dwfl, path, path, -1);
	dwfl_report_end(m->dwfl, NULL, NULL);
	if (!m->mod) {
		log_error("dwarf: %s: %s", path, dwfl_errmsg(-1));
		debuginfo_close(m);
		return -EIO;
	}
	if (m->root && dwfl_module_info(m->mod, &ud, NULL, NULL, NULL, NULL, NULL, NULL))
		*ud = m->root;	/* root_find_debuginfo's */
	m->dw = dwfl_module_getdwarf(m->mod, &m->bias);
	if (!m->dw) {
		log_debug("dwarf: %s has no DWARF debug info (%s)", path, dwfl_errmsg(-1));
		debuginfo_close(m);
		return -ENODATA;
	}
	*out = m;
	return 0;
}

void debuginfo_close(struct debuginfo *m)
{
	if (!m)
		return;
	debuginfo_inline_free(m);
	free(m->cur);
	for (size_t i = 0; i < m->nenums; i++)
		free(m->enums[i]);
	free(m->enums);
	if (m->dwfl)
		dwfl_end(m->dwfl);
	root_free(m->root);
	free(m);
}
