/* The probe-language parser. See probe.h for the grammar; README for the
 * user's view. It reads its input without modifying it and reports the byte
 * offset of the first mistake. */
#include "probe/probe.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

static const char *const perr_msgs[USC_PERR_NR] = {
#define X(id, msg) [USC_PERR_##id] = msg,
	USC_PARSE_ERRORS(X)
#undef X
};

const char *usc_parse_strerror(enum usc_parse_err code)
{
	return (unsigned)code < USC_PERR_NR ? perr_msgs[code] : "unknown error";
}

static int fail(struct usc_parse_error *err, enum usc_parse_err code, size_t pos)
{
	if (err) {
		err->code = code;
		err->pos = pos;
	}
	return -EINVAL;
}

static int is_ident_start(int c)
{
	return isalpha(c) || c == '_';
}

static int is_ident(int c)
{
	return isalnum(c) || c == '_';
}

size_t probe_parse_number(const char *s, uint64_t *out)
{
	const char *p = s;
	uint64_t v = 0;
	unsigned base = 10;

	if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
		base = 16;
		p += 2;
		if (!isxdigit((unsigned char)*p))
			return 0;
	} else if (p[0] == '0' && isdigit((unsigned char)p[1])) {
		base = 8;
		p++;
	} else if (!isdigit((unsigned char)*p)) {
		return 0;
	}
	for (;; p++) {
		unsigned d;
		int c = (unsigned char)*p;

		if (isdigit(c))
			d = c - '0';
		else if (base == 16 && isxdigit(c))
			d = (tolower(c) - 'a') + 10;
		else
			break;
		if (d >= base)
			return 0;	/* 08, 0x...: a digit out of its base */
		if (v > (UINT64_MAX - d) / base)
			return 0;	/* overflow */
		v = v * base + d;
	}
	if (is_ident(*p))
		return 0;		/* 12abc */
	*out = v;
	return (size_t)(p - s);
}

/* ---- registers -------------------------------------------------------- */


/* ---- types ------------------------------------------------------------ */

static enum usc_type type_for_width(unsigned width)
{
	switch (width) {
	case 1: return USC_T_X8;
	case 2: return USC_T_X16;
	case 4: return USC_T_X32;
	default: return USC_T_X64;
	}
}

/* Parse TYPE at s[0..n); fills type and bitfield geometry. */
static int parse_type(const char *text, size_t pos, size_t n, enum usc_type *type,
		      unsigned *bf_w, unsigned *bf_o, unsigned *bf_c,
		      struct usc_parse_error *err)
{
	const char *s = text + pos;

	for (int t = 0; t < USC_T_NR; t++) {
		if (t == USC_T_BITFIELD || t == USC_T_STACK)
			continue;
		if (strlen(fetch_type_name(t)) == n && !strncmp(fetch_type_name(t), s, n)) {
			*type = t;
			return 0;
		}
	}
	if (n > 0 && s[0] == 'b') {
		/* b<width>@<offset>/<container>: plain decimal digits only */
		unsigned v[3] = {0, 0, 0};
		const char seps[3] = {'@', '/', 0};
		size_t i = 1;

		for (int k = 0; k < 3; k++) {
			size_t start = i;

			while (i < n && isdigit((unsigned char)s[i]) && i - start < 3)
				v[k] = v[k] * 10 + (unsigned)(s[i++] - '0');
			if (i == start || (i < n && isdigit((unsigned char)s[i])))
				return fail(err, USC_PERR_BAD_BITFIELD, pos);
			if (seps[k] ? (i >= n || s[i] != seps[k]) : i != n)
				return fail(err, USC_PERR_BAD_BITFIELD, pos);
			i++;
		}
		if ((v[2] != 8 && v[2] != 16 && v[2] != 32 && v[2] != 64) || v[0] == 0 ||
		    v[1] >= v[2] || v[0] > v[2] - v[1])
			return fail(err, USC_PERR_BAD_BITFIELD, pos);
		*type = USC_T_BITFIELD;
		*bf_w = v[0];
		*bf_o = v[1];
		*bf_c = v[2];
		return 0;
	}
	return fail(err, USC_PERR_BAD_TYPE, pos);
}

/* ---- expressions ------------------------------------------------------ */

#define MAX_DEREFS (USC_FETCH_MAX - 4)

struct expr {
	struct fetch_insn load;
	unsigned reg_width;		/* for %REG: the alias's width */
	unsigned noffs;
	int64_t offs[MAX_DEREFS + 1];	/* innermost first */
};

/* Where an EXPR is being parsed: the probe's text and end, what the probe
 * allows ($retval on returns, $argN up to max_arg), how deep in +OFFS(...)
 * it is, and where an error goes. */
struct expr_in {
	const char *s;
	size_t end;
	bool is_return;
	unsigned max_arg;
	unsigned depth;
	struct usc_parse_error *err;
};

static int parse_expr(const struct expr_in *in, size_t *p, struct expr *ex);

/* A C expression on debug-info variables: [*]NAME{->F|.F|[N]}, kept as a
 * FOP_VAR the binding lowers with the debug info (src/debuginfo). */
