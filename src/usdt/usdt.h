/* USDT static probes (<sys/sdt.h>): the .note.stapsdt notes of an ELF file
 * and their argument specs.
 *
 * A note (type 3, owner "stapsdt") holds the probe's address, the link-time
 * address of .stapsdt.base, the semaphore's address (0: none), then three
 * NUL-terminated strings: provider, name, argument specs. If .stapsdt.base
 * was moved after linking (prelink), every address shifts by the difference.
 *
 * An argument spec is `[-]SIZE@LOC` separated by spaces, where a negative
 * SIZE means signed and LOC is one of
 *   %reg                 -4@%eax
 *   off(%reg)            8@-16(%rbp)
 *   off(%base,%idx,sc)   8@(%rax,%rbx,8), 4@8(%rax,%rcx,4), 8@(,%rcx,8)
 *   $imm                 4@$5, -4@$-1
 *   sym(%rip)            4@counter(%rip), 8@table+16(%rip)
 * Each is lowered to one fetch program (src/probe/fetch.h) ending in a store
 * of SIZE bytes, typed sN/uN... (uN for unsigned, sN for signed). */
#ifndef USC_USDT_USDT_H
#define USC_USDT_USDT_H

#include <stddef.h>
#include <stdint.h>

#include "objfile/objfile.h"
#include "probe/probe.h"

#define USDT_MAX_ARGS 12

struct usdt_note {
	char *provider;
	char *name;
	char *args;		/* the raw argument specs ("" when none) */
	uint64_t pc;		/* link-time address of the probe site, adjusted */
	uint64_t sema;		/* link-time address of the semaphore, adjusted, or 0 */
	uint64_t base;		/* the .stapsdt.base address the note recorded */
};

/* Parse the raw bytes of a .note.stapsdt section. actual_base is the address
 * of the .stapsdt.base section in this file (0 if it has none: no
 * adjustment). Every bound is checked; a malformed note is refused with
 * -EINVAL and a log_error naming what was wrong and at which byte offset.
 * Returns 0 with *out (malloc'd; free with usdt_notes_free) and *n. */
int usdt_parse_notes(const void *data, size_t len, uint64_t actual_base,
		     struct usdt_note **out, size_t *n);

/* All the notes of an ELF file (0 with *n = 0 when it has none). */
int usdt_read(const struct objfile *ef, struct usdt_note **out, size_t *n);
void usdt_notes_free(struct usdt_note *notes, size_t n);

struct usdt_arg_error {
	size_t pos;		/* byte offset into the spec string */
	const char *msg;	/* what was expected there */
};

/* Parse a whole argument-spec string into fetch programs, one per argument:
 * args[i].name = "argI", type from SIZE and sign (u8..u64 / s8..s64),
 * type_given = false. ef resolves sym(%rip) operands to FOP_VADDR loads (it
 * may be NULL, then such an operand is an error). Returns 0, or -EINVAL with
 * *err filled. */
int usdt_parse_args(const char *spec, const struct objfile *ef, struct usc_fetcharg *args,
		    unsigned max, unsigned *nargs, struct usdt_arg_error *err);

#endif
