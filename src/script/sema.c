/* Names and types (bpftrace's semantic analyser, for what user space has):
 * every expression gets its type (ast.h's struct ty), every map its key
 * and value types, every $variable its own; builtins and calls are checked
 * against the probe they are in (retval in a uretprobe, arg0 where a
 * function or USDT probe fires); formats against their arguments.
 *
 * Two passes over the probes: the first decides what it can (a map read
 * in one probe may be assigned in a later one), the second checks
 * everything with every map's type known and says the first mistake. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "script/fmt.h"
#include "script/lex.h"
#include "script/script_int.h"
#include "script/sema_int.h"

void ty_name(const struct ty *t, char *buf, size_t len)
{
	static const char *const aggs[] = {
		[SVK_COUNT] = "count", [SVK_SUM] = "sum", [SVK_MIN] = "min", [SVK_MAX] = "max",
		[SVK_AVG] = "avg", [SVK_STATS] = "stats", [SVK_HIST] = "hist", [SVK_LHIST] = "lhist",
	};

	switch (t->kind) {
	case TY_INT:
		snprintf(buf, len, "%sint%u%s", t->sign ? "" : "u", 8u * t->size,
			 t->ptr == 2 ? " **" : t->ptr ? " *" : "");
		return;
	case TY_STR: snprintf(buf, len, "string"); return;
	case TY_BUF: snprintf(buf, len, "buffer"); return;
	case TY_TUPLE: snprintf(buf, len, "tuple"); return;
	case TY_USYM: snprintf(buf, len, "usym"); return;
	case TY_USTACK: snprintf(buf, len, "ustack"); return;
	case TY_FUNC: snprintf(buf, len, "func"); return;
	case TY_PROBE: snprintf(buf, len, "probe"); return;
	case TY_TSTAMP: snprintf(buf, len, "timestamp"); return;
	case TY_AGG:
		snprintf(buf, len, "%s", t->agg < SVK_NR && aggs[t->agg] ? aggs[t->agg] : "aggregation");
		return;
	case TY_VOID: snprintf(buf, len, "none"); return;
	case TY_STACKMODE: snprintf(buf, len, "stack mode"); return;
	default: snprintf(buf, len, "unknown"); return;
	}
}

uint32_t ty_size(const struct usc_script *s, const struct ty *t)
{
	uint32_t n = 0;

	switch (t->kind) {
	case TY_STR:
	case TY_BUF:
		return (s->strlen + 7) & ~7u;
	case TY_USYM:
	case TY_USTACK:
		return 16;	/* the address or stack id, and the process */
	case TY_TUPLE:
		for (unsigned k = 0; k < t->nelem; k++)
			n += ty_size(s, &t->elem[k]);
		return n;
	default:
		return 8;
	}
}

int script_map_find(const struct usc_script *s, const char *name)
{
	for (size_t i = 0; i < s->nmaps; i++)
		if (!strcmp(s->maps[i].name, name))
			return (int)i;
	return -1;
}

int sema_map_of(struct sema *sm, struct ast *n)
{
	struct usc_script *s = sm->s;
	int i = script_map_find(s, n->name);
	struct script_mapinfo *m;

	if (i >= 0)
		return n->sym = i;
	if (strlen(n->name) >= USC_NAME_MAX)
		return FAIL(sm, n, "the map's name is too long");
	if (s->nmaps >= SCRIPT_MAPS_MAX)
		return FAIL(sm, n, "more than %d maps", SCRIPT_MAPS_MAX);
	if (s->nmaps == s->capmaps) {
		size_t cap = s->capmaps ? 2 * s->capmaps : 16;
		struct script_mapinfo *nm = realloc(s->maps, cap * sizeof(*nm));

		if (!nm)
			return FAIL(sm, n, "out of memory");
		s->maps = nm;
		s->capmaps = cap;
	}
	m = &s->maps[s->nmaps];
	memset(m, 0, sizeof(*m));
	snprintf(m->name, sizeof(m->name), "%s", n->name);
	m->pos = n->pos;
	m->len = n->len;
	m->nkeys = -1;
	m->tid_only = true;
	return n->sym = (int)s->nmaps++;
}

static bool is_builtin(const struct ast *n, const char *name)
{
	return n->kind == N_BUILTIN && !strcmp(n->name, name);
}

