/* The script lexer, bpftrace's (src/lexer.l): integers (decimal, hex,
 * octal, 1_000, 1e6, with u/l suffixes), strings with C escapes, @maps,
 * $variables and $N parameters, comments, the #! line and preprocessor
 * lines, and the operators. */
#include <ctype.h>
#include <errno.h>
#include <string.h>

#include "script/ast.h"
#include "script/lex.h"

void lex_init(struct lexer *lx, const char *src, size_t n, struct arena *a,
	      struct script_diag *diag)
{
	memset(lx, 0, sizeof(*lx));
	lx->src = src;
	lx->n = n;
	lx->arena = a;
	lx->diag = diag;
}

static int at(const struct lexer *lx, size_t k)
{
	return lx->i + k < lx->n ? (unsigned char)lx->src[lx->i + k] : 0;
}

size_t lex_skip(struct lexer *lx)
{
	for (;;) {
		int c = at(lx, 0);

		if (c && isspace(c)) {
			lx->i++;
		} else if (c == '/' && at(lx, 1) == '/') {
			while (lx->i < lx->n && lx->src[lx->i] != '\n')
				lx->i++;
		} else if (c == '/' && at(lx, 1) == '*') {
			size_t start = lx->i;

			lx->i += 2;
			while (lx->i < lx->n && !(lx->src[lx->i] == '*' && at(lx, 1) == '/'))
				lx->i++;
			if (lx->i >= lx->n) {
				if (!lx->failed)
					script_fail(lx->diag, (uint32_t)start, 2,
						    "end of file in a comment");
				lx->failed = 1;
				return lx->i;
			}
			lx->i += 2;
		} else if (c == '#' && at(lx, 1) == '!' &&
			   (lx->i == 0 || lx->src[lx->i - 1] == '\n')) {
			while (lx->i < lx->n && lx->src[lx->i] != '\n')
				lx->i++;	/* #!/usr/bin/env bpftrace */
		} else {
			return lx->i;
		}
	}
}

static struct token tok(enum tok t, size_t pos, size_t len)
{
	return (struct token){.t = t, .pos = (uint32_t)pos, .len = (uint32_t)len};
}

static struct token lex_fail(struct lexer *lx, size_t pos, size_t len, const char *msg)
{
	if (!lx->failed)
		script_fail(lx->diag, (uint32_t)pos, (uint32_t)len, "%s", msg);
	lx->failed = 1;
	return tok(T_ERROR, pos, len);
}

static int is_id(int c)
{
	return isalnum(c) || c == '_';
}

/* An integer: decimal with _ separators, 0x hex, 0 octal, NeM; u, l, ll
 * suffixes. */
static struct token lex_int(struct lexer *lx)
{
	size_t start = lx->i;
	uint64_t v = 0, e = 0;
	char digits[64];
	size_t nd = 0;
	unsigned base = 10;

	if (at(lx, 0) == '0' && (at(lx, 1) == 'x' || at(lx, 1) == 'X')) {
		base = 16;
		lx->i += 2;
		if (!isxdigit(at(lx, 0)))
			return lex_fail(lx, start, 2, "expected hex digits after 0x");
	}
	while (lx->i < lx->n && (isxdigit(at(lx, 0)) || at(lx, 0) == '_')) {
		int c = at(lx, 0);

		if (base == 10 && !isdigit(c) && c != '_' && !((c == 'e' || c == 'E') && nd))
			break;
		if (base == 10 && (c == 'e' || c == 'E'))
			break;
		if (c != '_' && nd < sizeof(digits) - 1)
			digits[nd++] = (char)c;
		lx->i++;
	}
	if (base == 10 && nd > 1 && digits[0] == '0')
		base = 8;
	for (size_t k = 0; k < nd; k++) {
		unsigned dgt = isdigit((unsigned char)digits[k]) ? (unsigned)(digits[k] - '0') :
			       (unsigned)(tolower((unsigned char)digits[k]) - 'a' + 10);

		if (dgt >= base)
			return lex_fail(lx, start, lx->i - start, "a digit out of its base");
		if (v > (UINT64_MAX - dgt) / base)
			return lex_fail(lx, start, lx->i - start, "integer out of range");
		v = v * base + dgt;
	}
	if (base == 10 && (at(lx, 0) == 'e' || at(lx, 0) == 'E') && isdigit(at(lx, 1))) {
		lx->i++;
		while (isdigit(at(lx, 0))) {
			e = e * 10 + (uint64_t)(at(lx, 0) - '0');
			lx->i++;
			if (e > 40)
				return lex_fail(lx, start, lx->i - start, "integer out of range");
		}
		while (e--) {
			if (v > UINT64_MAX / 10)
				return lex_fail(lx, start, lx->i - start, "integer out of range");
			v *= 10;
		}
	}
	/* u, l, ll, ul, ull suffixes */
	if (at(lx, 0) == 'u' || at(lx, 0) == 'U')
		lx->i++;
	if (at(lx, 0) == 'l' || at(lx, 0) == 'L')
		lx->i++;
	if (at(lx, 0) == 'l' || at(lx, 0) == 'L')
		lx->i++;
	if (is_id(at(lx, 0)))
		return lex_fail(lx, start, lx->i - start + 1, "bad integer");
	struct token t = tok(T_INT, start, lx->i - start);

