/* A script's compiled program: what the compiler (compile.c) writes and the
 * executor (vm.h) runs, wherever it runs: in uscope on streamed events, in
 * the traced process (the inject agent), in the kernel (the bpf program).
 * Plain C types only, pointer-free and fixed-size: compiled freestanding
 * for the agent and for BPF too, and copied as it is into the process's
 * shared memory and into a BPF map.
 *
 * A program is a blob: struct script_blob, then its instructions, its map
 * descriptors, its outputs' layouts and its string table, at the offsets
 * the header gives. Each probe of the script (an action block) is a range
 * of instructions; a site runs the range of its probe (usc_site.script).
 *
 * The machine: SCRIPT_NREGS 64-bit registers, SCRIPT_NSTRS string
 * registers of SCRIPT_STR_CAP bytes (a string is NUL-terminated and
 * zero-padded to the program's strlen, so that its bytes make a key), a
 * key buffer that map operations take their key from, and an output buffer
 * a record is built in (printf's values). Every offset into a buffer is a
 * constant the compiler chose, so that the BPF verifier sees bounded
 * accesses. Jumps go anywhere in the probe's range; the work of a hit is
 * bounded by SCRIPT_STEPS (each instruction executed counts), past which
 * the hit stops and the error is counted. */
#ifndef USC_SCRIPT_PROG_H
#define USC_SCRIPT_PROG_H

#ifdef __bpf__
#include <linux/types.h>
#else
#include <stdint.h>
#endif

#define SCRIPT_MAGIC 0x7573637269707401ULL	/* "uscript", version 1 */
#define SCRIPT_NREGS 32
#define SCRIPT_NSTRS 16
#define SCRIPT_STR_CAP 256		/* bytes of a string register */
#define SCRIPT_STRLEN 64		/* bytes of a string, NUL included (bpftrace's) */
#define SCRIPT_STRLEN_MAX 200		/* --strlen's bound (bpftrace's) */
#define SCRIPT_KEY_MAX 512		/* bytes of a map's key */
#define SCRIPT_OUT_MAX 2048		/* bytes of an output record's values */
#define SCRIPT_MAPS_MAX 128
#define SCRIPT_STEPS 100000		/* jumps back (a loop's turns) a hit may make:
					 * the rest of the code only goes forward */
#define SCRIPT_LOOP_MAX 1000000		/* a while loop's iterations at most: the
					 * step bound ends it before */
#define SCRIPT_HIST_BUCKETS 65		/* hist(): bpftrace's log2 buckets */
#define SCRIPT_LHIST_MAX 1002		/* lhist(): buckets at most, bpftrace's */
#define SCRIPT_KEYS_DEFAULT 4096	/* keys a map holds (bpftrace's) */
#define SCRIPT_VAL_BYTES (8 * SCRIPT_LHIST_MAX + 64)	/* a map's value, at most */