/* The keys of a map access (n->a, n->ival of them) against the map's. */
int sema_map_keys(struct sema *sm, struct ast *n)
{
	struct script_mapinfo *m;
	unsigned k = 0;

	if (sema_map_of(sm, n) < 0)
		return -EINVAL;
	for (struct ast *key = n->a; key; key = key->next)
		if (sema_expr(sm, key))
			return -EINVAL;
	m = &sm->s->maps[n->sym];
	if (!(n->ival == 1 && is_builtin(n->a, "tid")))
		m->tid_only = false;
	if (n->ival > 16)
		return FAIL(sm, n, "a map takes 16 keys at most");
	if (m->nkeys < 0) {
		m->nkeys = (int)n->ival;
	} else if (m->nkeys != (int)n->ival) {
		return FAIL(sm, n, "@%s has %d key%s here, and %d elsewhere", m->name, (int)n->ival,
			    n->ival == 1 ? "" : "s", m->nkeys);
	}
	for (struct ast *key = n->a; key; key = key->next, k++) {
		struct ty *kt = &m->keyty[k];
		char a[64], b[64];

		if (key->ty.kind == TY_NONE)
			continue;	/* a map not typed yet (the first pass) */
		if (key->ty.kind == TY_AGG || key->ty.kind == TY_VOID ||
		    key->ty.kind == TY_STACKMODE || key->ty.kind == TY_TUPLE)
			return FAIL(sm, key, "this cannot be a map's key");
		if (kt->kind == TY_NONE) {
			*kt = key->ty;
			kt->ptr = 0;
			continue;
		}
		if (kt->kind != key->ty.kind) {
			ty_name(&key->ty, a, sizeof(a));
			ty_name(kt, b, sizeof(b));
			return FAIL(sm, key, "@%s's key %u is %s here and %s elsewhere", m->name,
				    k + 1, a, b);
		}
	}
	return 0;
}

/* A value into a map: its type decides the map's. */
static int map_assign(struct sema *sm, struct ast *mapn, const struct ty *v, struct ast *at)
{
	struct script_mapinfo *m = &sm->s->maps[mapn->sym];
	char a[64], b[64];

	if (v->kind == TY_NONE)
		return 0;
	if (v->kind == TY_VOID || v->kind == TY_STACKMODE)
		return FAIL(sm, at, "this has no value to store");
	m->assigned = true;
	if (m->val.kind == TY_NONE) {
		m->val = *v;
		if (m->val.kind == TY_INT) {
			m->val.size = 8;
			m->val.ptr = 0;
		}
		return 0;
	}
	if (m->val.kind == v->kind && (v->kind != TY_AGG || (m->val.agg == v->agg &&
		(v->agg != SVK_LHIST || (m->val.lmin == v->lmin && m->val.lmax == v->lmax &&
					 m->val.lstep == v->lstep)))))
		return 0;
	ty_name(v, a, sizeof(a));
	ty_name(&m->val, b, sizeof(b));
	if (m->val.kind == TY_AGG && v->kind == TY_AGG && m->val.agg == v->agg)
		return FAIL(sm, at, "@%s: lhist()'s min, max and step must be the same everywhere",
			    m->name);
	return FAIL(sm, at, "type mismatch for @%s: trying to assign a value of type '%s' when the "
		    "map already holds values of type '%s'", m->name, a, b);
}

static struct script_var *var_of(struct sema *sm, const char *name)
{
	for (unsigned k = 0; k < sm->pr->nvars; k++)
		if (!strcmp(sm->pr->vars[k].name, name))
			return &sm->pr->vars[k];
	return NULL;
}

/* Two tuples of as many elements, each a string in both or in neither:
 * one variable's registers hold either. */
static bool same_elems(const struct ty *a, const struct ty *b)
{
	if (a->nelem != b->nelem)
		return false;
	for (unsigned k = 0; k < a->nelem; k++)
		if ((a->elem[k].kind == TY_STR) != (b->elem[k].kind == TY_STR))
			return false;
	return true;
}

