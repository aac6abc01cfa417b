/* JIT code a frame pointer does not describe, known by its shape: CPython's
 * perf trampolines (unwjit.c says why). Anonymous executable memory that
 * holds copies of one gets a table of one row, as a module gets its CFI's;
 * any other is walked by frame pointer (stack_walk.h). */
#ifndef USC_STACK_UNWJIT_H
#define USC_STACK_UNWJIT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "stack/unwtab.h"

struct proc_map;

/* The shape the n bytes at b begin with (copies of it: the next one too,
 * if n holds it): its index, and its *name; -ENODATA: none known. */
int stack_jit_shape(const uint8_t *b, size_t n, const char **name);

/* The table of anonymous executable mapping m of process pid, read from
 * its first bytes: 0 and *out (static: the same for every arena of a
 * shape); -ENODATA: no shape known there (or the memory unreadable). */
int stack_jit_tab(pid_t pid, const struct proc_map *m, const struct stack_utab **out);

#endif
