/* From logical probes to sites: find the module, the function(s), the
 * address and the file offset of every place a probe goes. Expansion (globs,
 * later USDT sites and inlined copies) is done here, before any engine is
 * involved, as bpftrace separates its matcher from its attacher. */
#ifndef USC_RESOLVE_RESOLVE_H
#define USC_RESOLVE_RESOLVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
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
	bool tail_call;			/* ... on a tail-call jmp: $retval unavailable */
	char *path;			/* the module file */
	char *symbol;			/* function name, or NULL */
	uint64_t vaddr;			/* link-time address of the probe point */
	uint64_t func_vaddr;		/* link-time address of the function, or 0 */
	uint64_t offset;		/* file offset of the probe point */
	bool is_return;
	bool inlined;			/* on an inlined copy of the function */
};

/* Fill target->exe for a PID (/proc/PID/exe) or a command (PATH lookup).
 * -ESRCH (no such process), -ENOENT (command not found). */
int resolve_target(struct usc_target *target, const char *command);

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
};
int resolve_probes(const struct usc_target *target, const struct usc_probe_spec *specs,
		   size_t nspecs, unsigned flags, struct usc_site **sites, size_t *nsites);
void resolve_sites_free(struct usc_site *sites, size_t n);

/* Symbolize a runtime address of process pid as "sym+0xoff" or "module+0xoff";
 * falls back to "0x...". Caches mappings and symbol tables. */
void resolve_symbolize(pid_t pid, uint64_t addr, char *buf, size_t len);
void resolve_cache_free(void);

/* The debug info of a module file, from the session's cache (closed by
 * resolve_cache_free). 0, -ENODATA (none), -errno. */
struct dwarf_module;
int resolve_debuginfo(const char *path, struct dwarf_module **m);

#endif
