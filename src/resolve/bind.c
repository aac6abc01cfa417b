/* A site's arguments and filter: $argN becomes a register (a function) or
 * the USDT argument's program, a variable by name is lowered from the debug
 * info at the site, a bare $retval takes the function's return type, Go's
 * register ABI for Go functions; then the filter binds to them by name. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "debuginfo/debuginfo.h"
#include "cache/cache.h"
#include "resolve/goabi.h"
#include "resolve/resolve_int.h"

/* A bound argument's failure: ret from probe_bind_arg, logged. */
static int bind_result(const struct usc_site *site, const struct usc_fetcharg *in,
		       unsigned nusdt, int ret)
{
	const struct usc_probe_spec *spec = site->spec;

	if (ret == -ERANGE) {
		log_error("%s: %.*s: %s has %u argument%s", spec->text, (int)in->len,
			  spec->text + in->pos, site->label[0] ? site->label : "the probe", nusdt,
			  nusdt == 1 ? "" : "s");
		return ret;
	}
	if (ret) {
		log_error("%s: %.*s: the argument's program is too long", spec->text,
			  (int)in->len, spec->text + in->pos);
		return ret;
	}
	return 0;
}

/* $params: every parameter, named after it. */
static int bind_params(struct usc_site *site, struct debuginfo *dm, unsigned *out)
{
	const struct usc_probe_spec *spec = site->spec;
	int ret = debuginfo_params(dm, site->vaddr, &site->args[*out], USC_MAX_ARGS - *out);

	if (ret < 0) {
		log_error("%s: $params: %s", spec->text,
			  ret == -ENOSPC ? "too many parameters" :
			  "no function with debug info at the probe");
		return ret;
	}
	*out += (unsigned)ret;
	return 0;
}

/* A variable by name: the C expression, lowered from the debug info at the
 * site, then the user's :TYPE as on a USDT argument. */
static int bind_var(struct usc_site *site, const struct usc_fetcharg *in,
		    struct debuginfo *dm, unsigned nusdt, unsigned *out)
{
	const struct usc_probe_spec *spec = site->spec;
	struct usc_fetcharg low = {0}, copy;
	struct debuginfo_error derr = {0};
	size_t vp = (size_t)(in->insn[0].imm & 0xffffffff);
	size_t vl = (size_t)(in->insn[0].imm >> 32);
	struct usc_fetcharg mem[USC_MAX_ARGS];
	int ret;

	memset(&mem[0], 0, sizeof(mem[0]));

	ret = debuginfo_lower_var(dm, site->vaddr, spec->text + vp, vl, in->name, mem,
			      USC_MAX_ARGS - *out, &derr);
	if (ret == -ENODATA) {
		/* <optimized out> here; an error if it is so at
		 * every site of the probe (check_optimized_out) */
		site->args[*out] = *in;
		memcpy(site->args[*out].insn, mem[0].insn, sizeof(mem[0].insn));
		site->args[*out].ninsn = mem[0].ninsn;
		site->args[*out].type = mem[0].type;
		site->args[*out].optimized_out = true;
		(*out)++;
		return 0;
	}
	if (ret < 0) {
		log_error("%s: %.*s: %s", spec->text, (int)vl, spec->text + vp,
			  derr.msg[0] ? derr.msg : strerror(-ret));
		return ret;
	}
	if (mem[0].group_len || ret > 1) {
		/* a struct shown whole: one argument per member; a Go
		 * string, slice or interface: one per word */
		if (in->type_given) {
			log_error("%s: %.*s: a %s takes no :TYPE; pick a member",
				  spec->text, (int)in->len, spec->text + in->pos,
				  mem[0].group_len ? "struct" : "Go value in several words");
			return -EINVAL;
		}
		for (int k = 0; k < ret; k++) {
			mem[k].pos = in->pos;
			mem[k].len = in->len;
			site->args[(*out)++] = mem[k];
		}
		return 0;
	}
	low = mem[0];
	copy = *in;
	copy.insn[0] = (struct fetch_insn){.op = FOP_ARG, .imm = 1};
	ret = probe_bind_arg(&copy, &low, 1, &site->args[*out]);
	site->args[*out].unavailable = low.unavailable;
	if (!in->type_given) {	/* :TYPE overrides how it shows */
		site->args[*out].show = low.show;
		site->args[*out].enums = low.enums;
	}
	ret = bind_result(site, in, nusdt, ret);
	if (!ret)
		(*out)++;
	return ret;
}

/* A bare $retval at a function's return takes the function's return type
 * (from the debug info, loaded into *dm if need be): true when it did. */
static bool bind_retval_typed(struct usc_site *site, const struct usc_fetcharg *in,
			      struct debuginfo **dm, struct usc_cache *c, struct usc_fetcharg *arg)
{
	struct usc_fetcharg low = {0};