static int parse_var_expr(const struct expr_in *in, size_t *p, struct expr *ex)
{
	const char *s = in->s;
	size_t i = *p, j = i + (s[i] == '*'), end = in->end;

	if (!(isalpha((unsigned char)s[j]) || s[j] == '_'))
		return fail(in->err, USC_PERR_BAD_VAR_EXPR, j);
	while (j < end && s[j] != ':') {
		if (is_ident((unsigned char)s[j])) {
			j++;
		} else if (s[j] == '.' && j + 1 < end && is_ident_start((unsigned char)s[j + 1])) {
			j++;
		} else if (s[j] == '-' && j + 2 < end && s[j + 1] == '>' &&
			   is_ident_start((unsigned char)s[j + 2])) {
			j += 2;
		} else if (s[j] == '[') {
			size_t k = j + 1;

			while (k < end && isalnum((unsigned char)s[k]))
				k++;
			if (k == j + 1 || k >= end || s[k] != ']')
				return fail(in->err, USC_PERR_BAD_VAR_EXPR, j);
			j = k + 1;
		} else {
			return fail(in->err, USC_PERR_BAD_VAR_EXPR, j);
		}
	}
	ex->load.op = FOP_VAR;
	ex->load.imm = (int64_t)((uint64_t)i | (uint64_t)(j - i) << 32);
	ex->reg_width = 8;
	*p = j;
	return 0;
}

/* %REG, or an alias of its low bits (%eax, %r8w). */
static int parse_reg(const struct expr_in *in, size_t *p, struct expr *ex)
{
	size_t i = *p, j = i + 1;
	const struct fetch_reg_name *ra;

	while (j < in->end && isalnum((unsigned char)in->s[j]))
		j++;
	ra = fetch_reg_lookup(in->s + i + 1, j - i - 1);
	if (!ra)
		return fail(in->err, USC_PERR_BAD_REG, i);
	ex->load.op = FOP_REG;
	ex->load.reg = ra->reg;
	ex->reg_width = ra->width;
	*p = j;
	return 0;
}

/* The $ variables without a number: their load, their width (0: the
 * default), and whether they must stand alone (not inside +OFFS(...)). */
static const struct {
	const char *name;
	enum fetch_op op;
	unsigned width;
	enum usc_parse_err alone;	/* the error when not alone, or 0 */
} dollar_vars[] = {
	{"goid", FOP_GOID, 0, 0},
	{"stack", FOP_STACKP, 0, 0},
	{"comm", FOP_COMM, 0, 0},
	{"ustack", FOP_USTACK, 0, USC_PERR_STACK_ALONE},
	{"pystack", FOP_PYSTACK, 0, USC_PERR_PYSTACK_ALONE},
	{"pid", FOP_PID, 4, 0},
	{"tid", FOP_TID, 4, 0},
	{"cpu", FOP_CPU, 4, 0},
	{"params", FOP_PARAMS, 0, USC_PERR_PARAMS_ALONE},
};

/* $argN, $retval, $retvalN (a Go function's N-th result word), $stackN:
 * 1 when v (n bytes) is one of them, filled in or failed; 0 when not. */
static int parse_numbered_var(const struct expr_in *in, size_t i, const char *v, size_t n,
			      struct expr *ex, int *ret)
{
	uint64_t num;

	*ret = 0;
	if (n > 3 && !strncmp(v, "arg", 3) && isdigit((unsigned char)v[3])) {
		if (probe_parse_number(v + 3, &num) != n - 3 || num < 1 || num > in->max_arg)
			*ret = fail(in->err, USC_PERR_BAD_ARG_INDEX, i);
		ex->load.op = FOP_ARG;
		ex->load.imm = (int64_t)num;
		ex->reg_width = 8;
	} else if (n >= 6 && !strncmp(v, "retval", 6) &&
		   (n == 6 || isdigit((unsigned char)v[6]))) {
		num = 1;
		if (n > 6 && (probe_parse_number(v + 6, &num) != n - 6 || num < 1 || num > 9))
			*ret = fail(in->err, USC_PERR_BAD_ARG_INDEX, i);
		else if (!in->is_return)
			*ret = fail(in->err, USC_PERR_RETVAL_ON_ENTRY, i);
		ex->load.op = FOP_RETVAL;
		ex->load.imm = num == 1 ? 0 : (int64_t)num;
	} else if (n > 5 && !strncmp(v, "stack", 5) && isdigit((unsigned char)v[5])) {
		if (probe_parse_number(v + 5, &num) != n - 5 || num > 1024)
			*ret = fail(in->err, USC_PERR_BAD_NUMBER, i + 6);
		ex->load.op = FOP_STACK;
		ex->load.imm = (int64_t)num;
	} else {
		return 0;
	}
	return 1;
}

