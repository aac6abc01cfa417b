/* Finding a file's debug info: a module is the DWARF of one ELF file,
 * through libdwfl, in the file itself or in a separate debug file found by
 * build-id or .gnu_debuglink (libdwfl's standard search path). Opening and
 * closing it; what the other passes cache in it is freed here. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <elfutils/libdwfl.h>

#include "core/log.h"
#include "debuginfo/debuginfo.h"
#include "debuginfo/debuginfo_int.h"

static char *debuginfo_path;	/* NULL: libdwfl's default search path */

static const Dwfl_Callbacks offline_callbacks = {
	.find_elf = dwfl_build_id_find_elf,
	.find_debuginfo = dwfl_standard_find_debuginfo,
	.section_address = dwfl_offline_section_address,
	.debuginfo_path = &debuginfo_path,
};

int debuginfo_open(const char *path, struct debuginfo **out)
{
	struct debuginfo *m;
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
	m->dwfl = dwfl_begin(&offline_callbacks);
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
	free(m);
}
