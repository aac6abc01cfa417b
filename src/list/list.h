/* What `uscope list` shows, found by the library: the functions and USDT
 * probes of a file or a process, whether the inject engine can patch each
 * function, the variables visible at a probe location and the source lines
 * of a function. Each call hands its rows to the caller's callback, one at
 * a time, in order; the caller prints them. Failures are logged (one line,
 * core/log.h) and returned as -errno.
 *
 *   list.c        usc_list_find_binary, usc_list_modules, usc_list_functions,
 *                 usc_list_usdt
 *   patchable.c   usc_list_patchable
 *   location.c    usc_list_vars, usc_list_lines (debug info)
 */
#ifndef USC_LIST_LIST_H
#define USC_LIST_LIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "probe/probe.h"

/* BINARY as a user names it: a path (or a /proc link to a memfd), a command
 * on PATH, or a library name the dynamic loader would find (libc). Under
 * root (a directory, or a container's /proc/PID/root; NULL: the host's), as
 * a process there would find it (ns/ns.h): a path inside root, a command
 * in root's /usr/local/sbin, ..., /bin, a library in its default library
 * directories. 0 with *path malloc'd (under root), or -ENOENT (logged). */
int usc_list_find_binary(const char *root, const char *bin, char **path);

/* path as the processes under root name it (a container's path, without
 * root or its own /proc/PID/root); path itself outside any. */
const char *usc_list_shown_path(const char *root, const char *path);

/* Each executable module mapped in process pid, once: path opens it (a
 * /proc link for a memfd, a run-time USDT provider; under /proc/PID/root
 * for a process that sees another root: usc_list_shown_path names it as
 * the process does), name is the MODULE a probe gives (or NULL); with
 * module (as a probe names one: "libc", "libjemalloc.so.2", a path) only
 * the modules it names. 0, or -errno (logged) when the maps cannot be read
 * or module names none (-ENOENT, the closest names said). */
int usc_list_modules(pid_t pid, const char *module,
		     void (*fn)(const char *path, const char *name, void *ctx), void *ctx);

/* A function of a file. */
struct usc_list_func {
	const char *name;	/* demangled for C++ */
	const char *mangled;	/* its symbol when name is demangled, or NULL */
	const char *version;	/* a version that is not the default one (a probe
				 * names it NAME@VERSION), or NULL */
	uint64_t vaddr, size;
	uint64_t offset;	/* file offset of vaddr, 0 when it has none */
	bool ifunc;
};

/* The functions of the file at path whose names (or demangled names) match
 * the glob pattern (NULL: all), sorted by name. every_address: one row per
 * symbol; otherwise one per name (C1/C2 constructors are one), except for
 * the versions that are not the default. 0 or -errno (logged). */
int usc_list_functions(const char *path, const char *pattern, bool every_address,
		       void (*fn)(const struct usc_list_func *f, void *ctx), void *ctx);

/* A USDT probe of a file: one of its sites. */
struct usc_list_usdt {
	const char *provider, *name;
	const char *args;	/* the note's argument specs ("" when none) */
	uint64_t pc;		/* the site's link-time address */
	uint64_t sema;		/* its semaphore's, or 0 */
};

/* The USDT probes of the file at path whose PROVIDER:NAME match the glob
 * pattern (NULL: all), in the notes' order. every_site: one row per site;
 * otherwise one per probe. 0 or -errno (logged). */
int usc_list_usdt(const char *path, const char *pattern, bool every_site,
		  void (*fn)(const struct usc_list_usdt *u, void *ctx), void *ctx);

/* Whether the inject engine can patch one function's entry and returns. */
struct usc_list_patch {
	const char *name;
	bool entry_ok, ret_ok;
	const char *entry_why, *ret_why;	/* "ok", or the reason it cannot */
	size_t nret;		/* return sites found */
	size_t nspring;		/* of those, patched through a springboard */
};

/* A reason to refuse a function, and how many functions it refused. */
struct usc_list_rule {
	const char *rule;
	size_t n;
};

#define USC_LIST_RULES_MAX 64

/* The functions usc_list_patchable went through. */
struct usc_list_patch_sum {
	size_t total;		/* functions */
	size_t entry_ok, ret_ok;
	size_t spring_funcs;	/* functions whose returns need springboards */
	size_t spring_sites;	/* their return sites through one */
	/* the refusals, the most frequent first */
	struct usc_list_rule entry_rules[USC_LIST_RULES_MAX], ret_rules[USC_LIST_RULES_MAX];
	size_t nentry_rules, nret_rules;
};

/* Each function of the file at path that matches pattern (NULL: all),
 * except the parts the compiler split off another (.cold): fn gets it, and
 * *sum the totals. 0 or -errno (logged). */
int usc_list_patchable(const char *path, const char *pattern,
		       void (*fn)(const struct usc_list_patch *p, void *ctx), void *ctx,
		       struct usc_list_patch_sum *sum);

/* What usc_list_vars finds at each site of a location. */
struct usc_list_vars_ops {
	/* a site, before its variables: what output calls it, where */
	void (*site)(const char *label, uint64_t pc, const char *path, void *ctx);
	/* a parameter or local visible there, with its C type */
	void (*var)(const char *name, const char *type, bool param, void *ctx);
	/* none is known there */
	void (*none)(void *ctx);
};

/* The variables visible at each site of the probe location spec (parsed
 * from the user's LOCATION) in process pid, or when pid is 0 in BINARY bin
 * (usc_list_find_binary, under root), where trace would read them. The
 * site's path is shown as the processes under the root name it. 0 or
 * -errno (logged). */
int usc_list_vars(pid_t pid, const char *root, const char *bin,
		  const struct usc_probe_spec *spec, const struct usc_list_vars_ops *ops,
		  void *ctx);

/* What usc_list_lines finds for each function of a location. */
struct usc_list_lines_ops {
	/* a function, before its lines: its name, its source file */
	void (*func)(const char *name, const char *file, void *ctx);
	/* a line of that file, from the function's first: text is NULL when
	 * the file cannot be read; code: a statement begins there (a probe
	 * can go on it). Lines with neither are left out. */
	void (*line)(unsigned line, const char *text, bool code, void *ctx);
};

/* The source of the function at each site of the probe location spec, as
 * usc_list_vars finds them. 0 or -errno (logged). */
int usc_list_lines(pid_t pid, const char *root, const char *bin,
		   const struct usc_probe_spec *spec, const struct usc_list_lines_ops *ops,
		   void *ctx);

#endif
