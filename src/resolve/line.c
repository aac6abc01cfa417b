/* FILE:LINE or FUNCTION:+N: a probe on every statement of that line (a
 * line can have several: loops, inlined copies, split conditions), from
 * the debug info's line table. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "debuginfo/debuginfo.h"
#include "objfile/objfile.h"
#include "cache/cache.h"
#include "resolve/resolve_int.h"

/* FUNCTION:+N: the file and line N lines after where FUNCTION starts. 0 or
 * -errno, logged. */
static int line_in_func(const struct usc_probe_spec *spec, const char *path,
			const struct objfile *ef, struct debuginfo *dm, const char **file,
			unsigned *line)
{
	const struct objfile_sym *fn = NULL;
	unsigned l0;
	int ret = objfile_func_lookup(ef, spec->symbol, &fn, NULL, NULL);

	if (ret) {
		resolve_log_unknown(spec, ef, path, 0);
		return ret;
	}
	if (debuginfo_func_line(dm, fn->vaddr, file, &l0)) {
		log_error("%s: the debug info of %s does not say where %s starts", spec->text,
			  path, objfile_sym_pretty(fn));
		return -ENOENT;
	}
	*line = l0 + spec->line;
	return 0;
}

/* The sites from first on show as FILE:LINE (label). 0 or -ENOMEM. */
static int line_label_sites(struct site_vec *sv, size_t first, const struct usc_probe_spec *spec,
			    const char *label)
{
	int ret = 0;

	for (size_t i = first; i < sv->n && !ret; i++) {
		struct usc_site *st = &sv->v[i];

		if (!spec->event_given)
			snprintf(st->label, sizeof(st->label), "%s", label);
		free(st->symbol);
		/* the kernel's event name: the label's characters that may be in one */
		st->symbol = strdup(label);
		if (!st->symbol)
			ret = -ENOMEM;
	}
	return ret;
}

int resolve_line(const struct usc_probe_spec *spec, unsigned idx, const char *path,
		 const struct objfile *ef, struct site_vec *sv)
{
	struct debuginfo *dm;
	const char *file = spec->symbol;
	unsigned line = spec->line, nearest = 0;
	uint64_t *addrs = NULL;
	char label[USC_NAME_MAX * 2];
	ssize_t n;
	size_t first = sv->n;
	int ret = cache_dwarf(sv->c, path, &dm);

	if (ret) {
		log_error("%s: %s has no debug info (DWARF) to find source lines in%s", spec->text,
			  path, ret == -ENODATA ? ": build it with -g, or install its separate debug "
			  "file" : "");
		return ret;
	}
	if (spec->line_rel) {
		ret = line_in_func(spec, path, ef, dm, &file, &line);
		if (ret)
			return ret;
	}
	n = debuginfo_line_addrs(dm, file, line, sv->flags & RESOLVE_ALL_LINE_SITES, &addrs, &nearest);
	if (n < 0)
		return (int)n;
	if (n == 0) {
		if (nearest)
			log_error("%s: no code at %s:%u; the next line with code is %u", spec->text,
				  file, line, nearest);
		else
			log_error("%s: no code at %s:%u in %s", spec->text, file, line, path);
		return -ENOENT;
	}
	snprintf(label, sizeof(label), "%s:%u", strrchr(file, '/') ? strrchr(file, '/') + 1 : file,
		 line);
	for (ssize_t i = 0; i < n && !ret; i++) {
		const struct objfile_sym *fn = objfile_func_at(ef, addrs[i]);

		ret = resolve_add_site(sv, spec, idx, path, ef, fn, addrs[i], 0);
	}
	free(addrs);
	if (ret)
		return ret;
	return line_label_sites(sv, first, spec, label);
}
