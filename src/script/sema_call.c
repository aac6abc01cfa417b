/* The calls of bpftrace's language (sema_int.h): each function's
 * arguments counted and typed, its result's type; what uscope refuses, and
 * why. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "script/fmt.h"
#include "script/lex.h"
#include "script/sema_int.h"

/* A call's arguments, n of them, counted. */
static int nargs(struct sema *sm, struct ast *n, unsigned min, unsigned max)
{
	if ((unsigned)n->ival < min || (unsigned)n->ival > max) {
		if (min == max)
			return FAIL(sm, n, "%s() takes %u argument%s (%u given)", n->name, min,
				    min == 1 ? "" : "s", (unsigned)n->ival);
		return FAIL(sm, n, "%s() takes %u to %u arguments (%u given)", n->name, min, max,
			    (unsigned)n->ival);
	}
	return 0;
}

static int args_all(struct sema *sm, struct ast *n)
{
	for (struct ast *a = n->a; a; a = a->next)
		if (sema_expr(sm, a))
			return -EINVAL;
	return 0;
}

int sema_want_int(struct sema *sm, struct ast *a, const char *what)
{
	char tn[64];

	if (a->ty.kind == TY_INT || a->ty.kind == TY_NONE)
		return 0;
	ty_name(&a->ty, tn, sizeof(tn));
	return FAIL(sm, a, "%s expects an integer (%s supplied)", what, tn);
}

int sema_want_const(struct sema *sm, struct ast *a, const char *what, int64_t *v)
{
	if (a->kind == N_INT) {
		*v = a->ival;
		return 0;
	}
	if (a->kind == N_PARAM && a->ty.kind == TY_INT) {
		*v = a->ival;
		return 0;
	}
	return FAIL(sm, a, "%s must be a constant integer", what);
}

/* A format's call (printf, time, cat, strftime): its first argument a
 * literal string (or a parameter). */
static int want_str_lit(struct sema *sm, struct ast *a, const char *what)
{
	if (a && a->kind == N_STR)
		return 0;
	return FAIL(sm, a, "%s's format must be a string literal", what);
}

static int new_fmt(struct sema *sm, struct ast *n, enum script_out_kind kind, const char *text,
		   size_t len, struct ast *args)
{
	struct usc_script *s = sm->s;
	struct script_fmt *f;

	if (!sm->final)
		return 0;
	if (s->nfmts >= 65535)
		return FAIL(sm, n, "too many outputs");
	if (s->nfmts == s->capfmts) {
		size_t cap = s->capfmts ? 2 * s->capfmts : 16;
		struct script_fmt *nf = realloc(s->fmts, cap * sizeof(*nf));

		if (!nf)
			return FAIL(sm, n, "out of memory");
		s->fmts = nf;
		s->capfmts = cap;
	}
	f = &s->fmts[s->nfmts];
	if (kind == SOUT_PRINTF || kind == SOUT_CAT) {
		if (script_fmt_split(s, text, len, f, n->a->pos, n->a->len, sm->d) ||
		    script_fmt_check(s, f, n->name, args, n->pos, n->len, sm->d))
			return sm->err = -EINVAL;
	} else {
		memset(f, 0, sizeof(*f));
		f->text = text;
		f->ntext = (uint32_t)len;
		f->map = -1;
	}
	f->kind = kind;
	n->sym = (int)s->nfmts++;
	return 0;
}

static int map_arg(struct sema *sm, struct ast *n, struct ast *a, bool keys_ok)
{
	if (!a || a->kind != N_MAP)
		return FAIL(sm, a ? a : n, "%s() takes a map", n->name);
	if (!keys_ok && a->ival)
		return FAIL(sm, a, "%s() takes a whole map: @%s, without a key", n->name, a->name);
	if (a->ival)
		return sema_map_keys(sm, a);
	return sema_map_of(sm, a) < 0 ? -EINVAL : 0;
}

