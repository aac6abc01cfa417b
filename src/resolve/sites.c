/* One site at an address of a module: checked to be code with a file
 * offset, moved past the prologue for a probe that names variables,
 * labelled, and its arguments bound. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/grow.h"
#include "debuginfo/debuginfo.h"
#include "objfile/objfile.h"
#include "cache/cache.h"
#include "resolve/goabi.h"
#include "resolve/resolve_int.h"

static bool spec_needs_dwarf(const struct usc_probe_spec *spec)
{
	for (unsigned i = 0; i < spec->nargs; i++)
		if (spec->args[i].insn[0].op == FOP_VAR || spec->args[i].insn[0].op == FOP_PARAMS)
			return true;
	return false;
}

struct usc_site *resolve_site_push(struct site_vec *sv)
{
	if (core_reserve(sv->v, sv->cap, sv->n + 1, 16))
		return NULL;
	memset(&sv->v[sv->n], 0, sizeof(sv->v[0]));
	sv->v[sv->n].agg_func = -1;
	return &sv->v[sv->n++];
}

struct usc_site *resolve_site_new(struct site_vec *sv, const struct usc_probe_spec *spec,
				  unsigned idx, const char *path)
{
	struct usc_site *s = resolve_site_push(sv);

	if (!s)
		return NULL;
	s->spec = spec;
	s->probe = idx;
	s->path = strdup(path);
	return s->path ? s : NULL;
}

/* Whether every variable the probe names by itself or through $params has
 * a location at pc (a member or a pointer it goes through may still fault
 * when read: that is for the run). Quiet: this is a question. */
static bool vars_readable(struct debuginfo *dm, const struct usc_probe_spec *spec,
			  uint64_t pc)
{
	struct usc_fetcharg mem[USC_MAX_ARGS];
	bool ok = true;

	usc_log_quiet(true);
	for (unsigned i = 0; i < spec->nargs && ok; i++) {
		const struct usc_fetcharg *in = &spec->args[i];
		size_t vp = (size_t)(in->insn[0].imm & 0xffffffff);
		size_t vl = (size_t)(in->insn[0].imm >> 32);
		int n;

		if (in->insn[0].op == FOP_VAR) {
			ok = debuginfo_lower_var(dm, pc, spec->text + vp, vl, in->name, mem,
					     USC_MAX_ARGS, NULL) != -ENODATA;
		} else if (in->insn[0].op == FOP_PARAMS) {
			n = debuginfo_params(dm, pc, mem, USC_MAX_ARGS);
			for (int k = 0; k < n && ok; k++)
				ok = !mem[k].optimized_out;
		}
	}
	usc_log_quiet(false);
	return ok;
}

/* A probe that names variables: the file's debug info in *dm, and the
 * probe at *vaddr (and *off) moved past the prologue where its variables
 * can be read. 0 or -errno, logged. */
static int site_for_vars(struct site_vec *sv, const struct usc_probe_spec *spec,
			 const char *path, const struct objfile *ef, const struct objfile_sym *fn,
			 unsigned site_flags, struct debuginfo **dm, uint64_t *vaddr,
			 uint64_t *off)
{
	int err;

	if (spec->is_return || site_flags) {
		log_error("%s: variables by name are not readable at a return; use $retval",
			  spec->text);
		return -EINVAL;
	}
	err = cache_dwarf(sv->c, path, dm);
	if (err == -ENODATA) {
		log_error("%s: %s has no debug info (DWARF) to find variables by name in: "
			  "build it with -g, or install its separate debug file", spec->text,
			  path);
		return err;
	}
	if (err) {
		log_error("%s: cannot read the debug info of %s: %s", spec->text, path,
			  strerror(-err));
		return err;
	}
	/* at a function's entry its parameters are not home yet: probe
	 * after the prologue, as perf probe does; but optimized code
	 * may have reused their registers by then, while they are all
	 * at the entry (a leaf at -O2): probe the entry then. Neither:
	 * the probe stays after the prologue, and resolve_check_optimized_out
	 * (bind.c) names the variable. */
	if (fn && *vaddr == fn->vaddr && debuginfo_after_prologue(*dm, fn->vaddr, vaddr) == 0 &&
	    *vaddr != fn->vaddr && !vars_readable(*dm, spec, *vaddr) &&
	    vars_readable(*dm, spec, fn->vaddr))
		*vaddr = fn->vaddr;
	if (objfile_vaddr_to_offset(ef, *vaddr, off))
		return -EINVAL;
	return 0;
}