static int var_assign(struct sema *sm, struct ast *n, const struct ty *t)
{
	struct script_var *v = var_of(sm, n->name);
	char a[64], b[64];

	if (t->kind == TY_AGG)
		return FAIL(sm, n, "an aggregation (count(), hist() ...) goes in a map, not in "
			    "a variable");
	if (t->kind == TY_VOID || t->kind == TY_STACKMODE)
		return FAIL(sm, n, "this has no value to store");
	if (!v) {
		if (sm->pr->nvars >= 64)
			return FAIL(sm, n, "more than 64 variables in one probe");
		if (strlen(n->name) >= USC_NAME_MAX)
			return FAIL(sm, n, "the variable's name is too long");
		v = &sm->pr->vars[sm->pr->nvars++];
		memset(v, 0, sizeof(*v));
		snprintf(v->name, sizeof(v->name), "%s", n->name);
		v->reg = -1;
	}
	if (t->kind == TY_NONE)
		return 0;
	if (t->kind == TY_TUPLE && t->nelem > SCRIPT_VAR_ELEMS)
		return FAIL(sm, n, "a tuple in a variable has %d elements at most", SCRIPT_VAR_ELEMS);
	for (unsigned k = 0; t->kind == TY_TUPLE && k < t->nelem; k++)
		if (t->elem[k].kind == TY_TUPLE || t->elem[k].kind == TY_BUF ||
		    t->elem[k].kind == TY_USTACK)
			return FAIL(sm, n, "a tuple in a variable holds integers and strings");
	if (v->ty.kind == TY_NONE) {
		v->ty = *t;
		return 0;
	}
	if (v->ty.kind == TY_TUPLE && t->kind == TY_TUPLE && !same_elems(&v->ty, t))
		return FAIL(sm, n, "type mismatch for $%s: a tuple of other elements than the one "
			    "it holds", n->name);
	if (v->ty.kind != t->kind) {
		ty_name(t, a, sizeof(a));
		ty_name(&v->ty, b, sizeof(b));
		return FAIL(sm, n, "type mismatch for $%s: trying to assign a value of type '%s' when "
			    "the variable already holds a value of type '%s'", n->name, a, b);
	}
	return 0;
}

/* The probe's attach points: do they all have kind k (or a site)? */
static bool all_attach(const struct sema *sm, int k)
{
	const struct script_probeinfo *pr = sm->pr;

	for (unsigned i = 0; i < pr->nattach; i++) {
		enum sp_kind kind = sm->s->attach[pr->first_attach + i].kind;

		if (k == -1 ? kind < SP_UPROBE : (int)kind != k)
			return false;
	}
	return true;
}

bool sema_on_sites(const struct sema *sm)
{
	return sm->pr->on_sites;
}

/* A probe takes its stack once: one number of frames (a site fetches one
 * $ustack). */
int sema_one_stack(struct sema *sm, struct ast *n, unsigned frames)
{
	if (!sm->pr->stack_frames)
		sm->pr->stack_frames = frames;
	if (sm->pr->stack_frames != frames)
		return FAIL(sm, n, "a probe takes its stack with one number of frames (ustack is "
			    "ustack(127))");
	return 0;
}

