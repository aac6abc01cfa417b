/* The probe language: `[p|r][:EVENT] LOCATION [FETCHARG ...]` -> usc_probe_spec.
 *
 * The parser never writes into its input and never allocates: a spec is one
 * self-contained struct. Errors carry the byte offset of the mistake so the
 * CLI can print a caret under it. */
#ifndef USC_PROBE_PROBE_H
#define USC_PROBE_PROBE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "probe/fetch.h"

#define USC_MAX_ARGS 32
#define USC_NAME_MAX 64		/* event and argument names */
#define USC_SYM_MAX 512		/* symbol, glob or C++ name */
#define USC_MODULE_MAX 4096
#define USC_SPEC_MAX 4096	/* longest probe text accepted */

/* One table of parse errors (as the kernel's trace_probe does). */
#define USC_PARSE_ERRORS(X)                                                    \
	X(OK, "no error")                                                      \
	X(EMPTY, "empty probe")                                                \
	X(TOO_LONG, "probe text is too long")                                  \
	X(BAD_KIND, "expected 'p' or 'r' before ':'")                          \
	X(BAD_EVENT, "expected an event name ([A-Za-z_][A-Za-z0-9_]*)")        \
	X(NO_LOCATION, "expected a location: SYMBOL, SYMBOL+OFFSET or ADDRESS") \
	X(BAD_MODULE, "expected a module name or path before ':'")             \
	X(BAD_SYMBOL, "expected a symbol name or glob")                        \
	X(BAD_NUMBER, "expected a number (decimal, 0x hex or 0 octal)")        \
	X(BAD_OFFSET, "expected an offset after '+'")                          \
	X(TRAILING, "unexpected text after the location")                      \
	X(TOO_MANY_ARGS, "too many fetch arguments")                           \
	X(BAD_ARG_NAME, "expected an argument name ([A-Za-z_][A-Za-z0-9_]*)")  \
	X(DUP_ARG_NAME, "an argument of this name already exists")             \
	X(BAD_FETCHARG, "expected %REG, $argN, $retval, $stackN, $stack, $comm, $ustack, $pystack, @ADDR, @+OFFSET or +OFFS(EXPR)") \
	X(BAD_REG, "unknown register")                                         \
	X(BAD_ARG_INDEX, "$argN takes N from 1 to 6 (9 on a Go function, 12 on a USDT probe); $retvalN from 1 to 9") \
	X(BAD_USDT, "expected %PROVIDER:NAME")                                 \
	X(USDT_RETURN, "a USDT probe fires at its site: 'r' does not apply")   \
	X(USDT_OFFSET, "a USDT probe takes no +OFFSET")                        \
	X(RETVAL_ON_ENTRY, "$retval needs a return probe ('r:')")              \
	X(BAD_VAR, "unknown $-variable")                                       \
	X(BAD_DEREF, "expected '(' after the dereference offset")              \
	X(NO_CLOSE_PAREN, "expected ')'")                                      \
	X(DEREF_TOO_DEEP, "dereferences nested too deeply")                    \
	X(BAD_TYPE, "expected a type: u8..u64, s8..s64, x8..x64, string, ustring, symbol or b<width>@<offset>/<size>") \
	X(BAD_BITFIELD, "expected a bitfield b<width>@<offset>/<container size 8|16|32|64>") \
	X(COMM_TYPE, "$comm is a string; only :string fits it")                \
	X(STRING_OF_STRING, "this expression is already a string")             \
	X(BAD_SPACE, "expected a space between fetch arguments")                \
	X(BAD_VAR_EXPR, "expected a variable, then ->field, .field or [N]")   \
	X(PARAMS_ALONE, "$params stands alone: no name, type or dereference") \
	X(BAD_LINE, "expected a line number (FILE:LINE or FUNCTION:+N)")      \
	X(FILTER_EMPTY, "expected a condition after 'if'")                     \
	X(FILTER_OPERAND, "expected a fetch argument's name, a number or a quoted string") \
	X(FILTER_NAME, "no fetch argument of this name in the probe")          \
	X(FILTER_OP, "expected an operator: == != < <= > >= &")                \
	X(FILTER_STRING, "a string compares with == or != (a glob: \"/api/*\")") \
	X(FILTER_QUOTE, "unterminated string")                                 \
	X(FILTER_PAREN, "expected ')'")                                        \
	X(FILTER_JOIN, "expected && or || between conditions")                 \
	X(FILTER_TOO_LONG, "the condition is too long")                        \
	X(STACK_ALONE, "$ustack stands alone: no dereference, and nothing dereferences it") \
	X(STACK_FRAMES, "$ustack:N takes N frames, from 1 to 256")            \
	X(STACK_TWICE, "a probe takes one $ustack")                              \
	X(PYSTACK_ALONE, "$pystack stands alone: no dereference, and nothing dereferences it") \
	X(PYSTACK_FRAMES, "$pystack:N takes N frames, from 1 to 128")         \
	X(PYSTACK_TWICE, "a probe takes one $pystack")                            \
	X(BAD_PYTHON, "expected py:QUALNAME or py:MODULE:QUALNAME (globs: py:http.server:*)")

