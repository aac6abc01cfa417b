/* Filters: `PROBE ... if COND`. The condition compares the probe's fetch
 * arguments, by name, with numbers and quoted strings (a string with *, ?
 * or [ is a glob), joined by && and || with ! and parentheses, as ftrace's
 * event filters do:
 *
 *   cond    := or
 *   or      := and { '||' and }
 *   and     := unary { '&&' unary }
 *   unary   := '!' unary | '(' cond ')' | test
 *   test    := NAME [ OP value ]          (NAME alone: not 0)
 *   NAME    := an argument's name | $EXPR[:TYPE] (a hidden argument)
 *   OP      := == != < <= > >= &          (& : the bits are not all 0)
 *   value   := NUMBER | -NUMBER | "STRING"
 *
 * It is compiled to reverse Polish notation (fetch.h), bound to each site's
 * arguments (their indexes, signs and sizes) at resolve time. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "probe/probe.h"

struct fparser {
	const char *text;
	size_t i, end;
	struct usc_probe_spec *spec;
	struct usc_filter *f;
	size_t nstr;
	struct usc_parse_error *err;
};

static int ffail(struct fparser *p, enum usc_parse_err code, size_t pos)
{
	if (p->err) {
		p->err->code = code;
		p->err->pos = pos;
	}
	return -EINVAL;
}

static void skip_ws(struct fparser *p)
{
	while (p->i < p->end && isspace((unsigned char)p->text[p->i]))
		p->i++;
}

static bool peek2(struct fparser *p, const char *s)
{
	size_t n = strlen(s);

	skip_ws(p);
	return p->i + n <= p->end && !memcmp(p->text + p->i, s, n);
}

static int emit(struct fparser *p, struct filter_insn in, size_t pos)
{
	if (p->f->n >= USC_FILTER_MAX)
		return ffail(p, USC_PERR_FILTER_TOO_LONG, pos);
	p->f->insn[p->f->n++] = in;
	return 0;
}

/* s[0..n) into the string table; its offset, or -1 when it is full. */
static int add_str(struct fparser *p, const char *s, size_t n)
{
	size_t at = p->nstr;

	if (at + n + 1 > USC_FILTER_STRS)
		return -1;
	memcpy(p->f->strs + at, s, n);
	p->f->strs[at + n] = 0;
	p->nstr += n + 1;
	return (int)at;
}

/* Is name[0..n) an argument of the probe? Unknown names are allowed when
 * $params or a struct shown whole may bring them (binding checks them). */
static bool name_known(const struct usc_probe_spec *spec, const char *name, size_t n)
{
	for (unsigned i = 0; i < spec->nargs; i++) {
		const struct usc_fetcharg *a = &spec->args[i];

		if (a->insn[0].op == FOP_PARAMS || a->insn[0].op == FOP_VAR)
			return true;	/* its names come with the debug info */
		if (strlen(a->name) == n && !memcmp(a->name, name, n))
			return true;
	}
	/* no argument written: the names are the site's, bound later (a USDT
	 * probe's arg1.. arg12 by default; a recording's recorded arguments
	 * with -r FILE), and an unknown one is said then; a $EXPR of a
	 * function probe is fetched for the filter (a hidden operand) */
	return spec->nargs == 0 && (spec->loc_kind == USC_LOC_USDT || name[0] != '$');
}

static int parse_cond(struct fparser *p, unsigned depth);

/* An operand that is an expression, text[start..end): a hidden argument of
 * the spec (one per distinct text), named __usc_fN. Its name's offset in
 * the strings, or -1 with the error set. */