static int builtin(struct sema *sm, struct ast *n)
{
	const char *b = n->name;

	if (!strcmp(b, "pid") || !strcmp(b, "tid") || !strcmp(b, "uid") || !strcmp(b, "gid") ||
	    !strcmp(b, "cpu") || !strcmp(b, "nsecs") || !strcmp(b, "elapsed")) {
		n->ty = ty_int(8, false);
		return 0;
	}
	if (!strcmp(b, "rand")) {
		n->ty = ty_int(4, false);
		return 0;
	}
	if (!strcmp(b, "comm")) {
		n->ty.kind = TY_STR;
		return 0;
	}
	if (!strcmp(b, "probe")) {
		n->ty.kind = TY_PROBE;
		return 0;
	}
	if (!strcmp(b, "func")) {
		if (!sema_on_sites(sm))
			return FAIL(sm, n, "func is the probed function's: it is for uprobes, "
				    "uretprobes and usdt probes");
		n->ty.kind = TY_FUNC;
		return 0;
	}
	if (!strcmp(b, "retval")) {
		bool py = all_attach(sm, SP_PY);

		if (!all_attach(sm, SP_URETPROBE) && !py)
			return FAIL(sm, n, "the retval builtin can only be used with 'uretprobe' probes");
		if (py)
			return FAIL(sm, n, "a py: probe fires at a call: it has no retval");
		n->ty = ty_int(8, false);
		return 0;
	}
	if ((!strncmp(b, "arg", 3) || !strncmp(b, "sarg", 4)) &&
	    b[strncmp(b, "arg", 3) ? 4 : 3] >= '0' && b[strncmp(b, "arg", 3) ? 4 : 3] <= '9') {
		const char *num = b + (strncmp(b, "arg", 3) ? 4 : 3);
		char *end;
		long v = strtol(num, &end, 10);

		if (*end || v < 0 || v > 31)
			return FAIL(sm, n, "unknown identifier: '%s'", b);
		if (!sema_on_sites(sm) || (!all_attach(sm, SP_UPROBE) && !all_attach(sm, SP_USDT)))
			return FAIL(sm, n, "the %s builtin can only be used with 'uprobe' and 'usdt' "
				    "probes", b);
		if (b[0] == 's' && !all_attach(sm, SP_UPROBE))
			return FAIL(sm, n, "the %s builtin can only be used with 'uprobe' probes", b);
		if (all_attach(sm, SP_USDT) && v > 11)
			return FAIL(sm, n, "a USDT probe has 12 arguments at most: arg0 to arg11");
		n->ty = ty_int(8, false);
		n->ival = v;
		return 0;
	}
	if (!strcmp(b, "ustack")) {
		if (!sema_on_sites(sm))
			return FAIL(sm, n, "ustack is the stack where the probe fires: BEGIN, END and "
				    "interval probes have none");
		n->ty.kind = TY_USTACK;
		return sema_one_stack(sm, n, 127);
	}
	if (!strcmp(b, "bpftrace") || !strcmp(b, "perf")) {
		n->ty.kind = TY_STACKMODE;
		n->ival = b[0] == 'p';
		return 0;
	}
	if (!strcmp(b, "args"))
		return FAIL(sm, n, "args is read by field: args.NAME (or args->NAME), a parameter of "
			    "the probed function by its name in the debug info");
	if (!strcmp(b, "kstack") || !strcmp(b, "curtask") || !strcmp(b, "cgroup") ||
	    !strcmp(b, "ctx") || !strcmp(b, "cpid") || !strcmp(b, "numaid") ||
	    !strcmp(b, "username"))
		return FAIL(sm, n, "%s is the kernel's: uscope traces user space", b);
	return FAIL(sm, n, "unknown identifier: '%s'", b);
}

static int binop(struct sema *sm, struct ast *n)
{
	struct ty *l = &n->a->ty, *r = &n->b->ty;
	char a[64], b[64];
	int op = n->op;

	if (sema_expr(sm, n->a) || sema_expr(sm, n->b))
		return -EINVAL;
	if (l->kind == TY_NONE || r->kind == TY_NONE) {
		n->ty = ty_int(8, true);
		return 0;
	}
	if (l->kind == TY_STR && r->kind == TY_STR) {
		if (op != T_EQ && op != T_NE)
			return FAIL(sm, n, "strings compare with == and != only");
		n->ty = ty_int(8, false);
		return 0;
	}
	if ((l->kind == TY_BUF || r->kind == TY_BUF) && l->kind == r->kind) {
		if (op != T_EQ && op != T_NE)
			return FAIL(sm, n, "buffers compare with == and != only");
		n->ty = ty_int(8, false);
		return 0;
	}
	if (l->kind != TY_INT || r->kind != TY_INT) {
		ty_name(l, a, sizeof(a));
		ty_name(r, b, sizeof(b));
		return FAIL(sm, n, "the %s operator can not be used on expressions of types %s, %s",
			    lex_tok_name((enum tok)op), a, b);
	}
	bool sign = l->sign && r->sign;

	if (op == T_SHL || op == T_SHR)
		sign = l->sign;
	n->ty = ty_int(8, sign);
	/* pointer arithmetic keeps the pointer (a later * reads through it) */
	if ((op == T_PLUS || op == T_MINUS) && (l->ptr || r->ptr)) {
		n->ty = l->ptr ? *l : *r;
	}
	if (op == T_LAND || op == T_LOR || op == T_EQ || op == T_NE || op == T_LT ||
	    op == T_LE || op == T_GT || op == T_GE)
		n->ty = ty_int(8, sign);
	if ((op == T_DIV || op == T_MOD) && n->b->kind == N_INT && !n->b->ival)
		return FAIL(sm, n->b, "division by zero");
	return 0;
}

