/* Function probes: on an ADDRESS, on every function a glob matches, on one
 * function by name (+OFFSET), each with its return sites for a return
 * probe and its inlined copies for an entry probe. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "objfile/objfile.h"
#include "resolve/resolve_int.h"
#include "resolve/shape.h"
#include "x86/insn.h"

static int check_boundary(const struct objfile *ef, const struct objfile_sym *fn, uint64_t off,
			  const struct usc_probe_spec *spec)
{
	uint8_t *code;
	uint64_t prev = 0, next = 0;
	int ret;

	if (!fn->size)
		return 0;
	code = malloc(fn->size);
	if (!code)
		return -ENOMEM;
	ret = objfile_read(ef, fn->vaddr, code, fn->size);
	if (!ret)
		ret = x86_check_boundary(code, fn->size, fn->vaddr, off, &prev, &next);
	free(code);
	if (ret == -EINVAL)
		log_error("%s: offset 0x%llx is inside an instruction of %s; the nearest "
			  "instruction boundaries are +0x%llx and +0x%llx",
			  spec->text, (unsigned long long)off, objfile_sym_pretty(fn),
			  (unsigned long long)prev, (unsigned long long)next);
	else if (ret == -ENOEXEC)
		log_error("%s: cannot decode %s up to offset 0x%llx to check the instruction "
			  "boundary", spec->text, objfile_sym_pretty(fn), (unsigned long long)off);
	else if (ret)
		log_error("%s: cannot read the code of %s: %s", spec->text, objfile_sym_pretty(fn),
			  strerror(-ret));
	return ret;
}

void resolve_log_unknown(const struct usc_probe_spec *spec, const struct objfile *ef,
			 const char *path, unsigned flags)
{
	const char *sugg[3];
	char list[512] = "";
	size_t n = objfile_func_suggest(ef, spec->symbol, sugg, 3), used = 0;

	for (size_t i = 0; i < n && used < sizeof(list); i++)
		used += (size_t)snprintf(list + used, sizeof(list) - used, "%s%s", i ? ", " : "",
					 sugg[i]);
	if (flags & RESOLVE_SKIP_MISSING)
		log_warn("%s: no function '%s' in %s: left out", spec->text, spec->symbol, path);
	else if (n)
		log_error("%s: no function '%s' in %s; did you mean: %s?", spec->text,
			  spec->symbol, path, list);
	else
		log_error("%s: no function '%s' in %s", spec->text, spec->symbol, path);
}

/* The label every site of one function's probe shows: the event, or the
 * function's name (demangled). */
static void label_sites(struct site_vec *sv, size_t first, const struct usc_probe_spec *spec,
			const char *name)
{
	for (size_t i = first; i < sv->n; i++)
		snprintf(sv->v[i].label, sizeof(sv->v[i].label), "%s%s",
			 spec->event_given ? spec->event : name,
			 sv->v[i].is_return && !spec->event_given ? "__return" : "");
}

int resolve_address(const struct usc_probe_spec *spec, unsigned idx, const char *path,
		    const struct objfile *ef, unsigned flags, struct site_vec *sv)
{
	const struct objfile_sym *fn = objfile_func_at(ef, spec->address);
	int ret;

	if (spec->is_return && fn && fn->vaddr != spec->address) {
		log_error("%s: a return probe needs a function's entry address; 0x%llx is "
			  "inside %s", spec->text, (unsigned long long)spec->address, objfile_sym_pretty(fn));
		return -EINVAL;
	}
	if (spec->is_return && !fn)
		log_warn("%s: no symbol covers 0x%llx; the return probe is only right if "
			 "it is a function's entry", spec->text,
			 (unsigned long long)spec->address);
	if (fn && fn->vaddr != spec->address) {
		ret = check_boundary(ef, fn, spec->address - fn->vaddr, spec);
		if (ret)
			return ret;
	}
	if (spec->is_return && fn)
		return resolve_return_sites(sv, spec, idx, path, ef, fn, flags);
	return resolve_add_site(sv, spec, idx, path, ef, fn, spec->address,
				0);
}

/* One line for every IFUNC the glob matched. */
static void glob_warn_ifuncs(const struct usc_probe_spec *spec, const struct objfile_sym **m,
			     ssize_t n)
{
	char ifuncs[256] = "";
	size_t nif = 0, used = 0;

	for (ssize_t i = 0; i < n; i++) {
		if (!(m[i]->flags & OBJFILE_SYM_IFUNC))
			continue;
		if (nif++ < 6 && used < sizeof(ifuncs))
			used += (size_t)snprintf(ifuncs + used, sizeof(ifuncs) - used, "%s%s",
						 nif > 1 ? ", " : "", objfile_sym_pretty(m[i]));
	}
	if (nif)
		log_warn("%s: %zu of the matches are IFUNCs (%s%s): their probes are on the "
			 "resolvers, which run when the symbols are bound", spec->text, nif,
			 ifuncs, nif > 6 ? ", ..." : "");
}

/* The sites of one function the glob matched: entry or returns, and the
 * inlined copies. 0 or -errno, logged. */
