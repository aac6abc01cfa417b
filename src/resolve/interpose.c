/* Interposed functions: a probe on MODULE:FUNCTION whose FUNCTION the
 * process's calls never reach, because an object earlier in its global
 * lookup scope defines the same symbol and the dynamic linker binds every
 * call there (jemalloc's or tcmalloc's malloc before libc's, an
 * LD_PRELOAD). Said once a probe, with the module to probe instead.
 *
 * The rule is the dynamic linker's: the first object in load order (the
 * link_map list: objfile/linkmap.c) whose .dynsym defines the name -
 * global or weak, not a non-default version (name@VER), and of the probed
 * symbol's version when both have one (a reference to malloc@GLIBC_2.2.5
 * takes an unversioned malloc, or malloc@@GLIBC_2.2.5, never
 * malloc@@OTHER) - takes the calls. A probed symbol that is not exported
 * (.symtab only) cannot be interposed. Globs and ADDRESSes are not looked
 * at: `*:malloc` or a glob may take every definition on purpose. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cache/cache.h"
#include "core/log.h"
#include "objfile/modules.h"
#include "objfile/objfile.h"
#include "resolve/resolve.h"

/* A probe whose function interposition would hide: MODULE:FUNCTION, by
 * name, at its entry or its returns. */
static bool checked_probe(const struct usc_probe_spec *spec)
{
	return spec->module[0] && spec->loc_kind == USC_LOC_SYMBOL && !spec->is_glob &&
	       !spec->has_offset;
}

/* Does ef export a definition of name that a reference to name (of version
 * ver, or none) binds to? */
static const struct objfile_sym *exported(const struct objfile *ef, const char *name,
					  const char *ver)
{
	for (size_t i = 0; i < ef->nsyms; i++) {
		const struct objfile_sym *d = &ef->syms[i];

		if (strcmp(d->name, name) || !(d->flags & OBJFILE_SYM_DYNSYM) ||
		    (d->flags & (OBJFILE_SYM_LOCAL | OBJFILE_SYM_HIDDEN_VER)))
			continue;
		if (!d->version || !ver || !strcmp(d->version, ver))
			return d;
	}
	return NULL;
}

/* "libjemalloc.so.2" -> "libjemalloc": the MODULE a probe names it by
 * (module_name_matches: NAME.so*), else the whole basename. */
static void short_module(const char *base, char *out, size_t len)
{
	const char *so = strstr(base, ".so");

	snprintf(out, len, "%.*s", so && so > base ? (int)(so - base) : (int)strlen(base), base);
}

static const char *base_of(const char *path)
{
	const char *b = strrchr(path, '/');

	return b ? b + 1 : path;
}

/* The first site of probe idx on the function itself (not an inlined copy,
 * not a hidden site), or NULL. */
static const struct usc_site *probe_site(const struct usc_site *sites, size_t nsites,
					 unsigned idx)
{
	for (size_t i = 0; i < nsites; i++)
		if (sites[i].probe == idx && !sites[i].inlined && !sites[i].hidden &&
		    !sites[i].python && sites[i].path)
			return &sites[i];
	return NULL;
}

/* Probe spec (its site s): say (say) who takes its calls, if another
 * object before its module in scope does. 0, or -EAGAIN (its module is not
 * in the list yet: ld.so has not loaded it). */
static int check_one(struct usc_cache *c, pid_t pid, const struct usc_probe_spec *spec,
		     const struct usc_site *s, const struct linkmap_obj *scope, size_t n,
		     bool say)
{
	const struct objfile_sym *fn = NULL, **cands = NULL;
	struct objfile *ef;
	struct stat st;
	size_t ncands = 0, at = n;

	if (cache_elf(c, s->path, &ef) || stat(s->path, &st))
		return 0;
	if (objfile_func_lookup(ef, spec->symbol, &fn, &cands, &ncands)) {
		free(cands);
		return 0;
	}
	free(cands);
	if (!(fn->flags & OBJFILE_SYM_DYNSYM) || (fn->flags & OBJFILE_SYM_LOCAL))
		return 0;	/* not exported: nothing binds to it by name */
	for (size_t k = 0; k < n && at == n; k++)
		if (scope[k].dev == (uint64_t)st.st_dev && scope[k].inode == (uint64_t)st.st_ino)
			at = k;
	if (at == n)
		return -EAGAIN;
	for (size_t k = 0; k < at && say; k++) {
		struct objfile *m;
		const struct objfile_sym *d;
		char mod[256];

		if (cache_elf(c, scope[k].path, &m) || !(d = exported(m, fn->name, fn->version)))
			continue;
		short_module(base_of(scope[k].path), mod, sizeof(mod));
		log_warn("%s:%s is interposed by %s:%s in process %d; its calls go there "
			 "(probe %s:%s)", spec->module, spec->symbol, base_of(scope[k].path),
			 objfile_sym_pretty(d), (int)pid, mod, spec->symbol);
		break;
	}
	return 0;
}

int resolve_interposed(struct usc_cache *c, pid_t pid, const struct usc_probe_spec *specs,
		       size_t nspecs, const struct usc_site *sites, size_t nsites)
{
	struct linkmap_obj *scope = NULL;
	ssize_t n = 0;
	int ret = 0;

	/* every probed module in the list first, then said: once */
	for (size_t i = 0; i < 2 * nspecs && !ret; i++) {
		size_t j = i % nspecs;
		const struct usc_site *s = probe_site(sites, nsites, (unsigned)j);
		bool seen = false;

		if (!s || !checked_probe(&specs[j]))
			continue;
		for (size_t k = 0; k < j && !seen; k++)	/* the same probe twice (latency) */
			seen = !strcmp(specs[k].module, specs[j].module) &&
			       !strcmp(specs[k].symbol, specs[j].symbol) && checked_probe(&specs[k]);
		if (seen)
			continue;
		if (!scope && (n = linkmap_read(pid, &scope)) < 0)
			return (int)n;
		ret = check_one(c, pid, &specs[j], s, scope, (size_t)n, i >= nspecs);
	}
	linkmap_free(scope, scope ? (size_t)n : 0);
	return ret;
}
