/* What the bpf engine's kernel program and its user-space half share: the
 * per-site fetch programs (the same fetch_insn as everywhere), filters and
 * aggregation roles, the record layout and the aggregation map's. Plain C
 * types only: this is compiled for BPF too (after probe/fetch.h). */
#ifndef USC_ENGINE_BPF_SHARED_H
#define USC_ENGINE_BPF_SHARED_H

#include "probe/fetch.h"
#include "python/offsets.h"

#define BPFENG_MAX_SITES 4096
#define BPFENG_MAX_ARGS 16		/* per site, the hidden return address included */
#define BPFENG_MAX_INSN 16		/* = USC_FETCH_MAX */
#define BPFENG_STR_MAX 128		/* bytes of one string, NUL included */
#define BPFENG_REC_MAX 4096		/* one record, strings included */
#define BPFENG_PENDING 16		/* tail calls a thread waits on */
#define BPFENG_POPS 4		/* tail calls one return can end (a chain's depth) */
#define BPFENG_LAT_DEPTH 16		/* latency: calls a thread is in, at most */
#define BPFENG_KEY_MAX 256		/* = AGG_KEY_MAX */
#define BPFENG_BUCKETS_MAX 1024	/* = AGG_LINEAR_MAX (>= AGG_LOG_BUCKETS) */

struct bpfeng_insn {		/* = struct fetch_insn */
	unsigned char op, size, reg, bf_width, bf_offset, pad[3];
	long long imm;
};

struct bpfeng_arg {
	unsigned int ninsn;
	unsigned int is_string;
	struct bpfeng_insn insn[BPFENG_MAX_INSN];
};

/* What a site does besides recording. */
enum bpfeng_site_kind {
	BPFENG_PLAIN = 0,	/* record the event */
	BPFENG_TAIL = 1,	/* a followed tail call: remember the stack pointer */
	BPFENG_CONT = 2,	/* a ret of a followed tail call's callees: deliver the
			 * tail calls waiting on this stack pointer */
};

/* What a site does when it aggregates in the kernel (as the inject
 * agent's enum inj_agg_role). */
enum bpfeng_agg_role {
	BPFENG_AGG_NONE = 0,	/* record the event */
	BPFENG_AGG_ROW = 1,		/* count or histogram a value in its key's row */
	BPFENG_AGG_ENTRY = 2,	/* latency: a call begins */
	BPFENG_AGG_RETURN = 3,	/* latency: the call of agg_func ends */
};

/* What a site does with the followed objects (uscope objtrace, the
 * objs map; = enum usc_obj_role). */
enum bpfeng_obj_role {
	BPFENG_OBJ_NONE = 0,
	BPFENG_OBJ_FROM = 1,	/* follow its first argument (verdict 1, or 2: full) */
	BPFENG_OBJ_UNTIL = 2,	/* follow it no more (verdict 1; none: no record) */
	BPFENG_OBJ_MATCH = 3,	/* record only a call that passes a followed object in
				 * an argument register (verdict: their mask) */
};
#define BPFENG_OBJ_NREGS 6

struct bpfeng_site {
	unsigned long long vaddr;	/* link-time address of the probe point */
	unsigned long long offset;	/* its file offset */
	unsigned int nargs;
	unsigned int kind;		/* enum bpfeng_site_kind */
	/* aggregation and filter */
	unsigned int agg;		/* enum bpfeng_agg_role */
	unsigned int agg_nkey;		/* the key: args [0, agg_nkey) */
	int agg_value;			/* hist: the value's arg, else -1 */
	unsigned int agg_func;		/* latency: the function's id */
	unsigned int agg_str_max;	/* bytes of a string in the key */
	unsigned short obj;		/* objtrace: enum bpfeng_obj_role */
	unsigned short obj_verdict;	/* ... the argument its verdict goes in */
	unsigned int obj_regs;		/* ... MATCH: the argument registers tested
					 * (usc_site.obj_regs) */
	unsigned char arg_size[BPFENG_MAX_ARGS];	/* an integer's bytes (0: all 8) */
	unsigned char arg_sign[BPFENG_MAX_ARGS];
	unsigned char arg_str[BPFENG_MAX_ARGS];
	struct usc_filter filter;	/* n 0: none */
	struct bpfeng_arg args[BPFENG_MAX_ARGS];
};

/* The aggregation map's key: the site, then the key's bytes (agg/agg_shared.h's
 * layout); the map's key size is 8 + the longest key, set at load. */