static int hidden_arg(struct fparser *p, size_t start, size_t end)
{
	struct usc_probe_spec *spec = p->spec;
	struct usc_fetcharg *a;
	char name[USC_NAME_MAX] = "";
	unsigned nh = 0;

	for (unsigned i = 0; i < spec->nargs; i++) {
		a = &spec->args[i];
		if (!a->hidden)
			continue;
		nh++;
		if (a->len == end - start && !memcmp(p->text + a->pos, p->text + start, a->len))
			return add_str(p, a->name, strlen(a->name));
	}
	if (spec->nargs >= USC_MAX_ARGS) {
		ffail(p, USC_PERR_TOO_MANY_ARGS, start);
		return -1;
	}
	a = &spec->args[spec->nargs];
	if (probe_parse_fetcharg(p->text, start, end, spec->is_return, a, p->err))
		return -1;
	if (a->insn[0].op == FOP_PARAMS || a->insn[0].op == FOP_VAR ||
	    fetch_type_is_string(a->type) != 0) {
		/* strings compare by name only: name them in the probe */
		if (!fetch_type_is_string(a->type) || a->insn[0].op == FOP_PARAMS) {
			ffail(p, USC_PERR_FILTER_OPERAND, start);
			return -1;
		}
	}
	snprintf(name, sizeof(name), "__usc_f%u", nh);
	memcpy(a->name, name, sizeof(name));
	a->hidden = true;
	spec->nargs++;
	int at = add_str(p, name, strlen(name));

	if (at < 0)
		ffail(p, USC_PERR_FILTER_TOO_LONG, start);
	return at;
}

static int parse_test(struct fparser *p)
{
	const char *s = p->text;
	size_t start, nstart;
	struct filter_insn in = {0};
	int name;

	skip_ws(p);
	start = p->i;
	if (p->i >= p->end || !(isalpha((unsigned char)s[p->i]) || s[p->i] == '_' ||
				s[p->i] == '$'))
		return ffail(p, USC_PERR_FILTER_OPERAND, p->i);
	nstart = p->i++;
	while (p->i < p->end && (isalnum((unsigned char)s[p->i]) || s[p->i] == '_'))
		p->i++;
	if (s[nstart] == '$' && p->i + 1 < p->end && s[p->i] == ':' &&
	    isalpha((unsigned char)s[p->i + 1])) {
		/* $EXPR:TYPE */
		p->i++;
		while (p->i < p->end && (isalnum((unsigned char)s[p->i]) || s[p->i] == '_' ||
					 s[p->i] == '@' || s[p->i] == '/'))
			p->i++;
	}
	if (s[nstart] == '$' && !name_known(p->spec, s + nstart, p->i - nstart)) {
		name = hidden_arg(p, nstart, p->i);
		if (name < 0)
			return -EINVAL;
	} else if (!name_known(p->spec, s + nstart, p->i - nstart)) {
		return ffail(p, USC_PERR_FILTER_NAME, nstart);
	} else {
		name = add_str(p, s + nstart, p->i - nstart);
	}
	if (name < 0)
		return ffail(p, USC_PERR_FILTER_TOO_LONG, nstart);
	in.name = (uint16_t)name;
	skip_ws(p);
	/* the operator */
	static const struct {
		const char *op;
		uint8_t cmp;
	} ops[] = {{"==", CMP_EQ}, {"!=", CMP_NE}, {"<=", CMP_LE}, {">=", CMP_GE}, {"<", CMP_LT},
		   {">", CMP_GT}, {"&", CMP_BITS}};
	size_t k;

	if (p->i >= p->end || peek2(p, "&&") || peek2(p, "||") || s[p->i] == ')') {
		in.op = FIL_NZ;
		return emit(p, in, start);
	}
	for (k = 0; k < sizeof(ops) / sizeof(ops[0]); k++)
		if (peek2(p, ops[k].op))
			break;
	if (k == sizeof(ops) / sizeof(ops[0]))
		return ffail(p, USC_PERR_FILTER_OP, p->i);
	size_t oppos = p->i;

	p->i += strlen(ops[k].op);
	in.cmp = ops[k].cmp;
	skip_ws(p);
	if (p->i < p->end && s[p->i] == '"') {
		char lit[USC_FILTER_STRS];
		size_t n = 0, q = p->i + 1;
		bool glob = false;
		int at;

		if (in.cmp != CMP_EQ && in.cmp != CMP_NE)
			return ffail(p, USC_PERR_FILTER_STRING, oppos);
		for (; q < p->end && s[q] != '"'; q++) {
			char c = s[q];

			if (c == '\\' && q + 1 < p->end)
				c = s[++q];
			else if (c == '*' || c == '?' || c == '[')
				glob = true;
			if (n + 1 >= sizeof(lit))
				return ffail(p, USC_PERR_FILTER_TOO_LONG, q);
			lit[n++] = c;
		}
		if (q >= p->end)
			return ffail(p, USC_PERR_FILTER_QUOTE, p->i);
		at = add_str(p, lit, n);
		if (at < 0)
			return ffail(p, USC_PERR_FILTER_TOO_LONG, p->i);
		p->i = q + 1;
		in.op = FIL_STR;
		in.imm = (int64_t)((uint64_t)at | (uint64_t)n << 32);
		if (glob)
			in.cmp = in.cmp == CMP_EQ ? CMP_GLOB : CMP_NGLOB;
		return emit(p, in, start);
	}
	/* a number, maybe negative */
	bool neg = p->i < p->end && s[p->i] == '-';
	uint64_t v;
	size_t used = probe_parse_number(s + p->i + neg, &v);

	if (!used || p->i + neg + used > p->end)
		return ffail(p, USC_PERR_FILTER_OPERAND, p->i);
	p->i += neg + used;
	in.op = FIL_CMP;
	in.imm = neg ? -(int64_t)v : (int64_t)v;
	return emit(p, in, start);
}