/* $VAR. */
static int parse_dollar(const struct expr_in *in, size_t *p, struct expr *ex)
{
	size_t i = *p, j = i + 1, n;
	const char *v = in->s + i + 1;
	int ret;

	while (j < in->end && is_ident((unsigned char)in->s[j]))
		j++;
	n = j - i - 1;
	if (parse_numbered_var(in, i, v, n, ex, &ret)) {
		if (ret)
			return ret;
		*p = j;
		return 0;
	}
	for (size_t k = 0; k < sizeof(dollar_vars) / sizeof(dollar_vars[0]); k++) {
		if (strlen(dollar_vars[k].name) != n || strncmp(v, dollar_vars[k].name, n))
			continue;
		if (dollar_vars[k].alone && in->depth)
			return fail(in->err, dollar_vars[k].alone, i);
		ex->load.op = dollar_vars[k].op;
		if (dollar_vars[k].width)
			ex->reg_width = dollar_vars[k].width;
		*p = j;
		return 0;
	}
	return fail(in->err, USC_PERR_BAD_VAR, i);
}

/* @ADDR (memory at a user address) or @+FILE_OFFSET. */
static int parse_at(const struct expr_in *in, size_t *p, struct expr *ex)
{
	uint64_t num;
	size_t j = *p + 1, used;
	bool foff = false;

	if (j < in->end && in->s[j] == '+') {
		foff = true;
		j++;
	}
	used = probe_parse_number(in->s + j, &num);
	if (!used || j + used > in->end)
		return fail(in->err, USC_PERR_BAD_NUMBER, j);
	ex->load.op = foff ? FOP_FOFFS : FOP_MEM;
	ex->load.imm = (int64_t)num;
	ex->offs[ex->noffs++] = 0;	/* @ADDR is the memory at ADDR */
	*p = j + used;
	return 0;
}

/* +OFFS(EXPR) or -OFFS(EXPR): memory at EXPR+OFFS. */
static int parse_deref(const struct expr_in *in, size_t *p, struct expr *ex)
{
	const char *s = in->s;
	struct expr_in inner = *in;
	uint64_t num;
	size_t i = *p, j = i + 1, used;
	int64_t off;

	used = probe_parse_number(s + j, &num);
	if (!used || j + used > in->end || num > INT32_MAX)
		return fail(in->err, USC_PERR_BAD_NUMBER, j);
	off = s[i] == '-' ? -(int64_t)num : (int64_t)num;
	j += used;
	if (j >= in->end || s[j] != '(')
		return fail(in->err, USC_PERR_BAD_DEREF, j);
	if (in->depth >= MAX_DEREFS)
		return fail(in->err, USC_PERR_DEREF_TOO_DEEP, i);
	j++;
	inner.depth++;
	if (parse_expr(&inner, &j, ex))
		return -EINVAL;
	if (j >= in->end || s[j] != ')')
		return fail(in->err, USC_PERR_NO_CLOSE_PAREN, j);
	if (ex->load.op == FOP_COMM)
		return fail(in->err, USC_PERR_COMM_TYPE, i);
	if (ex->load.op == FOP_USTACK)
		return fail(in->err, USC_PERR_STACK_ALONE, i);
	if (ex->load.op == FOP_PYSTACK)
		return fail(in->err, USC_PERR_PYSTACK_ALONE, i);
	if (ex->noffs >= MAX_DEREFS)
		return fail(in->err, USC_PERR_DEREF_TOO_DEEP, i);
	ex->offs[ex->noffs++] = off;
	*p = j + 1;
	return 0;
}

/* EXPR in text[*p..end). Advances *p. */
static int parse_expr(const struct expr_in *in, size_t *p, struct expr *ex)
{
	const char *s = in->s;
	size_t i = *p;

	if (i >= in->end)
		return fail(in->err, USC_PERR_BAD_FETCHARG, i);
	if (isalpha((unsigned char)s[i]) || s[i] == '_' || (s[i] == '*' && in->depth == 0))
		return parse_var_expr(in, p, ex);
	switch (s[i]) {
	case '%':
		return parse_reg(in, p, ex);
	case '$':
		return parse_dollar(in, p, ex);
	case '@':
		return parse_at(in, p, ex);
	case '+':
	case '-':
		return parse_deref(in, p, ex);
	default:
		return fail(in->err, USC_PERR_BAD_FETCHARG, i);
	}
}

static int arg_name_ok(const char *s, size_t n)
{
	if (n == 0 || n >= USC_NAME_MAX || !is_ident_start((unsigned char)s[0]))
		return 0;
	for (size_t i = 1; i < n; i++)
		if (!is_ident((unsigned char)s[i]))
			return 0;
	/* names the kernel's event format already uses */
	if (!strncmp(s, "common_", 7) || !strncmp(s, "__probe", 7) || !strncmp(s, "__usc", 5))
		return 0;
	return 1;
}

