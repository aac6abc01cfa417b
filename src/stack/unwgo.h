/* Unwind rows of Go code from Go's own function table (.gopclntab), for
 * the Go functions of a module that its CFI does not cover: a Go program
 * built with -ldflags=-w (no .debug_frame) or -s -w; Go's linker writes
 * no .eh_frame for Go code. unwtab.c asks for them while it builds a
 * module's table. See unwgo.c. */
#ifndef USC_STACK_UNWGO_H
#define USC_STACK_UNWGO_H

#include <libelf.h>
#include <stddef.h>
#include <stdint.h>

#include "objfile/gopclntab.h"
#include "stack/stack_walk.h"

struct objfile;

/* A Go module's functions that have a pcsp table. */
struct stack_gotab {
	struct objfile *ef;
	const void *tab;	/* the function table, in ef's mapping */
	size_t len;
	struct gopclntab_hdr h;
	struct gopclntab_func *fn;	/* in address order */
	size_t n;
};

/* The functions of the Go program at path (e: its ELF, to tell Go from
 * anything else cheaply). 0; -ENODATA: not a Go program, or no table with
 * pcsp tables; -ENOMEM. */
int stack_gotab_open(const char *path, Elf *e, struct stack_gotab *g);
void stack_gotab_close(struct stack_gotab *g);

/* The row of a Go function where its stack pointer is spdelta bytes below
 * the entry's: the CFA is rsp + spdelta + 8 (the return address the call
 * pushed), the return address at CFA - 8, rbp unchanged, as the
 * .debug_frame Go's linker compiles from the same table says
 * (cmd/link's writeframes: no rule for rbp, the ABI's default). */
struct stack_row stack_go_row(int32_t spdelta);

#endif