enum script_op {
	SOP_END = 0,	/* the probe is done */
	SOP_LDI,	/* r[d] = imm */
	SOP_MOV,	/* r[d] = r[a] */
	SOP_ALU,	/* r[d] = r[a] OP r[b], OP = x (enum script_alu) */
	SOP_ALUI,	/* r[d] = r[a] OP imm */
	SOP_EXT,	/* r[d] = r[a] cut to x & 0xff bytes, sign-extended when x & 0x100 */
	SOP_JMP,	/* pc = imm */
	SOP_JZ,		/* if (!r[a]) pc = imm */
	SOP_JNZ,	/* if (r[a]) pc = imm */
	SOP_IN,		/* r[d] = the hit's input x (an integer: 0 and counted when
			 * it could not be read) */
	SOP_INS,	/* s[d] = the hit's input x (a string: "" when unreadable) */
	SOP_BUILTIN,	/* r[d] = builtin x (enum script_builtin) */
	SOP_COMM,	/* s[d] = the thread's name */
	SOP_READ,	/* r[d] = x & 0xff bytes at r[a] + imm, sign-extended when
			 * x & 0x100 (0 and counted when unreadable) */
	SOP_STR,	/* s[d] = the string at r[a], at most r[b] bytes (b 0xff: the
			 * program's strlen), "" and counted when unreadable */
	SOP_BUF,	/* s[d] = r[b] bytes at r[a] (at most imm): a buffer, its
			 * length in its first byte */
	SOP_SCONST,	/* s[d] = the string table's string at x */
	SOP_SMOV,	/* s[d] = s[a] */
	SOP_SCMP,	/* r[d] = s[a] and s[b] compare: x 0 equal, 1 differ; imm
			 * > 0: only the first imm bytes (strncmp) */
	SOP_KEY,	/* key[x .. x+8) = r[a] */
	SOP_KEYS,	/* key[x .. x+imm) = s[a]'s bytes (imm: the strlen, padded to 8) */
	SOP_KEYPID,	/* key[x .. x+8) = the hit's process (a usym's, a stack's) */
	SOP_MAP,	/* map x: operation imm (enum script_mop) with r[a] / s[a],
			 * result in r[d] / s[d]; the key in the key buffer (b
			 * SCRIPT_KEYBUF), none (SCRIPT_KEYNONE: a zero word),
			 * input k's 8 bytes (SCRIPT_KEYIN | k), or register b's
			 * (a map of one integer key) */
	SOP_OUT,	/* out[x .. x+8) = r[a] */
	SOP_OUTS,	/* out[x .. x+imm) = s[a] */
	SOP_OUTPID,	/* out[x .. x+8) = the hit's process */
	SOP_EMIT,	/* emit the output record: kind imm (enum script_out_kind),
			 * its id x, its values out[0 .. a | b << 8) */
	SOP_USTACK,	/* r[d] = the hit's user stack as an id, imm frames (0: all) */
	SOP_RAND,	/* r[d] = a pseudo-random 32-bit number */
	SOP_SCUT,	/* s[d] cut to r[a] bytes (str(s, n)) */
	SOP_DELTA,	/* a per-thread stop, fused (compile.c's fuse): MAP LOAD
			 * into r[a] of map x & 0xff (its key as SOP_MAP's b), JZ
			 * r[a] to imm (imm 0: none), BUILTIN (x >> 8) & 0xff into
			 * r[(x >> 16) & 0xff], ALU SUB r[d] = that - r[a]:
			 * nsecs - @s[tid] after /@s[tid]/, one step */
	SOP_NR
};
_Static_assert(SOP_NR <= 32, "the bpf program's mask of the ops a program uses is 32 bits");

#define SCRIPT_KEYBUF 0xff
#define SCRIPT_KEYNONE 0xfe
#define SCRIPT_KEYIN 0x80	/* | k: input k's 8 bytes (IN fused in) */

enum script_alu {
	SALU_ADD, SALU_SUB, SALU_MUL, SALU_DIV, SALU_MOD, SALU_UDIV, SALU_UMOD,
	SALU_AND, SALU_OR, SALU_XOR, SALU_SHL, SALU_SHR, SALU_SAR,
	SALU_EQ, SALU_NE, SALU_LT, SALU_LE, SALU_GT, SALU_GE,
	SALU_ULT, SALU_ULE, SALU_UGT, SALU_UGE,
	SALU_LAND, SALU_LOR,	/* both operands already 0/1 or any: !!a && !!b */
	SALU_NEG,	/* unary (b unused): -a */
	SALU_NOT,	/* ~a */
	SALU_LNOT,	/* !a */
	SALU_BSWAP,	/* a's low b bytes reversed (SOP_ALUI: imm the size) */
	SALU_NR
};

enum script_builtin {
	SB_PID, SB_TID, SB_NSECS, SB_CPU, SB_ELAPSED, SB_UID, SB_GID,
	SB_SITE,	/* the session's index of the site that fired (func, probe) */
	SB_LIVE,	/* 1 where the probe runs (inject, bpf): memory is read at the
			 * hit; 0 in uscope, on streamed events: later */
	SB_NR
};

/* Map operations (SOP_MAP's imm). Loads of a key that is not there give 0
 * or "" (bpftrace's), and create nothing. */
enum script_mop {
	SMOP_LOAD,	/* r[d] = an integer value */
	SMOP_LOADS,	/* s[d] = a string value */
	SMOP_STORE,	/* = r[a] */
	SMOP_STORES,	/* = s[a] */
	SMOP_STOREB,	/* = the output buffer's first vallen bytes (a tuple, a usym) */
	SMOP_LOADB,	/* r[d] = 1 if the key is there; its bytes into the output buffer */
	SMOP_DELETE,
	SMOP_HAS,	/* r[d] = is the key there */
	SMOP_COUNT,
	SMOP_SUM,	/* + r[a] */
	SMOP_MIN,
	SMOP_MAX,
	SMOP_AVG,	/* count and sum of r[a] */
	SMOP_STATS,
	SMOP_HIST,	/* r[a]'s log2 bucket */
	SMOP_LHIST,	/* r[a]'s linear bucket (the map's lmin, lmax, lstep) */
	SMOP_AGGLOAD,	/* r[d] = an aggregation's value as an integer (count, sum,
			 * min, max, avg) */
	SMOP_NR
};

