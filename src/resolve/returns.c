/* A return probe's sites: an entry-style probe on every ret and tail-call
 * jmp of the function, and for each tail call the hidden sites that follow
 * it to the callees' rets (see usc_site). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "objfile/objfile.h"
#include "resolve/resolve_int.h"
#include "resolve/shape.h"
#include "x86/insn.h"

/* The hidden sites that follow a tail call to target (see usc_site): the
 * rets of the callee, and of every function it reaches by tail calls in
 * turn, at most 8 functions. None when a callee cannot be known (a jmp
 * through a pointer or the PLT, a callee whose returns cannot all be
 * found): the tail call's event then comes at its jmp. */
#define TAIL_FOLLOW_MAX 8

/* The functions a tail call reaches, and their rets. */
struct tail_walk {
	uint64_t fns[TAIL_FOLLOW_MAX];
	const char *names[TAIL_FOLLOW_MAX];	/* each function's, or NULL */
	size_t nfns;
	uint64_t *rets;
	size_t *ret_fn;		/* the function (index in fns) of each ret */
	size_t nrets;
	const char *why;
	char reason[256];	/* why the rets cannot all be known, or "" */
};

/* A ret of function f. 0 or -ENOMEM. */
static int tail_add_ret(struct tail_walk *w, size_t f, uint64_t addr)
{
	uint64_t *v = realloc(w->rets, (w->nrets + 1) * sizeof(*v));
	size_t *u = v ? realloc(w->ret_fn, (w->nrets + 1) * sizeof(*u)) : NULL;

	if (v)
		w->rets = v;
	if (!v || !u)
		return -ENOMEM;
	w->ret_fn = u;
	w->ret_fn[w->nrets] = f;
	w->rets[w->nrets++] = addr;
	return 0;
}

/* The rets of function f, and the functions it tail-calls added to the
 * walk; w->reason says when they cannot be known. 0 or -ENOMEM. */
static int tail_walk_fn(const struct objfile *ef, struct tail_walk *w, size_t f)
{
	struct x86_ret_site *rs = NULL;
	struct func_shape sh;
	ssize_t n;
	int ret = 0;

	if (shape_at(ef, w->fns[f], &sh) || sh.entry != w->fns[f]) {
		if (sh.n)
			shape_free(&sh);
		snprintf(w->reason, sizeof(w->reason), "no function starts at 0x%llx (the PLT?)",
			 (unsigned long long)w->fns[f]);
		return 0;
	}
	w->names[f] = sh.sym ? objfile_sym_pretty(sh.sym) : NULL;
	n = shape_returns(ef, &sh, &rs, &w->why);
	shape_free(&sh);
	if (n < 0) {
		snprintf(w->reason, sizeof(w->reason), "the returns of the callee at 0x%llx: %s",
			 (unsigned long long)w->fns[f], w->why ? w->why : strerror((int)-n));
		return 0;
	}
	for (ssize_t i = 0; i < n && !w->reason[0]; i++) {
		bool seen = false;

		if (rs[i].kind == X86_RET) {
			ret = tail_add_ret(w, f, rs[i].addr);
			if (ret)
				break;
			continue;
		}
		if (!rs[i].target) {
			snprintf(w->reason, sizeof(w->reason), "the callee at 0x%llx tail-calls "
				 "through a pointer", (unsigned long long)w->fns[f]);
			break;
		}
		for (size_t k = 0; k < w->nfns; k++)
			seen |= w->fns[k] == rs[i].target;
		if (seen)
			continue;
		if (w->nfns == TAIL_FOLLOW_MAX) {
			snprintf(w->reason, sizeof(w->reason), "more than %d functions in a chain of "
				 "tail calls", TAIL_FOLLOW_MAX);
			break;
		}
		w->fns[w->nfns++] = rs[i].target;
	}
	free(rs);
	return ret;
}

/* A hidden site on each ret the walk found, in the group of the tail-call
 * site sv->v[tail]. 0 or -errno. */
static int tail_hidden_sites(struct site_vec *sv, const struct usc_probe_spec *spec,
			     unsigned idx, const char *path, const struct objfile *ef,
			     size_t tail, const struct tail_walk *w)
{
	int ret = 0;

	for (size_t i = 0; i < w->nrets && !ret; i++) {
		struct usc_site *h = resolve_site_push(sv);
		uint64_t off = 0;

		if (!h) {
			ret = -ENOMEM;
			break;
		}
		h->spec = spec;
		h->probe = idx;
		h->path = strdup(path);
		/* the callee the ret returns from, for messages */
		h->symbol = w->names[w->ret_fn[i]] ? strdup(w->names[w->ret_fn[i]]) : NULL;
		h->vaddr = w->rets[i];
		h->func_vaddr = sv->v[tail].func_vaddr;
		h->is_return = true;
		h->ret_site = true;
		h->hidden = true;
		h->cont = true;
		h->group = (int32_t)tail;
		h->args = calloc(1, sizeof(*h->args));
		if (!h->path || !h->args)
			ret = -ENOMEM;
		else if (objfile_vaddr_to_offset(ef, w->rets[i], &off))
			ret = -EINVAL;
		h->offset = off;
	}
	sv->v[tail].group = (int32_t)tail;
	return ret;
}

