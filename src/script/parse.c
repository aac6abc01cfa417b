/* The script parser: bpftrace's grammar (src/parser.yy) by recursive
 * descent, into the syntax tree (ast.h). The first mistake stops it, with
 * its place (script_diag). Precedence, lowest first: ?:, ||, &&, |, ^, &,
 * == !=, < <= > >=, << >>, + -, * / %, the unary operators and casts, then
 * postfix (calls, [..], .field, ->field, ++, --). */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "script/ast.h"
#include "script/lex.h"
#include "script/parse.h"

struct parser {
	struct lexer lx;
	struct token t;		/* the current token */
	struct arena *a;
	struct script_diag *d;
	int in_pred;		/* a '/' followed by '{' ends the predicate */
	int depth;		/* nesting, bounded */
	int err;
};

#define MAX_DEPTH 200

static void next(struct parser *p)
{
	p->t = lex_next(&p->lx);
	if (p->t.t == T_ERROR)
		p->err = -EINVAL;
}

static int fail_at(struct parser *p, uint32_t pos, uint32_t len, const char *fmt, const char *what)
{
	script_fail(p->d, pos, len ? len : 1, fmt, what);
	p->err = -EINVAL;
	return -EINVAL;
}

static int unexpected(struct parser *p, const char *expected)
{
	char msg[160];

	if (p->t.t == T_ERROR)
		return p->err = -EINVAL;
	snprintf(msg, sizeof(msg), "expected %s, not %s", expected, lex_tok_name(p->t.t));
	return fail_at(p, p->t.pos, p->t.len, "%s", msg);
}

static int expect(struct parser *p, enum tok t)
{
	if (p->t.t != t)
		return unexpected(p, lex_tok_name(t));
	next(p);
	return p->err;
}

static struct ast *node(struct parser *p, enum ast_kind k, uint32_t pos, uint32_t len)
{
	struct ast *n = arena_alloc(p->a, sizeof(*n));

	if (!n) {
		script_fail(p->d, pos, len, "out of memory");
		p->err = -ENOMEM;
		return NULL;
	}
	n->kind = (uint8_t)k;
	n->pos = pos;
	n->len = len;
	n->sym = -1;
	n->input = -1;
	return n;
}

/* The span from a's start to b's end. */
static void span(struct ast *n, const struct ast *a, const struct ast *b)
{
	n->pos = a->pos;
	n->len = b->pos + b->len > a->pos ? b->pos + b->len - a->pos : a->len;
}

static struct ast *expr(struct parser *p);

/* expr {, expr} up to close: a list. */
static struct ast *arg_list(struct parser *p, enum tok close, unsigned *count)
{
	struct ast *head = NULL, **tail = &head;
	unsigned n = 0;

	if (p->t.t == close) {
		*count = 0;
		return NULL;
	}
	for (;;) {
		struct ast *e = expr(p);

		if (!e)
			return NULL;
		*tail = e;
		tail = &e->next;
		n++;
		if (p->t.t != T_COMMA)
			break;
		next(p);
	}
	*count = n;
	return head;
}

static bool is_type_name(const char *s)
{
	static const char *const types[] = {
		"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
		"int", "char", "short", "long", "unsigned", "signed", "bool",
		"int8_t", "int16_t", "int32_t", "int64_t", "uint8_t", "uint16_t", "uint32_t",
		"uint64_t", "size_t", "ssize_t", "void",
	};

	for (size_t k = 0; k < sizeof(types) / sizeof(types[0]); k++)
		if (!strcmp(s, types[k]))
			return true;
	return false;
}

/* After '(' : is this a cast "(TYPE[*[*]])" ? The lexer is not moved. */
static bool cast_ahead(struct parser *p)
{
	struct lexer save = p->lx;
	struct token t = p->t;
	bool yes = false;

	if (t.t == T_STRUCT) {
		yes = true;
	} else if (t.t == T_IDENT && is_type_name(t.text)) {
		struct token u = lex_next(&p->lx);

		while (u.t == T_IDENT && is_type_name(u.text))	/* unsigned long */
			u = lex_next(&p->lx);
		while (u.t == T_MUL)
			u = lex_next(&p->lx);
		yes = u.t == T_RPAREN;
	}
	p->lx = save;
	return yes;
}

/* A cast's type: "uint32", "struct task *", "unsigned long". */
static struct ast *cast(struct parser *p, uint32_t lpos)
{
	char name[256];
	size_t n = 0;
	unsigned stars = 0;
	struct ast *c;