/* What output calls the site, when not its event name (name.c). */
static void site_label(struct usc_site *s, const struct usc_probe_spec *spec,
		       const struct objfile *ef, const struct objfile_sym *fn)
{
	if (s->ret_site)	/* every return site of one function shows as one */
		snprintf(s->label, sizeof(s->label), "%s%s",
			 spec->event_given ? spec->event : objfile_sym_pretty(fn),
			 spec->event_given ? "" : "__return");
	else if (fn && (fn->demangled || ef->is_go) && !spec->event_given && spec->has_offset)
		snprintf(s->label, sizeof(s->label), "%s+0x%llx", objfile_sym_pretty(fn),
			 (unsigned long long)spec->offset);
	else if (fn && (fn->demangled || ef->is_go) && !spec->event_given)
		/* C++: the demangled name; Go: its own (main.(*T).m), which
		 * the kernel's event name cannot spell */
		snprintf(s->label, sizeof(s->label), "%s%s", objfile_sym_pretty(fn),
			 s->is_return ? "__return" : "");
}

int resolve_add_site(struct site_vec *sv, const struct usc_probe_spec *spec, unsigned idx,
		     const char *path, const struct objfile *ef, const struct objfile_sym *fn,
		     uint64_t vaddr, unsigned site_flags)
{
	struct debuginfo *dm = NULL;
	struct usc_site *s;
	uint64_t off;
	int err;

	/* a Go function's entry: past its stack check, where it starts over
	 * after growing its stack (goabi.h) */
	if (!spec->is_return && !site_flags && !spec->has_offset)
		goabi_past_stack_check(ef, fn, &vaddr);
	if (!objfile_vaddr_is_exec(ef, vaddr)) {
		log_error("%s: address 0x%llx is not in an executable segment of %s", spec->text,
			  (unsigned long long)vaddr, path);
		return -EINVAL;
	}
	if (objfile_vaddr_to_offset(ef, vaddr, &off)) {
		log_error("%s: address 0x%llx has no file offset in %s", spec->text,
			  (unsigned long long)vaddr, path);
		return -EINVAL;
	}
	if (spec_needs_dwarf(spec)) {
		err = site_for_vars(sv, spec, path, ef, fn, site_flags, &dm, &vaddr, &off);
		if (err)
			return err;
	}
	if (fn && (fn->flags & OBJFILE_SYM_IFUNC) && !spec->is_glob && !sv->quiet)
		log_warn("%s: %s is an IFUNC: the probe is on its resolver, which runs when the "
			 "symbol is bound, not on the implementation it selects", spec->text,
			 objfile_sym_pretty(fn));
	s = resolve_site_new(sv, spec, idx, path);
	if (!s)
		return -ENOMEM;
	s->symbol = fn ? strdup(objfile_sym_pretty(fn)) : NULL;
	s->vaddr = vaddr;
	s->func_vaddr = fn ? fn->vaddr : 0;
	s->offset = off;
	s->is_return = spec->is_return;
	s->ret_site = site_flags != 0;
	s->tail_call = site_flags & SITE_TAIL;
	if (fn && !s->symbol)
		return -ENOMEM;
	site_label(s, spec, ef, fn);
	return resolve_bind_site(s, NULL, 0, dm, sv);
}