static int agg_call(struct sema *sm, struct ast *n, uint32_t vk, unsigned na)
{
	if (nargs(sm, n, na, na) || args_all(sm, n))
		return -EINVAL;
	if (na >= 1 && sema_want_int(sm, n->a, n->name))
		return -EINVAL;
	n->ty.kind = TY_AGG;
	n->ty.agg = (uint8_t)vk;
	if (vk == SVK_LHIST) {
		struct ast *mn = n->a->next, *mx = mn->next, *st = mx->next;

		if (sema_want_const(sm, mn, "lhist()'s min", &n->ty.lmin) ||
		    sema_want_const(sm, mx, "lhist()'s max", &n->ty.lmax) ||
		    sema_want_const(sm, st, "lhist()'s step", &n->ty.lstep))
			return -EINVAL;
		if (n->ty.lmin < 0)
			return FAIL(sm, mn, "lhist(): min must be non-negative");
		if (n->ty.lmax <= n->ty.lmin)
			return FAIL(sm, mx, "lhist(): max must be greater than min");
		if (n->ty.lstep <= 0)
			return FAIL(sm, st, "lhist(): step must be at least 1");
		if ((n->ty.lmax - n->ty.lmin) / n->ty.lstep > SCRIPT_LHIST_MAX - 2)
			return FAIL(sm, st, "lhist(): more than %d buckets", SCRIPT_LHIST_MAX - 2);
	}
	return 0;
}

/* Aggregations, and the functions of a value (str, buf, usym, uaddr,
 * ustack, reg): 1 when f is none of them. */
static int call_values(struct sema *sm, struct ast *n)
{
	const char *f = n->name;
	struct ast *a = n->a;

	if (!strcmp(f, "count"))
		return agg_call(sm, n, SVK_COUNT, 0);
	if (!strcmp(f, "sum"))
		return agg_call(sm, n, SVK_SUM, 1);
	if (!strcmp(f, "min"))
		return agg_call(sm, n, SVK_MIN, 1);
	if (!strcmp(f, "max"))
		return agg_call(sm, n, SVK_MAX, 1);
	if (!strcmp(f, "avg"))
		return agg_call(sm, n, SVK_AVG, 1);
	if (!strcmp(f, "stats"))
		return agg_call(sm, n, SVK_STATS, 1);
	if (!strcmp(f, "hist"))
		return agg_call(sm, n, SVK_HIST, 1);
	if (!strcmp(f, "lhist"))
		return agg_call(sm, n, SVK_LHIST, 4);
	if (!strcmp(f, "str")) {
		if (nargs(sm, n, 1, 2) || args_all(sm, n))
			return -EINVAL;
		if (a->ty.kind == TY_STR) {
			/* str($1), str of a string: the string (cut) */
		} else if (sema_want_int(sm, a, "str()")) {
			return -EINVAL;
		}
		if (a->next && sema_want_int(sm, a->next, "str()'s length"))
			return -EINVAL;
		n->ty.kind = TY_STR;
		return 0;
	}
	if (!strcmp(f, "buf")) {
		if (nargs(sm, n, 1, 2) || args_all(sm, n) || sema_want_int(sm, a, "buf()"))
			return -EINVAL;
		if (!a->next)
			return FAIL(sm, n, "buf() of a pointer takes a length: buf(p, n)");
		if (sema_want_int(sm, a->next, "buf()'s length"))
			return -EINVAL;
		n->ty.kind = TY_BUF;
		return 0;
	}
	if (!strcmp(f, "usym")) {
		if (nargs(sm, n, 1, 1) || args_all(sm, n) || sema_want_int(sm, a, "usym()"))
			return -EINVAL;
		if (!sema_on_sites(sm))
			return FAIL(sm, n, "usym() names an address of the traced process: BEGIN, "
				    "END and interval probes have none");
		n->ty.kind = TY_USYM;
		return 0;
	}
	if (!strcmp(f, "uaddr")) {
		if (nargs(sm, n, 1, 1))
			return -EINVAL;
		if (a->kind != N_STR)
			return FAIL(sm, a, "uaddr() takes a symbol's name, a string literal");
		if (!sema_on_sites(sm))
			return FAIL(sm, n, "uaddr() is an address in the probed binary: it is for "
				    "uprobes, uretprobes and usdt probes");
		a->ty.kind = TY_STR;
		n->ty = ty_int(8, false);
		n->ty.ptr = 1;
		return 0;
	}
	if (!strcmp(f, "ustack")) {
		int64_t frames = 0;
		struct ast *x = a;

		if (nargs(sm, n, 0, 2) || args_all(sm, n))
			return -EINVAL;
		if (!sema_on_sites(sm))
			return FAIL(sm, n, "ustack is the stack where the probe fires: BEGIN, END and "
				    "interval probes have none");
		if (x && x->ty.kind == TY_STACKMODE)
			x = x->next;
		if (x && sema_want_const(sm, x, "ustack()'s frames", &frames))
			return -EINVAL;
		if (x && (frames < 1 || frames > 256))
			return FAIL(sm, x, "ustack(): from 1 to 256 frames");
		n->ty.kind = TY_USTACK;
		n->ty.fmt = (uint16_t)frames;
		return sema_one_stack(sm, n, frames ? (unsigned)frames : 127);
	}
	if (!strcmp(f, "reg")) {
		if (nargs(sm, n, 1, 1))
			return -EINVAL;
		if (a->kind != N_STR || !script_reg_name(a->str))
			return FAIL(sm, a, "reg() takes a register's name: ip, sp, bp, ax, bx, cx, dx, "
				    "si, di, r8 to r15");
		if (!sema_on_sites(sm))
			return FAIL(sm, n, "reg() is a register where the probe fires: it is for "
				    "uprobes, uretprobes and usdt probes");
		a->ty.kind = TY_STR;
		n->ty = ty_int(8, false);
		return 0;
	}
	return 1;
}