	name[0] = 0;
	if (p->t.t == T_STRUCT) {
		n = (size_t)snprintf(name, sizeof(name), "%.*s ", (int)p->t.len, p->lx.src + p->t.pos);
		next(p);
		if (p->t.t != T_IDENT) {
			unexpected(p, "a struct's name");
			return NULL;
		}
	}
	while (p->t.t == T_IDENT && n < sizeof(name) - 64) {
		n += (size_t)snprintf(name + n, sizeof(name) - n, "%s%s", n && name[n - 1] != ' ' ?
				      " " : "", p->t.text);
		next(p);
		if (!strncmp(name, "struct ", 7) || !strncmp(name, "union ", 6) ||
		    !strncmp(name, "enum ", 5))
			break;
	}
	while (p->t.t == T_MUL) {
		stars++;
		next(p);
	}
	if (expect(p, T_RPAREN))
		return NULL;
	c = node(p, N_CAST, lpos, p->t.pos - lpos);
	if (!c)
		return NULL;
	c->name = arena_strndup(p->a, name, strlen(name));
	c->ptr = (uint8_t)stars;
	return c;
}

static struct ast *unary(struct parser *p);

static struct ast *primary(struct parser *p)
{
	struct token t = p->t;
	struct ast *n;

	switch (t.t) {
	case T_INT:
		n = node(p, N_INT, t.pos, t.len);
		if (n)
			n->ival = t.ival;
		next(p);
		return n;
	case T_STR:
		n = node(p, N_STR, t.pos, t.len);
		if (n) {
			n->str = t.str;
			n->slen = t.slen;
		}
		next(p);
		return n;
	case T_PARAM:
		n = node(p, N_PARAM, t.pos, t.len);
		if (n)
			n->ival = t.ival;
		next(p);
		return n;
	case T_PARAMCOUNT:
		next(p);
		return node(p, N_PARAMCOUNT, t.pos, t.len);
	case T_VAR:
		n = node(p, N_VAR, t.pos, t.len);
		if (n)
			n->name = t.text;
		next(p);
		return n;
	case T_MAP: {
		unsigned nk = 0;

		n = node(p, N_MAP, t.pos, t.len);
		if (!n)
			return NULL;
		n->name = t.text;
		next(p);
		if (p->t.t == T_LBRACKET) {
			next(p);
			if (p->t.t == T_RBRACKET)
				return unexpected(p, "a key"), NULL;
			n->a = arg_list(p, T_RBRACKET, &nk);
			if (p->err)
				return NULL;
			n->ival = nk;
			n->len = p->t.pos + 1 - n->pos;
			if (expect(p, T_RBRACKET))
				return NULL;
		}
		return n;
	}
	case T_IDENT:
		next(p);
		if (p->t.t == T_LPAREN) {
			unsigned na = 0;

			n = node(p, N_CALL, t.pos, t.len);
			if (!n)
				return NULL;
			n->name = t.text;
			next(p);
			n->a = arg_list(p, T_RPAREN, &na);
			if (p->err)
				return NULL;
			n->ival = na;
			n->len = p->t.pos + 1 - n->pos;
			if (expect(p, T_RPAREN))
				return NULL;
			return n;
		}
		n = node(p, N_BUILTIN, t.pos, t.len);
		if (n)
			n->name = t.text;
		return n;
	case T_LPAREN: {
		struct ast *e, *tup;
		unsigned ne = 0;

		next(p);
		if (cast_ahead(p)) {
			struct ast *c = cast(p, t.pos), *x;

			if (!c || !(x = unary(p)))
				return NULL;
			c->a = x;
			span(c, c, x);
			return c;
		}
		int saved = p->in_pred;

		p->in_pred = 0;
		e = expr(p);
		if (!e)
			return NULL;
		if (p->t.t == T_COMMA) {
			next(p);
			e->next = arg_list(p, T_RPAREN, &ne);
			if (p->err)
				return NULL;
			tup = node(p, N_TUPLE, t.pos, p->t.pos + 1 - t.pos);
			if (!tup)
				return NULL;
			tup->a = e;
			tup->ival = ne + 1;
			e = tup;
		}
		p->in_pred = saved;
		if (expect(p, T_RPAREN))
			return NULL;
		return e;
	}
	default:
		unexpected(p, "an expression");
		return NULL;
	}
}

static struct ast *postfix(struct parser *p)
{
	struct ast *e = primary(p);

