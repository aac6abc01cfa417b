/* The probes' code for the script machine (prog.h): a walk of each probe's
 * tree, registers taken as a stack for temporaries (from 0 up) and for
 * $variables (from the top down), then the blob every executor takes.
 *
 * A probe's code: its variables zeroed (bpftrace's are), its predicate
 * (false: to the end), its statements, SOP_END. && and || short-circuit,
 * as bpftrace's. A while loop jumps back; the executor bounds the steps
 * of a hit (SCRIPT_STEPS). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "script/lex.h"
#include "script/script_int.h"

#define NLOOPS 16
#define NJUMPS 64
#define NCSE 4

struct cg {
	struct usc_script *s;
	struct script_probeinfo *pr;
	struct script_diag *d;
	uint32_t first;		/* the probe's first instruction */
	int nreg, nsreg;	/* temporaries in use */
	int vreg, vsreg;	/* the lowest register a variable holds */
	struct {
		uint32_t start;
		uint32_t brk[NJUMPS];
		int nbrk;
	} loops[NLOOPS];
	int nloops;
	/* pid and tid, read once at the probe's start into these registers
	 * (-1: the probe does not use it) */
	int pid_reg, tid_reg;
	/* integer values of maps read in this stretch of straight code, each
	 * kept in a register of its own: read again, that register (a store
	 * or delete on the map, an output record and a jump's target forget
	 * them) */
	struct {
		int map, key, reg;
	} cse[NCSE];
	int ncse;
	int err;
};

#define CFAIL(cg, n, ...) (script_fail((cg)->d, (n)->pos, (n)->len ? (n)->len : 1, __VA_ARGS__), \
			   (cg)->err = -EINVAL, -1)

int64_t script_strtab_add(struct usc_script *s, const char *str, size_t n)
{
	/* the same string once */
	for (size_t i = 0; i + n < s->nstrtab; i++)
		if (!memcmp(s->strtab + i, str, n) && !s->strtab[i + n] && (i == 0 || !s->strtab[i - 1]))
			return (int64_t)i;
	if (s->nstrtab + n + 1 > s->capstrtab) {
		size_t cap = s->capstrtab ? 2 * s->capstrtab : 1024;
		char *ns;

		while (cap < s->nstrtab + n + 1)
			cap *= 2;
		ns = realloc(s->strtab, cap);
		if (!ns)
			return -1;
		s->strtab = ns;
		s->capstrtab = cap;
	}
	memcpy(s->strtab + s->nstrtab, str, n);
	s->strtab[s->nstrtab + n] = 0;
	s->nstrtab += n + 1;
	return (int64_t)(s->nstrtab - n - 1);
}

/* pc within the probe of the next instruction */
static uint32_t here(const struct cg *cg)
{
	return (uint32_t)(cg->s->ninsns - cg->first);
}

static uint32_t emit(struct cg *cg, uint8_t op, int d, int a, int b, uint32_t x, int64_t imm)
{
	struct usc_script *s = cg->s;

	if (s->ninsns == s->capinsns) {
		size_t cap = s->capinsns ? 2 * s->capinsns : 256;
		struct script_insn *ni = realloc(s->insns, cap * sizeof(*ni));

		if (!ni) {
			cg->err = -ENOMEM;
			return 0;
		}
		s->insns = ni;
		s->capinsns = cap;
	}
	s->insns[s->ninsns] = (struct script_insn){op, (uint8_t)d, (uint8_t)a, (uint8_t)b, x, imm};
	if (op == SOP_EMIT) {
		cg->ncse = 0;
	} else if (op == SOP_MAP && imm != SMOP_LOAD && imm != SMOP_LOADS && imm != SMOP_HAS &&
		   imm != SMOP_LOADB && imm != SMOP_AGGLOAD) {
		for (int i = 0; i < cg->ncse; i++)
			if (cg->cse[i].map == (int)x)
				cg->cse[i--] = cg->cse[--cg->ncse];
	}
	return (uint32_t)(s->ninsns++ - cg->first);
}

/* a jump's target: what straight code before it read is not known there */
static void patch(struct cg *cg, uint32_t at, uint32_t target)
{
	if (cg->first + at < cg->s->ninsns)
		cg->s->insns[cg->first + at].imm = target;
	cg->ncse = 0;
}

static bool is_str(const struct ty *t)
{
	return t->kind == TY_STR || t->kind == TY_BUF;
}

static int reg(struct cg *cg, const struct ast *n)
{
	if (cg->nreg >= cg->vreg)
		return CFAIL(cg, n, "the probe needs more than %d registers: split it", SCRIPT_NREGS);
	return cg->nreg++;
}

static int sreg(struct cg *cg, const struct ast *n)
{
	if (cg->nsreg >= cg->vsreg)
		return CFAIL(cg, n, "the probe needs more than %d strings at once: split it",
			     SCRIPT_NSTRS);
	return cg->nsreg++;
}

static int cexpr(struct cg *cg, struct ast *n);
static int tuple_elems(struct cg *cg, struct ast *t, struct ast **el);

static int alu_of(int op, bool sign)
{
	switch (op) {
	case T_PLUS: return SALU_ADD;
	case T_MINUS: return SALU_SUB;
	case T_MUL: return SALU_MUL;
	case T_DIV: return SALU_DIV;
	case T_MOD: return SALU_MOD;
	case T_BAND: return SALU_AND;
	case T_BOR: return SALU_OR;
	case T_BXOR: return SALU_XOR;
	case T_SHL: return SALU_SHL;
	case T_SHR: return SALU_SHR;
	case T_EQ: return SALU_EQ;
	case T_NE: return SALU_NE;
	case T_LT: return sign ? SALU_LT : SALU_ULT;
	case T_LE: return sign ? SALU_LE : SALU_ULE;
	case T_GT: return sign ? SALU_GT : SALU_UGT;
	case T_GE: return sign ? SALU_GE : SALU_UGE;
	default: return SALU_ADD;
	}
}

/* A key's value into the key buffer at f (a usym's and a stack's process
 * after it). */