static int parse_fetcharg(const char *text, size_t start, size_t end, bool is_return,
			  unsigned max_arg, struct usc_fetcharg *arg, struct usc_parse_error *err)
{
	size_t p = start, q;
	struct expr ex;
	unsigned bf_w = 0, bf_o = 0, bf_c = 0, n = 0;

	memset(arg, 0, sizeof(*arg));
	memset(&ex, 0, sizeof(ex));
	arg->pos = (uint32_t)start;
	arg->len = (uint32_t)(end - start);

	/* NAME= */
	q = p;
	while (q < end && is_ident((unsigned char)text[q]))
		q++;
	if (q < end && text[q] == '=') {
		if (!arg_name_ok(text + p, q - p))
			return fail(err, USC_PERR_BAD_ARG_NAME, p);
		memcpy(arg->name, text + p, q - p);
		arg->named = true;
		p = q + 1;
	}

	struct expr_in in = {text, end, is_return, max_arg, 0, err};

	if (parse_expr(&in, &p, &ex))
		return -EINVAL;
	if (ex.load.op == FOP_PARAMS) {
		if (arg->named || p != end)
			return fail(err, USC_PERR_PARAMS_ALONE, arg->named ? start : p);
		snprintf(arg->name, sizeof(arg->name), "params");
		arg->insn[0] = ex.load;
		arg->insn[1] = (struct fetch_insn){.op = FOP_END};
		arg->ninsn = 2;
		return 0;
	}

	if (ex.load.op == FOP_USTACK || ex.load.op == FOP_PYSTACK) {
		/* $ustack or $ustack:N (frames); $pystack, $pystack:N */
		bool py = ex.load.op == FOP_PYSTACK;
		uint64_t frames = py ? USC_PYSTACK_FRAMES : USC_STACK_FRAMES;

		if (p < end && text[p] == ':') {
			size_t used = probe_parse_number(text + p + 1, &frames);

			if (!used || p + 1 + used != end || frames < 1 ||
			    frames > (py ? USC_PYSTACK_FRAMES_MAX : USC_STACK_FRAMES_MAX))
				return fail(err, py ? USC_PERR_PYSTACK_FRAMES : USC_PERR_STACK_FRAMES,
					    p + 1);
		} else if (p < end) {
			return fail(err, USC_PERR_BAD_SPACE, p);
		}
		if (!arg->named)
			snprintf(arg->name, sizeof(arg->name), py ? "pystack" : "ustack");
		arg->type = USC_T_STACK;
		arg->insn[0] = ex.load;
		arg->insn[0].imm = (int64_t)frames;
		arg->insn[1] = (struct fetch_insn){.op = FOP_END};
		arg->ninsn = 2;
		return 0;
	}

	/* :TYPE */
	if (p < end && text[p] == ':') {
		if (parse_type(text, p + 1, end - p - 1, &arg->type, &bf_w, &bf_o, &bf_c, err))
			return -EINVAL;
		arg->type_given = true;
		p = end;
	} else if (p < end) {
		return fail(err, USC_PERR_BAD_SPACE, p);
	} else if (ex.load.op == FOP_COMM) {
		arg->type = USC_T_STRING;
	} else if (ex.load.op == FOP_REG && ex.noffs == 0) {
		arg->type = type_for_width(ex.reg_width);
	} else if ((ex.load.op == FOP_PID || ex.load.op == FOP_TID || ex.load.op == FOP_CPU) &&
		   ex.noffs == 0) {
		arg->type = USC_T_U32;
	} else if (ex.load.op == FOP_GOID && ex.noffs == 0) {
		arg->type = USC_T_S64;
	} else {
		arg->type = USC_T_X64;
	}

	if (ex.load.op == FOP_COMM) {
		if (arg->type != USC_T_STRING)
			return fail(err, USC_PERR_COMM_TYPE, start);
		arg->insn[n++] = ex.load;
		arg->insn[n++] = (struct fetch_insn){.op = FOP_END};
		arg->ninsn = (uint8_t)n;
		return 0;
	}

	/* load, then every dereference but the last, then the store: the
	 * last dereference is fused into the store, as in the kernel. A plain
	 * value typed :string is the address of the string ($arg1:string
	 * means +0($arg1):string). */
	arg->insn[n++] = ex.load;
	bool is_str = fetch_type_is_string(arg->type);
	unsigned size = arg->type == USC_T_BITFIELD ? bf_c / 8 : fetch_type_size(arg->type);

	for (unsigned i = 0; i + 1 < ex.noffs; i++)
		arg->insn[n++] = (struct fetch_insn){.op = FOP_DEREF, .imm = ex.offs[i]};
	if (is_str)
		arg->insn[n++] = (struct fetch_insn){.op = FOP_ST_STRING,
			.imm = ex.noffs ? ex.offs[ex.noffs - 1] : 0};
	else if (ex.noffs)
		arg->insn[n++] = (struct fetch_insn){.op = FOP_ST_MEM, .size = (uint8_t)size,
			.imm = ex.offs[ex.noffs - 1]};
	else
		arg->insn[n++] = (struct fetch_insn){.op = FOP_ST_RAW, .size = (uint8_t)size};
	if (arg->type == USC_T_BITFIELD)
		arg->insn[n++] = (struct fetch_insn){.op = FOP_MOD_BF, .size = (uint8_t)size,
			.bf_width = (uint8_t)bf_w, .bf_offset = (uint8_t)bf_o};
	arg->insn[n++] = (struct fetch_insn){.op = FOP_END};
	arg->ninsn = (uint8_t)n;
	return 0;
}

int probe_parse_fetcharg(const char *text, size_t start, size_t end, bool is_return,
			 struct usc_fetcharg *arg, struct usc_parse_error *err)
{
	return parse_fetcharg(text, start, end, is_return, 9, arg, err);
}