enum usc_parse_err {
#define X(id, msg) USC_PERR_##id,
	USC_PARSE_ERRORS(X)
#undef X
	USC_PERR_NR
};

struct usc_parse_error {
	enum usc_parse_err code;
	size_t pos;		/* byte offset into the probe text */
};

const char *usc_parse_strerror(enum usc_parse_err code);

/* An enum type's enumerators, for output (from the debug info). Values are
 * the enum's bytes as fetched, truncated to its size. */
struct usc_enumerator {
	uint64_t value;
	const char *name;
};
struct usc_enum {
	unsigned n;
	bool flags;		/* every value a single bit: combinations show as A|B */
	const struct usc_enumerator *v;
};

/* How output shows a value, beyond its type: presentation only. Engines
 * fetch the program as always and ignore this. */
enum usc_show {
	USC_SHOW_PLAIN,		/* by its type */
	USC_SHOW_BOOL,		/* true / false */
	USC_SHOW_ENUM,		/* by enumerator name (enums) */
	USC_SHOW_STRUCT,	/* a nested struct or union, not fetched: {...} */
	USC_SHOW_ARRAY,		/* a nested array, not fetched: [...] */
	/* A Go value in several words (Go's register ABI passes them in
	 * consecutive registers): its parts (USC_SHOW_GO_PART, named
	 * NAME__PART) come first, then the argument that shows the whole
	 * (go_parts says how many parts are before it):
	 *   string    NAME__len, then NAME: its bytes (FOP_ST_BYTES, string)
	 *   slice     NAME__cap, NAME__len, then NAME: its first elements'
	 *             bytes (FOP_ST_BYTES, string; go_elem their type)
	 *   interface NAME__tab (the itab; 0: nil), NAME__type (the dynamic
	 *             type's runtime._type), then NAME: the data pointer
	 *   any       NAME__type (0: nil), then NAME: the data pointer */
	USC_SHOW_GO_STRING,
	USC_SHOW_GO_SLICE,
	USC_SHOW_GO_IFACE,
	USC_SHOW_GO_EFACE,
	USC_SHOW_GO_PART,	/* shown by the Go value after it */
	/* py: probes */
	USC_SHOW_PYFUNC,	/* the Python function called (a code object's
				 * address): it names the event */
	USC_SHOW_PYVAL,		/* a Python value: an int as a number, else the
				 * text the agent wrote (a repr, or <type>) */
};

#define USC_GO_STR_MAX 64	/* bytes of a Go string fetched */
#define USC_GO_ELEMS 4		/* elements of a Go slice fetched */

