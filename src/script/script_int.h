/* Internal to src/script: a compiled script as the passes build it and the
 * tracer's executor and printer read it. */
#ifndef USC_SCRIPT_SCRIPT_INT_H
#define USC_SCRIPT_SCRIPT_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "probe/probe.h"
#include "script/ast.h"
#include "script/prog.h"
#include "script/script.h"

/* An attach point, read (probes.c). */
enum sp_kind {
	SP_BEGIN, SP_END, SP_INTERVAL,
	SP_UPROBE, SP_URETPROBE, SP_USDT, SP_PY,
};

struct script_attach {
	enum sp_kind kind;
	uint32_t pos, len;		/* in the source */
	char module[USC_MODULE_MAX];	/* "" : the target's executable */
	char func[USC_SYM_MAX];		/* FUNCTION (a glob), USDT NAME, py: QUALNAME */
	char provider[USC_NAME_MAX * 2];	/* USDT (may be "") */
	uint64_t offset;		/* FUNCTION+OFFSET */
	bool has_offset;
	uint64_t address;		/* uprobe:BIN:0xADDR */
	bool is_address;
	uint64_t interval_ns;		/* SP_INTERVAL */
	unsigned probe;			/* the probe (action block) it belongs to */
};

/* A field of a key, a value or an output record: its type and its place. */
struct script_field {
	struct ty ty;
	uint32_t off, size;
};

struct script_mapinfo {
	char name[USC_NAME_MAX];	/* without the @ ("" for @) */
	uint32_t pos, len;		/* its first mention */
	int nkeys;			/* -1: not known yet */
	struct ty keyty[16];
	struct ty val;			/* its values' type */
	bool assigned;			/* a value was ever stored */
	bool tid_only;			/* every access is [tid] */
	bool read_as_agg;
	/* str(@m[k]) of a map of addresses: the strings at them, read when
	 * each was stored (lower.c), for the engines that stream events (the
	 * process may have moved on, or ended, when uscope runs the event):
	 * the shadow map's index, or 0 */
	int shadow;
	bool hidden;			/* a shadow: never printed */
	struct script_field keys[16];	/* the key's layout */
	struct script_map m;		/* what the executors see */
	struct script_field vfields[16];	/* SVK_BYTES of a tuple: its elements */
};

/* A probe's $variable. */
#define SCRIPT_TUPLE_ELEMS 16	/* a tuple's elements, at most */
#define SCRIPT_VAR_ELEMS 8	/* a tuple in a variable: its elements, at most */
struct script_var {
	char name[USC_NAME_MAX];
	struct ty ty;
	int reg;			/* its register (an int's, or a string's); a
					 * tuple's: -1, each element has its own */
	bool is_str;
	int ereg[SCRIPT_VAR_ELEMS];	/* a tuple's elements' registers (compile.c) */
};

/* printf's (and time's, cat's) format, split: literal text and
 * conversions, each conversion with its argument's field. */
struct script_conv {
	char spec[32];			/* the conversion as written, flags and width
					 * included ("%-10s"), length modifiers dropped */
	char conv;			/* d i u x X o c s p r */
	struct script_field arg;	/* its value in the record */
};

struct script_fmt {
	const char *text;		/* the format (the arena's) */
	uint32_t ntext;
	unsigned nconv;
	struct script_conv *conv;	/* nconv */
	uint32_t size;			/* bytes of the record's values */
	enum script_out_kind kind;
	/* SOUT_PRINT_MAP: the map; SOUT_PRINT: the value's type */
	int map;
	struct ty ty;
};

/* What a probe of the script reads at the hit: its inputs, as fetch
 * arguments in uscope's probe language ("$arg1", "+0($arg2):string"). */
struct script_input {
	char text[256];
	bool is_str;
};

#define SCRIPT_INPUTS_MAX 16

struct script_probeinfo {
	struct ast_probe *ast;
	unsigned first_attach, nattach;
	bool on_sites;			/* uprobe, uretprobe, usdt, py: */
	bool is_return;			/* uretprobe */
	struct script_var vars[64];
	unsigned nvars;
	struct script_input inputs[SCRIPT_INPUTS_MAX];
	unsigned ninputs;
	unsigned stack_frames;		/* its ustack's (sema: one a probe) */
};

struct usc_script {
	struct arena *arena;
	const char *src;		/* the caller's */
	size_t nsrc;
	struct usc_script_opts opts;
	uint32_t strlen;
	uint32_t max_keys;
	struct ast_program prog;
	struct script_attach *attach;	/* every attach point */
	size_t nattach;
	struct script_probeinfo *probes;	/* prog.nprobes */
	struct script_mapinfo *maps;
	size_t nmaps, capmaps;
	struct script_fmt *fmts;
	size_t nfmts, capfmts;
	/* the string table: literals, formats */
	char *strtab;
	size_t nstrtab, capstrtab;
	/* the compiled code */
	struct script_insn *insns;
	size_t ninsns, capinsns;
	struct script_blob *blob;	/* the program as the executors take it */
	/* the session's probes: one a site-attach point */
	struct usc_probe_spec *specs;
	size_t nspecs;
	unsigned *spec_probe;		/* nspecs: the probe each runs */
	unsigned *spec_attach;		/* nspecs: its attach point */
};

/* probes.c: every attach point of every probe read into s->attach. 0 or
 * -EINVAL with d. */
int script_probes_read(struct usc_script *s, struct script_diag *d);
/* sema.c: names and types. 0 or -EINVAL with d. */
int script_sema(struct usc_script *s, struct script_diag *d);
/* lower.c: the inputs of each probe, then its specs. 0 or -errno with d. */
int script_lower(struct usc_script *s, struct script_diag *d);
/* compile.c: the code, then the blob. 0 or -errno with d. */
int script_compile(struct usc_script *s, struct script_diag *d);
/* fuse.c: a probe's n instructions at in with the common shapes fused (the
 * new count); is it a few updates of maps (SCRIPT_PROBE_UPDATES)? */
uint32_t script_fuse(struct script_insn *in, uint32_t n);
bool script_few(const struct script_insn *in, uint32_t n);

/* sema.c: map m's layout (its keys' places, its values' kind and size). */
int script_map_layout(struct usc_script *s, struct script_mapinfo *m, struct script_diag *d);

/* lower.c: bpftrace's reg("NAME") as the 64-bit register's name, or NULL. */
const char *script_reg_name(const char *r);

/* A string into the string table: its offset, or -1 (no memory). */
int64_t script_strtab_add(struct usc_script *s, const char *str, size_t n);

/* Types (sema.c). */
static inline struct ty ty_int(unsigned size, bool sign)
{
	return (struct ty){.kind = TY_INT, .size = (uint8_t)size, .sign = sign};
}
/* "int64", "string", "hist", ... */
void ty_name(const struct ty *t, char *buf, size_t len);
/* Bytes the type takes in a key, a value or a record (strings: strlen,
 * rounded up to 8). */
uint32_t ty_size(const struct usc_script *s, const struct ty *t);
/* A map by name: its index, or -1. */
int script_map_find(const struct usc_script *s, const char *name);

#endif
