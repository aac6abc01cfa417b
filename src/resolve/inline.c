/* The copies of a function the compiler inlined: an entry probe on a
 * function goes on each of them too (from the debug info), with the same
 * label, unless RESOLVE_NO_INLINES. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "debuginfo/debuginfo.h"
#include "debuginfo/inline.h"
#include "objfile/objfile.h"
#include "cache/cache.h"
#include "resolve/resolve_int.h"

/* Can every variable the probe names be read at the inlined copy? The
 * compiler often folds an inlined copy's parameters into constants or
 * computes them: such a copy is skipped with a warning, the others stay. */
static bool inline_vars_ok(struct debuginfo *dm, const struct usc_probe_spec *spec,
			   const char *name, const struct debuginfo_inline_site *is)
{
	for (unsigned i = 0; i < spec->nargs; i++) {
		const struct usc_fetcharg *in = &spec->args[i];
		struct usc_fetcharg low = {0};
		struct debuginfo_error derr = {0};
		size_t vp = (size_t)(in->insn[0].imm & 0xffffffff);
		size_t vl = (size_t)(in->insn[0].imm >> 32);
		int ret;

		if (in->insn[0].op != FOP_VAR)
			continue;
		ret = debuginfo_lower_expr(dm, is->pc, spec->text + vp, vl, &low, &derr);
		if (ret) {
			log_warn("%s: skipping the copy of %s inlined at %s:%u (0x%llx): %.*s: %s",
				 spec->text, name,
				 !is->call_file ? "?" : strrchr(is->call_file, '/') ?
				 strrchr(is->call_file, '/') + 1 : is->call_file,
				 is->call_line, (unsigned long long)is->pc, (int)vl, spec->text + vp,
				 derr.msg[0] ? derr.msg : strerror(-ret));
			return false;
		}
	}
	return true;
}

/* An entry probe on a function also goes on every copy of it the compiler
 * inlined (as perf probe does), with the same label. fn is the out-of-line
 * function, or NULL for a function that only exists inlined (name). A
 * return probe cannot: an inlined copy has no return; say so. Without
 * debug info there is nothing to add. Returns the number of copies added,
 * or -errno. */
int resolve_inline_sites(struct site_vec *sv, const struct usc_probe_spec *spec,
			 unsigned idx, const char *path, const struct objfile *ef,
			 const struct objfile_sym *fn, const char *name, unsigned flags)
{
	struct debuginfo *dm;
	struct debuginfo_inline_site *is = NULL;
	ssize_t n;
	int ret = 0, added = 0;

	if ((flags & RESOLVE_NO_INLINES) || spec->has_offset || cache_dwarf(sv->c, path, &dm))
		return 0;
	n = debuginfo_inline_sites(dm, fn ? fn->vaddr : 0, name, &is);
	if (n == -ENOENT)
		return 0;
	if (n < 0)
		return (int)n;
	if (n && spec->is_return && !fn) {
		log_error("%s: %s has no out-of-line copy, and its %zd inlined cop%s no "
			  "return to probe", spec->text, name, n, n == 1 ? "y has" : "ies have");
		free(is);
		return -ENOTSUP;
	}
	if (n && spec->is_return) {
		log_warn("%s: %s is also inlined at %zd place%s, which %s no return to probe: "
			 "only its out-of-line copy is probed", spec->text, name, n,
			 n == 1 ? "" : "s", n == 1 ? "has" : "have");
		n = 0;
	}
	for (ssize_t i = 0; i < n && !ret; i++) {
		struct usc_site *s;

		if (!inline_vars_ok(dm, spec, name, &is[i]))
			continue;
		ret = resolve_add_site(sv, spec, idx, path, ef, NULL, is[i].pc, 0);
		if (ret)
			break;
		s = &sv->v[sv->n - 1];
		s->symbol = strdup(name);
		s->func_vaddr = fn ? fn->vaddr : 0;
		s->inlined = true;
		if (!s->symbol)
			ret = -ENOMEM;
		log_debug("%s: inlined copy of %s at 0x%llx (%s:%u)", spec->text, name,
			  (unsigned long long)is[i].pc, is[i].call_file ? is[i].call_file : "?",
			  is[i].call_line);
		added++;
	}
	free(is);
	if (!ret && n > 0 && !added && !fn) {
		log_error("%s: %s exists only inlined, and none of its %zd copies can be probed",
			  spec->text, name, n);
		return -ENOENT;
	}
	return ret ? ret : added;
}
