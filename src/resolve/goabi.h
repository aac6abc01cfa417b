/* Go's register ABI at a probe: $argN, $retvalN and $goid on Go functions.
 *
 * Go 1.17+ on x86-64 (ABIInternal) passes integer arguments and results in
 * RAX, RBX, RCX, RDI, RSI, R8, R9, R10, R11, a word each, and keeps the
 * running goroutine's g in R14. Functions written in assembly (ABI0), and
 * all functions before Go 1.17, pass arguments on the stack. */
#ifndef USC_RESOLVE_GOABI_H
#define USC_RESOLVE_GOABI_H

#include "resolve/resolve.h"

struct usc_cache;
struct debuginfo;
struct objfile;
struct objfile_sym;

/* Does in need Go's rules at site: $argN, $retvalN (N >= 2) or $goid, on a
 * function probe (not a USDT one)? */
bool goabi_wants(const struct usc_fetcharg *in);

/* Bind in at site into out by Go's ABI when site's file is a Go program:
 * $argN is the N-th integer register of ABIInternal (the N-th stack word
 * above the return address for ABI0), $retvalN the N-th result register,
 * $goid runtime.g's goid through R14 (its offset from the debug info dm, or
 * else a table by Go version). 0 when bound; 1 when the file is not Go's
 * (bind $argN as C's); -errno with the reason logged. */
int goabi_bind(struct usc_cache *c, const struct usc_site *site, struct debuginfo *dm,
	       const struct usc_fetcharg *in, struct usc_fetcharg *out);

/* Is site in a Go function of the register ABI (Go 1.17+, not assembly's
 * ABI0), where R14 holds the running goroutine's g at every entry and
 * return? */
bool goabi_regabi(struct usc_cache *c, const struct usc_site *site);

/* A Go function's entry probe goes past its stack check: the function
 * starts by comparing its stack pointer (or, for a big frame, R12 = SP
 * less the frame) with g.stackguard0 and, when the stack must grow, calls
 * runtime.morestack, which copies the stack and starts the function over
 * from its entry: a probe there would count that call twice. The check
 * (cmp, jbe to the morestack call inside the function) changes no
 * argument register, no stack word and no R14, so the probe past it sees
 * what it would at the entry. *vaddr moved when fn (of a Go file) begins
 * with such a check; else untouched (NOSPLIT functions have none). */
void goabi_past_stack_check(const struct objfile *ef, const struct objfile_sym *fn,
			    uint64_t *vaddr);

/* $argN:string on a Go function is a Go string: its pointer in the N-th
 * argument word, its length in the next, with or without debug info (Go
 * puts no NUL after a string's bytes). Into out[0..max): its length (a
 * part, NAME__len) and its bytes, counted by it. 2 when bound; 0 when in
 * is no such argument or the file is not Go's; -errno with the reason
 * logged. */
int goabi_bind_string(struct usc_cache *c, const struct usc_site *site,
		      const struct usc_fetcharg *in, struct usc_fetcharg *out, unsigned max);

/* The offset of goid in runtime.g for Go 1.minor on x86-64, or -1 when
 * uscope does not know it. */
int goabi_goid_offset(int minor);

#endif