static int field(struct sema *sm, struct ast *n)
{
	const struct ast *root = n->a;

	/* args.r->next->id: a member chain of a parameter, as the debug info
	 * lays it out (uscope's probe language reads it: r->next->id) */
	while (root->kind == N_FIELD)
		root = root->a;
	if (root->kind == N_BUILTIN && !strcmp(root->name, "args")) {
		if (!sema_on_sites(sm) || (!all_attach(sm, SP_UPROBE) && !all_attach(sm, SP_URETPROBE) &&
				      !all_attach(sm, SP_PY)))
			return FAIL(sm, n, "args is for uprobes and py: probes: the probed "
				    "function's parameters by name");
		n->ty = ty_int(8, true);	/* its bits, as the debug info types them */
		return 0;
	}
	if (sema_expr(sm, n->a))
		return -EINVAL;
	return FAIL(sm, n, "fields of a value are read by the debug info's names in uscope: "
		    "args.NAME (a parameter), or casts to integer pointers");
}

/* $1...: an integer when its text is one, else a string */
static int param_expr(struct sema *sm, struct ast *n)
{
	size_t k;

	if (n->sym < 0)
		n->sym = (int)n->ival;	/* its number; ival becomes its value */
	k = (size_t)n->sym - 1;
	const char *v = k < sm->s->opts.nparams ? sm->s->opts.params[k] : "";
	char *end;
	long long x;

	errno = 0;
	x = strtoll(v, &end, 0);
	if (*v && !*end && !errno) {
		n->ty = ty_int(8, true);
		n->ival = x;
	} else {
		n->ty.kind = TY_STR;
		if (strlen(v) >= sm->s->strlen)
			return FAIL(sm, n, "$%lld is longer than strlen (%u bytes)",
				    (long long)n->ival, sm->s->strlen);
	}
	return 0;
}

/* @m[k] read: its value's type (an aggregation read as its integer) */
static int map_expr(struct sema *sm, struct ast *n)
{
	struct script_mapinfo *m;

	if (sema_map_keys(sm, n))
		return -EINVAL;
	m = &sm->s->maps[n->sym];
	n->ty = m->val;
	if (m->val.kind == TY_AGG) {
		if (m->val.agg == SVK_COUNT || m->val.agg == SVK_SUM ||
		    m->val.agg == SVK_MIN || m->val.agg == SVK_MAX || m->val.agg == SVK_AVG) {
			n->ty = ty_int(8, m->val.agg != SVK_COUNT);
			m->read_as_agg = true;
			return 0;
		}
		return FAIL(sm, n, "@%s is a %s(): it can only be printed", m->name,
			    m->val.agg == SVK_HIST ? "hist" : m->val.agg == SVK_LHIST ?
			    "lhist" : "stats");
	}
	if (m->val.kind == TY_NONE && sm->final)
		return FAIL(sm, n, "undefined map: @%s", m->name);
	return 0;
}

/* (type)x, (type *)p */
static int cast_expr(struct sema *sm, struct ast *n)
{
	char tn[64];
	struct ty t;

	if (sema_int_type(sm, n->name, n, &t) || sema_expr(sm, n->a))
		return -EINVAL;
	if (n->a->ty.kind != TY_INT && n->a->ty.kind != TY_NONE) {
		ty_name(&n->a->ty, tn, sizeof(tn));
		return FAIL(sm, n, "cannot cast a %s to an integer", tn);
	}
	if (n->ptr > 2)
		return FAIL(sm, n, "casts go to pointers of at most two stars");
	if (!strcmp(n->name, "void") && !n->ptr)
		return FAIL(sm, n, "cannot cast to void");
	t.ptr = n->ptr;
	n->ty = t;
	return 0;
}

/* (a, b, ...): integers and strings */
static int tuple_expr(struct sema *sm, struct ast *n)
{
	unsigned k = 0;
	struct ty *el;

	if (n->ival > SCRIPT_TUPLE_ELEMS)
		return FAIL(sm, n, "a tuple has %d elements at most", SCRIPT_TUPLE_ELEMS);
	el = arena_alloc(sm->s->arena, (size_t)n->ival * sizeof(*el));
	if (!el)
		return FAIL(sm, n, "out of memory");
	for (struct ast *x = n->a; x; x = x->next, k++) {
		if (sema_expr(sm, x))
			return -EINVAL;
		if (x->ty.kind != TY_INT && x->ty.kind != TY_STR && x->ty.kind != TY_NONE &&
		    x->ty.kind != TY_USYM && x->ty.kind != TY_FUNC && x->ty.kind != TY_PROBE)
			return FAIL(sm, x, "a tuple holds integers and strings");
		el[k] = x->ty;
		if (el[k].kind == TY_INT) {
			el[k].size = 8;
			el[k].ptr = 0;
		}
	}
	n->ty.kind = TY_TUPLE;
	n->ty.nelem = (uint8_t)k;
	n->ty.elem = el;
	return 0;
}