static int put_field(struct cg *cg, struct ast *v, const struct script_field *f, bool out)
{
	int r = cexpr(cg, v);

	if (r < 0)
		return -1;
	if (is_str(&f->ty)) {
		if (!is_str(&v->ty))
			return CFAIL(cg, v, "a string is needed here");
		emit(cg, out ? SOP_OUTS : SOP_KEYS, 0, r, 0, f->off, f->size);
		return 0;
	}
	emit(cg, out ? SOP_OUT : SOP_KEY, 0, r, 0, f->off, 0);
	if (f->ty.kind == TY_USYM || f->ty.kind == TY_USTACK)
		emit(cg, out ? SOP_OUTPID : SOP_KEYPID, 0, 0, 0, f->off + 8, 0);
	return 0;
}

/* The key of a map access n, for SOP_MAP's b: none (SCRIPT_KEYNONE), one
 * integer in a register (its number: it stays taken until the caller's
 * statement ends), or built in the key buffer (SCRIPT_KEYBUF); -1: a
 * mistake. */
static int key(struct cg *cg, struct ast *n)
{
	const struct script_mapinfo *m = &cg->s->maps[n->sym];
	int sr = cg->nreg, ss = cg->nsreg, k = 0;

	if (!n->ival)
		return SCRIPT_KEYNONE;
	if (n->ival == 1 && m->m.keylen == 8 && !is_str(&m->keys[0].ty) &&
	    m->keys[0].ty.kind != TY_USYM && m->keys[0].ty.kind != TY_USTACK) {
		if (n->a->input >= 0 && n->a->input < 0x7e && n->a->ty.kind == TY_INT &&
		    (n->a->ty.size >= 8 || n->a->ty.ptr))
			return SCRIPT_KEYIN | n->a->input;	/* read by the map's step */
		return cexpr(cg, n->a);
	}
	for (struct ast *v = n->a; v; v = v->next, k++)
		if (put_field(cg, v, &m->keys[k], false))
			return -1;
	cg->nreg = sr;
	cg->nsreg = ss;
	return SCRIPT_KEYBUF;
}

/* The value of @m[k] into a new register. */
static int map_read(struct cg *cg, struct ast *n)
{
	const struct script_mapinfo *m = &cg->s->maps[n->sym];
	int r, k = key(cg, n);

	if (k < 0)
		return -1;
	if (is_str(&m->val)) {
		r = sreg(cg, n);
		if (r >= 0)
			emit(cg, SOP_MAP, r, 0, k, (uint32_t)n->sym, SMOP_LOADS);
		return r;
	}
	if (m->val.kind == TY_TUPLE || m->val.kind == TY_USYM || m->val.kind == TY_USTACK) {
		if (m->val.kind == TY_TUPLE)
			return CFAIL(cg, n, "a tuple in a map can only be printed: print(@%s)", m->name);
		r = reg(cg, n);
		if (r >= 0)
			emit(cg, SOP_MAP, r, 0, k, (uint32_t)n->sym, SMOP_LOAD);	/* its address or id */
		return r;
	}
	if (m->val.kind != TY_AGG &&
	    (k == SCRIPT_KEYNONE || k == SCRIPT_REG_TID || k == SCRIPT_REG_PID ||
	     ((k & SCRIPT_KEYIN) && k < SCRIPT_KEYNONE))) {	/* a key the hit keeps */
		/* read before in this straight code: its register */
		for (int i = 0; i < cg->ncse; i++)
			if (cg->cse[i].map == n->sym && cg->cse[i].key == k)
				return cg->cse[i].reg;
		if (cg->ncse < NCSE && cg->vreg > 16) {
			r = --cg->vreg;
			emit(cg, SOP_MAP, r, 0, k, (uint32_t)n->sym, SMOP_LOAD);
			cg->cse[cg->ncse++] = (typeof(cg->cse[0])){n->sym, k, r};
			return r;
		}
	}
	r = reg(cg, n);
	if (r >= 0)
		emit(cg, SOP_MAP, r, 0, k, (uint32_t)n->sym,
		     m->val.kind == TY_AGG ? SMOP_AGGLOAD : SMOP_LOAD);
	return r;
}

/* A value into a map, v of type t (or the aggregation's argument). */
static int map_store(struct cg *cg, struct ast *mapn, struct ast *v)
{
	const struct script_mapinfo *m = &cg->s->maps[mapn->sym];
	int sr = cg->nreg, ss = cg->nsreg, r = 0;
	int64_t mop;

	if (v->kind == N_CALL && v->ty.kind == TY_AGG) {
		mop = m->m.vk == SVK_COUNT ? SMOP_COUNT : m->m.vk == SVK_SUM ? SMOP_SUM :
		      m->m.vk == SVK_MIN ? SMOP_MIN : m->m.vk == SVK_MAX ? SMOP_MAX :
		      m->m.vk == SVK_AVG ? SMOP_AVG : m->m.vk == SVK_STATS ? SMOP_STATS :
		      m->m.vk == SVK_HIST ? SMOP_HIST : SMOP_LHIST;
		if (v->a && (r = cexpr(cg, v->a)) < 0)
			return -1;
	} else if (v->ty.kind == TY_TUPLE) {
		struct ast *el[SCRIPT_TUPLE_ELEMS];
		int n = tuple_elems(cg, v, el);

		if (n < 0)
			return -1;
		for (int k = 0; k < n; k++)
			if (put_field(cg, el[k], &m->vfields[k], true))
				return -1;
		mop = SMOP_STOREB;
	} else if (is_str(&v->ty)) {
		if ((r = cexpr(cg, v)) < 0)
			return -1;
		mop = SMOP_STORES;
	} else if (v->ty.kind == TY_USYM || v->ty.kind == TY_USTACK) {
		struct script_field f = {.ty = v->ty, .off = 0, .size = 16};

		if (put_field(cg, v, &f, true))
			return -1;
		mop = SMOP_STOREB;
	} else {
		if ((r = cexpr(cg, v)) < 0)
			return -1;
		mop = SMOP_STORE;
	}
	int k = key(cg, mapn);

	if (k < 0)
		return -1;
	emit(cg, SOP_MAP, 0, r, k, (uint32_t)mapn->sym, mop);
	cg->nreg = sr;
	cg->nsreg = ss;
	return 0;
}