	while (e && !p->err) {
		struct token t = p->t;
		struct ast *n;

		if (t.t == T_DOT || t.t == T_ARROW) {
			next(p);
			if (t.t == T_DOT && p->t.t == T_INT) {
				n = node(p, N_TUPLEIDX, e->pos, p->t.pos + p->t.len - e->pos);
				if (!n)
					return NULL;
				n->a = e;
				n->ival = p->t.ival;
				next(p);
			} else if (p->t.t == T_IDENT) {
				n = node(p, N_FIELD, e->pos, p->t.pos + p->t.len - e->pos);
				if (!n)
					return NULL;
				n->a = e;
				n->name = p->t.text;
				n->arrow = t.t == T_ARROW;
				next(p);
			} else {
				unexpected(p, "a field's name");
				return NULL;
			}
			e = n;
		} else if (t.t == T_LBRACKET) {
			struct ast *i;

			next(p);
			int saved = p->in_pred;

			p->in_pred = 0;
			i = expr(p);
			p->in_pred = saved;
			if (!i)
				return NULL;
			n = node(p, N_INDEX, e->pos, p->t.pos + 1 - e->pos);
			if (!n || expect(p, T_RBRACKET))
				return NULL;
			n->a = e;
			n->b = i;
			e = n;
		} else if (t.t == T_INC || t.t == T_DEC) {
			if (e->kind != N_MAP && e->kind != N_VAR) {
				fail_at(p, t.pos, t.len, "the %s operator applies to a map or a variable",
					t.t == T_INC ? "++" : "--");
				return NULL;
			}
			n = node(p, N_INCDEC, e->pos, t.pos + t.len - e->pos);
			if (!n)
				return NULL;
			n->a = e;
			n->op = t.t == T_INC ? T_PLUS : T_MINUS;
			n->post = 1;
			next(p);
			e = n;
		} else {
			break;
		}
	}
	return e;
}

static struct ast *unary(struct parser *p)
{
	struct token t = p->t;
	struct ast *n, *x;

	if (++p->depth > MAX_DEPTH) {
		fail_at(p, t.pos, t.len, "%s", "the expression nests too deeply");
		return NULL;
	}
	switch (t.t) {
	case T_MINUS:
	case T_LNOT:
	case T_BNOT:
	case T_MUL:
		next(p);
		x = unary(p);
		if (!x)
			return NULL;
		if (t.t == T_MINUS && x->kind == N_INT && x->pos == t.pos + 1) {
			x->ival = (int64_t)(0 - (uint64_t)x->ival);	/* a literal: -5 */
			x->pos = t.pos;
			x->len++;
			p->depth--;
			return x;
		}
		n = node(p, N_UNOP, t.pos, 0);
		if (!n)
			return NULL;
		n->op = t.t;
		n->a = x;
		span(n, n, x);
		p->depth--;
		return n;
	case T_INC:
	case T_DEC:
		next(p);
		x = postfix(p);
		if (!x)
			return NULL;
		if (x->kind != N_MAP && x->kind != N_VAR) {
			fail_at(p, t.pos, t.len, "the %s operator applies to a map or a variable",
				t.t == T_INC ? "++" : "--");
			return NULL;
		}
		n = node(p, N_INCDEC, t.pos, 0);
		if (!n)
			return NULL;
		n->op = t.t == T_INC ? T_PLUS : T_MINUS;
		n->a = x;
		span(n, n, x);
		p->depth--;
		return n;
	default:
		x = postfix(p);
		p->depth--;
		return x;
	}
}

/* The binary operators by level, lowest first. */
static const enum tok levels[][5] = {
	{T_LOR}, {T_LAND}, {T_BOR}, {T_BXOR}, {T_BAND}, {T_EQ, T_NE},
	{T_LT, T_LE, T_GT, T_GE}, {T_SHL, T_SHR}, {T_PLUS, T_MINUS}, {T_MUL, T_DIV, T_MOD},
};
#define NLEVELS (sizeof(levels) / sizeof(levels[0]))

/* In a predicate, a '/' followed by '{' (or the end) ends it. */
static bool pred_end(struct parser *p)
{
	size_t i = p->t.pos + 1;

	if (!p->in_pred || p->t.t != T_DIV)
		return false;
	while (i < p->lx.n && isspace((unsigned char)p->lx.src[i]))
		i++;
	return i >= p->lx.n || p->lx.src[i] == '{';
}

static struct ast *binary(struct parser *p, size_t level)
{
	struct ast *l;

