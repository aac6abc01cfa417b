/* The script lexer: bpftrace's tokens, each with its place in the source.
 * Attach points are not tokens: the parser reads them as raw text
 * (lex_attach), as they hold paths and globs. */
#ifndef USC_SCRIPT_LEX_H
#define USC_SCRIPT_LEX_H

#include <stddef.h>
#include <stdint.h>

#include "script/script.h"

enum tok {
	T_EOF = 0,
	T_INT,		/* ival */
	T_STR,		/* str, slen: escapes done */
	T_IDENT,	/* names, builtins, calls, keywords other than those below */
	T_MAP,		/* @name or @ (text: the name) */
	T_VAR,		/* $name */
	T_PARAM,	/* $N */
	T_PARAMCOUNT,	/* $# */
	T_IF, T_ELSE, T_WHILE, T_UNROLL, T_RETURN, T_BREAK, T_CONTINUE, T_FOR,
	T_LBRACE, T_RBRACE, T_LPAREN, T_RPAREN, T_LBRACKET, T_RBRACKET,
	T_SEMI, T_COMMA, T_COLON, T_QUES, T_DOT, T_ARROW,
	T_ASSIGN,	/* = */
	T_OPASSIGN,	/* += -= ... : op the operator */
	T_INC, T_DEC,
	T_PLUS, T_MINUS, T_MUL, T_DIV, T_MOD,
	T_BAND, T_BOR, T_BXOR, T_BNOT, T_LNOT,
	T_SHL, T_SHR,
	T_EQ, T_NE, T_LT, T_LE, T_GT, T_GE,
	T_LAND, T_LOR,
	T_PREPROC,	/* a line starting with # (not #!): #include, #define */
	T_STRUCT,	/* struct, union, enum */
	T_ERROR,
};

struct token {
	enum tok t;
	int op;			/* T_OPASSIGN: the operator's token */
	uint32_t pos, len;
	int64_t ival;
	char *text;		/* T_IDENT, T_MAP, T_VAR: the name (in the lexer's buffer) */
	char *str;		/* T_STR */
	uint32_t slen;
};

struct lexer {
	const char *src;
	size_t n, i;
	struct arena *arena;
	struct script_diag *diag;
	int failed;
};

void lex_init(struct lexer *lx, const char *src, size_t n, struct arena *a,
	      struct script_diag *diag);
/* The next token. A mistake: T_ERROR, with lx->diag filled. */
struct token lex_next(struct lexer *lx);
/* Skip blanks and comments; the offset of what follows. */
size_t lex_skip(struct lexer *lx);
/* An attach point's raw text at the current position, up to a blank, ',',
 * '{' or a predicate's '/' after a blank: 0 with *pos and *len, or -1
 * (none there). Quoted parts ("...") are taken whole. */
int lex_attach(struct lexer *lx, uint32_t *pos, uint32_t *len);
/* A token's name, for messages: "'+'", "an integer". */
const char *lex_tok_name(enum tok t);

#endif
