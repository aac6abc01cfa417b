/* The intermediate fetch program: what one FETCHARG computes.
 *
 * Like the kernel's trace_probe, a program is a short array of fixed-size,
 * pointer-free instructions in stages:
 *   1. one load   (FOP_REG, FOP_STACK, FOP_STACKP, FOP_RETVAL, FOP_COMM,
 *                  FOP_IMM, FOP_MEM, FOP_FOFFS, FOP_VADDR; FOP_ARG before
 *                  binding), then optionally FOP_ADD_REG
 *   2. dereferences (FOP_DEREF: val = *(u64 *)(val + imm))
 *   3. one store  (FOP_ST_RAW: val itself; FOP_ST_MEM: `size` bytes at val+imm;
 *                  FOP_ST_STRING: NUL-terminated string at val+imm;
 *                  FOP_ST_BYTES: bytes at val, counted by the previous
 *                  argument's value)
 *   4. optional modify (FOP_MOD_BF)
 *   5. FOP_END
 * Every front end (the probe parser, later USDT arg specs and DWARF
 * locations) produces this form, and every engine lowers from it: the tracefs
 * engine prints it as uprobe_events fetchargs; an in-process engine can
 * interpret it; a BPF engine can copy it into a map. */
#ifndef USC_PROBE_FETCH_H
#define USC_PROBE_FETCH_H

#ifdef __bpf__
/* the bpf engine's kernel program includes this for the enums: no libc */
#include <linux/types.h>
typedef __u8 uint8_t;
typedef __u16 uint16_t;
typedef __u32 uint32_t;
typedef __s64 int64_t;
typedef __u64 uint64_t;
typedef __SIZE_TYPE__ size_t;
#else
#include <stddef.h>
#include <stdint.h>
#endif

enum fetch_op {
	FOP_END = 0,
	/* load stage */
	FOP_REG,	/* reg = enum usc_reg: full 64-bit register value */
	FOP_STACK,	/* imm = N: the N-th word at the stack pointer ($stackN) */
	FOP_STACKP,	/* the stack pointer itself ($stack) */
	FOP_RETVAL,	/* the return value (return probes); imm >= 2: the Go
			 * result word $retvalN before binding */
	FOP_COMM,	/* the task's comm (string only) */
	FOP_IMM,	/* imm: a constant */
	FOP_MEM,	/* imm: an absolute user address (@ADDR) */
	FOP_FOFFS,	/* imm: a file offset in the probed file (@+OFF) */
	FOP_VADDR,	/* imm: a link-time address in the probed module (USDT
			 * sym(%rip)); engines add the load bias */
	FOP_ARG,	/* imm = N: the probe's N-th argument. A placeholder the
			 * parser emits for $argN; binding replaces it with the
			 * SysV register, or the USDT argument's program */
	FOP_VAR,	/* a C expression on DWARF variables (r->path), at
			 * imm = pos | len << 32 in the probe text. A placeholder:
			 * binding lowers it from the debug info at the site */
	FOP_PARAMS,	/* $params: every parameter; binding expands it */
	FOP_PID,	/* the process id (thread group) of the hit */
	FOP_TID,	/* the thread id */
	FOP_CPU,	/* the CPU it ran on */
	/* index stage (after the load) */
	FOP_ADD_REG,	/* val += reg * size (a USDT SIB operand's index) */
	/* dereference stage */
	FOP_DEREF,	/* val = *(u64 *)(val + imm) */
	/* store stage */
	FOP_ST_RAW,	/* store the low `size` bytes of val */
	FOP_ST_MEM,	/* store `size` bytes read at val + imm */
	FOP_ST_STRING,	/* store the string at val + imm */
	/* modify stage */
	FOP_MOD_BF,	/* bf_width bits at bf_offset of a `size`-byte container */
	/* store stage, counted (a Go string's or slice's bytes) */
	FOP_ST_BYTES,	/* store min(N * size, imm) bytes at val, where N is the
			 * value of the argument just before this one (its
			 * length, fetched first): not NUL-terminated */
	/* load stage, a placeholder binding replaces */
	FOP_GOID,	/* $goid: the goroutine's id, through Go's g (R14) */
	/* load stage, alone (after those above: recordings keep the numbers) */
	FOP_USTACK,	/* $ustack: the user stack, walked (struct fetch_walk_hdr)
			 * or copied (struct fetch_stack_hdr); imm = frames |
			 * FETCH_STACK_COPY | bytes to copy << 32 (0: defaults) */
	FOP_PYSTACK,	/* $pystack: the thread's Python frames, walked where the
			 * probe runs (python/frame.h's python_stack_hdr, then
			 * struct python_frame triples); imm = frames */
	/* py: probes (the inject agent's profile function), loads alone */
	FOP_PYFUNC,	/* the Python function called (its code object) */
	FOP_PYARGS,	/* every argument, "name=value ..." */
	FOP_PYARG,	/* the argument named at imm = pos | len << 32 in the
			 * probe text (the engine rewrites imm to its own) */
	FOP_PYRETVAL,	/* the value returned */
};

