/* x86-64 code relocation for the inject engine: move the instructions a
 * patch displaces into a trampoline (Zydis decodes and encodes), and encode
 * the jumps to and from it. */
#ifndef USC_X86_RELOC_H
#define USC_X86_RELOC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The size of the patch: a `jmp rel32`. */
#define X86_JMP_LEN 5
/* The size of a springboard's first jump: a `jmp rel8` (EB rel8). */
#define X86_JMP8_LEN 2

/* The most bytes x86_relocate writes for len input bytes: a jcc rel8 (2
 * bytes) becomes a jcc rel32 (6), at most 3x; a call becomes a push of its
 * return address (at most 13 bytes) and a jmp (at most 15), once, as the last
 * instruction. Add X86_JMP_LEN for the jump back. */
#define X86_RELOC_MAX(len) (3 * (size_t)(len) + 28)

/* Relocate the instructions code[0..len) (loaded at `from`) to run at `to`.
 * Writes at most cap bytes to out (X86_RELOC_MAX(len) always suffices);
 * returns bytes written or -errno: -ENOTSUP with *why for an instruction
 * that cannot be relocated (not on the allow-list, or a call/syscall that is
 * not the last instruction), -ERANGE if a rel32/disp32 no longer reaches,
 * -ENOEXEC for undecodable or truncated code, -ENOSPC if cap is too small.
 * No jmp back is appended. */
ssize_t x86_relocate(const uint8_t *code, size_t len, uint64_t from, uint64_t to,
		     uint8_t *out, size_t cap, const char **why);

/* Encode a jmp rel32 from `from` to `to` into out[5]; 0, or -ERANGE if too
 * far. */
int x86_encode_jmp(uint64_t from, uint64_t to, uint8_t out[5]);

/* Encode a jmp rel8 (EB rel8) from `from` to `to` into out[2]; 0, or
 * -ERANGE if to - (from + 2) is outside [-128, 127]. */
int x86_encode_jmp8(uint64_t from, uint64_t to, uint8_t out[2]);

#endif
