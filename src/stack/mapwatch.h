/* The traced processes' code mappings as they change (perf's mmap records):
 * see mapwatch.c. */
#ifndef USC_STACK_MAPWATCH_H
#define USC_STACK_MAPWATCH_H

#include <stdbool.h>
#include <sys/types.h>

struct usc_cache;
struct mapwatch;

/* Watch process pid and its children (0: every process), from its next
 * exec when on_exec (a COMMAND held before its exec). 0 or -errno. */
int mapwatch_open(pid_t pid, bool on_exec, struct mapwatch **out);
/* Bring the cache's maps up to date; *changed: a pid whose maps changed
 * (0: none). The records read. */
int mapwatch_poll(struct mapwatch *w, struct usc_cache *c, int *changed);
void mapwatch_close(struct mapwatch *w);

#endif