struct usc_fetcharg {
	char name[USC_NAME_MAX];
	bool named;			/* NAME= given */
	enum usc_type type;
	bool type_given;		/* :TYPE given */
	uint32_t pos;			/* offset of the argument in the probe text */
	uint32_t len;			/* its length */
	bool unavailable;		/* bound where its value does not exist yet
					 * ($retval at a tail call): shown as such */
	bool optimized_out;		/* the variable has no location at this
					 * site: the program is a harmless immediate,
					 * output shows <optimized out> */
	bool in_place;			/* lowered from the debug info: a char array
					 * in memory (FOP_ST_STRING at val + imm), its
					 * bytes with no value to load before them
					 * (probe_bind_arg reads a :TYPE there) */
	uint8_t show;			/* enum usc_show */
	const struct usc_enum *enums;	/* USC_SHOW_ENUM; owned by the debug info it
					 * came from (valid until resolve_cache_free) */
	/* A member of a struct shown whole: the args of one struct are
	 * consecutive, the first has group_first. name is "GROUP__MEMBER";
	 * group_len is the length of GROUP. 0: not a member. */
	uint8_t group_len;
	bool group_first;
	bool hidden;			/* a filter's operand only ($pid in `if $pid
					 * == 42`), or a Go goroutine's g calls pair
					 * by (resolve.h, USC_GO_CTX_ARG): fetched,
					 * neither shown nor a key; after every
					 * argument the probe shows */
	uint8_t go_parts;		/* a Go value: how many parts are before it */
	uint8_t go_elem;		/* a Go slice: 1 + enum usc_type of its
					 * elements (0: not shown, a string's bytes) */
	bool go_elem_bool;		/* ... bools */
	const char *go_type;		/* a Go value's type name ("[]int", "error");
					 * owned by the debug info, as enums */
	uint8_t ninsn;			/* including the FOP_END */
	struct fetch_insn insn[USC_FETCH_MAX];
};

enum usc_loc_kind {
	USC_LOC_SYMBOL,		/* SYMBOL or SYMBOL+OFFSET; symbol may be a glob */
	USC_LOC_ADDRESS,	/* a link-time virtual address */
	USC_LOC_USDT,		/* %PROVIDER:NAME; symbol holds NAME */
	USC_LOC_LINE,		/* FILE:LINE (symbol holds FILE), or FUNCTION:+N
				 * (symbol holds FUNCTION, line_rel set) */
	USC_LOC_PYTHON,		/* py:[MODULE:]QUALNAME: Python functions, symbol
				 * the qualname's glob, module the module's ("*":
				 * any; __main__: the script) */
};

struct usc_probe_spec {
	char text[USC_SPEC_MAX];	/* the probe as given */
	bool is_return;
	bool event_given;
	char event[USC_NAME_MAX];
	char module[USC_MODULE_MAX];	/* "" = the target's executable */
	uint32_t module_pos;
	enum usc_loc_kind loc_kind;
	uint32_t loc_pos;		/* offset of the location's symbol/address */
	char symbol[USC_SYM_MAX];	/* may carry @VER / @@VER; USDT: the name */
	char provider[USC_NAME_MAX * 2];	/* USDT */
	bool is_glob;
	uint64_t offset;		/* SYMBOL+OFFSET */
	bool has_offset;
	uint64_t address;		/* USC_LOC_ADDRESS */
	uint32_t line;			/* USC_LOC_LINE */
	bool line_rel;			/* ... relative to the function's first line */
	unsigned nargs;
	struct usc_fetcharg args[USC_MAX_ARGS];
	struct usc_filter filter;	/* if COND; filter.n == 0: none */
	uint8_t obj_role;		/* uscope objtrace: enum usc_obj_role */
};

/* uscope objtrace: what a probe does with the followed objects. A FROM or
 * UNTIL probe's first argument is the object; a MATCH probe's arguments are
 * the six SysV argument registers (arg1..arg6), then with --field the value
 * at that offset of each (field1..field6). Each ends with a hidden verdict
 * (USC_OBJ_VERDICT) the engine that keeps the set writes: FROM 1 followed,
 * 2 not (the set is full); UNTIL 1 released; MATCH the mask of the
 * arguments that hold a followed object. A hit whose verdict would be 0
 * (an UNTIL of no followed object, a MATCH of none) is no event. */