/* Outputs and map operations (printf, cat, time, strftime, exit, delete,
 * clear, zero, print): 1 when f is none of them. */
static int call_outputs(struct sema *sm, struct ast *n)
{
	const char *f = n->name;
	struct ast *a = n->a;

	if (!strcmp(f, "printf") || !strcmp(f, "cat")) {
		if (nargs(sm, n, 1, 64) || args_all(sm, n) || want_str_lit(sm, a, f))
			return -EINVAL;
		return new_fmt(sm, n, f[0] == 'p' ? SOUT_PRINTF : SOUT_CAT, a->str, a->slen, a->next);
	}
	if (!strcmp(f, "time")) {
		if (nargs(sm, n, 0, 1) || args_all(sm, n) || (a && want_str_lit(sm, a, f)))
			return -EINVAL;
		return a ? new_fmt(sm, n, SOUT_TIME, a->str, a->slen, NULL) :
			   new_fmt(sm, n, SOUT_TIME, "%H:%M:%S\n", 9, NULL);
	}
	if (!strcmp(f, "strftime")) {
		if (nargs(sm, n, 2, 2) || args_all(sm, n) || want_str_lit(sm, a, f) ||
		    sema_want_int(sm, a->next, "strftime()'s time"))
			return -EINVAL;
		int64_t off = script_strtab_add(sm->s, a->str, a->slen);

		if (off < 0 || off > 65535)
			return FAIL(sm, n, "out of memory");
		n->ty.kind = TY_TSTAMP;
		n->ty.fmt = (uint16_t)off;
		return 0;
	}
	if (!strcmp(f, "exit")) {
		if (nargs(sm, n, 0, 0))
			return -EINVAL;
		return 0;
	}
	if (!strcmp(f, "delete")) {
		if (nargs(sm, n, 1, 1))
			return -EINVAL;
		return map_arg(sm, n, a, true);
	}
	if (!strcmp(f, "clear") || !strcmp(f, "zero")) {
		if (nargs(sm, n, 1, 1))
			return -EINVAL;
		return map_arg(sm, n, a, false);
	}
	if (!strcmp(f, "print")) {
		if (nargs(sm, n, 1, 3))
			return -EINVAL;
		if (a->kind == N_MAP && !a->ival) {
			int64_t v;

			if (map_arg(sm, n, a, false))
				return -EINVAL;
			for (struct ast *x = a->next; x; x = x->next)
				if (sema_expr(sm, x) || sema_want_const(sm, x, "print()'s top and div", &v))
					return -EINVAL;
			if (new_fmt(sm, n, SOUT_PRINT_MAP, "", 0, NULL))
				return -EINVAL;
			if (sm->final)
				sm->s->fmts[n->sym].map = a->sym;
			return 0;
		}
		if (a->next)
			return FAIL(sm, n, "print() of a value takes that value alone");
		if (sema_expr(sm, a))
			return -EINVAL;
		if (a->ty.kind == TY_AGG || a->ty.kind == TY_VOID || a->ty.kind == TY_STACKMODE)
			return FAIL(sm, a, "this cannot be printed");
		if (new_fmt(sm, n, SOUT_PRINT, "", 0, NULL))
			return -EINVAL;
		if (sm->final) {
			struct script_fmt *fm = &sm->s->fmts[n->sym];

			fm->ty = a->ty;
			fm->size = ty_size(sm->s, &a->ty);
		}
		return 0;
	}
	return 1;
}