/* @m op= v, $x op= v, ++, --: the new value in a register (and the old in
 * *old when asked). */
static int update(struct cg *cg, struct ast *lhs, int op, struct ast *v, int64_t k, int *old)
{
	int cur, val, dst;

	if (lhs->kind == N_MAP) {
		cur = map_read(cg, lhs);
	} else {
		struct script_var *var = &cg->pr->vars[lhs->sym];

		cur = var->reg;
	}
	if (cur < 0)
		return -1;
	if (old) {
		*old = reg(cg, lhs);
		if (*old < 0)
			return -1;
		emit(cg, SOP_MOV, *old, cur, 0, 0, 0);
	}
	dst = lhs->kind == N_MAP ? cur : reg(cg, lhs);
	if (dst < 0)
		return -1;
	if (v) {
		val = cexpr(cg, v);
		if (val < 0)
			return -1;
		emit(cg, SOP_ALU, dst, cur, val, (uint32_t)alu_of(op, lhs->ty.sign && v->ty.sign), 0);
	} else {
		emit(cg, SOP_ALUI, dst, cur, 0, (uint32_t)alu_of(op, true), k);
	}
	if (lhs->kind == N_MAP) {
		int k = key(cg, lhs);

		if (k < 0)
			return -1;
		emit(cg, SOP_MAP, 0, dst, k, (uint32_t)lhs->sym, SMOP_STORE);
	} else {
		emit(cg, SOP_MOV, cg->pr->vars[lhs->sym].reg, dst, 0, 0, 0);
	}
	return dst;
}

static int var_index(struct cg *cg, const char *name)
{
	for (unsigned k = 0; k < cg->pr->nvars; k++)
		if (!strcmp(cg->pr->vars[k].name, name))
			return (int)k;
	return -1;
}

/* A tuple's elements as expressions, into el (SCRIPT_TUPLE_ELEMS at most):
 * a tuple written out's, or a variable's, each element read as $t.k. Their
 * number, or -1. */
static int tuple_elems(struct cg *cg, struct ast *t, struct ast **el)
{
	int n = 0;

	if (t->kind == N_TUPLE) {
		for (struct ast *e = t->a; e; e = e->next) {
			if (n == SCRIPT_TUPLE_ELEMS)
				return CFAIL(cg, t, "a tuple has %d elements at most",
					     SCRIPT_TUPLE_ELEMS);
			el[n++] = e;
		}
		return n;
	}
	if (t->kind != N_VAR || t->ty.kind != TY_TUPLE)
		return CFAIL(cg, t, "a tuple here is written out, (a, b), or a variable's");
	for (; n < t->ty.nelem && n < SCRIPT_VAR_ELEMS; n++) {
		struct ast *e = arena_alloc(cg->s->arena, sizeof(*e));

		if (!e)
			return CFAIL(cg, t, "out of memory");
		*e = (struct ast){.kind = N_TUPLEIDX, .pos = t->pos, .len = t->len, .a = t,
				  .ival = n, .ty = t->ty.elem[n], .input = -1};
		el[n] = e;
	}
	return n;
}

/* $t.k: a variable's element (its register), or a tuple written out's. */
static int tuple_elem(struct cg *cg, struct ast *n)
{
	struct ast *el[SCRIPT_TUPLE_ELEMS];
	int k;

	if (n->a->kind == N_VAR) {
		k = var_index(cg, n->a->name);
		if (k < 0)
			return CFAIL(cg, n->a, "undefined variable: $%s", n->a->name);
		if (cg->pr->vars[k].ty.kind != TY_TUPLE || n->ival < 0 ||
		    n->ival >= cg->pr->vars[k].ty.nelem || n->ival >= SCRIPT_VAR_ELEMS)
			return CFAIL(cg, n, "$%s has no element %lld", n->a->name, (long long)n->ival);
		return cg->pr->vars[k].ereg[n->ival];
	}
	if (n->a->kind != N_TUPLE)
		return CFAIL(cg, n, "a tuple's elements are read from a variable ($t = ...; $t.0) or "
			     "a tuple written out; a map's tuple is read whole, by print(@m)");
	k = tuple_elems(cg, n->a, el);
	if (k < 0)
		return -1;
	if (n->ival < 0 || n->ival >= k)
		return CFAIL(cg, n, "the tuple has %d elements", k);
	return cexpr(cg, el[n->ival]);
}

/* $t = (a, b ...) or $t = $u: every element read first, into registers of
 * their own ($t = ($t.1, $t.0) swaps), then into the variable's. */
static int tuple_assign(struct cg *cg, const struct script_var *var, struct ast *v)
{
	struct ast *el[SCRIPT_TUPLE_ELEMS];
	int r[SCRIPT_VAR_ELEMS], n = tuple_elems(cg, v, el);

	if (n < 0)
		return -1;
	if (var->ty.kind != TY_TUPLE || n != var->ty.nelem)
		return CFAIL(cg, v, "$%s holds a tuple of %u elements", var->name, var->ty.nelem);
	for (int k = 0; k < n; k++) {
		bool str = is_str(&var->ty.elem[k]);
		int x = cexpr(cg, el[k]);

		if (x < 0)
			return -1;
		r[k] = str ? sreg(cg, el[k]) : reg(cg, el[k]);
		if (r[k] < 0)
			return -1;
		emit(cg, str ? SOP_SMOV : SOP_MOV, r[k], x, 0, 0, 0);
	}
	for (int k = 0; k < n; k++)
		emit(cg, is_str(&var->ty.elem[k]) ? SOP_SMOV : SOP_MOV, var->ereg[k], r[k], 0, 0, 0);
	return 0;
}

/* An output (printf, print, time ...): its values, then SOP_EMIT. */
static int output(struct cg *cg, struct ast *n, enum script_out_kind kind, uint32_t id,
		  struct ast *args, const struct script_fmt *f)
{
	(void)n;
	int sr = cg->nreg, ss = cg->nsreg;
	unsigned k = 0;
	uint32_t len = f ? f->size : 0;

