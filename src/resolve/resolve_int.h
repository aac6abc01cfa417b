/* Internal to src/resolve: the passes that turn one probe into sites, one
 * file each.
 *
 *   resolve.c   resolve_probes: each probe through the passes, then naming
 *   target.c    the target's executable, and the module a probe names
 *   func.c      function probes: by address, by glob, by name (+OFFSET)
 *   sites.c     one site at an address: its file offset, its label, the
 *               move past the prologue for variables by name
 *   returns.c   a return probe's sites: every ret and tail-call jmp of the
 *               function, and the hidden sites that follow a tail call
 *   inline.c    the copies of a function the compiler inlined (DWARF)
 *   usdt.c      USDT probes: a site per note
 *   line.c      FILE:LINE and FUNCTION:+N: a site per statement of the line
 *   bind.c      a site's arguments ($argN, variables, $retval) and filter
 *   name.c      the kernel's event name of each site
 *   interpose.c after resolving, in a live process: the probed functions
 *               another object's definition takes the calls of (resolve.h)
 */
#ifndef USC_RESOLVE_RESOLVE_INT_H
#define USC_RESOLVE_RESOLVE_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "resolve/resolve.h"

struct usc_cache;
struct debuginfo;
struct objfile;
struct objfile_sym;

/* The sites made so far, for every probe of the call. */
struct site_vec {
	struct usc_site *v;
	size_t n, cap;
	struct usc_cache *c;	/* the session's files */
	unsigned flags;		/* enum resolve_flags */
	bool quiet;		/* the probe's text is an earlier probe's (the return
				 * probe flow and latency add): its warnings were said */
	bool py_hooks;		/* py: probes' hidden GIL sites are in */
};

/* python.c: a py: probe's site (and, the first time, the hidden sites
 * where a thread takes the GIL). 0 or -errno, logged. */
int resolve_python(const struct usc_target *t, const struct usc_probe_spec *spec, unsigned idx,
		   unsigned flags, struct site_vec *sv);
/* A probe with a stack on a CPython target: the hidden site at
 * Py_FinalizeEx (py_final), once. 0 (none when the target runs no
 * CPython) or -errno, logged. */
int resolve_python_final(const struct usc_target *t, const struct usc_probe_spec *spec,
			 unsigned idx, struct site_vec *sv);

/* target.c: the file a probe's MODULE names (the target's executable when
 * it names none), malloc'd in *path. 0 or -errno, logged. */
int resolve_find_module(const struct usc_target *t, const struct usc_probe_spec *spec,
			char **path);

/* func.c: a probe on an ADDRESS, on the functions a glob matches, and on
 * one function by name (SYMBOL or SYMBOL+OFFSET). 0 or -errno, logged. */
int resolve_address(const struct usc_probe_spec *spec, unsigned idx, const char *path,
		    const struct objfile *ef, unsigned flags, struct site_vec *sv);
int resolve_glob(const struct usc_probe_spec *spec, unsigned idx, const char *path,
		 const struct objfile *ef, unsigned flags, struct site_vec *sv);
int resolve_symbol(const struct usc_probe_spec *spec, unsigned idx, const char *path,
		   const struct objfile *ef, unsigned flags, struct site_vec *sv);
/* No function spec->symbol in path: say so, with the closest names (a
 * warning with RESOLVE_SKIP_MISSING in flags: the probe is left out). */
void resolve_log_unknown(const struct usc_probe_spec *spec, const struct objfile *ef,
			 const char *path, unsigned flags);

/* sites.c: a new zeroed site at the end of sv, or NULL (no memory). */
struct usc_site *resolve_site_push(struct site_vec *sv);
/* A new site of probe idx of spec in path (a copy), or NULL (no memory). */
struct usc_site *resolve_site_new(struct site_vec *sv, const struct usc_probe_spec *spec,
				  unsigned idx, const char *path);

#define SITE_RET 1	/* on a ret */
#define SITE_TAIL 2	/* on a tail-call jmp */

/* A site of probe idx at vaddr (in fn, or NULL), bound: site_flags
 * SITE_RET or SITE_TAIL for a return site, else 0. 0 or -errno, logged. */
int resolve_add_site(struct site_vec *sv, const struct usc_probe_spec *spec, unsigned idx,
		     const char *path, const struct objfile *ef, const struct objfile_sym *fn,
		     uint64_t vaddr, unsigned site_flags);

/* returns.c: a return probe on fn, on its return sites (or the kernel's
 * uretprobe with RESOLVE_URETPROBE in flags). 0 or -errno, logged. */
int resolve_return_sites(struct site_vec *sv, const struct usc_probe_spec *spec,
			 unsigned idx, const char *path, const struct objfile *ef,
			 const struct objfile_sym *fn, unsigned flags);

/* inline.c: an entry probe on the inlined copies of a function (fn, or
 * NULL for one that only exists inlined, by name). The number of copies
 * added, or -errno (logged). */
int resolve_inline_sites(struct site_vec *sv, const struct usc_probe_spec *spec,
			 unsigned idx, const char *path, const struct objfile *ef,
			 const struct objfile_sym *fn, const char *name, unsigned flags);

/* usdt.c: a probe on USDT notes; line.c: on a source line. 0 or -errno,
 * logged. */
int resolve_usdt(const struct usc_probe_spec *spec, unsigned idx, const char *path,
		 const struct objfile *ef, struct site_vec *sv);
int resolve_line(const struct usc_probe_spec *spec, unsigned idx, const char *path,
		 const struct objfile *ef, struct site_vec *sv);

/* bind.c: the site's arguments (usdt: a USDT site's own; dm: the file's
 * debug info, or NULL), then its filter. 0 or -errno, logged. */
int resolve_bind_site(struct usc_site *site, const struct usc_fetcharg *usdt, unsigned nusdt,
		      struct debuginfo *dm, struct site_vec *sv);
/* A variable the probe names that is optimized out at every one of its n
 * sites v is an error. 0 or -ENODATA, logged. */
int resolve_check_optimized_out(struct usc_cache *c, const struct usc_probe_spec *spec,
				const struct usc_site *v, size_t n);

/* name.c: site's event name, unique among all[nall] (several: one of
 * several sites of its probe), and its label when it has none yet. */
void resolve_name_site(struct usc_site *site, struct usc_site *all, size_t nall, bool several);

#endif
