/* A script's syntax tree, as the parser (parse.c) makes it and the passes
 * after it annotate it: sema.c its types and names, lower.c its inputs,
 * compile.c its code. Every node has its position in the source (a byte
 * offset and a length) for the caret of an error. Nodes live in one arena,
 * freed with the tree. */
#ifndef USC_SCRIPT_AST_H
#define USC_SCRIPT_AST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum ast_kind {
	/* expressions */
	N_INT,		/* ival */
	N_STR,		/* str, slen */
	N_BUILTIN,	/* name: pid, arg0, retval, ... */
	N_VAR,		/* $name */
	N_MAP,		/* @name (name "" for @), keys in a (a list), nkeys */
	N_CALL,		/* name(args): args in a (a list) */
	N_BINOP,	/* a op b */
	N_UNOP,		/* op a */
	N_TERNARY,	/* a ? b : c */
	N_CAST,		/* (name[*[*]]) a: ptr stars */
	N_FIELD,	/* a.name, a->name (arrow) */
	N_TUPLEIDX,	/* a.ival */
	N_INDEX,	/* a[b] */
	N_TUPLE,	/* (a, ...): the elements in a */
	N_PARAM,	/* $N: ival */
	N_PARAMCOUNT,	/* $# */
	N_INCDEC,	/* ++a, a++, --a, a-- : op '+'/'-', post */
	/* statements */
	N_EXPRSTMT,	/* a */
	N_ASSIGN,	/* a = b (a map or a variable), op: a compound operator or 0 */
	N_IF,		/* if (a) b else c (lists) */
	N_WHILE,	/* while (a) b */
	N_UNROLL,	/* unroll (ival) b */
	N_RETURN,
	N_BREAK,
	N_CONTINUE,
};

/* Binary and unary operators: their tokens (T_* in lex.h). */

/* A value's type, as bpftrace has them. */
enum ty_kind {
	TY_NONE = 0,	/* not decided yet */
	TY_INT,		/* size bytes, sign; ptr: a pointer to such an int */
	TY_STR,		/* a string (the program's strlen) */
	TY_BUF,		/* buf(): bytes with a length */
	TY_TUPLE,	/* elems */
	TY_USYM,	/* usym(): an address in a process */
	TY_USTACK,	/* ustack: a stack */
	TY_FUNC,	/* func: the probed function */
	TY_PROBE,	/* probe: the probe's name */
	TY_TSTAMP,	/* strftime(): a time, shown with a format (fmt) */
	TY_AGG,		/* count(), hist()...: agg (enum script_vk); only in a map */
	TY_VOID,	/* printf() and the like: no value */
	TY_STACKMODE,	/* the words bpftrace and perf in ustack(MODE) */
};

struct ty {
	uint8_t kind;		/* enum ty_kind */
	uint8_t size;		/* TY_INT: 1, 2, 4 or 8 */
	uint8_t sign;
	uint8_t ptr;		/* TY_INT: a pointer to it (1), to a pointer (2) */
	uint8_t agg;		/* TY_AGG: enum script_vk */
	uint8_t nelem;		/* TY_TUPLE */
	uint16_t fmt;		/* TY_TSTAMP: the format's string; TY_USTACK: frames */
	int64_t lmin, lmax, lstep;	/* TY_AGG lhist */
	struct ty *elem;	/* TY_TUPLE: nelem of them (the arena's) */
};

struct ast {
	uint8_t kind;		/* enum ast_kind */
	uint8_t post;		/* N_INCDEC: a++ */
	uint8_t arrow;		/* N_FIELD: -> */
	uint8_t ptr;		/* N_CAST: stars */
	int op;			/* N_BINOP, N_UNOP, N_INCDEC, N_ASSIGN: the operator token */
	uint32_t pos, len;	/* in the source */
	struct ast *a, *b, *c;
	struct ast *next;	/* the next of a list (arguments, keys, statements) */
	int64_t ival;
	char *name;		/* identifiers, builtins, calls, maps (without @),
				 * variables (without $), cast types */
	char *str;		/* N_STR: its bytes (NUL-terminated, slen of them) */
	uint32_t slen;
	/* sema.c */
	struct ty ty;
	int sym;		/* N_MAP: the map's index; N_VAR: the variable's */
	/* lower.c: an expression the probe's site fetches (fetch.h): its
	 * input's index, or -1 */
	int input;
};

/* One attach point, as written: "uprobe:/bin/bash:readline". */
struct ast_attach {
	char *text;
	uint32_t pos, len;
	struct ast_attach *next;
};

struct ast_probe {
	struct ast_attach *attach;
	struct ast *pred;	/* /pred/, or NULL */
	struct ast *body;	/* its statements (a list) */
	uint32_t pos, len;	/* the attach points' text */
	struct ast_probe *next;
};

struct ast_program {
	struct ast_probe *probes;
	size_t nprobes;
};

/* An arena the tree's nodes and strings are in. */
struct arena;
void *arena_alloc(struct arena *a, size_t n);
char *arena_strndup(struct arena *a, const char *s, size_t n);
struct arena *arena_new(void);
void arena_free(struct arena *a);

#endif