/* -x, !x, ~x, *p */
static int unop(struct sema *sm, struct ast *n)
{
	char tn[64];

	if (sema_expr(sm, n->a))
		return -EINVAL;
	if (n->a->ty.kind == TY_NONE) {
		n->ty = ty_int(8, true);
		return 0;
	}
	if (n->a->ty.kind != TY_INT) {
		ty_name(&n->a->ty, tn, sizeof(tn));
		return FAIL(sm, n, "the %s operator can not be used on expressions of type "
			    "'%s'", lex_tok_name((enum tok)n->op), tn);
	}
	if (n->op == T_MUL) {
		n->ty = n->a->ty.ptr ? n->a->ty : ty_int(8, false);
		if (n->a->ty.ptr)
			n->ty.ptr--;
		if (n->ty.ptr)
			n->ty.size = 8;
	} else if (n->op == T_LNOT) {
		n->ty = ty_int(8, false);
	} else {
		n->ty = n->a->ty;
		n->ty.ptr = 0;
		if (n->op == T_MINUS)
			n->ty = ty_int(8, true);
	}
	return 0;
}

/* c ? a : b */
static int ternary(struct sema *sm, struct ast *n)
{
	if (sema_expr(sm, n->a) || sema_expr(sm, n->b) || sema_expr(sm, n->c))
		return -EINVAL;
	if (sema_want_int(sm, n->a, "the condition"))
		return -EINVAL;
	if (n->b->ty.kind == TY_NONE || n->c->ty.kind == TY_NONE) {
		n->ty = n->b->ty.kind == TY_NONE ? n->c->ty : n->b->ty;
		return 0;
	}
	if (n->b->ty.kind != n->c->ty.kind)
		return FAIL(sm, n, "the ternary's branches have different types");
	if (n->b->ty.kind != TY_INT && n->b->ty.kind != TY_STR)
		return FAIL(sm, n, "the ternary gives integers or strings");
	n->ty = n->b->ty;
	if (n->ty.kind == TY_INT) {
		n->ty = ty_int(8, n->b->ty.sign && n->c->ty.sign);
	}
	return 0;
}

/* x++, @m[k]-- */
static int incdec(struct sema *sm, struct ast *n)
{
	if (n->a->kind == N_MAP) {
		struct ty i64 = ty_int(8, true);

		if (sema_map_keys(sm, n->a) || map_assign(sm, n->a, &i64, n))
			return -EINVAL;
		if (sema_expr(sm, n->a))
			return -EINVAL;
	} else {
		struct ty i64 = ty_int(8, true);
		struct script_var *v = var_of(sm, n->a->name);

		if (!v)
			return FAIL(sm, n->a, "undefined or undeclared variable: $%s",
				    n->a->name);
		if (var_assign(sm, n->a, &i64) || sema_expr(sm, n->a))
			return -EINVAL;
	}
	if (sema_want_int(sm, n->a, "++ and --"))
		return -EINVAL;
	n->ty = n->a->ty;
	return 0;
}

int sema_expr(struct sema *sm, struct ast *n)
{
	if (sm->err)
		return sm->err;
	switch (n->kind) {
	case N_INT:
		n->ty = ty_int(8, true);
		return 0;
	case N_STR:
		n->ty.kind = TY_STR;
		if (n->slen >= sm->s->strlen)
			return FAIL(sm, n, "the string is longer than strlen (%u bytes with its NUL): "
				    "--strlen sets it", sm->s->strlen);
		return 0;
	case N_PARAM:
		return param_expr(sm, n);
	case N_PARAMCOUNT:
		n->ty = ty_int(8, true);
		return 0;
	case N_BUILTIN:
		return builtin(sm, n);
	case N_VAR: {
		struct script_var *v = var_of(sm, n->name);

		if (!v)
			return FAIL(sm, n, "undefined or undeclared variable: $%s", n->name);
		n->ty = v->ty;
		return 0;
	}
	case N_MAP:
		return map_expr(sm, n);
	case N_CALL:
		return sema_call(sm, n);
	case N_BINOP:
		return binop(sm, n);
	case N_UNOP:
		return unop(sm, n);
	case N_TERNARY:
		return ternary(sm, n);
	case N_CAST:
		return cast_expr(sm, n);
	case N_FIELD:
		return field(sm, n);
	case N_TUPLEIDX:
		if (sema_expr(sm, n->a))
			return -EINVAL;
		if (n->a->ty.kind != TY_TUPLE)
			return n->a->ty.kind == TY_NONE ? 0 : FAIL(sm, n, "only a tuple has fields .0, .1 ...");
		if (n->ival < 0 || n->ival >= n->a->ty.nelem)
			return FAIL(sm, n, "the tuple has %u elements", n->a->ty.nelem);
		n->ty = n->a->ty.elem[n->ival];
		return 0;
	case N_INDEX:
		if (sema_expr(sm, n->a) || sema_expr(sm, n->b))
			return -EINVAL;
		if (n->a->ty.kind != TY_INT || !n->a->ty.ptr)
			return FAIL(sm, n, "only a pointer can be indexed: cast it first, ((uint32 *)p)[i]");
		if (sema_want_int(sm, n->b, "the index"))
			return -EINVAL;
		n->ty = n->a->ty;
		n->ty.ptr--;
		if (n->ty.ptr)
			n->ty.size = 8;
		return 0;
	case N_TUPLE:
		return tuple_expr(sm, n);
	case N_INCDEC:
		return incdec(sm, n);
	default:
		return FAIL(sm, n, "not an expression");
	}
}