static int parse_unary(struct fparser *p, unsigned depth)
{
	size_t at;
	int ret;

	skip_ws(p);
	at = p->i;
	if (depth > 16)
		return ffail(p, USC_PERR_FILTER_TOO_LONG, at);
	if (p->i < p->end && p->text[p->i] == '!' && !peek2(p, "!=")) {
		p->i++;
		ret = parse_unary(p, depth + 1);
		return ret ? ret : emit(p, (struct filter_insn){.op = FIL_NOT}, at);
	}
	if (p->i < p->end && p->text[p->i] == '(') {
		p->i++;
		ret = parse_cond(p, depth + 1);
		if (ret)
			return ret;
		skip_ws(p);
		if (p->i >= p->end || p->text[p->i] != ')')
			return ffail(p, USC_PERR_FILTER_PAREN, p->i);
		p->i++;
		return 0;
	}
	return parse_test(p);
}

/* One level of a left-associative binary operator: sub { op sub }. */
static int parse_binary(struct fparser *p, unsigned depth, const char *op, uint8_t fil,
			int (*sub)(struct fparser *, unsigned))
{
	int ret = sub(p, depth);

	while (!ret && peek2(p, op)) {
		size_t at = p->i;

		p->i += 2;
		ret = sub(p, depth);
		if (!ret)
			ret = emit(p, (struct filter_insn){.op = fil}, at);
	}
	return ret;
}

static int parse_and(struct fparser *p, unsigned depth)
{
	return parse_binary(p, depth, "&&", FIL_AND, parse_unary);
}

static int parse_cond(struct fparser *p, unsigned depth)
{
	return parse_binary(p, depth, "||", FIL_OR, parse_and);
}

int probe_parse_filter(const char *text, size_t start, size_t end,
		       struct usc_probe_spec *spec, struct usc_filter *f,
		       struct usc_parse_error *err)
{
	struct fparser p = {text, start, end, spec, f, 0, err};
	int ret;

	memset(f, 0, sizeof(*f));
	skip_ws(&p);
	if (p.i >= end)
		return ffail(&p, USC_PERR_FILTER_EMPTY, p.i);
	f->pos = (uint32_t)p.i;
	ret = parse_cond(&p, 0);
	if (ret)
		return ret;
	skip_ws(&p);
	if (p.i < end)
		return ffail(&p, USC_PERR_FILTER_JOIN, p.i);
	f->len = (uint32_t)(end - f->pos);
	return 0;
}

