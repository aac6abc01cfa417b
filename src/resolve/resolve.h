/* From logical probes to sites: find the module, the function(s), the
 * address and the file offset of every place a probe goes. Expansion (globs,
 * later USDT sites and inlined copies) is done here, before any engine is
 * involved, as bpftrace separates its matcher from its attacher. */
#ifndef USC_RESOLVE_RESOLVE_H
#define USC_RESOLVE_RESOLVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#include "probe/probe.h"

enum usc_target_kind {
	USC_TARGET_SYSTEM,	/* every process running the probed files */
	USC_TARGET_PID,		/* a running process */
	USC_TARGET_COMMAND,	/* a command uscope starts */
};

struct usc_target {
	enum usc_target_kind kind;
	pid_t pid;		/* USC_TARGET_PID */
	char *exe;		/* the executable (absolute path), or NULL */
	/* COMMAND a script: the script, what is run (exe is then the program
	 * the kernel runs for it, its interpreter); else NULL: exe is run. */
	char *script;
	/* COMMAND a launcher of CPython (env python3, a pyenv shim, a shell
	 * script's exec: python/launch.h): the CPython it runs in the end, in
	 * which py: probes resolve; else NULL. */
	char *python;
	/* The root MODULE paths resolve under (ns/ns.h), or NULL: the host's.
	 * A PID that sees another root (a container): "/proc/PID/root",
	 * found by resolve_target. System-wide: a --root the caller sets
	 * before resolve_target (malloc'd), which checks it. Every path
	 * resolved (exe, sites' paths) is then under it. */
	char *root;
};

struct usc_site {
	const struct usc_probe_spec *spec;
	unsigned probe;			/* index of spec */
	char event[USC_NAME_MAX];	/* the kernel's event name: unique in the session */
	char label[USC_NAME_MAX * 4];	/* what output calls it: the event name, or for
					 * every site of one USDT probe, PROVIDER:NAME */
	struct usc_fetcharg *args;	/* bound to this site (probe_bind_arg) */
	unsigned nargs;
	uint64_t ref_ctr_offset;	/* file offset of a USDT semaphore, or 0 */
	bool ret_site;			/* a return probe placed on a ret (or tail-call
					 * jmp) of the function: an entry-style probe
					 * that never touches the stack */
	bool tail_call;			/* ... on a tail-call jmp */
	char *path;			/* the module file */
	char *symbol;			/* function name, or NULL */
	uint64_t vaddr;			/* link-time address of the probe point */
	uint64_t func_vaddr;		/* link-time address of the function, or 0 */
	uint64_t offset;		/* file offset of the probe point */
	bool is_return;
	bool inlined;			/* on an inlined copy of the function */
	uint8_t obj_regs;		/* objtrace: the argument registers a call can
					 * pass a followed object in (bit 0 rdi ... bit 5
					 * r9): its pointer parameters by the debug info,
					 * else all six */
	/* Return probes through tail calls. A tail-call site (tail_call) has a
	 * group of hidden sites (cont), one on each ret of the functions its
	 * jmp reaches, directly or through more tail calls. An engine that
	 * follows them (usc_engine_ops.follows_tail_calls) records the stack
	 * pointer at the jmp, and delivers the tail-call site's event when a
	 * ret of its group runs with that same stack pointer: the probed
	 * function's real return, with its $retval. Otherwise the event is at
	 * the jmp, $retval (unavailable). */
	bool hidden;			/* added by resolve: delivers no event of its own */
	bool cont;			/* hidden: a ret of a tail call's callees */
	bool follow_tail;		/* tail_call with its group placed together on an
					 * engine that follows tail calls (the session's choice) */
	int32_t group;			/* tail_call and cont: the tail-call site's index */
	struct usc_filter filter;	/* the probe's filter, bound to args (n 0: none) */
	/* the session's choices */
	bool filter_in_place;		/* the engine filters: every event passed */
	bool agg_in_place;		/* the engine aggregates: no event */
	int32_t agg_func;		/* latency: the function's id, shared by its entry
					 * and return sites; -1: none */
	/* Python (src/python) */
	bool python;			/* a py: probe: fired in the process by CPython's
					 * profile function (the inject agent's), at no
					 * address; path is the file with the runtime */
	bool py_hook;			/* hidden: where a thread takes the GIL, the agent
					 * gives it the profile function (py: probes) */
	bool py_final;			/* hidden: Py_FinalizeEx, where the agent waits
					 * for the tracer to read what the records so far
					 * name, before CPython frees it ($pystack) */
	/* uscope script (src/script/): the probe of the program (the run's
	 * settings' script) this site runs, or -1; and whether its engine
	 * runs it where the probe fires (the session's choice: else its
	 * events go to uscope, which runs it) */
	int32_t script;
	bool script_in_place;
};