	t.ival = (int64_t)v;
	return t;
}

static struct token lex_string(struct lexer *lx)
{
	size_t start = lx->i++;
	char *buf = arena_alloc(lx->arena, lx->n - start + 1);
	uint32_t n = 0;

	if (!buf)
		return lex_fail(lx, start, 1, "out of memory");
	for (;;) {
		int c = at(lx, 0);

		if (!c || c == '\n')
			return lex_fail(lx, start, lx->i - start, "unterminated string");
		lx->i++;
		if (c == '"')
			break;
		if (c != '\\') {
			buf[n++] = (char)c;
			continue;
		}
		c = at(lx, 0);
		lx->i++;
		switch (c) {
		case 'n': buf[n++] = '\n'; break;
		case 't': buf[n++] = '\t'; break;
		case 'r': buf[n++] = '\r'; break;
		case '"': buf[n++] = '"'; break;
		case '\\': buf[n++] = '\\'; break;
		case 'x':
		case 'X': {
			unsigned v = 0, k = 0;

			while (k < 2 && isxdigit(at(lx, 0))) {
				int h = at(lx, 0);

				v = v * 16 + (unsigned)(isdigit(h) ? h - '0' : tolower(h) - 'a' + 10);
				lx->i++;
				k++;
			}
			if (!k)
				return lex_fail(lx, lx->i - 2, 2, "invalid escape: \\x takes hex digits");
			buf[n++] = (char)v;
			break;
		}
		default:
			if (c >= '0' && c <= '7') {
				unsigned v = (unsigned)(c - '0'), k = 1;

				while (k < 3 && at(lx, 0) >= '0' && at(lx, 0) <= '7') {
					v = v * 8 + (unsigned)(at(lx, 0) - '0');
					lx->i++;
					k++;
				}
				if (v > 255)
					return lex_fail(lx, lx->i - k - 1, k + 1,
							"octal escape out of range");
				buf[n++] = (char)v;
				break;
			}
			return lex_fail(lx, lx->i - 2, 2, "invalid escape character");
		}
	}
	buf[n] = 0;
	struct token t = tok(T_STR, start, lx->i - start);

	t.str = buf;
	t.slen = n;
	return t;
}