/* ---- the whole probe ---------------------------------------------------- */

struct tok {
	size_t start, end;
};

/* Does s[0..n) hold one of the characters of set? */
static bool strpbrk_n(const char *s, size_t n, const char *set)
{
	for (size_t i = 0; i < n; i++)
		if (strchr(set, s[i]))
			return true;
	return false;
}

static bool tok_is_fetcharg(const char *s, struct tok t)
{
	char c = s[t.start];

	if (c == '%') {
		/* %rax or %rax:TYPE is a register; %PROVIDER:NAME (globs
		 * allowed) a USDT probe */
		const char *colon = memchr(s + t.start, ':', t.end - t.start);

		return !colon || fetch_reg_lookup(s + t.start + 1, (size_t)(colon - s - t.start - 1));
	}
	if (c == '$' || c == '@' || c == '+' || c == '-')
		return true;
	/* NAME=, or a C expression through a pointer (r->f). A leading '*' or a
	 * '[' could start a glob, so such a token is a location. */
	for (size_t i = t.start; i < t.end; i++) {
		if (s[i] == '=')
			return true;
		if (s[i] == '-' && i + 2 < t.end && s[i + 1] == '>' &&
		    is_ident_start((unsigned char)s[i + 2]))
			return true;
		if (!is_ident((unsigned char)s[i]) && s[i] != '.' && s[i] != '[' && s[i] != ']' &&
		    s[i] != '-' && s[i] != '>')
			return false;	/* "ns::f(int x=...": a C++ location */
	}
	return false;
}

/* The first ':' that is not part of a "::" (C++ scope). */
static const char *lone_colon(const char *s, const char *end)
{
	for (const char *p = s; p < end; p++) {
		if (*p != ':')
			continue;
		if (p + 1 < end && p[1] == ':') {
			p++;
			continue;
		}
		return p;
	}
	return NULL;
}

/* '/' for Go's package paths ("go/parser.ParseFile") */
static bool sym_char_ok(int c)
{
	return is_ident(c) || strchr(".$@*?[]!^:~<>,&()-/ ", c) != NULL;
}

/* The length of a C++ operator's name at p ("operator<<", "operator()",
 * "operator new[]", "operator bool"), whose characters are not those of
 * the probe language; 0 if p does not start one. */
static size_t operator_len(const char *text, const char *p, const char *end)
{
	const char *q = p + 8;

	if (end - p < 9 || memcmp(p, "operator", 8) || (p > text && is_ident((unsigned char)p[-1])))
		return 0;
	if (q + 1 < end && q[0] == '(' && q[1] == ')')
		return 10;
	if (strchr("<>=!+-*/%&|^~,[", *q)) {
		while (q < end && *q && strchr("<>=!+-*/%&|^~,[]", *q))
			q++;
		return (size_t)(q - p);
	}
	if (*q != ' ')
		return 0;
	/* a conversion, new or delete: up to the parameters */
	while (q < end && (is_ident((unsigned char)*q) || strchr(" *&[]:<>", *q)))
		q++;
	while (q > p + 8 && q[-1] == ' ')
		q--;
	return (size_t)(q - p);
}

/* Where the location token starting at text[start] ends: at white space,
 * except inside a C++ parameter or template list ("ns::f(int, char const*)",
 * "std::vector<int, std::allocator<int> >::push_back"). */
static size_t loc_end(const char *text, size_t len, size_t start)
{
	size_t i = start;
	int depth = 0;

	while (i < len) {
		char c = text[i];
		size_t op;

		if (isspace((unsigned char)c)) {
			if (depth <= 0)
				break;
			i++;
			continue;
		}
		op = operator_len(text, text + i, text + len);
		if (op) {
			i += op;
			continue;
		}
		if (c == '(' || c == '<')
			depth++;
		else if ((c == ')' || c == '>') && depth > 0)
			depth--;
		i++;
	}
	return i;
}

/* %PROVIDER:NAME, both globs allowed */
static int parse_usdt(const char *text, const char *s, const char *end,
		      struct usc_probe_spec *spec, struct usc_parse_error *err)
{
	const char *p = s + 1, *colon = memchr(p, ':', (size_t)(end - p));

	if (!colon || colon == p || colon + 1 == end)
		return fail(err, USC_PERR_BAD_USDT, (size_t)(s - text));
	if ((size_t)(colon - p) >= sizeof(spec->provider) || (size_t)(end - colon - 1) >= USC_SYM_MAX)
		return fail(err, USC_PERR_BAD_USDT, (size_t)(s - text));
	for (const char *c = p; c < end; c++) {
		if (c == colon)
			continue;
		if (*c == '+' && c > colon)
			return fail(err, USC_PERR_USDT_OFFSET, (size_t)(c - text));
		if (!is_ident((unsigned char)*c) && !strchr("*?[]!-.", *c))
			return fail(err, USC_PERR_BAD_USDT, (size_t)(c - text));
	}
	memcpy(spec->provider, p, (size_t)(colon - p));
	memcpy(spec->symbol, colon + 1, (size_t)(end - colon - 1));
	spec->loc_kind = USC_LOC_USDT;
	spec->is_glob = strpbrk(spec->provider, "*?[") || strpbrk(spec->symbol, "*?[");
	if (spec->is_return)
		return fail(err, USC_PERR_USDT_RETURN, 0);
	return 0;
}

