/* x86-64 instruction decoding helpers (Zydis). */
#ifndef USC_X86_INSN_H
#define USC_X86_INSN_H

#include <stdbool.h>
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

/* What one instruction does to the machine's state: whether it can run in
 * place ahead of a patch placed after it, the probe firing as if before it
 * (the inject engine's entry placement, which checks that the probe reads
 * none of what it changes). */
struct x86_effects {
	uint8_t len;
	bool in_place;		/* may run in place: no branch, no write of rsp,
				 * rip, a segment, x87 or control state; no lock,
				 * string, I/O or system instruction */
	bool leaves;		/* an unconditional jmp or a ret: what runs it goes
				 * to its target, never to the next instruction */
	bool reads_mem, writes_mem;
	bool writes_flags;
	bool rerun;		/* running it again right after it ran is running
				 * it once: it writes registers only, none that it
				 * reads (or it zeroes one: xor %eax,%eax), and
				 * tests no flag */
	/* per general register, by its encoding (0 rax, 1 rcx, 2 rdx, 3 rbx,
	 * 4 rsp, 5 rbp, 6 rsi, 7 rdi, 8-15 r8-r15): the bytes (bit n, byte
	 * n) it may change. movslq %edi,%rdi changes rdi's upper 4 only. */
	uint8_t changed[16];
};

/* Decode the instruction at code[0] (len bytes readable) into *out.
 * 0, or -ENOEXEC when it does not decode. */
int x86_insn_effects(const uint8_t *code, size_t len, struct x86_effects *out);

#endif