/* Registers, in the order of the kernel's x86-64 pt_regs names. */
enum usc_reg {
	USC_REG_AX, USC_REG_BX, USC_REG_CX, USC_REG_DX, USC_REG_SI, USC_REG_DI,
	USC_REG_BP, USC_REG_SP, USC_REG_R8, USC_REG_R9, USC_REG_R10,
	USC_REG_R11, USC_REG_R12, USC_REG_R13, USC_REG_R14, USC_REG_R15,
	USC_REG_IP, USC_REG_NR
};

struct fetch_insn {
	uint8_t op;		/* enum fetch_op */
	uint8_t size;		/* store size in bytes (1, 2, 4, 8) */
	uint8_t reg;		/* enum usc_reg, for FOP_REG */
	uint8_t bf_width;	/* FOP_MOD_BF */
	uint8_t bf_offset;	/* FOP_MOD_BF */
	uint8_t pad[3];
	int64_t imm;
};
_Static_assert(sizeof(struct fetch_insn) == 16, "fetch_insn must stay 16 bytes");

#define USC_FETCH_MAX 16

/* How many bytes FOP_ST_BYTES stores: the previous argument's value prev
 * (a length) times the element size, at most in->imm and max. */
static inline uint32_t fetch_bytes_len(const struct fetch_insn *in, uint64_t prev, uint32_t max)
{
	uint64_t lim = in->imm < 0 ? 0 : (uint64_t)in->imm, n;

	if (lim > max)
		lim = max;
	n = prev > lim ? lim : prev * (in->size ? in->size : 1);
	return (uint32_t)(n > lim ? lim : n);
}

/* A filter (`if COND` after the fetch arguments): a short program in
 * reverse Polish notation over the probe's fetched values, fixed-size and
 * pointer-free like the fetch program, so that every engine can evaluate
 * it where the probe runs (filter_eval.h), or the kernel's event filter
 * can take its text. */
enum filter_op {
	FIL_END = 0,
	FIL_CMP,	/* push: value of arg `arg` cmp imm (a number) */
	FIL_STR,	/* push: string arg `arg` cmp the literal strs[imm & 0xffff]
			 * of imm >> 32 bytes (CMP_EQ, CMP_NE, CMP_GLOB, CMP_NGLOB) */
	FIL_NZ,		/* push: value of arg `arg` is not 0 */
	FIL_AND,	/* pop two, push their and */
	FIL_OR,
	FIL_NOT,	/* pop one, push its negation */
};

enum filter_cmp {
	CMP_EQ, CMP_NE, CMP_LT, CMP_LE, CMP_GT, CMP_GE,
	CMP_BITS,	/* value & imm is not 0 */
	CMP_GLOB,	/* a string matches a glob (*, ?, [...]) */
	CMP_NGLOB,
};