static const struct {
	const char *s;
	enum tok t;
	int op;
} ops[] = {
	{"<<=", T_OPASSIGN, T_SHL}, {">>=", T_OPASSIGN, T_SHR},
	{"+=", T_OPASSIGN, T_PLUS}, {"-=", T_OPASSIGN, T_MINUS}, {"*=", T_OPASSIGN, T_MUL},
	{"/=", T_OPASSIGN, T_DIV}, {"%=", T_OPASSIGN, T_MOD}, {"&=", T_OPASSIGN, T_BAND},
	{"|=", T_OPASSIGN, T_BOR}, {"^=", T_OPASSIGN, T_BXOR},
	{"==", T_EQ, 0}, {"!=", T_NE, 0}, {"<=", T_LE, 0}, {">=", T_GE, 0},
	{"<<", T_SHL, 0}, {">>", T_SHR, 0}, {"&&", T_LAND, 0}, {"||", T_LOR, 0},
	{"++", T_INC, 0}, {"--", T_DEC, 0}, {"->", T_ARROW, 0},
	{"{", T_LBRACE, 0}, {"}", T_RBRACE, 0}, {"(", T_LPAREN, 0}, {")", T_RPAREN, 0},
	{"[", T_LBRACKET, 0}, {"]", T_RBRACKET, 0}, {";", T_SEMI, 0}, {",", T_COMMA, 0},
	{":", T_COLON, 0}, {"?", T_QUES, 0}, {".", T_DOT, 0}, {"=", T_ASSIGN, 0},
	{"+", T_PLUS, 0}, {"-", T_MINUS, 0}, {"*", T_MUL, 0}, {"/", T_DIV, 0},
	{"%", T_MOD, 0}, {"&", T_BAND, 0}, {"|", T_BOR, 0}, {"^", T_BXOR, 0},
	{"~", T_BNOT, 0}, {"!", T_LNOT, 0}, {"<", T_LT, 0}, {">", T_GT, 0},
};

static const struct {
	const char *s;
	enum tok t;
} keywords[] = {
	{"if", T_IF}, {"else", T_ELSE}, {"while", T_WHILE}, {"unroll", T_UNROLL},
	{"return", T_RETURN}, {"break", T_BREAK}, {"continue", T_CONTINUE}, {"for", T_FOR},
	{"struct", T_STRUCT}, {"union", T_STRUCT}, {"enum", T_STRUCT},
};

struct token lex_next(struct lexer *lx)
{
	size_t start;
	int c;

	if (lx->failed)
		return tok(T_ERROR, lx->i, 0);
	start = lex_skip(lx);
	if (lx->failed)
		return tok(T_ERROR, start, 0);
	c = at(lx, 0);
	if (!c) {
		if (lx->i < lx->n)
			return lex_fail(lx, start, 1, "a NUL byte in the program");
		return tok(T_EOF, lx->n, 0);
	}
	if (c == '#') {
		/* #include <linux/...>, #define: C for kernel types, which
		 * user-space probes read by DWARF instead */
		while (lx->i < lx->n && lx->src[lx->i] != '\n')
			lx->i++;
		return tok(T_PREPROC, start, lx->i - start);
	}
	if (isdigit(c))
		return lex_int(lx);
	if (c == '"')
		return lex_string(lx);
	if (isalpha(c) || c == '_') {
		while (is_id(at(lx, 0)))
			lx->i++;
		size_t len = lx->i - start;

		for (size_t k = 0; k < sizeof(keywords) / sizeof(keywords[0]); k++)
			if (strlen(keywords[k].s) == len && !memcmp(keywords[k].s, lx->src + start, len))
				return tok(keywords[k].t, start, len);
		struct token t = tok(T_IDENT, start, len);

		t.text = arena_strndup(lx->arena, lx->src + start, len);
		return t.text ? t : lex_fail(lx, start, len, "out of memory");
	}
	if (c == '@' || (c == '$' && (isalpha(at(lx, 1)) || at(lx, 1) == '_'))) {
		lx->i++;
		while (is_id(at(lx, 0)))
			lx->i++;
		if (c == '@' && lx->i - start > 1 && isdigit((unsigned char)lx->src[start + 1]))
			return lex_fail(lx, start, lx->i - start, "a map's name starts with a letter or _");
		struct token t = tok(c == '@' ? T_MAP : T_VAR, start, lx->i - start);

		t.text = arena_strndup(lx->arena, lx->src + start + 1, lx->i - start - 1);
		return t.text ? t : lex_fail(lx, start, lx->i - start, "out of memory");
	}
	if (c == '$' && isdigit(at(lx, 1))) {
		uint64_t v = 0;

		lx->i++;
		while (isdigit(at(lx, 0))) {
			v = v * 10 + (uint64_t)(at(lx, 0) - '0');
			lx->i++;
			if (v > 1000000)
				return lex_fail(lx, start, lx->i - start, "parameter out of range");
		}
		if (v == 0)
			return lex_fail(lx, start, lx->i - start,
					"positional parameters start at $1");
		struct token t = tok(T_PARAM, start, lx->i - start);

		t.ival = (int64_t)v;
		return t;
	}
	if (c == '$' && at(lx, 1) == '#') {
		lx->i += 2;
		return tok(T_PARAMCOUNT, start, 2);
	}
	for (size_t k = 0; k < sizeof(ops) / sizeof(ops[0]); k++) {
		size_t len = strlen(ops[k].s);

		if (lx->i + len <= lx->n && !memcmp(lx->src + lx->i, ops[k].s, len)) {
			struct token t = tok(ops[k].t, start, len);

			t.op = ops[k].op;
			lx->i += len;
			return t;
		}
	}
	return lex_fail(lx, start, 1, "unexpected character");
}

