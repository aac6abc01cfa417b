/* The unwind tables the engines walk stacks with where the probe runs:
 * one store a session, hung off its cache, shared by its engines. Every
 * module's table is in it once (by build-id: unwtab.h's set, and the disk
 * cache), in the order modules were first met, and the store only grows:
 * tabs[], rows[] and idx[] (stack_walk.h) up to an engine's last copy of
 * them never change, so an engine copies what was added since (into the
 * inject agent's memory, the bpf program's maps) and publishes the new
 * counts. A process's mappings are built against the store: each
 * stack_map's tab is an index in its tabs[]. */
#ifndef USC_STACK_UNWSTORE_H
#define USC_STACK_UNWSTORE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "stack/unwtab.h"

struct usc_cache;
struct stack_store;

/* The cache's store, made on first use (the disk cache in stack_cache_dir,
 * none with USCOPE_NO_UNWIND_CACHE set); NULL when out of memory. */
struct stack_store *stack_store_of(struct usc_cache *c);
void stack_store_free(struct stack_store *s);

/* Its tables as the walker indexes them (the image's maps are unused). */
const struct stack_image *stack_store_image(const struct stack_store *s);

/* The walker's mappings of m (n of them, process pid's: 0 for none to
 * read), sorted, the tables of their modules added to the store: *out
 * (malloc'd), *nout. 0 or -ENOMEM. */
int stack_store_maps(struct stack_store *s, pid_t pid, const struct proc_map *m, size_t n,
		     struct stack_map **out, uint32_t *nout);
/* The same of process pid's maps as the cache holds them (refresh: read
 * again). -ESRCH: none known. */
int stack_store_proc(struct stack_store *s, struct usc_cache *c, pid_t pid, bool refresh,
		     struct stack_map **out, uint32_t *nout);

#endif