struct filter_insn {
	uint8_t op;		/* enum filter_op */
	uint8_t cmp;		/* enum filter_cmp */
	uint8_t arg;		/* the argument's index, once bound to a site */
	uint8_t sign;		/* the argument is signed: compare as int64 of its size */
	uint8_t size;		/* its size in bytes (1..8), to sign-extend */
	uint8_t pad;
	uint16_t name;		/* before binding: the argument's name in strs */
	int64_t imm;
};
_Static_assert(sizeof(struct filter_insn) == 16, "filter_insn must stay 16 bytes");

#define USC_FILTER_MAX 24	/* instructions */
#define USC_FILTER_STRS 256	/* bytes of names and literals, NUL-terminated each:
				 * a power of two (the bpf program masks offsets) */

struct usc_filter {
	uint32_t n;		/* 0: none */
	uint32_t pos, len;	/* the condition in the probe text */
	struct filter_insn insn[USC_FILTER_MAX];
	char strs[USC_FILTER_STRS];
};

/* The value types of the probe language. */
enum usc_type {
	USC_T_U8, USC_T_U16, USC_T_U32, USC_T_U64,
	USC_T_S8, USC_T_S16, USC_T_S32, USC_T_S64,
	USC_T_X8, USC_T_X16, USC_T_X32, USC_T_X64,
	USC_T_STRING, USC_T_USTRING,
	USC_T_SYMBOL,		/* an address shown as SYMBOL+OFF */
	USC_T_BITFIELD,		/* unsigned; insn carries the geometry */
	USC_T_STACK,		/* $ustack, $pystack: frames */
	USC_T_NR
};

/* $ustack: what a stack fetch stores, as every engine writes it (the
 * agent, the bpf program). Two forms:
 *   - walked where the probe ran (src/stack/stack_walk.h, with unwind
 *     tables compiled from the modules' CFI): struct fetch_walk_hdr, then
 *     n return addresses, 8 bytes each;
 *   - copied (--stack-mode copy, or a walk that could not go on: the
 *     fallback, with why): the registers at the hit, then `len` bytes of
 *     the stack from regs[USC_REG_SP] up, which the tracer unwinds with
 *     libdw, as perf's --call-graph dwarf does. */
#define USC_STACK_FRAMES 64		/* $ustack: frames shown */
#define USC_STACK_FRAMES_MAX 256	/* $ustack:N */
#define USC_STACK_BYTES 8192		/* bytes of stack copied, by default */
#define USC_STACK_BYTES_MAX 32768	/* --stack-size */

#define USC_PYSTACK_FRAMES 64		/* $pystack: frames shown */
#define USC_PYSTACK_FRAMES_MAX 128	/* $pystack:N (= PYTHON_FRAMES_MAX) */

enum fetch_stack_end {
	FETCH_STACK_FULL = 0,	/* the copy took all the bytes asked for */
	FETCH_STACK_MAPEND = 1,	/* the stack's mapping ends before */
	FETCH_STACK_UNREAD = 2,	/* the stack could not be read at all */
};

struct fetch_stack_hdr {
	uint64_t regs[USC_REG_NR];	/* at the hit; IP the probe's address */
	uint32_t len;			/* bytes of stack that follow */
	uint16_t frames;		/* frames wanted */
	uint8_t end;			/* enum fetch_stack_end */
	uint8_t why;			/* 0: a copy was asked for; else the walk fell
					 * back to it: STACK_WHY_* (stack_walk.h) */
};
_Static_assert(sizeof(struct fetch_stack_hdr) == 8 * USC_REG_NR + 8, "fetch_stack_hdr layout");