/* Does s[0..n) name a source file (file.c, src/x.cc, y.h ...)? */
static bool is_source_name(const char *s, size_t n)
{
	static const char *const exts[] = {".c", ".h", ".cc", ".cpp", ".cxx", ".hh", ".hpp",
					   ".C", ".S", ".s", ".go", ".rs", ".m", ".i"};

	for (size_t i = 0; i < sizeof(exts) / sizeof(exts[0]); i++) {
		size_t e = strlen(exts[i]);

		if (n > e && !memcmp(s + n - e, exts[i], e))
			return true;
	}
	return false;
}

static bool all_digits(const char *s, const char *end)
{
	if (s >= end)
		return false;
	for (; s < end; s++)
		if (!isdigit((unsigned char)*s))
			return false;
	return true;
}

/* FILE:LINE or FUNCTION:+N at s..end (the module, if any, already taken). */
static int parse_line_loc(const char *text, const char *s, const char *colon, const char *end,
			  struct usc_probe_spec *spec, struct usc_parse_error *err)
{
	const char *num = colon + 1;
	uint64_t line;

	spec->line_rel = *num == '+';
	if (spec->line_rel)
		num++;
	if (!all_digits(num, end) || !probe_parse_number(num, &line) || line == 0 ||
	    line > UINT32_MAX)
		return fail(err, USC_PERR_BAD_LINE, (size_t)(num - text));
	if ((size_t)(colon - s) >= USC_SYM_MAX)
		return fail(err, USC_PERR_BAD_SYMBOL, (size_t)(s - text));
	memcpy(spec->symbol, s, (size_t)(colon - s));
	spec->loc_kind = USC_LOC_LINE;
	spec->line = (uint32_t)line;
	spec->loc_pos = (uint32_t)(s - text);
	if (spec->is_return)
		return fail(err, USC_PERR_BAD_LINE, 0);
	return 0;
}

/* A Python name's byte: an identifier's (UTF-8 too), '.' between names,
 * '<' and '>' of <module>, <lambda>, <locals>, and a glob's. */
static bool py_char_ok(unsigned char c)
{
	return is_ident(c) || c >= 0x80 || strchr(".<>*?[]!-", c);
}

static bool py_glob(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (strchr("*?[", s[i]))
			return true;
	return false;
}

/* py:QUALNAME or py:MODULE:QUALNAME, s just after "py:". */
static int parse_python_loc(const char *text, const char *s, const char *end,
			    struct usc_probe_spec *spec, struct usc_parse_error *err)
{
	const char *colon = memchr(s, ':', (size_t)(end - s)), *q = colon ? colon + 1 : s;
	size_t mlen = colon ? (size_t)(colon - s) : 1;

	if (colon && (!mlen || mlen >= USC_MODULE_MAX))
		return fail(err, USC_PERR_BAD_PYTHON, (size_t)(s - text));
	if (q >= end || (size_t)(end - q) >= USC_SYM_MAX)
		return fail(err, USC_PERR_BAD_PYTHON, (size_t)(q - text));
	for (const char *c = s; c < end; c++)
		if (c != colon && !py_char_ok((unsigned char)*c))
			return fail(err, USC_PERR_BAD_PYTHON, (size_t)(c - text));
	memcpy(spec->module, colon ? s : "*", mlen);
	spec->module_pos = (uint32_t)(s - text);
	memcpy(spec->symbol, q, (size_t)(end - q));
	spec->loc_pos = (uint32_t)(q - text);
	spec->loc_kind = USC_LOC_PYTHON;
	spec->is_glob = (colon && py_glob(spec->module, mlen)) || py_glob(q, (size_t)(end - q));
	return 0;
}

static int parse_location(const char *text, struct tok t, struct usc_probe_spec *spec,
			  struct usc_parse_error *err)
{
	const char *s = text + t.start, *end = text + t.end;
	const char *colon = *s == '%' ? NULL : lone_colon(s, end);
	size_t pos = t.start;

	if (t.start >= t.end)
		return fail(err, USC_PERR_NO_LOCATION, t.start);
	if (end - s >= 3 && !memcmp(s, "py:", 3))
		return parse_python_loc(text, s + 3, end, spec, err);
	/* source lines: FILE:LINE, FUNCTION:+N, or MODULE: before either */
	if (colon) {
		const char *c2 = lone_colon(colon + 1, end);

		if (!c2 && colon > s &&
		    ((is_source_name(s, (size_t)(colon - s)) && all_digits(colon + 1, end)) ||
		     colon[1] == '+'))
			return parse_line_loc(text, s, colon, end, spec, err);
		if (c2 && c2 > colon + 1 &&
		    ((is_source_name(colon + 1, (size_t)(c2 - colon - 1)) &&
		      all_digits(c2 + 1, end)) || c2[1] == '+') &&
		    (size_t)(colon - s) < USC_MODULE_MAX && colon > s) {
			memcpy(spec->module, s, (size_t)(colon - s));
			spec->module_pos = (uint32_t)t.start;
			return parse_line_loc(text, colon + 1, c2, end, spec, err);
		}
	}
	if (colon) {
		size_t mlen = (size_t)(colon - s);

		if (mlen == 0 || mlen >= USC_MODULE_MAX)
			return fail(err, USC_PERR_BAD_MODULE, pos);
		memcpy(spec->module, s, mlen);
		spec->module_pos = (uint32_t)pos;
		s = colon + 1;
		pos = (size_t)(s - text);
		if (s >= end)
			return fail(err, USC_PERR_NO_LOCATION, pos);
	}
	spec->loc_pos = (uint32_t)pos;