static int stmts(struct sema *sm, struct ast *list);

static int stmt(struct sema *sm, struct ast *n)
{
	switch (n->kind) {
	case N_EXPRSTMT:
		if (sema_expr(sm, n->a))
			return -EINVAL;
		if (n->a->ty.kind == TY_AGG)
			return FAIL(sm, n->a, "%s() goes into a map: @m = %s(...)", n->a->name,
				    n->a->name);
		return 0;
	case N_ASSIGN: {
		struct ast *l = n->a, *r = n->b;

		if (sema_expr(sm, r))
			return -EINVAL;
		if (n->op) {
			/* @x += v, $x += v: integers */
			if (sema_want_int(sm, r, "a compound assignment"))
				return -EINVAL;
			if (l->kind == N_MAP) {
				struct ty i64 = ty_int(8, true);

				if (sema_map_keys(sm, l) || map_assign(sm, l, &i64, n) || sema_expr(sm, l))
					return -EINVAL;
			} else if (!var_of(sm, l->name)) {
				return FAIL(sm, l, "undefined or undeclared variable: $%s", l->name);
			} else if (sema_expr(sm, l)) {
				return -EINVAL;
			}
			return sema_want_int(sm, l, "a compound assignment");
		}
		if (l->kind == N_MAP) {
			if (sema_map_keys(sm, l) || map_assign(sm, l, &r->ty, n))
				return -EINVAL;
			l->ty = sm->s->maps[l->sym].val;
			return 0;
		}
		if (var_assign(sm, l, &r->ty))
			return -EINVAL;
		l->ty = r->ty;
		return 0;
	}
	case N_IF:
		if (sema_expr(sm, n->a) || sema_want_int(sm, n->a, "if's condition"))
			return -EINVAL;
		return stmts(sm, n->b) || (n->c && (n->c->kind == N_IF ? stmt(sm, n->c) :
						     stmts(sm, n->c))) ? -EINVAL : 0;
	case N_WHILE:
		if (sema_expr(sm, n->a) || sema_want_int(sm, n->a, "while's condition"))
			return -EINVAL;
		sm->loops++;
		if (stmts(sm, n->b))
			return -EINVAL;
		sm->loops--;
		return 0;
	case N_UNROLL: {
		int64_t v;

		if (sema_expr(sm, n->a) || sema_want_const(sm, n->a, "unroll's count", &v))
			return -EINVAL;
		if (v < 1 || v > 100)
			return FAIL(sm, n->a, "unroll takes 1 to 100");
		n->ival = v;
		return stmts(sm, n->b);
	}
	case N_BREAK:
	case N_CONTINUE:
		if (!sm->loops)
			return FAIL(sm, n, "%s outside a while loop", n->kind == N_BREAK ? "break" :
				    "continue");
		return 0;
	case N_RETURN:
		return 0;
	default:
		return FAIL(sm, n, "not a statement");
	}
}

static int stmts(struct sema *sm, struct ast *list)
{
	for (struct ast *n = list; n; n = n->next)
		if (stmt(sm, n))
			return -EINVAL;
	return 0;
}