	for (struct ast *a = args; a && f; a = a->next, k++) {
		if (put_field(cg, a, &f->conv[k].arg, true))
			return -1;
		cg->nreg = sr;
		cg->nsreg = ss;
	}
	emit(cg, SOP_EMIT, 0, (int)(len & 0xff), (int)(len >> 8), id, kind);
	return 0;
}

static int call(struct cg *cg, struct ast *n)
{
	const char *f = n->name;
	struct ast *a = n->a;
	int r, x, y;

	if (!strcmp(f, "str")) {
		if (a->kind == N_MAP && cg->s->maps[a->sym].shadow > 0 && !a->next) {
			/* where the probe runs, the string now (bpftrace's); in
			 * uscope, the one read when the address was stored */
			int sh = cg->s->maps[a->sym].shadow, t;
			uint32_t j1, j2, j3;

			x = map_read(cg, a);
			r = sreg(cg, n);
			t = reg(cg, n);
			if (x < 0 || r < 0 || t < 0)
				return -1;
			emit(cg, SOP_BUILTIN, t, 0, 0, SB_LIVE, 0);
			j1 = emit(cg, SOP_JNZ, 0, t, 0, 0, 0);
			/* the key map_read used: its last instruction's */
			int kb = cg->s->insns[cg->s->ninsns - 3].b;

			emit(cg, SOP_MAP, t, 0, kb, (uint32_t)sh, SMOP_HAS);
			j2 = emit(cg, SOP_JZ, 0, t, 0, 0, 0);
			emit(cg, SOP_MAP, r, 0, kb, (uint32_t)sh, SMOP_LOADS);
			j3 = emit(cg, SOP_JMP, 0, 0, 0, 0, 0);
			patch(cg, j1, here(cg));
			patch(cg, j2, here(cg));
			emit(cg, SOP_STR, r, x, 0xff, 0, 0);
			patch(cg, j3, here(cg));
			cg->nreg = t;
			return r;
		}
		if (n->input >= 0) {
			r = sreg(cg, n);
			if (r < 0)
				return -1;
			emit(cg, SOP_INS, r, 0, 0, (uint32_t)n->input, 0);
		} else if (is_str(&a->ty)) {
			x = cexpr(cg, a);
			r = sreg(cg, n);
			if (x < 0 || r < 0)
				return -1;
			emit(cg, SOP_SMOV, r, x, 0, 0, 0);
		} else {
			x = cexpr(cg, a);
			y = a->next ? cexpr(cg, a->next) : 0xff;
			r = sreg(cg, n);
			if (x < 0 || y < 0 || r < 0)
				return -1;
			emit(cg, SOP_STR, r, x, y, 0, 0);
			return r;
		}
		if (a->next) {
			y = cexpr(cg, a->next);
			if (y < 0)
				return -1;
			emit(cg, SOP_SCUT, r, y, 0, 0, 0);
		}
		return r;
	}
	if (!strcmp(f, "buf")) {
		x = cexpr(cg, a);
		y = cexpr(cg, a->next);
		r = sreg(cg, n);
		if (x < 0 || y < 0 || r < 0)
			return -1;
		emit(cg, SOP_BUF, r, x, y, 0, SCRIPT_STR_CAP);
		return r;
	}
	if (!strcmp(f, "usym") || !strcmp(f, "uptr"))
		return cexpr(cg, a);
	if (!strcmp(f, "ustack") || !strcmp(f, "reg")) {
		r = reg(cg, n);
		if (r >= 0)
			emit(cg, SOP_IN, r, 0, 0, (uint32_t)n->input, 0);
		return r;
	}
	if (!strcmp(f, "sizeof")) {
		r = reg(cg, n);
		if (r >= 0)
			emit(cg, SOP_LDI, r, 0, 0, 0, a->ty.kind == TY_INT ? (a->ty.ptr ? 8 : a->ty.size) :
			     ty_size(cg->s, &a->ty));
		return r;
	}
	if (!strcmp(f, "bswap")) {
		x = cexpr(cg, a);
		r = reg(cg, n);
		if (x < 0 || r < 0)
			return -1;
		emit(cg, SOP_ALUI, r, x, 0, SALU_BSWAP, a->ty.size);
		return r;
	}
	if (!strcmp(f, "strncmp")) {
		x = cexpr(cg, a);
		y = cexpr(cg, a->next);
		r = reg(cg, n);
		if (x < 0 || y < 0 || r < 0)
			return -1;
		emit(cg, SOP_SCMP, r, x, y, 1, a->next->next->ival ? a->next->next->ival : 1);
		return r;
	}
	if (!strcmp(f, "strftime")) {
		return cexpr(cg, a->next);	/* the time; its format is the type's */
	}
	if (!strcmp(f, "printf") || !strcmp(f, "cat"))
		return output(cg, n, f[0] == 'p' ? SOUT_PRINTF : SOUT_CAT, (uint32_t)n->sym, a->next,
			      &cg->s->fmts[n->sym]) ? -1 : 0;
	if (!strcmp(f, "time"))
		return output(cg, n, SOUT_TIME, (uint32_t)n->sym, NULL, NULL) ? -1 : 0;
	if (!strcmp(f, "exit"))
		return output(cg, n, SOUT_EXIT, 0, NULL, NULL) ? -1 : 0;
	if (!strcmp(f, "clear") || !strcmp(f, "zero"))
		return output(cg, n, f[0] == 'c' ? SOUT_CLEAR : SOUT_ZERO, (uint32_t)a->sym, NULL,
			      NULL) ? -1 : 0;
	if (!strcmp(f, "delete")) {
		int k = key(cg, a);

		if (k < 0)
			return -1;
		emit(cg, SOP_MAP, 0, 0, k, (uint32_t)a->sym, SMOP_DELETE);
		if (cg->s->maps[a->sym].shadow > 0)
			emit(cg, SOP_MAP, 0, 0, k, (uint32_t)cg->s->maps[a->sym].shadow, SMOP_DELETE);
		return 0;
	}
	if (!strcmp(f, "print")) {
		const struct script_fmt *fm = &cg->s->fmts[n->sym];

		if (fm->kind == SOUT_PRINT_MAP) {
			/* top and div, constants, as the record's two values */
			struct ast *t = a->next, *dv = t ? t->next : NULL;

			r = reg(cg, n);
			if (r < 0)
				return -1;
			emit(cg, SOP_LDI, r, 0, 0, 0, t ? t->ival : 0);
			emit(cg, SOP_OUT, 0, r, 0, 0, 0);
			emit(cg, SOP_LDI, r, 0, 0, 0, dv ? dv->ival : 0);
			emit(cg, SOP_OUT, 0, r, 0, 8, 0);
			emit(cg, SOP_EMIT, 0, 16, 0, (uint32_t)n->sym, SOUT_PRINT_MAP);
			return 0;
		}
		struct script_conv c = {.arg = {.ty = fm->ty, .off = 0, .size = fm->size}};
		struct script_fmt tmp = {.nconv = 1, .conv = &c, .size = fm->size};

		if (a->ty.kind == TY_TUPLE) {
			struct ast *el[SCRIPT_TUPLE_ELEMS];
			int ne = tuple_elems(cg, a, el);
			uint32_t off = 0;

			if (ne < 0)
				return -1;
			for (int k = 0; k < ne; k++) {
				struct script_field fl = {.ty = el[k]->ty, .off = off,
							  .size = ty_size(cg->s, &el[k]->ty)};

				if (put_field(cg, el[k], &fl, true))
					return -1;
				off += fl.size;
			}
			emit(cg, SOP_EMIT, 0, (int)(off & 0xff), (int)(off >> 8), (uint32_t)n->sym,
			     SOUT_PRINT);
			return 0;
		}
		a->next = NULL;
		return output(cg, n, SOUT_PRINT, (uint32_t)n->sym, a, &tmp) ? -1 : 0;
	}
	return CFAIL(cg, n, "%s() is not compiled yet", f);
}

