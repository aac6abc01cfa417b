/* From probes to sites: each probe through the pass its location calls for
 * (the files are listed in resolve_int.h), then every site named. */
#include "resolve/resolve.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "cache/cache.h"
#include "resolve/resolve_int.h"

static int resolve_one(const struct usc_target *t, const struct usc_probe_spec *spec,
		       unsigned idx, unsigned flags, struct site_vec *sv)
{
	char *path = NULL;
	struct objfile *ef;
	int ret;

	if (spec->loc_kind == USC_LOC_PYTHON)
		return resolve_python(t, spec, idx, flags, sv);
	ret = resolve_find_module(t, spec, &path);
	if (ret)
		return ret;
	ret = cache_elf(sv->c, path, &ef);
	if (ret) {
		if (ret == -ENOEXEC)
			log_error("%s: %s is not an x86-64 ELF file", spec->text, path);
		else
			log_error("%s: cannot open %s: %s", spec->text, path, strerror(-ret));
	} else if (spec->loc_kind == USC_LOC_USDT) {
		ret = resolve_usdt(spec, idx, path, ef, sv);
	} else if (spec->loc_kind == USC_LOC_LINE) {
		ret = resolve_line(spec, idx, path, ef, sv);
	} else if (spec->loc_kind == USC_LOC_ADDRESS) {
		ret = resolve_address(spec, idx, path, ef, flags, sv);
	} else if (spec->is_glob) {
		ret = resolve_glob(spec, idx, path, ef, flags, sv);
	} else {
		ret = resolve_symbol(spec, idx, path, ef, flags, sv);
	}
	free(path);
	return ret;
}

int resolve_probes(struct usc_cache *c, const struct usc_target *target,
		   const struct usc_probe_spec *specs, size_t nspecs, unsigned flags,
		   struct usc_site **sites, size_t *nsites)
{
	struct site_vec sv = {.c = c, .flags = flags};
	bool final = false;
	size_t skipped = 0;
	int ret = cache_set_root(c, target->root);	/* its debug files are there too */

	for (size_t i = 0; i < nspecs && !ret; i++) {
		size_t first = sv.n;

		sv.quiet = false;
		for (size_t k = 0; k < i && !sv.quiet; k++)
			sv.quiet = !strcmp(specs[k].text, specs[i].text);
		ret = resolve_one(target, &specs[i], (unsigned)i, flags, &sv);
		if (ret == -ENOENT && (flags & RESOLVE_SKIP_MISSING) &&
		    specs[i].loc_kind == USC_LOC_SYMBOL && sv.n == first) {
			skipped++;	/* left out, said */
			ret = 0;
			continue;
		}
		if (!ret)
			ret = resolve_check_optimized_out(c, &specs[i], sv.v + first, sv.n - first);
		for (size_t k = first; !ret && k < sv.n; k++)
			resolve_name_site(&sv.v[k], sv.v, sv.n, sv.n - first > 1);
		/* Python frames in a stack: CPython's end waits for them to be read */
		for (unsigned a = 0; !ret && !final && a < specs[i].nargs; a++)
			if (specs[i].args[a].insn[0].op == FOP_PYSTACK ||
			    specs[i].args[a].insn[0].op == FOP_USTACK) {
				final = true;
				ret = resolve_python_final(target, &specs[i], (unsigned)i, &sv);
			}
	}
	if (!ret && nspecs && skipped == nspecs) {
		log_error("none of the probes' functions exists: nothing to trace");
		ret = -ENOENT;
	}
	if (ret) {
		resolve_sites_free(sv.v, sv.n);
		return ret;
	}
	*sites = sv.v;
	*nsites = sv.n;
	return 0;
}

void resolve_sites_free(struct usc_site *sites, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(sites[i].path);
		free(sites[i].symbol);
		free(sites[i].args);
	}
	free(sites);
}