static int glob_function(const struct usc_probe_spec *spec, unsigned idx, const char *path,
			 const struct objfile *ef, unsigned flags, struct site_vec *sv,
			 const struct objfile_sym *f)
{
	size_t first = sv->n;
	int ret, k;

	if (spec->has_offset && spec->offset >= f->size)
		return 0;	/* too short for the offset */
	if (shape_is_part(f) && strncmp(spec->symbol, f->name,
					strlen(f->name)))
		return 0;	/* NAME.cold is NAME's, unless named */
	if (spec->is_return)
		ret = resolve_return_sites(sv, spec, idx, path, ef, f, flags);
	else
		ret = resolve_add_site(sv, spec, idx, path, ef, f,
				       f->vaddr + spec->offset, 0);
	k = ret ? 0 : resolve_inline_sites(sv, spec, idx, path, ef, f,
					   objfile_sym_pretty(f), flags);
	if (k < 0)
		ret = k;
	else if (k > 0 && !spec->event_given)	/* one label a function */
		label_sites(sv, first, spec, objfile_sym_pretty(f));
	return ret;
}

int resolve_glob(const struct usc_probe_spec *spec, unsigned idx, const char *path,
		 const struct objfile *ef, unsigned flags, struct site_vec *sv)
{
	const struct objfile_sym **m = NULL;
	ssize_t n = objfile_func_match(ef, spec->symbol, &m);
	int ret = 0;

	if (n < 0)
		return (int)n;
	if (n == 0) {
		if (flags & RESOLVE_SKIP_MISSING)
			log_warn("%s: no function matches '%s' in %s: left out", spec->text,
				 spec->symbol, path);
		else
			log_error("%s: no function matches '%s' in %s", spec->text, spec->symbol,
				  path);
		ret = -ENOENT;
	}
	if (!sv->quiet)
		glob_warn_ifuncs(spec, m, n);
	for (ssize_t i = 0; i < n && !ret; i++)
		ret = glob_function(spec, idx, path, ef, flags, sv, m[i]);
	free(m);
	return ret;
}

/* Several functions have the name: say which, and how to pick. */
static void log_ambiguous(const struct usc_probe_spec *spec, const char *path,
			  const struct objfile_sym **cands, size_t ncands)
{
	char list[1024] = "";
	size_t used = 0;

	for (size_t i = 0; i < ncands && used < sizeof(list); i++)
		used += (size_t)snprintf(list + used, sizeof(list) - used,
					 "%s%s%s%s at 0x%llx", i ? ", " : "",
					 objfile_sym_pretty(cands[i]), cands[i]->version ? "@" : "",
					 cands[i]->version ? cands[i]->version : "",
					 (unsigned long long)cands[i]->vaddr);
	if (cands[0]->demangled && strcmp(cands[0]->name, spec->symbol) &&
	    !strchr(spec->symbol, '('))
		log_error("%s: '%s' is overloaded in %s: %s; name one with its parameters "
			  "('%s'), or every one with a glob ('%s*')", spec->text,
			  spec->symbol, path, list, cands[0]->demangled, spec->symbol);
	else
		log_error("%s: %zu functions are named '%s' in %s (%s); probe one by "
			  "ADDRESS", spec->text, ncands, spec->symbol, path, list);
}

/* A function that only exists inlined, perhaps: its copies. 0 or -errno,
 * logged. */
static int symbol_inlined_only(const struct usc_probe_spec *spec, unsigned idx, const char *path,
			       const struct objfile *ef, unsigned flags, struct site_vec *sv)
{
	size_t first = sv->n;
	int k = spec->has_offset ? 0 :
		resolve_inline_sites(sv, spec, idx, path, ef, NULL, spec->symbol, flags);

	if (k > 0) {
		label_sites(sv, first, spec, spec->symbol);
		return 0;
	}
	if (k < 0)
		return k;
	resolve_log_unknown(spec, ef, path, flags);
	return -ENOENT;
}

/* SYMBOL+OFFSET: inside the function, on an instruction boundary, and not
 * a return probe. 0 or -errno, logged. */
static int symbol_check_offset(const struct usc_probe_spec *spec, const struct objfile *ef,
			       const struct objfile_sym *fn)
{
	if (spec->is_return) {
		log_error("%s: a return probe goes on a function, not at an offset in it",
			  spec->text);
		return -EINVAL;
	}
	if (fn->size && spec->offset >= fn->size) {
		log_error("%s: offset 0x%llx is outside %s (size 0x%llx)", spec->text,
			  (unsigned long long)spec->offset, objfile_sym_pretty(fn),
			  (unsigned long long)fn->size);
		return -EINVAL;
	}
	return check_boundary(ef, fn, spec->offset, spec);
}

int resolve_symbol(const struct usc_probe_spec *spec, unsigned idx, const char *path,
		   const struct objfile *ef, unsigned flags, struct site_vec *sv)
{
	const struct objfile_sym *fn = NULL, **cands = NULL;
	size_t ncands = 0, first;
	int ret, k;

	ret = objfile_func_lookup(ef, spec->symbol, &fn, &cands, &ncands);
	if (ret == -ENOENT)
		return symbol_inlined_only(spec, idx, path, ef, flags, sv);
	if (ret == -EEXIST)
		log_ambiguous(spec, path, cands, ncands);
	free(cands);
	if (ret)
		return ret;
	if (spec->has_offset) {
		ret = symbol_check_offset(spec, ef, fn);
		if (ret)
			return ret;
	}
	first = sv->n;
	if (spec->is_return)
		ret = resolve_return_sites(sv, spec, idx, path, ef, fn, flags);
	else
		ret = resolve_add_site(sv, spec, idx, path, ef, fn, fn->vaddr + spec->offset, 0);
	k = ret ? 0 : resolve_inline_sites(sv, spec, idx, path, ef, fn, objfile_sym_pretty(fn), flags);
	if (k < 0)
		ret = k;
	else if (k > 0)		/* the copies show as the function */
		label_sites(sv, first, spec, objfile_sym_pretty(fn));
	return ret;
}