static int cexpr(struct cg *cg, struct ast *n)
{
	int r, x, y;

	if (cg->err)
		return -1;
	if (n->input >= 0) {
		bool s = is_str(&n->ty);

		r = s ? sreg(cg, n) : reg(cg, n);
		if (r >= 0)
			emit(cg, s ? SOP_INS : SOP_IN, r, 0, 0, (uint32_t)n->input, 0);
		if (r >= 0 && !s && n->ty.kind == TY_INT && n->ty.size < 8 && !n->ty.ptr)
			emit(cg, SOP_EXT, r, r, 0, n->ty.size | (n->ty.sign ? 0x100u : 0), 0);
		return r;
	}
	switch (n->kind) {
	case N_INT:
		r = reg(cg, n);
		if (r >= 0)
			emit(cg, SOP_LDI, r, 0, 0, 0, n->ival);
		return r;
	case N_STR: {
		int64_t off = script_strtab_add(cg->s, n->str, n->slen);

		if (off < 0)
			return CFAIL(cg, n, "out of memory");
		r = sreg(cg, n);
		if (r >= 0)
			emit(cg, SOP_SCONST, r, 0, 0, (uint32_t)off, 0);
		return r;
	}
	case N_PARAM:
		if (n->ty.kind == TY_INT) {
			r = reg(cg, n);
			if (r >= 0)
				emit(cg, SOP_LDI, r, 0, 0, 0, n->ival);
			return r;
		} else {
			size_t k = (size_t)n->sym - 1;
			const char *v = k < cg->s->opts.nparams ? cg->s->opts.params[k] : "";
			int64_t off = script_strtab_add(cg->s, v, strlen(v));

			if (off < 0)
				return CFAIL(cg, n, "out of memory");
			r = sreg(cg, n);
			if (r >= 0)
				emit(cg, SOP_SCONST, r, 0, 0, (uint32_t)off, 0);
			return r;
		}
	case N_PARAMCOUNT:
		r = reg(cg, n);
		if (r >= 0)
			emit(cg, SOP_LDI, r, 0, 0, 0, (int64_t)cg->s->opts.nparams);
		return r;
	case N_BUILTIN: {
		static const struct {
			const char *name;
			int which;
		} b[] = {
			{"pid", SB_PID}, {"tid", SB_TID}, {"nsecs", SB_NSECS}, {"cpu", SB_CPU},
			{"elapsed", SB_ELAPSED}, {"uid", SB_UID}, {"gid", SB_GID},
			{"func", SB_SITE}, {"probe", SB_SITE},
		};

		if (!strcmp(n->name, "comm")) {
			r = sreg(cg, n);
			if (r >= 0)
				emit(cg, SOP_COMM, r, 0, 0, 0, 0);
			return r;
		}
		if (!strcmp(n->name, "rand")) {
			r = reg(cg, n);
			if (r >= 0)
				emit(cg, SOP_RAND, r, 0, 0, 0, 0);
			return r;
		}
		if (!strcmp(n->name, "tid") && cg->tid_reg >= 0)
			return cg->tid_reg;
		if (!strcmp(n->name, "pid") && cg->pid_reg >= 0)
			return cg->pid_reg;
		for (size_t k = 0; k < sizeof(b) / sizeof(b[0]); k++)
			if (!strcmp(n->name, b[k].name)) {
				r = reg(cg, n);
				if (r >= 0)
					emit(cg, SOP_BUILTIN, r, 0, 0, (uint32_t)b[k].which, 0);
				return r;
			}
		if (n->ty.kind == TY_STACKMODE) {
			r = reg(cg, n);
			if (r >= 0)
				emit(cg, SOP_LDI, r, 0, 0, 0, 0);
			return r;
		}
		return CFAIL(cg, n, "%s: nothing reads it here", n->name);
	}
	case N_VAR: {
		int k = var_index(cg, n->name);

		if (k < 0)
			return CFAIL(cg, n, "undefined variable: $%s", n->name);
		n->sym = k;
		if (cg->pr->vars[k].ty.kind == TY_TUPLE)
			return CFAIL(cg, n, "a tuple in a variable is read by its elements ($%s.0 ...), "
				     "stored whole in a map or printed whole", n->name);
		return cg->pr->vars[k].reg;
	}
	case N_MAP:
		return map_read(cg, n);
	case N_CALL:
		return call(cg, n);
	case N_BINOP: {
		const struct ty *l = &n->a->ty, *rt = &n->b->ty;

		if (n->op == T_LAND || n->op == T_LOR) {
			uint32_t j;

			r = reg(cg, n);
			x = cexpr(cg, n->a);
			if (r < 0 || x < 0)
				return -1;
			emit(cg, SOP_ALU, r, x, x, SALU_LNOT, 0);
			emit(cg, SOP_ALU, r, r, r, SALU_LNOT, 0);	/* !!a */
			j = emit(cg, n->op == T_LAND ? SOP_JZ : SOP_JNZ, 0, r, 0, 0, 0);
			y = cexpr(cg, n->b);
			if (y < 0)
				return -1;
			emit(cg, SOP_ALU, r, y, y, SALU_LNOT, 0);
			emit(cg, SOP_ALU, r, r, r, SALU_LNOT, 0);
			patch(cg, j, here(cg));
			cg->nreg = r + 1;
			return r;
		}
		x = cexpr(cg, n->a);
		y = cexpr(cg, n->b);
		if (x < 0 || y < 0)
			return -1;
		r = reg(cg, n);
		if (r < 0)
			return -1;
		if (is_str(l)) {
			emit(cg, SOP_SCMP, r, x, y, n->op == T_NE, 0);
			return r;
		}
		if ((n->op == T_PLUS || n->op == T_MINUS) && (l->ptr || rt->ptr)) {
			/* pointer arithmetic: the integer scaled by the pointee's size */
			const struct ty *p = l->ptr ? l : rt;
			int64_t size = p->ptr >= 2 ? 8 : p->size ? p->size : 1;
			int other = l->ptr ? y : x;

			if (size > 1) {
				emit(cg, SOP_ALUI, r, other, 0, SALU_MUL, size);
				if (l->ptr)
					y = r;
				else
					x = r;
			}
		}
		emit(cg, SOP_ALU, r, x, y, (uint32_t)alu_of(n->op, l->sign && rt->sign), 0);
		return r;
	}
	case N_UNOP:
		x = cexpr(cg, n->a);
		r = reg(cg, n);
		if (x < 0 || r < 0)
			return -1;
		if (n->op == T_MUL) {
			unsigned size = n->a->ty.ptr ? (n->a->ty.ptr >= 2 ? 8 : n->a->ty.size) : 8;

			emit(cg, SOP_READ, r, x, 0, size | (n->ty.sign && !n->ty.ptr ? 0x100u : 0), 0);
			return r;
		}
		emit(cg, SOP_ALU, r, x, x, n->op == T_MINUS ? SALU_NEG : n->op == T_BNOT ? SALU_NOT :
		     SALU_LNOT, 0);
		return r;
	case N_TERNARY: {
		uint32_t j1, j2;
		bool s = is_str(&n->ty);

		r = s ? sreg(cg, n) : reg(cg, n);
		x = cexpr(cg, n->a);
		if (r < 0 || x < 0)
			return -1;
		j1 = emit(cg, SOP_JZ, 0, x, 0, 0, 0);
		y = cexpr(cg, n->b);
		if (y < 0)
			return -1;
		emit(cg, s ? SOP_SMOV : SOP_MOV, r, y, 0, 0, 0);
		j2 = emit(cg, SOP_JMP, 0, 0, 0, 0, 0);
		patch(cg, j1, here(cg));
		y = cexpr(cg, n->c);
		if (y < 0)
			return -1;
		emit(cg, s ? SOP_SMOV : SOP_MOV, r, y, 0, 0, 0);
		patch(cg, j2, here(cg));
		if (s)
			cg->nsreg = r + 1;
		return r;
	}
	case N_CAST:
		x = cexpr(cg, n->a);
		if (x < 0)
			return -1;
		if (n->ty.ptr || n->ty.size >= 8)
			return x;
		r = reg(cg, n);
		if (r >= 0)
			emit(cg, SOP_EXT, r, x, 0, n->ty.size | (n->ty.sign ? 0x100u : 0), 0);
		return r;
	case N_INDEX: {
		unsigned size = n->a->ty.ptr >= 2 ? 8 : n->a->ty.size ? n->a->ty.size : 1;

		x = cexpr(cg, n->a);
		y = cexpr(cg, n->b);
		r = reg(cg, n);
		if (x < 0 || y < 0 || r < 0)
			return -1;
		emit(cg, SOP_ALUI, r, y, 0, SALU_MUL, size);
		emit(cg, SOP_ALU, r, x, r, SALU_ADD, 0);
		emit(cg, SOP_READ, r, r, 0, size | (n->ty.sign && !n->ty.ptr ? 0x100u : 0), 0);
		return r;
	}
	case N_INCDEC: {
		int old = -1, nv;

		if (n->a->kind == N_VAR && (n->a->sym = var_index(cg, n->a->name)) < 0)
			return CFAIL(cg, n, "undefined variable");
		nv = update(cg, n->a, n->op, NULL, 1, n->post ? &old : NULL);
		return n->post ? old : nv;
	}
	case N_TUPLEIDX:
		return tuple_elem(cg, n);
	case N_TUPLE:
		return CFAIL(cg, n, "a tuple goes in a map or print()");
	default:
		return CFAIL(cg, n, "not compiled yet");
	}
}