static int pass(struct sema *sm)
{
	unsigned pi = 0;

	for (struct ast_probe *p = sm->s->prog.probes; p; p = p->next, pi++) {
		sm->pr = &sm->s->probes[pi];
		sm->probe = pi;
		sm->pr->nvars = 0;
		sm->pr->stack_frames = 0;
		sm->loops = 0;
		if (p->pred && (sema_expr(sm, p->pred) || sema_want_int(sm, p->pred, "the predicate")))
			return -EINVAL;
		if (stmts(sm, p->body))
			return -EINVAL;
	}
	return 0;
}

/* A map's layout: its keys' places, its values' kind and size. */
int script_map_layout(struct usc_script *s, struct script_mapinfo *m, struct script_diag *d)
{
	uint32_t off = 0;

	if (m->nkeys < 0)
		m->nkeys = 0;
	for (int k = 0; k < m->nkeys; k++) {
		m->keys[k].ty = m->keyty[k];
		m->keys[k].off = off;
		m->keys[k].size = ty_size(s, &m->keyty[k]);
		off += m->keys[k].size;
	}
	if (off > SCRIPT_KEY_MAX)
		return script_fail(d, m->pos, m->len, "@%s's key takes more than %d bytes", m->name,
				   SCRIPT_KEY_MAX);
	m->m.keylen = off ? off : 8;
	m->m.flags = (m->nkeys == 0 ? SCRIPT_MAP_NOKEY : 0) |
		     (m->tid_only && m->nkeys == 1 ? SCRIPT_MAP_PERTHREAD : 0);
	m->m.max = s->max_keys;
	switch (m->val.kind) {
	case TY_AGG:
		m->m.vk = m->val.agg;
		m->m.vallen = m->val.agg == SVK_MIN || m->val.agg == SVK_MAX ?
			      sizeof(struct script_mm) :
			      m->val.agg == SVK_AVG || m->val.agg == SVK_STATS ?
			      sizeof(struct script_cs) : 8;
		if (m->val.agg == SVK_HIST) {
			m->m.nbuckets = SCRIPT_HIST_BUCKETS;
			m->m.vallen = 8 * SCRIPT_HIST_BUCKETS;
		} else if (m->val.agg == SVK_LHIST) {
			m->m.nbuckets = (uint32_t)((m->val.lmax - m->val.lmin) / m->val.lstep) + 2;
			m->m.vallen = 8 * m->m.nbuckets;
			m->m.lmin = m->val.lmin;
			m->m.lmax = m->val.lmax;
			m->m.lstep = m->val.lstep;
		}
		break;
	case TY_INT:
	case TY_FUNC:
	case TY_PROBE:
	case TY_TSTAMP:
		m->m.vk = SVK_INT;
		m->m.vallen = 8;
		break;
	case TY_NONE:
		/* only deleted, cleared, printed: never assigned */
		m->m.vk = SVK_INT;
		m->m.vallen = 8;
		break;
	default:
		m->m.vk = SVK_BYTES;
		m->m.vallen = ty_size(s, &m->val);
		if (m->val.kind == TY_TUPLE) {
			uint32_t o = 0;

			for (unsigned k = 0; k < m->val.nelem && k < 16; k++) {
				m->vfields[k].ty = m->val.elem[k];
				m->vfields[k].off = o;
				m->vfields[k].size = ty_size(s, &m->val.elem[k]);
				o += m->vfields[k].size;
			}
		}
		if (m->m.vallen > SCRIPT_OUT_MAX)
			return script_fail(d, m->pos, m->len, "@%s's values take more than %d bytes",
					   m->name, SCRIPT_OUT_MAX);
		break;
	}
	return 0;
}

int script_sema(struct usc_script *s, struct script_diag *d)
{
	struct sema sm = {.s = s, .d = d};

	if (pass(&sm) || sm.err)
		return -EINVAL;
	/* again, every map's type known (and the formats made) */
	for (size_t i = 0; i < s->nmaps; i++)
		s->maps[i].tid_only = true;
	sm.final = true;
	if (pass(&sm) || sm.err)
		return -EINVAL;
	for (size_t i = 0; i < s->nmaps; i++) {
		struct script_mapinfo *m = &s->maps[i];

		if (!m->assigned && m->val.kind == TY_NONE)
			return script_fail(d, m->pos, m->len, "@%s is never assigned a value", m->name);
		if (script_map_layout(s, m, d))
			return -EINVAL;
	}
	return 0;
}