struct bpfeng_agg_key {
	unsigned int site;
	unsigned int pad;
	unsigned char key[BPFENG_KEY_MAX];
};

/* A row's values on one CPU: struct agg_val (agg/agg_shared.h), then its
 * buckets (the value's size is set at load). */

enum bpfeng_kind { BPFENG_INT = 0, BPFENG_STR = 1, BPFENG_FAULT = 2, BPFENG_NULL = 3,
	BPFENG_STACK = 4,	/* at str_off (BPFENG_STK_OFF), str_len bytes: fetch_stack_hdr, the stack */
	BPFENG_WALK = 5,	/* at str_off (BPFENG_STK_OFF), str_len bytes: fetch_walk_hdr, the pcs */
	BPFENG_STACKID = 6,	/* a count's key: val the walk's hash in stk_stacks (never
				 * in a record) */
	BPFENG_PYSTACK = 7 };	/* at str_off, str_len bytes: python_stack_hdr, the frames */

/* $ustack walked where the probe runs (the program's "$ustack walked"
 * part, engine/bpf/ustack.c): the unwind tables (stack_walk.h's tabs[],
 * rows[], idx[]) are three array maps the tracer fills and publishes the
 * counts of (stk_ntabs, ...: the program's globals) after the entries;
 * every traced process's mappings are ranges of a fourth, stk_maps, and
 * stk_procs gives a process's range: replaced whole (a new range, a new
 * gen) when its mappings change, the old range reused only a while later.
 * A walk looks its process up before and after: another gen, and it falls
 * back. Counted stacks are kept in stk_stacks by (process, hash), their
 * header and pcs the value (compared whole on a hit: a different stack
 * of the same hash is a collision, counted, and recorded instead). */
struct bpfeng_stk_proc {
	unsigned int first;		/* its mappings: stk_maps[first, first + n) */
	unsigned int n;
	unsigned int gen;		/* unique among every process's, every update */
	unsigned int pad;
};

struct bpfeng_stk_key {
	unsigned int tgid;
	unsigned int pad;
	unsigned long long hash;	/* odd; with BPFENG_STK_PY: in py_stacks */
};

/* $pystack counted the same way: its frames kept in py_stacks by (process,
 * hash), the hash's bit 1 set (the key's slot says which table) */
#define BPFENG_STK_PY 2ULL

/* bpfeng_rec.pad: a record that is no event: a $pystack counted for the
 * first time, for uscope to name its frames while the process runs */
#define BPFENG_REC_PYNAMES 1

/* $pystack: where CPython is in a process (the pyprocs map, by tgid):
 * its layout, glibc's, and _PyRuntime's run-time address */
struct bpfeng_py {
	struct python_offsets off;
	struct python_glibc glibc;
	unsigned int pad;
	unsigned long long runtime;
};

/* $ustack: where a record's stack copy goes, after its strings (and the
 * bytes a filter may read past them) */
#define BPFENG_STK_OFF (BPFENG_REC_MAX + 256)

struct bpfeng_val {
	unsigned long long val;		/* BPFENG_INT */
	unsigned short str_off;		/* BPFENG_STR: from the record's start */
	unsigned short str_len;		/* without the NUL */
	unsigned char kind;
	unsigned char pad[3];
};

struct bpfeng_rec {
	unsigned long long ts;		/* CLOCK_MONOTONIC ns */
	unsigned long long ip;		/* the probe's runtime address */
	unsigned int pid, tid;
	unsigned int site;		/* the event's site */
	unsigned int via;		/* the site that fired: site, or for a tail
					 * call delivered at its callee's return,
					 * that ret's site (ip is its address) */
	unsigned int cpu;
	unsigned int nargs;
	unsigned int len;		/* bytes of the whole record */
	unsigned int pad;
	char comm[16];
	struct bpfeng_val vals[BPFENG_MAX_ARGS];
	/* strings follow */
};

struct bpfeng_counts {
	unsigned long long hits, lost;
	/* tail calls whose return was never seen (a longjmp, an unwind, a
	 * thread's end, more than BPFENG_PENDING waiting) */
	unsigned long long dropped;
	unsigned long long full;	/* hits whose new key found the map full */
	unsigned long long fault;	/* hist: values that could not be read */
	unsigned long long collided;	/* counted stacks whose hash another had */
	/* $ustack counted as far as walked where the probe ran, by why the
	 * walk stopped (enum stack_fallback): the ring buffer had no room
	 * for a copy of the stack to unwind */
	unsigned long long partial[16];
};

#endif