	if (level >= NLEVELS)
		return unary(p);
	l = binary(p, level + 1);
	while (l && !p->err) {
		struct token t = p->t;
		bool match = false;
		struct ast *r, *n;

		for (size_t k = 0; k < 5 && levels[level][k]; k++)
			match |= t.t == levels[level][k];
		if (!match || pred_end(p))
			break;
		next(p);
		r = binary(p, level + 1);
		if (!r)
			return NULL;
		n = node(p, N_BINOP, 0, 0);
		if (!n)
			return NULL;
		n->op = t.t;
		n->a = l;
		n->b = r;
		span(n, l, r);
		l = n;
	}
	return l;
}

static struct ast *expr(struct parser *p)
{
	struct ast *c = binary(p, 0), *x, *y, *n;

	if (!c || p->t.t != T_QUES)
		return c;
	next(p);
	x = expr(p);
	if (!x || expect(p, T_COLON))
		return NULL;
	y = expr(p);
	if (!y)
		return NULL;
	n = node(p, N_TERNARY, 0, 0);
	if (!n)
		return NULL;
	n->a = c;
	n->b = x;
	n->c = y;
	span(n, c, y);
	return n;
}

static struct ast *block(struct parser *p, bool top);

static struct ast *stmt(struct parser *p);

/* if (c) { } [else { } | else if ...] */
static struct ast *if_stmt(struct parser *p)
{
	struct ast *n = node(p, N_IF, p->t.pos, p->t.len);

	if (!n)
		return NULL;
	next(p);
	if (expect(p, T_LPAREN) || !(n->a = expr(p)) || expect(p, T_RPAREN))
		return NULL;
	n->b = block(p, false);
	if (p->err)
		return NULL;
	if (p->t.t == T_ELSE) {
		next(p);
		if (p->t.t == T_IF)
			n->c = if_stmt(p);
		else
			n->c = block(p, false);
		if (p->err)
			return NULL;
		n->ival = 1;	/* has an else */
	}
	return n;
}

static struct ast *stmt(struct parser *p)
{
	struct token t = p->t;
	struct ast *n, *e;

	switch (t.t) {
	case T_IF:
		return if_stmt(p);
	case T_WHILE:
		n = node(p, N_WHILE, t.pos, t.len);
		if (!n)
			return NULL;
		next(p);
		if (expect(p, T_LPAREN) || !(n->a = expr(p)) || expect(p, T_RPAREN))
			return NULL;
		n->b = block(p, false);
		return p->err ? NULL : n;
	case T_UNROLL:
		n = node(p, N_UNROLL, t.pos, t.len);
		if (!n)
			return NULL;
		next(p);
		if (expect(p, T_LPAREN))
			return NULL;
		if (p->t.t == T_INT || p->t.t == T_PARAM) {
			n->a = primary(p);
			if (!n->a)
				return NULL;
		} else {
			unexpected(p, "an integer or a parameter");
			return NULL;
		}
		if (expect(p, T_RPAREN))
			return NULL;
		n->b = block(p, false);
		return p->err ? NULL : n;
	case T_FOR:
		fail_at(p, t.pos, t.len, "%s", "for loops are not in bpftrace 0.17's language: "
			"use while or unroll");
		return NULL;
	case T_RETURN:
	case T_BREAK:
	case T_CONTINUE:
		next(p);
		return node(p, t.t == T_RETURN ? N_RETURN : t.t == T_BREAK ? N_BREAK : N_CONTINUE,
			    t.pos, t.len);
	default:
		break;
	}
	e = expr(p);
	if (!e)
		return NULL;
	if (p->t.t == T_ASSIGN || p->t.t == T_OPASSIGN) {
		struct token op = p->t;

		if (e->kind == N_TUPLEIDX) {
			fail_at(p, e->pos, e->len, "%s", "tuples are immutable once created: make "
				"a new tuple and assign it instead");
			return NULL;
		}
		if (e->kind != N_MAP && e->kind != N_VAR) {
			fail_at(p, e->pos, e->len, "%s", "only a map or a variable can be assigned to");
			return NULL;
		}
		next(p);
		n = node(p, N_ASSIGN, op.pos, op.len);
		if (!n)
			return NULL;
		n->a = e;
		n->op = op.t == T_OPASSIGN ? op.op : 0;
		n->b = expr(p);
		if (!n->b)
			return NULL;
		return n;
	}
	n = node(p, N_EXPRSTMT, e->pos, e->len);
	if (n)
		n->a = e;
	return n;
}

/* { stmt ; stmt ... } : expression statements are separated by ';', the
 * last may have none; if, while and unroll need none. */
static struct ast *block(struct parser *p, bool top)
{
	struct ast *head = NULL, **tail = &head;