	if (*s == '%') {
		const char *r = s + 1;

		while (r < end && isalnum((unsigned char)*r))
			r++;
		if (fetch_reg_lookup(s + 1, (size_t)(r - s - 1)))
			return fail(err, USC_PERR_BAD_SYMBOL, pos);	/* a register */
		return parse_usdt(text, s, end, spec, err);
	}
	if (isdigit((unsigned char)*s)) {
		size_t used = probe_parse_number(s, &spec->address);

		if (!used)
			return fail(err, USC_PERR_BAD_NUMBER, pos);
		if (s + used != end)
			return fail(err, USC_PERR_TRAILING, pos + used);
		spec->loc_kind = USC_LOC_ADDRESS;
		return 0;
	}

	/* SYMBOL[+OFFSET]: the '+' of an offset is outside a C++ name's lists
	 * and operators; glob characters count before its parameters */
	const char *plus = NULL, *c = s;
	bool glob = false, in_params = false;
	int depth = 0;

	if (!(is_ident_start((unsigned char)*s) || strchr(".*?[", *s) ||
	      (end - s > 21 && !memcmp(s, "(anonymous namespace)", 21))))
		return fail(err, USC_PERR_BAD_SYMBOL, pos);
	while (c < end && !plus) {
		size_t op = operator_len(text, c, end);

		if (op) {
			c += op;
			continue;
		}
		if (!sym_char_ok((unsigned char)*c) && !(*c == '+' && depth == 0))
			return fail(err, USC_PERR_BAD_SYMBOL, (size_t)(c - text));
		if (*c == '+' && depth == 0)
			plus = c;
		else if (*c == '(' && !(end - c >= 21 && !memcmp(c, "(anonymous namespace)", 21)) &&
			 !(c > s && c[-1] == '.'))	/* Go's main.(*T).m: a receiver */
			in_params = true;
		if (*c == '(' || *c == '<')
			depth++;
		else if ((*c == ')' || *c == '>') && depth > 0)
			depth--;
		else if (depth == 0 && !in_params && strchr("*?[", *c))
			glob = true;
		c++;
	}

	const char *sym_end = plus ? plus : end;
	size_t slen = (size_t)(sym_end - s);

	if (slen == 0 || slen >= USC_SYM_MAX)
		return fail(err, USC_PERR_BAD_SYMBOL, pos);
	memcpy(spec->symbol, s, slen);
	spec->loc_kind = USC_LOC_SYMBOL;
	spec->is_glob = glob;
	if (plus) {
		size_t used = probe_parse_number(plus + 1, &spec->offset);

		if (!used)
			return fail(err, USC_PERR_BAD_OFFSET, (size_t)(plus + 1 - text));
		if (plus + 1 + used != end)
			return fail(err, USC_PERR_TRAILING, (size_t)(plus + 1 + used - text));
		spec->has_offset = true;
	}
	return 0;
}

static bool event_name_ok(const char *s, size_t n)
{
	if (n == 0 || n >= USC_NAME_MAX || !is_ident_start((unsigned char)s[0]))
		return false;
	for (size_t i = 1; i < n; i++)
		if (!is_ident((unsigned char)s[i]))
			return false;
	return true;
}

/* The next whitespace-separated token at or after *i; false at the end. */
static bool next_tok(const char *text, size_t len, size_t *i, struct tok *t)
{
	while (*i < len && isspace((unsigned char)text[*i]))
		(*i)++;
	if (*i >= len)
		return false;
	t->start = *i;
	while (*i < len && !isspace((unsigned char)text[*i]))
		(*i)++;
	t->end = *i;
	return true;
}

int usc_probe_parse(const char *text, struct usc_probe_spec *spec,
		    struct usc_parse_error *err)
{
	size_t len = strlen(text), i = 0;
	struct tok t0, t1, loc, t;
	bool have_t1, t1_used = false;

	memset(spec, 0, sizeof(*spec));
	if (err)
		*err = (struct usc_parse_error){0};
	if (len >= USC_SPEC_MAX)
		return fail(err, USC_PERR_TOO_LONG, USC_SPEC_MAX - 1);
	memcpy(spec->text, text, len);

	if (!next_tok(text, len, &i, &t0))
		return fail(err, USC_PERR_EMPTY, 0);
	t0.end = i = loc_end(text, len, t0.start);	/* it may be the location */
	have_t1 = next_tok(text, len, &i, &t1);

