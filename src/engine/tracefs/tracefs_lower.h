/* Lowering the fetch program to uprobe_events fetchargs. */
#ifndef USC_ENGINE_TRACEFS_LOWER_H
#define USC_ENGINE_TRACEFS_LOWER_H

#include <stdbool.h>
#include <stddef.h>

#include "probe/probe.h"

/* One bound fetcharg: "NAME=EXPR:TYPE". foff_delta is the probe site's
 * file offset minus its link-time address, to express FOP_VADDR as the
 * kernel's @+FILE_OFFSET. On a return site (an entry-style probe on a
 * ret), $retval is %ax. 0, -ENOSPC, or -ENOTSUP for what the kernel's
 * fetch arguments cannot do (adding two registers; an unbound $argN). */
int tracefs_lower_arg(const struct usc_fetcharg *arg, int64_t foff_delta, bool ret_site,
		      char *buf, size_t len);
/* Several, space-separated ("" when none). */
int tracefs_lower_args(const struct usc_fetcharg *args, unsigned n, int64_t foff_delta,
		       bool ret_site, char *buf, size_t len);

/* The kernel stores a string it could not read, at a NULL pointer or a bad
 * one alike, with length 0. To tell them apart, a string argument whose
 * address is a loaded value (not @ADDR, not $comm, no offset added to the
 * pointer) gets a hidden x64 field of that address, named
 * TRACEFS_NULL_FIELD "<index>": into *ptr, true; false for the others. */
#define TRACEFS_NULL_FIELD "__usc_p"
bool tracefs_string_ptr(const struct usc_fetcharg *arg, unsigned index, struct usc_fetcharg *ptr);
/* Those hidden fields of args[0..n), space-separated ("" when none). */
int tracefs_lower_string_ptrs(const struct usc_fetcharg *args, unsigned n, int64_t foff_delta,
			      bool ret_site, char *buf, size_t len);

#endif