int probe_bind_filter(const struct usc_filter *in, const struct usc_fetcharg *args,
		      unsigned nargs, struct usc_filter *out, const char **bad)
{
	*out = *in;
	for (uint32_t k = 0; k < out->n; k++) {
		struct filter_insn *fi = &out->insn[k];
		const char *name;
		unsigned a;

		if (fi->op != FIL_CMP && fi->op != FIL_STR && fi->op != FIL_NZ)
			continue;
		name = in->strs + fi->name;
		for (a = 0; a < nargs; a++)
			if (!strcmp(args[a].name, name))
				break;
		*bad = name;
		if (a == nargs)
			return -ENOENT;
		if (fi->op == FIL_STR ? !fetch_type_is_string(args[a].type) :
					fetch_type_is_string(args[a].type))
			return -EINVAL;
		fi->arg = (uint8_t)a;
		fi->sign = fetch_type_is_signed(args[a].type);
		fi->size = (uint8_t)(fetch_type_size(args[a].type) ? fetch_type_size(args[a].type) : 8);
	}
	*bad = NULL;
	return 0;
}

/* ftrace's filter syntax, rebuilt from the RPN by a stack of strings. */
int filter_render_ftrace(const struct usc_filter *f, const struct usc_fetcharg *args,
			 char *buf, size_t len)
{
	static const char *const cmps[] = {"==", "!=", "<", "<=", ">", ">=", "&", "~", "!~"};
	char stack[USC_FILTER_MAX][512];
	unsigned sp = 0;

	for (uint32_t k = 0; k < f->n; k++) {
		const struct filter_insn *fi = &f->insn[k];
		const struct usc_fetcharg *a = &args[fi->arg];
		char tmp[512];
		int n = 0;

		switch (fi->op) {
		case FIL_CMP:
		case FIL_NZ:
		case FIL_STR:
			if (a->insn[0].op == FOP_PID || a->insn[0].op == FOP_TID ||
			    a->insn[0].op == FOP_CPU || a->unavailable || a->optimized_out)
				return -ENOTSUP;	/* not a field the kernel fetches */
			if (sp >= USC_FILTER_MAX)
				return -ENOSPC;
			if (fi->op == FIL_NZ)
				n = snprintf(stack[sp], sizeof(stack[sp]), "%s != 0", a->name);
			else if (fi->op == FIL_CMP && fi->sign)
				n = snprintf(stack[sp], sizeof(stack[sp]), "%s %s %lld", a->name,
					     cmps[fi->cmp], (long long)fi->imm);
			else if (fi->op == FIL_CMP)
				n = snprintf(stack[sp], sizeof(stack[sp]), "%s %s 0x%llx", a->name,
					     cmps[fi->cmp], (unsigned long long)fi->imm);
			else {
				const char *lit = f->strs + (fi->imm & 0xffff);

				/* ftrace's strings have no escapes: refuse a quote */
				if (strchr(lit, '"'))
					return -ENOTSUP;
				n = snprintf(stack[sp], sizeof(stack[sp]), "%s %s \"%s\"", a->name,
					     cmps[fi->cmp], lit);
			}
			if (n < 0 || (size_t)n >= sizeof(stack[sp]))
				return -ENOSPC;
			sp++;
			break;
		case FIL_NOT:
			if (sp < 1)
				return -EINVAL;
			n = snprintf(tmp, sizeof(tmp), "!(%s)", stack[sp - 1]);
			if (n < 0 || (size_t)n >= sizeof(tmp))
				return -ENOSPC;
			memcpy(stack[sp - 1], tmp, (size_t)n + 1);
			break;
		case FIL_AND:
		case FIL_OR:
			if (sp < 2)
				return -EINVAL;
			n = snprintf(tmp, sizeof(tmp), "(%s) %s (%s)", stack[sp - 2],
				     fi->op == FIL_AND ? "&&" : "||", stack[sp - 1]);
			if (n < 0 || (size_t)n >= sizeof(tmp))
				return -ENOSPC;
			memcpy(stack[sp - 2], tmp, (size_t)n + 1);
			sp--;
			break;
		default:
			return -EINVAL;
		}
	}
	if (sp != 1 || strlen(stack[0]) + 1 > len)
		return sp != 1 ? -EINVAL : -ENOSPC;
	memcpy(buf, stack[0], strlen(stack[0]) + 1);
	return 0;
}

unsigned probe_shown_args(const struct usc_fetcharg *args, unsigned n)
{
	unsigned k = 0;

	while (k < n && !args[k].hidden)
		k++;
	return k;
}