static int cstmts(struct cg *cg, struct ast *n);

static int cstmt(struct cg *cg, struct ast *n)
{
	int sr = cg->nreg, ss = cg->nsreg, x;
	uint32_t j1, j2;

	switch (n->kind) {
	case N_EXPRSTMT:
		if (cexpr(cg, n->a) < 0 && cg->err)
			return -1;
		break;
	case N_ASSIGN:
		if (n->a->kind == N_MAP) {
			if (n->op) {
				if (update(cg, n->a, n->op, n->b, 0, NULL) < 0)
					return -1;
			} else if (map_store(cg, n->a, n->b)) {
				return -1;
			}
			if (n->ival > 0) {
				/* the shadow (lower.c): the string at the address, in
				 * uscope only */
				int t = reg(cg, n), sr2 = sreg(cg, n);
				uint32_t j;

				if (t < 0 || sr2 < 0)
					return -1;
				emit(cg, SOP_BUILTIN, t, 0, 0, SB_LIVE, 0);
				j = emit(cg, SOP_JNZ, 0, t, 0, 0, 0);
				emit(cg, SOP_INS, sr2, 0, 0, (uint32_t)(n->ival - 1), 0);
				int k = key(cg, n->a);

				if (k < 0)
					return -1;
				emit(cg, SOP_MAP, 0, sr2, k, (uint32_t)cg->s->maps[n->a->sym].shadow,
				     SMOP_STORES);
				patch(cg, j, here(cg));
			}
			break;
		}
		n->a->sym = var_index(cg, n->a->name);
		if (n->a->sym < 0)
			return CFAIL(cg, n, "undefined variable");
		if (n->op) {
			if (update(cg, n->a, n->op, n->b, 0, NULL) < 0)
				return -1;
			break;
		}
		if (n->b->ty.kind == TY_TUPLE) {
			if (tuple_assign(cg, &cg->pr->vars[n->a->sym], n->b))
				return -1;
			break;
		}
		x = cexpr(cg, n->b);
		if (x < 0)
			return -1;
		emit(cg, is_str(&n->b->ty) ? SOP_SMOV : SOP_MOV, cg->pr->vars[n->a->sym].reg, x, 0, 0, 0);
		break;
	case N_IF:
		x = cexpr(cg, n->a);
		if (x < 0)
			return -1;
		cg->nreg = sr;
		cg->nsreg = ss;
		j1 = emit(cg, SOP_JZ, 0, x, 0, 0, 0);
		if (cstmts(cg, n->b))
			return -1;
		if (n->c) {
			j2 = emit(cg, SOP_JMP, 0, 0, 0, 0, 0);
			patch(cg, j1, here(cg));
			if (n->c->kind == N_IF ? cstmt(cg, n->c) : cstmts(cg, n->c))
				return -1;
			patch(cg, j2, here(cg));
		} else {
			patch(cg, j1, here(cg));
		}
		break;
	case N_WHILE: {
		uint32_t start = here(cg);

		cg->ncse = 0;	/* a target: the loop's turns jump back here */
		if (cg->nloops >= NLOOPS)
			return CFAIL(cg, n, "loops nest %d deep at most", NLOOPS);
		cg->loops[cg->nloops].start = start;
		cg->loops[cg->nloops].nbrk = 0;
		cg->nloops++;
		x = cexpr(cg, n->a);
		if (x < 0)
			return -1;
		cg->nreg = sr;
		cg->nsreg = ss;
		j1 = emit(cg, SOP_JZ, 0, x, 0, 0, 0);
		if (cstmts(cg, n->b))
			return -1;
		emit(cg, SOP_JMP, 0, 0, 0, 0, start);
		cg->nloops--;
		patch(cg, j1, here(cg));
		for (int k = 0; k < cg->loops[cg->nloops].nbrk; k++)
			patch(cg, cg->loops[cg->nloops].brk[k], here(cg));
		break;
	}
	case N_UNROLL:
		for (int64_t k = 0; k < n->ival; k++)
			if (cstmts(cg, n->b))
				return -1;
		break;
	case N_BREAK:
		if (!cg->nloops || cg->loops[cg->nloops - 1].nbrk >= NJUMPS)
			return CFAIL(cg, n, "break outside a loop");
		cg->loops[cg->nloops - 1].brk[cg->loops[cg->nloops - 1].nbrk++] =
			emit(cg, SOP_JMP, 0, 0, 0, 0, 0);
		break;
	case N_CONTINUE:
		if (!cg->nloops)
			return CFAIL(cg, n, "continue outside a loop");
		emit(cg, SOP_JMP, 0, 0, 0, 0, cg->loops[cg->nloops - 1].start);
		break;
	case N_RETURN:
		emit(cg, SOP_END, 0, 0, 0, 0, 0);
		break;
	default:
		return CFAIL(cg, n, "not a statement");
	}
	cg->nreg = sr;
	cg->nsreg = ss;
	return cg->err ? -1 : 0;
}