	if (!(site->is_return && site->func_vaddr && in->insn[0].op == FOP_RETVAL &&
	      in->insn[0].imm < 2 && !in->type_given && in->ninsn == 3 &&
	      in->insn[1].op == FOP_ST_RAW &&
	      (*dm || cache_dwarf(c, site->path, dm) == 0) &&
	      debuginfo_func_rettype(*dm, site->func_vaddr, &low) == 0))
		return false;
	*arg = *in;
	memcpy(arg->insn, low.insn, sizeof(low.insn));
	arg->ninsn = low.ninsn;
	arg->type = low.type;
	arg->show = low.show;
	arg->enums = low.enums;
	return true;
}

/* One fetch argument of the probe at site->args[*out] (several for
 * $params, a struct or a Go value), *out advanced. 0 or -errno, logged. */
static int bind_arg(struct usc_site *site, const struct usc_fetcharg *in,
		    const struct usc_fetcharg *usdt, unsigned nusdt, struct debuginfo **dm,
		    struct usc_cache *c, unsigned *out)
{
	const struct usc_probe_spec *spec = site->spec;
	int ret;

	if (!usdt && (ret = goabi_bind_string(c, site, in, &site->args[*out],
					      USC_MAX_ARGS - *out)) != 0) {
		if (ret < 0)
			return ret;
		*out += (unsigned)ret;	/* a Go string: its length, its bytes */
		return 0;
	}
	if (!usdt && goabi_wants(in)) {
		/* a Go function: Go's register ABI ($argN, $retvalN, $goid) */
		struct debuginfo *gdm = *dm;

		if (!gdm && in->insn[0].op == FOP_GOID && cache_dwarf(c, site->path, &gdm))
			gdm = NULL;
		ret = goabi_bind(c, site, gdm, in, &site->args[*out]);
		if (ret < 0)
			return ret;
		if (ret == 0) {
			(*out)++;
			return 0;
		}
	}
	if ((in->insn[0].op == FOP_PARAMS || in->insn[0].op == FOP_VAR) && !*dm) {
		log_error("%s: %.*s: variables by name work on function and address "
			  "probes, not here", spec->text, (int)in->len, spec->text + in->pos);
		return -EINVAL;
	}
	if (in->insn[0].op == FOP_PARAMS)
		return bind_params(site, *dm, out);
	if (in->insn[0].op == FOP_VAR)
		return bind_var(site, in, *dm, nusdt, out);
	if (bind_retval_typed(site, in, dm, c, &site->args[*out]))
		ret = 0;
	else
		ret = probe_bind_arg(in, usdt, nusdt, &site->args[*out]);
	ret = bind_result(site, in, nusdt, ret);
	/* At a return site $retval stays FOP_RETVAL: %rax, read by every
	 * engine. At a tail call the callee has not computed it yet: it
	 * is read at the callee's return where the engine follows the
	 * call, and is unavailable where it does not (the session marks
	 * it). */
	if (!ret)
		(*out)++;
	return ret;
}

/* objtrace: the registers in which a call at site can receive a followed
 * object. At a function's own entry, with its debug info: those of its
 * pointer parameters (a register past them holds what the caller left
 * there). Without debug info, inside a function, on an inlined copy or a
 * compiler's clone (foo.isra.0, foo.constprop.0, whose parameters are not
 * the ones its debug info lists): all six. */
static uint8_t obj_regs(struct usc_cache *c, const struct usc_site *site)
{
	struct debuginfo *dm = NULL;
	uint8_t mask;

	if (site->spec->obj_role != USC_OBJ_MATCH || site->inlined || site->ret_site ||
	    !site->func_vaddr || site->vaddr != site->func_vaddr || !site->symbol ||
	    strchr(site->symbol, '.') || cache_dwarf(c, site->path, &dm) || !dm ||
	    debuginfo_param_ptr_regs(dm, site->func_vaddr, &mask))
		return 0x3f;
	return mask;
}

/* Bind the probe's arguments to a site: $argN becomes a register (a
 * function) or the USDT argument's program. A USDT probe with no FETCHARG
 * records all of its arguments. */
static int bind_args(struct usc_site *site, const struct usc_fetcharg *usdt, unsigned nusdt,
		     bool defaults, struct debuginfo *dm, struct usc_cache *c)
{
	const struct usc_probe_spec *spec = site->spec;
	unsigned shown = probe_shown_args(spec->args, spec->nargs), out = 0;

	site->obj_regs = obj_regs(c, site);
	site->args = calloc(USC_MAX_ARGS, sizeof(*site->args));
	if (!site->args)
		return -ENOMEM;
	if (!shown && defaults && usdt) {
		/* every argument of the USDT probe, then the filter's own */
		out = nusdt < USC_MAX_ARGS ? nusdt : USC_MAX_ARGS;
		memcpy(site->args, usdt, out * sizeof(*usdt));
	}
	for (unsigned i = 0; i < spec->nargs; i++) {
		int ret;

		if (out >= USC_MAX_ARGS) {
			log_error("%s: more than %d arguments", spec->text, USC_MAX_ARGS);
			return -E2BIG;
		}
		ret = bind_arg(site, &spec->args[i], usdt, nusdt, &dm, c, &out);
		if (ret)
			return ret;
	}
	/* names must stay unique once $params has added its own */
	for (unsigned i = 0; i < out; i++)
		for (unsigned k = 0; k < i; k++)
			if (!strcmp(site->args[i].name, site->args[k].name)) {
				log_error("%s: two arguments are named '%s'", spec->text,
					  site->args[i].name);
				return -EINVAL;
			}
	site->nargs = out;
	return 0;
}