	if (expect(p, T_LBRACE))
		return NULL;
	while (p->t.t != T_RBRACE) {
		struct ast *s;

		if (p->t.t == T_SEMI) {
			next(p);
			continue;
		}
		if (p->t.t == T_EOF) {
			unexpected(p, "'}'");
			return NULL;
		}
		s = stmt(p);
		if (!s)
			return NULL;
		*tail = s;
		tail = &s->next;
		if (s->kind == N_IF || s->kind == N_WHILE || s->kind == N_UNROLL)
			continue;
		if (p->t.t != T_SEMI && p->t.t != T_RBRACE) {
			unexpected(p, "';' or '}'");
			return NULL;
		}
	}
	if (top)
		p->lx.i = p->t.pos + 1;	/* the next probe's attach points are raw text */
	else
		next(p);
	return head;
}

static int probe(struct parser *p, struct ast_probe **out)
{
	struct ast_probe *pr = arena_alloc(p->a, sizeof(*pr));
	struct ast_attach **tail;
	uint32_t pos, len;

	if (!pr)
		return p->err = -ENOMEM;
	tail = &pr->attach;
	for (;;) {
		struct ast_attach *at;

		if (lex_attach(&p->lx, &pos, &len)) {
			if (p->lx.failed)
				return p->err = -EINVAL;
			lex_skip(&p->lx);
			script_fail(p->d, (uint32_t)p->lx.i, 1, "expected a probe (uprobe:BINARY:FUNCTION, "
				    "BEGIN, END, ...)");
			return p->err = -EINVAL;
		}
		at = arena_alloc(p->a, sizeof(*at));
		if (!at || !(at->text = arena_strndup(p->a, p->lx.src + pos, len)))
			return p->err = -ENOMEM;
		at->pos = pos;
		at->len = len;
		*tail = at;
		tail = &at->next;
		if (!pr->pos && !pr->len)
			pr->pos = pos;
		pr->len = pos + len - pr->pos;
		lex_skip(&p->lx);
		if (p->lx.i < p->lx.n && p->lx.src[p->lx.i] == ',') {
			p->lx.i++;
			continue;
		}
		break;
	}
	next(p);
	if (p->err)
		return p->err;
	if (p->t.t == T_DIV) {
		next(p);
		p->in_pred = 1;
		pr->pred = expr(p);
		p->in_pred = 0;
		if (!pr->pred)
			return p->err ? p->err : -EINVAL;
		if (p->t.t != T_DIV)
			return unexpected(p, "'/' after the predicate");
		next(p);
	}
	if (p->t.t != T_LBRACE)
		return unexpected(p, "'{' (the probe's actions)");
	pr->body = block(p, true);
	if (p->err)
		return p->err;
	*out = pr;
	return 0;
}

int script_parse(const char *src, size_t n, struct arena *a, struct ast_program *prog,
		 struct script_diag *d)
{
	struct parser p = {.a = a, .d = d};
	struct ast_probe **tail = &prog->probes;

	memset(prog, 0, sizeof(*prog));
	lex_init(&p.lx, src, n, a, d);
	for (;;) {
		size_t i = lex_skip(&p.lx);
		struct ast_probe *pr = NULL;

		if (p.lx.failed)
			return -EINVAL;
		if (i >= n)
			break;
		if (src[i] == '#') {
			/* #include, #define: C headers for kernel types */
			while (p.lx.i < n && src[p.lx.i] != '\n')
				p.lx.i++;
			continue;
		}
		if (n - i > 7 && (!strncmp(src + i, "struct ", 7) || !strncmp(src + i, "union ", 6) ||
				  !strncmp(src + i, "enum ", 5))) {
			/* a C definition: bpftrace hands it to clang for kernel
			 * types; user space reads its types from DWARF */
			size_t k = i;
			int depth = 0;

			while (k < n && src[k] != '{' && src[k] != ';')
				k++;
			for (; k < n; k++) {
				depth += src[k] == '{';
				depth -= src[k] == '}';
				if (!depth && (src[k] == ';' || src[k] == '}'))
					break;
			}
			if (k < n && src[k] == '}' && k + 1 < n && src[k + 1] == ';')
				k++;
			p.lx.i = k < n ? k + 1 : n;
			continue;
		}
		if (probe(&p, &pr))
			return p.err ? p.err : -EINVAL;
		*tail = pr;
		tail = &pr->next;
		prog->nprobes++;
	}
	if (!prog->nprobes)
		return script_fail(d, (uint32_t)n, 0, "the program has no probe");
	return 0;
}
