/* x86-64 instruction decoding helpers (Zydis). */
#ifndef USC_X86_INSN_H
#define USC_X86_INSN_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Decode code[0..len) linearly from its start (a function's entry, loaded at
 * runtime address `addr`) and check that byte offset `off` starts an
 * instruction. Returns 0 if it does; -EINVAL if it falls inside one, with
 * *prev and *next set to the boundaries around it; -ENOEXEC if decoding failed
 * before reaching off. */
int x86_check_boundary(const uint8_t *code, size_t len, uint64_t addr,
		       uint64_t off, uint64_t *prev, uint64_t *next);

/* The length of the instruction at code[0] (len bytes readable), or
 * -ENOEXEC when it does not decode. */
int x86_insn_length(const uint8_t *code, size_t len);

#endif