enum usc_obj_role { USC_OBJ_NONE, USC_OBJ_FROM, USC_OBJ_UNTIL, USC_OBJ_MATCH };
#define USC_OBJ_NREGS 6
#define USC_OBJ_MAX 65535	/* objects followed at once, at most */
#define USC_OBJ_DEFAULT 1024
#define USC_OBJ_VERDICT "__objtrace"

/* Parse one probe. Returns 0, or -EINVAL with *err filled. */
int usc_probe_parse(const char *text, struct usc_probe_spec *spec,
		    struct usc_parse_error *err);

/* Parse one FETCHARG alone (text[pos..]) into arg; used by the probe parser
 * and by front ends that build probes programmatically. */
int probe_parse_fetcharg(const char *text, size_t start, size_t end,
			 bool is_return, struct usc_fetcharg *arg,
			 struct usc_parse_error *err);

/* Parse the condition text[start..end) of `if COND` into f, its names
 * checked against the spec's arguments (unless $params may bring more); an
 * operand that is no argument's name but an expression ($pid, $arg2:s32)
 * becomes a hidden argument of the spec. 0 or -EINVAL with *err. */
int probe_parse_filter(const char *text, size_t start, size_t end,
		       struct usc_probe_spec *spec, struct usc_filter *f,
		       struct usc_parse_error *err);

/* The arguments a probe shows (and keys on): those before its hidden
 * filter operands. */
unsigned probe_shown_args(const struct usc_fetcharg *args, unsigned n);

/* Bind a filter to a site's arguments: each name becomes the index of the
 * argument of that name, with its sign and size; a string literal needs a
 * string argument, a number a number. 0, or -ENOENT / -EINVAL with the
 * offending name in *bad (points into in). */
int probe_bind_filter(const struct usc_filter *in, const struct usc_fetcharg *args,
		      unsigned nargs, struct usc_filter *out, const char **bad);

/* The filter as the kernel's event filter text (ftrace syntax: field names
 * are the arguments' names, globs with ~). -ENOTSUP for what it cannot say
 * (an argument the kernel does not fetch: $pid). */
int filter_render_ftrace(const struct usc_filter *f, const struct usc_fetcharg *args,
			 char *buf, size_t len);

/* Parse a number: decimal, 0x hex or 0 octal. Returns chars consumed, 0 on
 * error. */
size_t probe_parse_number(const char *s, uint64_t *out);

/* Bind a parsed argument to a site: FOP_ARG N becomes the N-th SysV
 * argument register (usdt == NULL) or the program of the USDT probe's N-th
 * argument. A bare $argN with no :TYPE takes the USDT argument's type.
 * 0, -ERANGE (no such argument), -E2BIG (program too long). */
int probe_bind_arg(const struct usc_fetcharg *in, const struct usc_fetcharg *usdt,
		   unsigned nusdt, struct usc_fetcharg *out);

/* How a syntax writes a fetch program (fetch_render). */
struct fetch_syntax {
	const char *(*reg_name)(enum usc_reg reg);
	const char *imm_prefix;		/* "\\" for the kernel's immediates */
	bool has_vaddr;			/* FOP_VADDR as @+(imm + foff_delta) */
	bool has_arg;			/* FOP_ARG as $argN (unbound programs) */
	bool symbol_as_x64;		/* no user-space :symbol: fetch an x64 */
	bool retval_as_ax;		/* $retval as %ax: an entry-style probe on a
					 * function's return instruction */
	int64_t foff_delta;
};
extern const struct fetch_syntax fetch_syntax_probe;	/* the probe language */
extern const struct fetch_syntax fetch_syntax_kernel;	/* uprobe_events */

/* "NAME=EXPR:TYPE" in a syntax. 0, -ENOSPC, -ENOTSUP (an operation the
 * syntax cannot write: two registers added, an unbound $argN for the
 * kernel), -EINVAL (a bitfield type without its geometry). */
int fetch_render(const struct usc_fetcharg *arg, const struct fetch_syntax *syn, char *buf,
		 size_t len);

/* Render a fetch program back as probe-language text (for messages and tests). */
int probe_fetcharg_format(const struct usc_fetcharg *arg, char *buf, size_t len);

#endif