	const char *s0 = text + t0.start;
	size_t n0 = t0.end - t0.start;

	loc = t0;
	if (n0 == 1 && (s0[0] == 'p' || s0[0] == 'r')) {
		spec->is_return = s0[0] == 'r';
		if (!have_t1)
			return fail(err, USC_PERR_NO_LOCATION, len);
		t1.end = i = loc_end(text, len, t1.start);
		loc = t1;
		t1_used = true;
	} else if (n0 >= 2 && (s0[0] == 'p' || s0[0] == 'r') && s0[1] == ':' &&
		   !(n0 >= 3 && s0[2] == ':')) {	/* p::x is a C++ scope */
		struct tok rest = {t0.start + 2, t0.end};
		bool has_colon = memchr(text + rest.start, ':', rest.end - rest.start) != NULL;

		spec->is_return = s0[0] == 'r';
		/* p:EVENT LOCATION, unless what follows p: cannot be an event but
		 * is a location's name (a Go name, a C++ signature, a path, a
		 * glob): r:main.process id is the location main.process and the
		 * argument id */
		if (!has_colon && have_t1 && !tok_is_fetcharg(text, t1) &&
		    (event_name_ok(text + rest.start, rest.end - rest.start) ||
		     !strpbrk_n(text + rest.start, rest.end - rest.start, "./(*?["))) {
			/* p:EVENT LOCATION */
			if (!event_name_ok(text + rest.start, rest.end - rest.start))
				return fail(err, USC_PERR_BAD_EVENT, rest.start);
			memcpy(spec->event, text + rest.start, rest.end - rest.start);
			spec->event_given = true;
			t1.end = i = loc_end(text, len, t1.start);
			loc = t1;
			t1_used = true;
		} else {
			if (rest.start == rest.end)
				return fail(err, USC_PERR_NO_LOCATION, rest.start);
			loc = rest;
		}
	} else if (tok_is_fetcharg(text, t0)) {
		return fail(err, USC_PERR_NO_LOCATION, t0.start);
	}

	if (parse_location(text, loc, spec, err))
		return -EINVAL;

	bool more = have_t1 && !t1_used;

	t = t1;
	while (more || next_tok(text, len, &i, &t)) {
		struct usc_fetcharg *a;

		more = false;
		if (t.end - t.start == 2 && !memcmp(text + t.start, "if", 2))
			/* the rest is the condition */
			return probe_parse_filter(text, t.end, len, spec, &spec->filter, err);
		if (spec->nargs >= USC_MAX_ARGS)
			return fail(err, USC_PERR_TOO_MANY_ARGS, t.start);
		a = &spec->args[spec->nargs];
		if (parse_fetcharg(text, t.start, t.end, spec->is_return,
				   spec->loc_kind == USC_LOC_USDT ? 12 : 9, a, err))
			return -EINVAL;
		if (!a->named && a->insn[0].op == FOP_VAR) {
			/* r->next->id is named r_next_id */
			size_t vp = (size_t)(a->insn[0].imm & 0xffffffff), vl = (size_t)(a->insn[0].imm >> 32), o = 0;

			for (size_t q = vp; q < vp + vl && o + 1 < sizeof(a->name); q++) {
				char ch = text[q];

				if (is_ident((unsigned char)ch))
					a->name[o++] = ch;
				else if (o && a->name[o - 1] != '_' && ch != ']')
					a->name[o++] = '_';
			}
			while (o && a->name[o - 1] == '_')
				o--;
			a->name[o] = 0;
			if (!arg_name_ok(a->name, o))	/* "_", a reserved prefix */
				snprintf(a->name, sizeof(a->name), "arg%u", spec->nargs + 1);
		} else if (!a->named && a->insn[0].op != FOP_PARAMS && a->insn[0].op != FOP_USTACK &&
			   a->insn[0].op != FOP_PYSTACK) {
			snprintf(a->name, sizeof(a->name), "arg%u", spec->nargs + 1);
		}
		for (unsigned k = 0; k < spec->nargs; k++) {
			if (!strcmp(spec->args[k].name, a->name))
				return fail(err, USC_PERR_DUP_ARG_NAME, t.start);
			if (a->insn[0].op == FOP_USTACK && spec->args[k].insn[0].op == FOP_USTACK)
				return fail(err, USC_PERR_STACK_TWICE, t.start);
			if (a->insn[0].op == FOP_PYSTACK && spec->args[k].insn[0].op == FOP_PYSTACK)
				return fail(err, USC_PERR_PYSTACK_TWICE, t.start);
		}
		spec->nargs++;
	}
	return 0;
}

/* ---- back to text ------------------------------------------------------- */


/* Back to probe-language text that parses to the same program: NAME=EXPR:TYPE
 * with 64-bit register names (a sub-register's width is in its type). */
int probe_fetcharg_format(const struct usc_fetcharg *arg, char *buf, size_t len)
{
	int ret = fetch_render(arg, &fetch_syntax_probe, buf, len);

	return ret ? ret : (int)strlen(buf);
}