static int cstmts(struct cg *cg, struct ast *n)
{
	for (; n; n = n->next)
		if (cstmt(cg, n))
			return -1;
	return 0;
}

/* Does the tree use builtin name? */
static bool uses(const struct ast *n, const char *name)
{
	for (; n; n = n->next)
		if ((n->kind == N_BUILTIN && !strcmp(n->name, name)) || uses(n->a, name) ||
		    uses(n->b, name) || uses(n->c, name))
			return true;
	return false;
}

static int probe(struct usc_script *s, struct script_probeinfo *pr, struct script_diag *d,
		 struct script_probe *out)
{
	struct cg cg = {.s = s, .pr = pr, .d = d, .vreg = SCRIPT_NREGS, .vsreg = SCRIPT_NSTRS,
			.pid_reg = -1, .tid_reg = -1};
	uint32_t j = 0;
	bool pred = pr->ast->pred != NULL;

	cg.first = (uint32_t)s->ninsns;
	/* the thread's ids, constant in a hit: in their registers before the
	 * first instruction (the drivers put them there: SCRIPT_PROBE_TID) */
	cg.vreg = SCRIPT_REG_PID;
	if (uses(pr->ast->pred, "tid") || uses(pr->ast->body, "tid"))
		cg.tid_reg = SCRIPT_REG_TID;
	if (uses(pr->ast->pred, "pid") || uses(pr->ast->body, "pid"))
		cg.pid_reg = SCRIPT_REG_PID;
	/* variables: registers from the top, zeroed */
	for (unsigned k = 0; k < pr->nvars; k++) {
		struct script_var *v = &pr->vars[k];

		v->is_str = is_str(&v->ty);
		if (v->ty.kind == TY_TUPLE) {	/* a register an element */
			v->reg = -1;
			for (unsigned e = 0; e < v->ty.nelem && e < SCRIPT_VAR_ELEMS; e++) {
				bool str = is_str(&v->ty.elem[e]);

				if (str ? cg.vsreg <= 2 : cg.vreg <= 8)
					return script_fail(d, pr->ast->pos, pr->ast->len, "too many "
							   "variables in one probe");
				v->ereg[e] = str ? --cg.vsreg : --cg.vreg;
				if (str)
					emit(&cg, SOP_SCONST, v->ereg[e], 0, 0,
					     (uint32_t)script_strtab_add(s, "", 0), 0);
				else
					emit(&cg, SOP_LDI, v->ereg[e], 0, 0, 0, 0);
			}
			continue;
		}
		if (v->is_str) {
			if (cg.vsreg <= 2)
				return script_fail(d, pr->ast->pos, pr->ast->len, "too many string "
						   "variables in one probe");
			v->reg = --cg.vsreg;
			emit(&cg, SOP_SCONST, v->reg, 0, 0, (uint32_t)script_strtab_add(s, "", 0), 0);
		} else {
			if (cg.vreg <= 8)
				return script_fail(d, pr->ast->pos, pr->ast->len, "too many variables "
						   "in one probe");
			v->reg = --cg.vreg;
			emit(&cg, SOP_LDI, v->reg, 0, 0, 0, 0);
		}
	}
	if (pred) {
		int x = cexpr(&cg, pr->ast->pred);

		if (x < 0)
			return cg.err ? cg.err : -EINVAL;
		j = emit(&cg, SOP_JZ, 0, x, 0, 0, 0);
		cg.nreg = 0;
		cg.nsreg = 0;
	}
	if (cstmts(&cg, pr->ast->body))
		return cg.err ? cg.err : -EINVAL;
	if (pred)
		patch(&cg, j, here(&cg));
	emit(&cg, SOP_END, 0, 0, 0, 0, 0);
	if (cg.err)
		return cg.err;
	s->ninsns = cg.first + script_fuse(&s->insns[cg.first], (uint32_t)(s->ninsns - cg.first));
	out->first = cg.first;
	out->n = (uint32_t)(s->ninsns - cg.first);
	out->ninputs = pr->ninputs;
	out->flags = SCRIPT_PROBE_FAST | (cg.tid_reg >= 0 ? SCRIPT_PROBE_TID : 0) |
		     (cg.pid_reg >= 0 ? SCRIPT_PROBE_PID : 0);
	for (size_t i = cg.first; i < s->ninsns; i++) {
		const struct script_insn *in = &s->insns[i];
		bool fast;

		/* what vm.h's SCRIPT_FAST_ONLY step has */
		switch (in->op) {
		case SOP_END: case SOP_LDI: case SOP_MOV: case SOP_ALU: case SOP_ALUI:
		case SOP_EXT: case SOP_JMP: case SOP_JZ: case SOP_JNZ: case SOP_BUILTIN:
		case SOP_KEY: case SOP_KEYPID: case SOP_RAND:
			fast = true;
			break;
		case SOP_IN:
			fast = in->x < 2;
			break;
		case SOP_MAP:
		case SOP_DELTA:
			fast = (in->op == SOP_DELTA ||
				(in->imm != SMOP_LOADS && in->imm != SMOP_STORES &&
				 in->imm != SMOP_STOREB && in->imm != SMOP_LOADB)) &&
			       !((in->b & SCRIPT_KEYIN) && in->b < SCRIPT_KEYNONE &&
				 (in->b & 0x7f) >= 2);
			break;
		default:
			fast = false;
		}
		if (!fast)
			out->flags &= ~SCRIPT_PROBE_FAST;
	}
	if (script_few(&s->insns[cg.first], out->n))
		out->flags |= SCRIPT_PROBE_UPDATES;
	return 0;
}