/* The hidden argument, last of a site's, in which a Go function's site
 * fetches its goroutine's g (RESOLVE_GO_PAIRS): flow_ctx_of pairs its
 * calls by it. */
#define USC_GO_CTX_ARG "__usc_g"

/* Does the site fetch its goroutine's g (RESOLVE_GO_PAIRS)? */
static inline bool site_go_ctx(const struct usc_site *site)
{
	return site->nargs && site->args[site->nargs - 1].hidden &&
	       !strcmp(site->args[site->nargs - 1].name, USC_GO_CTX_ARG);
}

/* Does the site fetch $ustack (a stack the tracer unwinds)? */
static inline bool site_has_ustack(const struct usc_site *site)
{
	for (unsigned i = 0; i < site->nargs; i++)
		if (site->args[i].ninsn && site->args[i].insn[0].op == FOP_USTACK)
			return true;
	return false;
}

/* Is one of its $ustack copied at every hit (--stack-mode copy), not
 * walked where the probe runs? */
static inline bool site_copies_ustack(const struct usc_site *site)
{
	for (unsigned i = 0; i < site->nargs; i++)
		if (site->args[i].ninsn && site->args[i].insn[0].op == FOP_USTACK &&
		    ((uint64_t)site->args[i].insn[0].imm & FETCH_STACK_COPY))
			return true;
	return false;
}

/* Does the site fetch $pystack? */
static inline bool site_has_pystack(const struct usc_site *site)
{
	for (unsigned i = 0; i < site->nargs; i++)
		if (site->args[i].ninsn && site->args[i].insn[0].op == FOP_PYSTACK)
			return true;
	return false;
}

/* Fill target->exe for a PID (/proc/PID/exe) or a command (PATH lookup),
 * and target->root (see there). -ESRCH (no such process), -ENOENT
 * (command not found, no such root), -EACCES/-EPERM, -EINVAL (a root
 * with a PID or a command), logged. */
int resolve_target(struct usc_target *target, const char *command);
/* Free what resolve_target filled. */
void resolve_target_release(struct usc_target *target);

/* Expand specs into sites. 0 or -errno; every failure is logged as one line
 * naming the probe (unknown symbols with the closest names, ambiguities with
 * their candidates). */
enum resolve_flags {
	/* r: probes swap the return address (the kernel's uretprobe) instead
	 * of probing the function's return sites */
	RESOLVE_URETPROBE = 1 << 0,
	/* a function's probe goes on its out-of-line entry only, not also on
	 * the copies the compiler inlined (DWARF) */
	RESOLVE_NO_INLINES = 1 << 1,
	/* no hidden sites to follow tail calls: only hits are counted */
	RESOLVE_NO_TAIL_FOLLOW = 1 << 2,
	/* a USDT probe without fetch arguments records none (not all of its
	 * own): aggregations key on what the probe names only */
	RESOLVE_NO_DEFAULT_ARGS = 1 << 3,
	/* FILE:LINE goes on every statement of the line (is_stmt row), not
	 * on its first address in each block or inlined copy */
	RESOLVE_ALL_LINE_SITES = 1 << 4,
	/* the command pairs entries with returns (flow, latency, record,
	 * report, export): a Go function's sites also fetch their goroutine's
	 * g (R14), the hidden argument USC_GO_CTX_ARG: a goroutine's call may
	 * return on another thread than it began */
	RESOLVE_GO_PAIRS = 1 << 5,
	/* a probe on a function its module does not have (a name or a glob
	 * that matches none) is left out with a warning, as bpftrace leaves
	 * out an attach point it cannot resolve (uscope script); an error
	 * still when every probe is */
	RESOLVE_SKIP_MISSING = 1 << 6,
	/* a return probe whose $retval its return sites cannot give at every
	 * return (a tail call through a pointer, return sites that cannot all
	 * be found) swaps the return address instead, as RESOLVE_URETPROBE
	 * does for every one (uscope script: bpftrace's uretprobe answers) */
	RESOLVE_URETPROBE_EXACT = 1 << 7,
};
struct usc_cache;
int resolve_probes(struct usc_cache *c, const struct usc_target *target,
		   const struct usc_probe_spec *specs, size_t nspecs, unsigned flags,
		   struct usc_site **sites, size_t *nsites);
void resolve_sites_free(struct usc_site *sites, size_t n);

/* Process pid binds its calls of a probed MODULE:FUNCTION to another
 * object's definition, earlier in its lookup scope (an LD_PRELOAD,
 * jemalloc's malloc before libc's): say so, a warning for each such probe
 * (interpose.c). 0 when looked at (said or not); -EAGAIN while its dynamic
 * linker has not loaded every probed module yet (COMMAND: try again);
 * another -errno when it cannot be known (a static program, the process
 * gone). */
int resolve_interposed(struct usc_cache *c, pid_t pid, const struct usc_probe_spec *specs,
		       size_t nspecs, const struct usc_site *sites, size_t nsites);

#endif