static int add_tail_follow(struct site_vec *sv, const struct usc_probe_spec *spec, unsigned idx,
			   const char *path, const struct objfile *ef, size_t tail,
			   uint64_t target)
{
	struct tail_walk w = {.names = {0}};
	int ret = 0;

	if (!target)
		snprintf(w.reason, sizeof(w.reason), "a tail call through a pointer");
	else
		w.fns[w.nfns++] = target;
	for (size_t f = 0; f < w.nfns && !w.reason[0]; f++) {
		int err = tail_walk_fn(ef, &w, f);

		if (err)
			ret = err;
	}
	if (ret || w.reason[0]) {
		if (w.reason[0])
			log_info("%s: the return of %s at its tail call 0x%llx cannot be followed: %s; "
				 "its $retval is unavailable", spec->text, sv->v[tail].symbol,
				 (unsigned long long)sv->v[tail].vaddr, w.reason);
	} else {
		ret = tail_hidden_sites(sv, spec, idx, path, ef, tail, &w);
	}
	free(w.rets);
	free(w.ret_fn);
	return ret;
}

/* A return probe on fn: one entry-style probe on each of its return sites
 * (seed 001's "kretinsn"), so the stack is never touched, unless the caller
 * asked for the kernel's uretprobe. When the sites cannot all be known,
 * say what is missing: an error for a named function, a warning (and the
 * function skipped) within a glob. */
int resolve_return_sites(struct site_vec *sv, const struct usc_probe_spec *spec,
			 unsigned idx, const char *path, const struct objfile *ef,
			 const struct objfile_sym *fn, unsigned flags)
{
	struct x86_ret_site *rs = NULL;
	const char *why = NULL;
	struct func_shape sh;
	ssize_t n;
	int ret = 0;

	if (flags & RESOLVE_URETPROBE)
		return resolve_add_site(sv, spec, idx, path, ef, fn, fn->vaddr, 0);
	n = shape_of(ef, fn, &sh);
	if (n == -EINVAL) {
		why = "its size is unknown";
		n = -ENOTSUP;
	} else if (n) {
		log_error("%s: cannot read the code of %s: %s", spec->text, objfile_sym_pretty(fn),
			  strerror((int)-n));
		return (int)n;
	} else {
		n = shape_returns(ef, &sh, &rs, &why);
		shape_free(&sh);
		if (n == -ENOMEM)
			return (int)n;
	}
	for (ssize_t i = 0; i < n && (flags & RESOLVE_URETPROBE_EXACT); i++)
		if (rs[i].kind == X86_TAIL_JMP && !rs[i].target) {
			why = "a tail call through a pointer";
			n = 0;
		}
	if (n <= 0 && (flags & RESOLVE_URETPROBE_EXACT) && n != -ENOMEM) {
		log_info("%s: the return of %s is probed by swapping its return address: %s",
			 spec->text, objfile_sym_pretty(fn), why ? why : "its return sites");
		free(rs);
		return resolve_add_site(sv, spec, idx, path, ef, fn, fn->vaddr, 0);
	}
	if (n <= 0) {
		if (spec->is_glob) {
			log_warn("%s: skipping %s: cannot find all its return sites: %s "
				 "(--uretprobe probes it by swapping the return address)",
				 spec->text, objfile_sym_pretty(fn), why ? why : "?");
			return 0;
		}
		log_error("%s: cannot find all the return sites of %s: %s; --uretprobe probes it "
			  "by swapping the return address instead, which programs that walk their "
			  "stacks (Go) do not survive", spec->text, objfile_sym_pretty(fn), why ? why : "?");
		return n == -ENOENT ? -ENOENT : -ENOTSUP;
	}
	for (ssize_t i = 0; i < n && !ret; i++) {
		size_t at = sv->n;

		ret = resolve_add_site(sv, spec, idx, path, ef, fn, rs[i].addr,
				       rs[i].kind == X86_TAIL_JMP ? SITE_TAIL : SITE_RET);
		if (!ret && rs[i].kind == X86_TAIL_JMP && !(flags & RESOLVE_NO_TAIL_FOLLOW))
			ret = add_tail_follow(sv, spec, idx, path, ef, at, rs[i].target);
	}
	free(rs);
	return ret;
}