/* How a map's values are kept. Plain values (ints, strings, bytes) have
 * one copy a key, the last write's; aggregations one copy a key per thread
 * (inject) or CPU (bpf), which the reader combines. */
enum script_vk {
	SVK_INT = 0,	/* 8 bytes */
	SVK_BYTES,	/* vallen bytes: a string, a usym, a stack, a tuple */
	SVK_COUNT,	/* u64 */
	SVK_SUM,	/* s64 */
	SVK_MIN,	/* struct script_mm */
	SVK_MAX,
	SVK_AVG,	/* struct script_cs */
	SVK_STATS,
	SVK_HIST,	/* u64[SCRIPT_HIST_BUCKETS] */
	SVK_LHIST,	/* u64[nbuckets] */
	SVK_NR
};

static inline int script_vk_agg(uint32_t vk)
{
	return vk >= SVK_COUNT;
}

struct script_mm {		/* min, max */
	int64_t v;
	uint64_t set;		/* 0: no value yet */
};

struct script_cs {		/* avg, stats */
	uint64_t count;
	int64_t sum;
};

struct script_insn {
	uint8_t op;		/* enum script_op */
	uint8_t d, a, b;
	uint32_t x;
	int64_t imm;
};
_Static_assert(sizeof(struct script_insn) == 16, "script_insn must stay 16 bytes");

/* A map as every executor sees it. */
struct script_map {
	uint32_t vk;		/* enum script_vk */
	uint32_t flags;		/* SCRIPT_MAP_* */
	uint32_t keylen;	/* bytes of a key, a multiple of 8 (8 for a map of none) */
	uint32_t vallen;	/* bytes of a value (plain) or of a thread's copy (agg) */
	uint32_t max;		/* keys it holds at most */
	uint32_t nbuckets;	/* hist, lhist */
	int64_t lmin, lmax, lstep;	/* lhist */
};

#define SCRIPT_MAP_PERTHREAD 1u	/* every access is @m[tid]: a thread's own */
#define SCRIPT_MAP_NOKEY 2u	/* @m, without a key */

/* A probe (an action block): its instructions. */
struct script_probe {
	uint32_t first, n;	/* instructions [first, first + n) */
	uint32_t ninputs;	/* the site's fetch arguments it reads */
	uint32_t flags;		/* SCRIPT_PROBE_* */
};

/* Its code is integers and maps only, and reads inputs 0 and 1 at most: a
 * fast path may run it with no call out (no string, no memory read, no
 * output record, no stack). */
#define SCRIPT_PROBE_FAST 1u
/* Its code reads the thread's id in SCRIPT_REG_TID, the process's in
 * SCRIPT_REG_PID: the driver puts them there before the first step. */
#define SCRIPT_PROBE_TID 2u
#define SCRIPT_PROBE_PID 4u
/* It is a few updates of maps (compile.c's few(): at most
 * SCRIPT_UNITS_MAX): vm.h's _unit runs them with no machine to set up. */
#define SCRIPT_PROBE_UPDATES 8u
#define SCRIPT_UNITS_MAX 16

/* One unit of a probe of updates, decoded (vm.h's script_unit_decode):
 * a value, then the map operation that takes it. A driver that runs the
 * same probe at every hit decodes its units once (the inject agent's
 * agent_script_units); vm.h's _unit decodes and runs one. */
struct script_unit {
	uint8_t vop;		/* SOP_LDI, SOP_IN, SOP_BUILTIN, SOP_DELTA; 0: none */
	uint8_t vx;		/* IN: the input; BUILTIN, DELTA: the builtin */
	uint8_t dmap;		/* DELTA: the map it reads */
	uint8_t dkey;		/* DELTA: its key (as SOP_MAP's b) */
	uint8_t dstop;		/* DELTA: a value of 0 ends the probe */
	uint8_t map;		/* the map operation's map, */
	uint8_t mop;		/* its enum script_mop, */
	uint8_t key;		/* its key (SOP_MAP's b: none, an input, tid, pid) */
	int64_t imm;		/* LDI's value */
};
_Static_assert(sizeof(struct script_unit) == 16, "script_unit must stay 16 bytes");
#define SCRIPT_REG_TID (SCRIPT_NREGS - 1)
#define SCRIPT_REG_PID (SCRIPT_NREGS - 2)