/* A Go function's site of a command that pairs calls (RESOLVE_GO_PAIRS):
 * its goroutine's g (R14), a hidden argument after the others. */
static int add_go_ctx(struct usc_site *site)
{
	struct usc_fetcharg *a;

	if (site->nargs >= USC_MAX_ARGS) {
		log_error("%s: more than %d arguments with the goroutine uscope pairs calls by",
			  site->spec->text, USC_MAX_ARGS - 1);
		return -E2BIG;
	}
	a = &site->args[site->nargs++];
	memset(a, 0, sizeof(*a));
	snprintf(a->name, sizeof(a->name), "%s", USC_GO_CTX_ARG);
	a->hidden = true;
	a->type = USC_T_X64;
	a->insn[0] = (struct fetch_insn){.op = FOP_REG, .reg = USC_REG_R14};
	a->insn[1] = (struct fetch_insn){.op = FOP_ST_RAW, .size = 8};
	a->insn[2] = (struct fetch_insn){.op = FOP_END};
	a->ninsn = 3;
	return 0;
}

/* The arguments, then the filter over them, by their names. */
int resolve_bind_site(struct usc_site *site, const struct usc_fetcharg *usdt, unsigned nusdt,
		      struct debuginfo *dm, struct site_vec *sv)
{
	const struct usc_probe_spec *spec = site->spec;
	const char *bad = NULL;
	int ret;

	bool defaults = !(sv->flags & RESOLVE_NO_DEFAULT_ARGS);

	site->agg_func = -1;
	ret = bind_args(site, usdt, nusdt, defaults, dm, sv->c);
	if (!ret && (sv->flags & RESOLVE_GO_PAIRS) && !usdt && goabi_regabi(sv->c, site))
		ret = add_go_ctx(site);
	if (ret || !spec->filter.n)
		return ret;
	ret = probe_bind_filter(&spec->filter, site->args, site->nargs, &site->filter, &bad);
	if (ret == -ENOENT)
		log_error("%s: if %.*s: %s has no argument named '%s'", spec->text,
			  (int)spec->filter.len, spec->text + spec->filter.pos,
			  site->symbol ? site->symbol : site->label, bad);
	else if (ret) {
		bool str = false;

		for (unsigned i = 0; i < site->nargs; i++)
			if (!strcmp(site->args[i].name, bad))
				str = fetch_type_is_string(site->args[i].type);
		log_error("%s: if %.*s: '%s' is %s, and is compared with %s", spec->text,
			  (int)spec->filter.len, spec->text + spec->filter.pos, bad,
			  str ? "a string" : "a number", str ? "a number" : "a string");
	}
	return ret;
}

/* A variable optimized out at some sites of a probe shows <optimized out>
 * there; at all of them it is an error, naming it and where. */
int resolve_check_optimized_out(struct usc_cache *c, const struct usc_probe_spec *spec,
				const struct usc_site *v, size_t n)
{
	for (unsigned i = 0; i < spec->nargs && n; i++) {
		const struct usc_fetcharg *in = &spec->args[i];
		struct debuginfo *dm;
		struct debuginfo_error derr = {0};
		struct usc_fetcharg tmp[1];
		size_t vp = (size_t)(in->insn[0].imm & 0xffffffff);
		size_t vl = (size_t)(in->insn[0].imm >> 32);
		bool seen = false, somewhere = false;

		if (in->insn[0].op != FOP_VAR)
			continue;
		for (size_t k = 0; k < n && !somewhere; k++)
			for (unsigned a = 0; a < v[k].nargs; a++)
				if (v[k].args[a].pos == in->pos) {
					seen = true;
					somewhere |= !v[k].args[a].optimized_out;
				}
		if (!seen || somewhere)
			continue;
		/* the reason, as the debug info gives it at the first site */
		if (cache_dwarf(c, v[0].path, &dm) == 0)
			debuginfo_lower_var(dm, v[0].vaddr, spec->text + vp, vl, in->name, tmp, 1, &derr);
		log_error("%s: %.*s: %s%s%s%s", spec->text, (int)vl, spec->text + vp,
			  derr.msg[0] ? derr.msg : "optimized out",
			  v[0].symbol ? " in " : "", v[0].symbol ? v[0].symbol : "",
			  n > 1 ? ", and at every other site of the probe" : "");
		return -ENODATA;
	}
	return 0;
}