/* A walked stack: frame 0 is the probed address, exact; then return
 * addresses; the frames listed in sig[] are signal trampolines (the frame
 * after each, the interrupted code, is exact too). end and end_pc say where
 * and why it stopped (enum stack_walk_end, never a fallback: a walk that
 * falls back is stored as a copy). General on purpose: the tracer turns it
 * into struct usc_stack (probe/event.h) before anything else sees it, so a
 * symbolizer can splice other frames into it (Python's) there. */
#define FETCH_WALK_SIGS 4		/* = STACK_SIGS_MAX */

struct fetch_walk_hdr {
	uint64_t end_pc;		/* the frame the walk could not unwind, or
					 * the first left out (LIMIT) */
	uint16_t n;			/* return addresses that follow */
	uint16_t frames;		/* frames wanted */
	uint8_t end;			/* enum stack_walk_end */
	uint8_t nsig;
	uint8_t sig[FETCH_WALK_SIGS];	/* frames that are the signal trampoline */
	uint8_t pad[6];
};
_Static_assert(sizeof(struct fetch_walk_hdr) == 24, "fetch_walk_hdr layout");

/* Is it a walk an engine writes: len bytes at p (any alignment), its
 * header and n return addresses, signal frames among them? */
static inline int fetch_walk_valid(const void *p, size_t len)
{
	struct fetch_walk_hdr h;

	if (len < sizeof(h))
		return 0;
	__builtin_memcpy(&h, p, sizeof(h));
	if (len != sizeof(h) + 8 * (size_t)h.n || h.n > 256 || h.nsig > FETCH_WALK_SIGS ||
	    h.end < 1 || h.end > 5)	/* OUTERMOST ... UNREAD */
		return 0;
	for (unsigned k = 0; k < h.nsig; k++)
		if (h.sig[k] >= h.n)
			return 0;
	return 1;
}

/* $ustack's insn imm: frames (low 16 bits), bytes to copy (high 32) and how
 * (bit 16: FETCH_STACK_COPY, always a copy: --stack-mode copy). */
#define FETCH_STACK_COPY (1u << 16)

static inline uint32_t fetch_stack_frames(int64_t imm)
{
	uint32_t n = (uint32_t)imm & 0xffff;

	return n ? (n > USC_STACK_FRAMES_MAX ? USC_STACK_FRAMES_MAX : n) : USC_STACK_FRAMES;
}

static inline uint32_t fetch_stack_bytes(int64_t imm)
{
	uint32_t n = (uint32_t)((uint64_t)imm >> 32);

	return n ? (n > USC_STACK_BYTES_MAX ? USC_STACK_BYTES_MAX : (n + 7) & ~7u) :
		   USC_STACK_BYTES;
}

/* Kernel register name ("ax", "r8", ...) for enum usc_reg. */
const char *fetch_reg_kname(enum usc_reg reg);
/* Its x86-64 assembler name ("rax", "r8", ...). */
const char *fetch_reg_name64(enum usc_reg reg);

/* A register name as written in x86 assembly: the register and how many of
 * its low bytes the name covers. */
struct fetch_reg_name {
	const char *name;
	uint8_t reg;		/* enum usc_reg */
	uint8_t width;		/* bytes */
};
/* name[0..n) -> its entry, or NULL. */
const struct fetch_reg_name *fetch_reg_lookup(const char *name, size_t n);
/* Canonical type name ("u32", "string", ...). */
const char *fetch_type_name(enum usc_type type);
/* Byte size of a fixed-size type (0 for strings). */
unsigned fetch_type_size(enum usc_type type);
static inline int fetch_type_is_string(enum usc_type t)
{
	return t == USC_T_STRING || t == USC_T_USTRING;
}
static inline int fetch_type_is_signed(enum usc_type t)
{
	return t >= USC_T_S8 && t <= USC_T_S64;
}
static inline int fetch_type_is_hex(enum usc_type t)
{
	return (t >= USC_T_X8 && t <= USC_T_X64) || t == USC_T_SYMBOL;
}

#endif
