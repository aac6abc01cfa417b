/* uscope script: bpftrace's language for user space. This header is where
 * to start; the pieces, a pass a file as bpftrace's are:
 *
 *   script/lex.c       the tokens (lex.h), with their place in the source
 *   script/parse.c     the syntax tree (ast.h), positions kept for carets
 *   script/sema.c      names and types: maps (their keys and values), $locals,
 *                      builtins, calls, what each probe may use
 *   script/probes.c    attach points read: uprobe, uretprobe, usdt, py:,
 *                      BEGIN, END, interval; a type uscope lacks refused
 *   script/lower.c     each attach point as uscope's own probe spec (the
 *                      session resolves it into sites), and what its probe
 *                      reads at the hit as the spec's fetch arguments (its
 *                      inputs: arg0, retval, str(arg1), args.name ...)
 *   script/compile.c   the probes' code, for one small machine (prog.h)
 *   script/prog.h      the compiled program, the same bytes everywhere
 *   script/vm.h        the executor, written once: included by the tracer,
 *                      the inject agent and the bpf engine's script program
 *   script/table.h     a map's table in flat memory (open addressing, lock-free
 *                      inserts): the tracer's own and the inject agent's, in
 *                      the shared memory
 *   script/run.c       the executor in uscope: a probe run on an event's
 *                      values, BEGIN, END and interval, the engines' maps
 *                      and output records
 *   script/print.c     printf's formats and the maps in bpftrace's text
 *                      and JSON (@name[key]: value, hist, lhist, stats)
 *   script/diag.c      a mistake as FILE:LINE:COL with the line and a caret
 *   sink/script.c      the sink that runs it in a session
 *   cli/cmd_script.c   uscope script
 * Where the probe runs, the engines run the same program: see
 * engine/engine.h (usc_site.script, script_place, script_rows,
 * script_clear, script_errors) and doc/scripts.md. */
#ifndef USC_SCRIPT_SCRIPT_H
#define USC_SCRIPT_SCRIPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* A mistake in a script: where, and what. */
struct script_diag {
	char msg[512];
	uint32_t pos, len;	/* in the source */
	bool set;
};

/* Fill d (once: the first mistake stays). Returns -EINVAL. */
int script_fail(struct script_diag *d, uint32_t pos, uint32_t len, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* The mistake as it is shown: "NAME:LINE:COL: MSG", then the line and a
 * caret (^~~~) under it, each line ended by '\n'. */
void script_diag_format(const char *src, size_t n, const char *name, const struct script_diag *d,
			char *buf, size_t len);

struct usc_script_opts {
	const char *name;		/* for messages: the file, "-" or "PROGRAM" */
	char *const *params;		/* $1, $2 ... */
	size_t nparams;
	uint32_t strlen;		/* bytes of a string with its NUL (0: 64) */
	uint32_t max_keys;		/* keys a map holds (0: 4096) */
};

struct usc_script;

/* Parse, check and compile a script; nothing is touched. 0, or -EINVAL
 * with d filled (-ENOMEM: out of memory). */
int usc_script_compile(const char *src, size_t n, const struct usc_script_opts *o,
		       struct usc_script **out, struct script_diag *d);
void usc_script_free(struct usc_script *s);

struct usc_probe_spec;
/* The probe specs its uprobes, uretprobes, usdt and py: probes became, for
 * the session (owned by the script). */
struct usc_probe_spec *usc_script_specs(struct usc_script *s, size_t *n);
/* The compiled program (script/prog.h), for the engines; and for each of
 * usc_script_specs's specs the probe its sites run. */
struct script_blob;
const struct script_blob *usc_script_blob(const struct usc_script *s);
const unsigned *usc_script_spec_probes(const struct usc_script *s);
/* Has it probes on sites (else only BEGIN, END, interval)? */
bool usc_script_has_sites(const struct usc_script *s);
/* The attach points, for the readiness line: their count. */
size_t usc_script_nattach(const struct usc_script *s);

#endif