int lex_attach(struct lexer *lx, uint32_t *pos, uint32_t *len)
{
	size_t start = lex_skip(lx);

	if (lx->failed || lx->i >= lx->n)
		return -1;
	while (lx->i < lx->n) {
		int c = at(lx, 0);

		if (isspace(c) || c == ',' || c == '{')
			break;
		if (c == '/' && (at(lx, 1) == '/' || at(lx, 1) == '*') && lx->i > start &&
		    lx->src[lx->i - 1] != ':')
			break;	/* a comment */
		if (c == '"') {
			lx->i++;
			while (lx->i < lx->n && lx->src[lx->i] != '"' && lx->src[lx->i] != '\n')
				lx->i += lx->src[lx->i] == '\\' ? 2 : 1;
			if (lx->i >= lx->n || lx->src[lx->i] != '"') {
				lex_fail(lx, start, lx->i - start, "unterminated string");
				return -1;
			}
		}
		lx->i++;
	}
	if (lx->i == start)
		return -1;
	*pos = (uint32_t)start;
	*len = (uint32_t)(lx->i - start);
	return 0;
}

const char *lex_tok_name(enum tok t)
{
	static const char *const names[] = {
		[T_EOF] = "the end of the program", [T_INT] = "an integer",
		[T_STR] = "a string", [T_IDENT] = "a name", [T_MAP] = "a map",
		[T_VAR] = "a variable", [T_PARAM] = "a parameter", [T_PARAMCOUNT] = "'$#'",
		[T_IF] = "'if'", [T_ELSE] = "'else'", [T_WHILE] = "'while'",
		[T_UNROLL] = "'unroll'", [T_RETURN] = "'return'", [T_BREAK] = "'break'",
		[T_CONTINUE] = "'continue'", [T_FOR] = "'for'", [T_LBRACE] = "'{'",
		[T_RBRACE] = "'}'", [T_LPAREN] = "'('", [T_RPAREN] = "')'",
		[T_LBRACKET] = "'['", [T_RBRACKET] = "']'", [T_SEMI] = "';'",
		[T_COMMA] = "','", [T_COLON] = "':'", [T_QUES] = "'?'", [T_DOT] = "'.'",
		[T_ARROW] = "'->'", [T_ASSIGN] = "'='", [T_OPASSIGN] = "an assignment",
		[T_INC] = "'++'", [T_DEC] = "'--'", [T_PLUS] = "'+'", [T_MINUS] = "'-'",
		[T_MUL] = "'*'", [T_DIV] = "'/'", [T_MOD] = "'%'", [T_BAND] = "'&'",
		[T_BOR] = "'|'", [T_BXOR] = "'^'", [T_BNOT] = "'~'", [T_LNOT] = "'!'",
		[T_SHL] = "'<<'", [T_SHR] = "'>>'", [T_EQ] = "'=='", [T_NE] = "'!='",
		[T_LT] = "'<'", [T_LE] = "'<='", [T_GT] = "'>'", [T_GE] = "'>='",
		[T_LAND] = "'&&'", [T_LOR] = "'||'", [T_PREPROC] = "a # line",
		[T_STRUCT] = "a struct", [T_ERROR] = "a mistake",
	};

	return (unsigned)t < sizeof(names) / sizeof(names[0]) && names[t] ? names[t] : "a token";
}
