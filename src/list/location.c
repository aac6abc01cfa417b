/* `uscope list --vars` and `--lines`: a probe location resolved as trace
 * resolves it, then from the debug info the variables visible at each of
 * its sites, or the source of each of its functions with the lines a probe
 * can go on. */
#include "list/list.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "debuginfo/debuginfo.h"
#include "objfile/objfile.h"
#include "cache/cache.h"
#include "ns/ns.h"
#include "resolve/resolve.h"

/* The sites of one location, resolved as trace would resolve them. */
/* Under a root, BINARY's MODULEs are found there (a library by its short
 * name in the root's directories: no COMMAND of the host links them). The
 * root is kept in *shown_root for the paths shown. */
static int list_location_sites(struct usc_cache *cache, pid_t pid, const char *root,
			       const char *bin, const struct usc_probe_spec *spec,
			       struct usc_site **sites, size_t *nsites, char **shown_root)
{
	struct usc_target t = {.kind = pid ? USC_TARGET_PID : root ? USC_TARGET_SYSTEM :
					USC_TARGET_COMMAND, .pid = pid};
	int ret;

	if (pid) {
		if (resolve_target(&t, NULL))
			return -ESRCH;
	} else if (root && (!(t.root = strdup(root)) || resolve_target(&t, NULL))) {
		resolve_target_release(&t);
		return -ENOENT;
	}
	if (!pid && usc_list_find_binary(t.root, bin, &t.exe)) {
		resolve_target_release(&t);
		return -ENOENT;
	}
	ret = resolve_probes(cache, &t, spec, 1, RESOLVE_NO_TAIL_FOLLOW, sites, nsites);
	*shown_root = t.root;
	t.root = NULL;
	resolve_target_release(&t);
	return ret;
}

/* Is a parameter of the function at pc optimized out there? */
static bool list_params_lost(struct debuginfo *dm, uint64_t pc)
{
	struct usc_fetcharg p[USC_MAX_ARGS];
	bool lost = false;
	int n;

	usc_log_quiet(true);
	n = debuginfo_params(dm, pc, p, USC_MAX_ARGS);
	usc_log_quiet(false);
	for (int k = 0; k < n; k++)
		lost |= p[k].optimized_out;
	return lost;
}

/* Where trace reads a site's variables: at a function's entry, after the
 * prologue, or at the entry if a parameter is gone there and none is at
 * the entry. */
static uint64_t list_vars_pc(struct debuginfo *dm, const struct usc_site *site)
{
	uint64_t pc = site->vaddr;

	if (pc == site->func_vaddr && debuginfo_after_prologue(dm, pc, &pc) == 0 &&
	    pc != site->func_vaddr && list_params_lost(dm, pc) &&
	    !list_params_lost(dm, site->func_vaddr))
		pc = site->func_vaddr;
	return pc;
}

/* What is listed at one site (ops: the call's usc_list_*_ops). 0 or -errno
 * (logged): the end of the list. */
typedef int (*list_site_fn)(struct usc_cache *cache, const char *shown_root,
			    const struct usc_probe_spec *spec, const struct usc_site *site,
			    const void *ops, void *ctx);

/* fn at each site of spec's location, in order, until one fails. */
static int list_each_site(pid_t pid, const char *root, const char *bin,
			  const struct usc_probe_spec *spec, list_site_fn fn, const void *ops,
			  void *ctx)
{
	struct usc_site *sites = NULL;
	struct usc_cache *cache = cache_new();
	char *shown_root = NULL;
	size_t n = 0;
	int ret = cache ? list_location_sites(cache, pid, root, bin, spec, &sites, &n,
					      &shown_root) : -ENOMEM;

	for (size_t i = 0; i < n && !ret; i++)
		ret = fn(cache, shown_root, spec, &sites[i], ops, ctx);
	resolve_sites_free(sites, n);
	cache_free(cache);
	free(shown_root);
	return ret;
}

/* The variables at one site. 0 or -errno (logged). */
static int list_vars_at(struct usc_cache *cache, const char *shown_root,
			const struct usc_probe_spec *spec, const struct usc_site *site,
			const void *vops, void *ctx)
{
	const struct usc_list_vars_ops *ops = vops;
	struct debuginfo *dm;
	uint64_t pc;
	int ret = cache_dwarf(cache, site->path, &dm);

	(void)spec;
	if (ret) {
		log_error("%s has no debug info (DWARF)", site->path);
		return ret;
	}
	pc = list_vars_pc(dm, site);
	ops->site(site->label, pc, ns_shown_path(shown_root, site->path), ctx);
	if (debuginfo_vars_at(dm, pc, ops->var, ctx))
		ops->none(ctx);
	return 0;
}

int usc_list_vars(pid_t pid, const char *root, const char *bin,
		  const struct usc_probe_spec *spec, const struct usc_list_vars_ops *ops,
		  void *ctx)
{
	return list_each_site(pid, root, bin, spec, list_vars_at, ops, ctx);
}

/* The lines of file from first to the function's last statement (lines,
 * sorted): the ones that begin a statement, and the others the file has. */
static void list_source(const char *file, const unsigned *lines, ssize_t nl, unsigned first,
			const struct usc_list_lines_ops *ops, void *ctx)
{
	FILE *src = fopen(file, "r");
	char text[512];

	for (unsigned l = 1, k = 0; l <= lines[nl - 1]; l++) {
		bool code = k < (size_t)nl && lines[k] == l;
		bool have = src && fgets(text, sizeof(text), src);

		if (code)
			k++;
		if (l < first)
			continue;
		if (have)
			text[strcspn(text, "\n")] = 0;
		if (code || have)
			ops->line(l, have ? text : NULL, code, ctx);
	}
	if (src)
		fclose(src);
}

/* The source of the function at one site. 0 or -errno (logged). */
static int list_lines_at(struct usc_cache *cache, const char *shown_root,
			 const struct usc_probe_spec *spec, const struct usc_site *site,
			 const void *lops, void *ctx)
{
	const struct usc_list_lines_ops *ops = lops;
	struct debuginfo *dm;
	struct objfile *ef;
	const struct objfile_sym *fn;
	const char *file;
	unsigned *lines = NULL, first = 0;
	ssize_t nl;

	(void)shown_root;
	if (cache_dwarf(cache, site->path, &dm) || cache_elf(cache, site->path, &ef)) {
		log_error("%s has no debug info (DWARF)", site->path);
		return -ENODATA;
	}
	fn = objfile_func_at(ef, site->func_vaddr);
	nl = fn ? debuginfo_func_lines(dm, fn->vaddr, fn->size, &file, &lines) : -ENOENT;
	if (nl <= 0 || debuginfo_func_line(dm, fn->vaddr, &file, &first)) {
		log_error("%s: no line information for %s", spec->text,
			  fn ? objfile_sym_pretty(fn) : spec->text);
		free(lines);
		return -ENOENT;
	}
	ops->func(objfile_sym_pretty(fn), file, ctx);
	list_source(file, lines, nl, first, ops, ctx);
	free(lines);
	return 0;
}

int usc_list_lines(pid_t pid, const char *root, const char *bin,
		   const struct usc_probe_spec *spec, const struct usc_list_lines_ops *ops,
		   void *ctx)
{
	return list_each_site(pid, root, bin, spec, list_lines_at, ops, ctx);
}
