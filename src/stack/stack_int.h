/* The stack module's private parts, shared by its files. */
#ifndef USC_STACK_STACK_INT_H
#define USC_STACK_STACK_INT_H

#include <elfutils/libdwfl.h>

#include "stack/stack.h"

#define STACK_PROCS 32		/* processes whose modules are kept */

struct unw_proc {
	pid_t pid;
	Dwfl *dwfl;
	uint64_t used;		/* for eviction: least recently used goes */
	uint64_t refreshed;	/* ms, when its maps were last read again */
	uint64_t maps_gen;	/* cache_maps_gen of the maps dwfl was made of */
	/* the stack being unwound */
	struct fetch_stack_hdr h;
	const uint8_t *bytes;
	uint32_t len;
	pid_t tid;
	bool missed;		/* the unwinder read beyond the copy */
};

struct sym_ent;
struct stack_store;

struct stack_cache {
	struct unw_proc procs[STACK_PROCS];
	uint64_t tick;
	/* frames' names by (module, link-time address) */
	struct sym_ent **tab;
	size_t ntab, used;
	char **paths;		/* interned module paths */
	size_t npaths;
	/* interned stacks: ids are index + 1 */
	struct interned {
		pid_t pid;
		uint64_t hash;
		struct usc_stack *st;
	} *stacks;
	size_t nstacks, capstacks;
	uint32_t *stack_slots;	/* open addressing: index + 1 */
	size_t nstack_slots;
	/* unwind tables for the engines that walk where the probe runs */
	struct stack_store *store;
	/* JIT code's names: the processes' perf maps (perfmap.c) */
	struct stack_perfmaps *perfmaps;
};

/* The cache's stack state, made on first use; NULL when out of memory. */
struct stack_cache *stack_cache_get(struct usc_cache *c);
int unw_cfi_at(Dwfl *d, uint64_t pc, bool *sig);

/* The JIT symbol over addr in process pid's perf map (/tmp/perf-PID.map,
 * .dump), read again when it grew: its name (valid until the next call)
 * and *start; NULL for none. */
const char *stack_perfmap_sym(struct stack_cache *sc, pid_t pid, uint64_t addr, uint64_t *start);
void stack_perfmaps_free(struct stack_perfmaps *pm);

#endif