/* What an output record is (SOP_EMIT's imm). The tracer does the rest. */
enum script_out_kind {
	SOUT_PRINTF = 1,	/* printf(FORMAT, ...): id the format */
	SOUT_TIME,		/* time(FORMAT): id its string */
	SOUT_PRINT_MAP,		/* print(@m[, top[, div]]): id the map, then top, div */
	SOUT_CLEAR,		/* clear(@m) */
	SOUT_ZERO,		/* zero(@m) */
	SOUT_EXIT,		/* exit() */
	SOUT_PRINT,		/* print(value): id the value's layout */
	SOUT_CAT,		/* cat(FORMAT, ...): id the format (a path) */
	SOUT_ERROR,		/* a runtime error, first of its kind: id enum script_err */
};

/* The header of an output record, before its values. */
struct script_rec {
	uint16_t kind;		/* enum script_out_kind */
	uint16_t id;
	uint32_t len;		/* bytes of values that follow */
};

/* Runtime errors, each counted and said once at the end. */
enum script_err {
	SERR_NONE = 0,
	SERR_READ,		/* a read of user memory failed: 0 or "" instead */
	SERR_DIV,		/* division by zero: 0 instead */
	SERR_STEPS,		/* the hit ran SCRIPT_STEPS instructions: stopped */
	SERR_FULL,		/* a map was full: the update is lost (per map) */
	SERR_OUT,		/* an output record found no room: lost */
	SERR_STACK,		/* a stack could not be taken */
	SERR_NR
};

struct script_blob {
	uint64_t magic;
	uint32_t size;		/* bytes of the whole blob */
	uint32_t strlen;	/* bytes of a string, NUL included */
	uint32_t nprobes, ninsns, nmaps, nstrtab;
	uint32_t probes_off, insns_off, maps_off, strtab_off;	/* from the blob's start */
};

static inline const struct script_probe *script_probes(const struct script_blob *b)
{
	return (const struct script_probe *)((const char *)b + b->probes_off);
}

static inline const struct script_insn *script_insns(const struct script_blob *b)
{
	return (const struct script_insn *)((const char *)b + b->insns_off);
}

static inline const struct script_map *script_maps(const struct script_blob *b)
{
	return (const struct script_map *)((const char *)b + b->maps_off);
}

static inline const char *script_strtab(const struct script_blob *b)
{
	return (const char *)b + b->strtab_off;
}

/* bpftrace's log2 bucket: 0 the negatives, 1 the zero, then 2 + floor(log2 v). */
static inline __attribute__((always_inline)) uint32_t script_hist_bucket(int64_t v)
{
	uint64_t u = (uint64_t)v;
	uint32_t n = 0;

	if (v < 0)
		return 0;
	if (v == 0)
		return 1;
#ifdef SCRIPT_NZ
	/* the driver's SCRIPT_NZ(x), 1 when x is not 0 with no branch: the
	 * highest bit set on one path (the bpf program's verifier walks it
	 * once, not once a bucket) */
	{
		uint64_t t;

		t = SCRIPT_NZ(u >> 32) << 5; n += (uint32_t)t; u >>= t;
		t = SCRIPT_NZ(u >> 16) << 4; n += (uint32_t)t; u >>= t;
		t = SCRIPT_NZ(u >> 8) << 3; n += (uint32_t)t; u >>= t;
		t = SCRIPT_NZ(u >> 4) << 2; n += (uint32_t)t; u >>= t;
		t = SCRIPT_NZ(u >> 2) << 1; n += (uint32_t)t; u >>= t;
		n += (uint32_t)SCRIPT_NZ(u >> 1);
	}
#else
	if (u >> 32) { n += 32; u >>= 32; }
	if (u >> 16) { n += 16; u >>= 16; }
	if (u >> 8) { n += 8; u >>= 8; }
	if (u >> 4) { n += 4; u >>= 4; }
	if (u >> 2) { n += 2; u >>= 2; }
	if (u >> 1) { n += 1; }
#endif
	return 2 + n;
}

/* bpftrace's linear bucket: 0 below min, one a step, the last at or above max. */
static inline uint32_t script_lhist_bucket(int64_t v, int64_t min, int64_t max, int64_t step,
					   uint32_t nb)
{
	if (v < min)
		return 0;
	if (v >= max || step <= 0)
		return nb - 1;
	return 1 + (uint32_t)((uint64_t)(v - min) / (uint64_t)step);
}

#endif