/* The rest, and what uscope refuses. */
static int call_others(struct sema *sm, struct ast *n)
{
	const char *f = n->name;
	struct ast *a = n->a;

	if (!strcmp(f, "strncmp")) {
		int64_t v;

		if (nargs(sm, n, 3, 3) || args_all(sm, n))
			return -EINVAL;
		if (a->ty.kind != TY_STR || a->next->ty.kind != TY_STR)
			return FAIL(sm, n, "strncmp() compares two strings");
		if (sema_want_const(sm, a->next->next, "strncmp()'s length", &v))
			return -EINVAL;
		n->ty = ty_int(8, false);
		return 0;
	}
	if (!strcmp(f, "sizeof")) {
		if (nargs(sm, n, 1, 1))
			return -EINVAL;
		/* a type's name (sizeof(uint32)), or an expression's type */
		if (a->kind == N_BUILTIN && (!strncmp(a->name, "int", 3) || !strncmp(a->name, "uint", 4))) {
			if (sema_int_type(sm, a->name, a, &a->ty))
				return -EINVAL;
		} else if (args_all(sm, n)) {
			return -EINVAL;
		}
		n->ty = ty_int(8, false);
		return 0;
	}
	if (!strcmp(f, "bswap")) {
		if (nargs(sm, n, 1, 1) || args_all(sm, n) || sema_want_int(sm, a, "bswap()"))
			return -EINVAL;
		n->ty = a->ty;
		n->ty.ptr = 0;
		return 0;
	}
	if (!strcmp(f, "uptr")) {
		if (nargs(sm, n, 1, 1) || args_all(sm, n) || sema_want_int(sm, a, "uptr()"))
			return -EINVAL;
		n->ty = a->ty;
		return 0;
	}
	if (!strcmp(f, "system"))
		return FAIL(sm, n, "system() runs a command from the probe: uscope does not (it "
			    "would run with uscope's rights at any hit)");
	if (!strcmp(f, "signal") || !strcmp(f, "override"))
		return FAIL(sm, n, "%s() changes the traced program: uscope only observes it", f);
	if (!strcmp(f, "kstack") || !strcmp(f, "ksym") || !strcmp(f, "kaddr") ||
	    !strcmp(f, "kptr") || !strcmp(f, "cgroupid") || !strcmp(f, "cgroup_path") ||
	    !strcmp(f, "path") || !strcmp(f, "skboutput") || !strcmp(f, "macaddr") ||
	    !strcmp(f, "ntop") || !strcmp(f, "pton") || !strcmp(f, "unwatch") ||
	    !strcmp(f, "strerror") || !strcmp(f, "join") || !strcmp(f, "debugf") ||
	    !strcmp(f, "strcontains"))
		return FAIL(sm, n, "%s() is not in uscope's language (doc/scripts.md lists what is)",
			    f);
	return FAIL(sm, n, "unknown function: %s", f);
}

int sema_call(struct sema *sm, struct ast *n)
{
	int r;

	n->ty.kind = TY_VOID;
	if ((r = call_values(sm, n)) != 1 || (r = call_outputs(sm, n)) != 1)
		return r;
	return call_others(sm, n);
}

int sema_int_type(struct sema *sm, const char *name, struct ast *n, struct ty *t)
{
	static const struct {
		const char *name;
		unsigned size;
		bool sign;
	} types[] = {
		{"int8", 1, true}, {"int16", 2, true}, {"int32", 4, true}, {"int64", 8, true},
		{"uint8", 1, false}, {"uint16", 2, false}, {"uint32", 4, false}, {"uint64", 8, false},
		{"int8_t", 1, true}, {"int16_t", 2, true}, {"int32_t", 4, true}, {"int64_t", 8, true},
		{"uint8_t", 1, false}, {"uint16_t", 2, false}, {"uint32_t", 4, false},
		{"uint64_t", 8, false}, {"char", 1, true}, {"signed char", 1, true},
		{"unsigned char", 1, false}, {"short", 2, true}, {"unsigned short", 2, false},
		{"int", 4, true}, {"signed", 4, true}, {"unsigned", 4, false},
		{"unsigned int", 4, false}, {"long", 8, true}, {"unsigned long", 8, false},
		{"long long", 8, true}, {"unsigned long long", 8, false}, {"size_t", 8, false},
		{"ssize_t", 8, true}, {"bool", 1, false}, {"void", 1, false},
	};

	for (size_t k = 0; k < sizeof(types) / sizeof(types[0]); k++)
		if (!strcmp(name, types[k].name)) {
			*t = ty_int(types[k].size, types[k].sign);
			return 0;
		}
	if (!strncmp(name, "struct ", 7) || !strncmp(name, "union ", 6) || !strncmp(name, "enum ", 5))
		return FAIL(sm, n, "casts to C structs need the kernel's headers in bpftrace; uscope "
			    "reads user-space types from the debug info: use args.NAME, or an "
			    "integer pointer cast ((uint64 *)p)");
	return FAIL(sm, n, "unknown type: %s", name);
}