int script_compile(struct usc_script *s, struct script_diag *d)
{
	struct script_probe *probes = calloc(s->prog.nprobes ? s->prog.nprobes : 1, sizeof(*probes));
	struct script_blob *b;
	size_t size, off;
	int ret = 0;

	if (!probes)
		return script_fail(d, 0, 0, "out of memory"), -ENOMEM;
	if (script_strtab_add(s, "", 0) < 0) {
		free(probes);
		return -ENOMEM;
	}
	for (size_t i = 0; i < s->prog.nprobes && !ret; i++)
		ret = probe(s, &s->probes[i], d, &probes[i]);
	if (ret) {
		free(probes);
		return ret;
	}
	size = sizeof(*b);
	size += s->prog.nprobes * sizeof(struct script_probe);
	size = (size + 15) & ~(size_t)15;
	size += s->ninsns * sizeof(struct script_insn);
	size += s->nmaps * sizeof(struct script_map);
	size += s->nstrtab + 8;
	b = calloc(1, size);
	if (!b) {
		free(probes);
		return script_fail(d, 0, 0, "out of memory"), -ENOMEM;
	}
	b->magic = SCRIPT_MAGIC;
	b->size = (uint32_t)size;
	b->strlen = s->strlen;
	b->nprobes = (uint32_t)s->prog.nprobes;
	b->ninsns = (uint32_t)s->ninsns;
	b->nmaps = (uint32_t)s->nmaps;
	b->nstrtab = (uint32_t)s->nstrtab;
	off = sizeof(*b);
	b->probes_off = (uint32_t)off;
	memcpy((char *)b + off, probes, s->prog.nprobes * sizeof(*probes));
	off += s->prog.nprobes * sizeof(*probes);
	off = (off + 15) & ~(size_t)15;
	b->insns_off = (uint32_t)off;
	if (s->ninsns)
		memcpy((char *)b + off, s->insns, s->ninsns * sizeof(struct script_insn));
	off += s->ninsns * sizeof(struct script_insn);
	b->maps_off = (uint32_t)off;
	for (size_t i = 0; i < s->nmaps; i++)
		memcpy((char *)b + off + i * sizeof(struct script_map), &s->maps[i].m,
		       sizeof(struct script_map));
	off += s->nmaps * sizeof(struct script_map);
	b->strtab_off = (uint32_t)off;
	memcpy((char *)b + off, s->strtab, s->nstrtab);
	free(probes);
	s->blob = b;
	return 0;
}
