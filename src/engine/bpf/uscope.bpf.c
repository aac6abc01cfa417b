// SPDX-License-Identifier: GPL-2.0
/* The bpf engine's program: attached to every site, with the site's index
 * as the attach cookie, it interprets that site's fetch programs with the
 * interpreter every engine shares (probe/fetch_eval.h) and sends a record
 * through a ring buffer.
 *
 * Two builds of it: usc_probe_s, sleepable, reads user memory with
 * bpf_copy_from_user, which faults in a page nobody has touched yet (a
 * string in .rodata the program never read); usc_probe, for kernels
 * without sleepable uprobes, reads with bpf_probe_read_user, which cannot
 * (such memory reads as a fault). The engine loads the first it can.
 *
 * Per thread (task storage, freed with the task): the scratch a record is
 * built in (a sleepable program may sleep in a fault, and another task on
 * its CPU run this program meanwhile, so a per-CPU buffer would not do),
 * the fetch programs' progress (eval_state), and the tail calls waiting for
 * their callee's return (see usc_site).
 *
 * A site may filter (`if COND`, the filter interpreter every engine shares:
 * probe/filter_eval.h) and aggregate instead of recording: count or
 * histogram a value in its key's row of a per-CPU hash map, or pair a
 * call's entry with its return per thread (latency). */
#include <stdbool.h>
#include <linux/bpf.h>
#include <linux/ptrace.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "probe/fetch.h"
#include "stack/stack_walk.h"	/* the unwind tables' types */
/* a sleepable program is preemptible: another task may run it on this CPU */
#define AGG_ADD(p, x) __sync_fetch_and_add(p, x)
#include "agg/agg_shared.h"
#include "engine/bpf/bpf_shared.h"
#include "python/frame.h"

char LICENSE[] SEC("license") = "GPL";

/* set before load */
const volatile __u32 count_only = 0;	/* hit counts only */
const volatile __u32 follow = 0;	/* only the processes in tgids (COMMAND's tree) */
const volatile __u32 agg_nbuckets = 0;	/* buckets of a row (0: none) */
const volatile __u32 agg_linear = 0;
const volatile __s64 agg_lmin = 0, agg_lmax = 0, agg_lstep = 1;
const volatile __u32 agg_unit_ns = 1;	/* latency: ns of its unit */
/* What some site of the session does (a feature no site uses is code the
 * verifier prunes, and does not walk: a quicker load) */
const volatile __u32 ustack_on = 0;	/* $ustack */
const volatile __u32 pystack_on = 0;	/* $pystack, or a $ustack's hidden one
					   (2: system-wide) */
const volatile __u32 obj_on = 0;	/* objtrace's roles */
/* What the sites' fetch programs and filters hold (their code is what the
 * verifier walks: its time is the engine's readiness). Every default is
 * "all", which is always right. */
const volatile __u64 ops_used = ~0ULL;	/* bit FOP_*: an instruction of that op */
const volatile __u32 args_on = 1;	/* some site fetches an argument */
const volatile __u32 filter_on = 1;	/* some site filters */
const volatile __u32 fstr_on = 1;	/* ... comparing a string */
#define OP_USED(op) ((ops_used >> (op)) & 1)

/* The program loaded is the sleepable one (the engine loads one of the
 * two at a time). Only that one may call bpf_copy_from_user: a callback
 * shared by both picks its reader by a flag in its context, which Linux
 * 6.1's verifier does not see as a constant (a byte spilled to the stack),
 * so it walks the sleepable reader in the other program too and refuses
 * the helper there. This constant makes that call dead code it prunes. */
const volatile __u32 prog_sleepable = 0;
#define bpf_copy_from_user(dst, len, src) \
	(prog_sleepable ? (bpf_copy_from_user)(dst, len, src) : -14 /* EFAULT */)

/* min and max older than this are stale: the tracer moves it on as it reads */
volatile __u64 agg_epoch = 1;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, BPFENG_MAX_SITES);
	__type(key, __u32);
	__type(value, struct bpfeng_site);
} sites SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, BPFENG_MAX_SITES);
	__type(key, __u32);
	__type(value, struct bpfeng_counts);
} counts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 8 << 20);
} events SEC(".maps");

/* Is the ring buffer too full for a stack's copy: half of it holds
 * records uscope has not read yet (a burst of copies is what fills it). */
static __always_inline bool stk_crowded(void)
{
	return bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) > (4u << 20);
}

/* The processes followed: COMMAND, and every process it forks (usc_fork). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, __u8);
} tgids SEC(".maps");

struct pend {
	__u64 sp;		/* the stack pointer at the tail call's jmp */
	__u32 site;
	__u32 pad;
};

/* Rows: per site and key, each CPU's values (struct agg_val and buckets).
 * Key and value sizes are set at load; a key past max_entries is refused
 * (counted as full). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 1);
	__uint(key_size, sizeof(struct bpfeng_agg_key));
	__uint(value_size, sizeof(struct agg_val));
} agg SEC(".maps");

/* uscope objtrace: the followed objects, added and removed by the --from
 * and --until sites, looked up by the others (max_entries set at load:
 * --max-objects; an add beyond is refused, counted as full). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1);
	__type(key, __u64);
	__type(value, __u8);
} objs SEC(".maps");

/* $pystack: where CPython is, by tgid (set by the tracer once it is mapped) */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, struct bpfeng_py);
} pyprocs SEC(".maps");

/* The interpreter, twice: the sleepable program's reads fault pages in. */
#define FETCH_INLINE static __always_inline
#define FETCH_STEP fetch_step_s
#define FETCH_READ(env, dst, addr, len) \
	bpf_copy_from_user(dst, len, (const void *)(unsigned long)(addr))
#define FETCH_PID(env) (bpf_get_current_pid_tgid() >> 32)
#define FETCH_TID(env) ((__u32)bpf_get_current_pid_tgid())
#define FETCH_CPU(env) bpf_get_smp_processor_id()
#define FETCH_OP_USED(op) OP_USED(op)
#include "probe/fetch_eval.h"

#define FETCH_INLINE static __always_inline
#define FETCH_STEP fetch_step_ns
#define FETCH_READ(env, dst, addr, len) \
	bpf_probe_read_user(dst, len, (const void *)(unsigned long)(addr))
#define FETCH_PID(env) (bpf_get_current_pid_tgid() >> 32)
#define FETCH_TID(env) ((__u32)bpf_get_current_pid_tgid())
#define FETCH_CPU(env) bpf_get_smp_processor_id()
#define FETCH_OP_USED(op) OP_USED(op)
#include "probe/fetch_eval.h"

/* The fetch programs' walk over a site's arguments: the pointers on the
 * stack (typed for the verifier), the rest in the thread's eval_state. */
struct eval_ctx {
	struct task_state *ts;
	struct bpfeng_site *site;
};

/* A new row's values */
static char agg_zeros[sizeof(struct agg_val) + 8 * BPFENG_BUCKETS_MAX];

/* A glob match in progress. Kept in task storage, not on the stack: the
 * verifier knows nothing of values it loads from a map, so the step
 * callback's states converge at once instead of being walked through
 * every position. */
struct glob_state {
	__u32 poff, pn;		/* the pattern, in the filter's strings */
	__u32 soff, sn;		/* the string, in the record's buffer */
	__u32 pi, si, star, mark;
	__u32 in_class, cq, cneg, chit;	/* inside [...]: at cq */
	__u32 literal;		/* the pattern's characters stand for themselves */
	int result;
};

struct lat_frame {
	__u32 func;		/* the function's id */
	__u32 nokey;		/* its key was not made (a fault): no row */
	__u64 ts;
	struct bpfeng_agg_key key;
};

/* A walk remembered (per thread: see stk_walk). */
#define STK_MEMO_N 4		/* a power of two */
#define STK_MEMO_READS 32
#define STK_MEMO_PCS 32
#define STK_MEMO_RANGES 4	/* the words it read lie in at most so many ranges */
#define STK_MEMO_RANGE 512	/* ... of at most so many bytes each */

struct stk_memo {
	__u64 ip, sp, bp;
	__u32 gen, frames;
	__u32 nreads, bp_used;
	__u64 rbp_reads;	/* the reads (bits) that were saved rbps: compared
				 * only where the walk used bp (STACK_READ_RBP) */
	__u32 valid, nranges;	/* nranges: the ranges so far, as it is read */
	__u64 clo, chi;		/* the last range so far: [clo, chi) */
	__u64 rlo[STK_MEMO_RANGES];	/* the ranges: [rlo, rlo + rlen), read */
	__u32 rlen[STK_MEMO_RANGES];	/* again one after the other */
	__u64 hash;		/* counted: its hash in stk_stacks; 0: not yet */
	struct fetch_walk_hdr h;
	__u64 pcs[STK_MEMO_PCS];
	__u64 addr[STK_MEMO_READS];	/* as the walk read them */
	__u64 val[STK_MEMO_READS];
	__u32 off[STK_MEMO_READS];	/* ... in the ranges read one after the other */
};

/* The arguments being evaluated. Kept in task storage, not on the stack,
 * for the reason glob_state is: the verifier knows nothing of the values
 * it loads from a map, so the steps' callbacks converge at once instead of
 * being walked through every string offset and argument. */
struct eval_state {
	struct fetch_where where;
	__u64 val;		/* the current argument's value */
	__u64 stack_imm;	/* $ustack: its instruction's imm (frames, bytes) */
	__u32 str_off;		/* where the next string goes */
	__u32 nargs;
	__u32 done;		/* the current argument is finished */
	__u32 stack_arg;	/* $ustack: its argument + 1 (0: none) */
	__u32 arg;		/* the argument being evaluated */
	__u32 py_arg;		/* $pystack: its argument + 1 (0: none) */
	__u32 py_want;		/* ... the frames it asks for */
	__u32 pad;
};

struct task_state {
	__u32 npend;
	__u32 nlat;		/* latency: calls this thread is in */
	struct pend pend[BPFENG_PENDING];
	__u64 regs[USC_REG_NR];	/* the context's registers, in enum usc_reg order:
				 * ctx fields can only be read at constant offsets */
	struct bpfeng_agg_key key;	/* the key being made */
	struct glob_state glob;
	struct eval_state ev;
	struct lat_frame lat[BPFENG_LAT_DEPTH];
	/* a record: strings at offsets below BPFENG_REC_MAX, read up to 256
	 * bytes on by a filter's comparisons; then a $ustack's copy (and a
	 * page of room for the copy's last, unaligned, page) */
	char buf[BPFENG_STK_OFF + sizeof(struct fetch_stack_hdr) + USC_STACK_BYTES_MAX + 4096];
	/* $ustack walked: the walk, and the window of the stack last read */
	struct stack_walk walk;
	__u64 wbase;
	__u64 stk_hash;		/* a count's: the walk's hash */
	__u8 win[512];
	/* the walks remembered (see stk_walk) */
	__u32 mlog;		/* the one being written + 1, logging its reads */
	__u32 mbp;		/* ... a row with a CFA from rbp was used */
	struct stk_memo memo[STK_MEMO_N];
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct task_state);
} state SEC(".maps");

/* The thread's state, in a global function (one the verifier checks once,
 * on its own): there a pointer argument is typed `mem`, which Linux 6.1's
 * verifier refuses as a map key or value ("R2 type=mem expected=fp, pkt,
 * pkt_meta, map_key, map_value"; 6.2 and later take it). A key or value
 * made in the thread's state is passed from the map's own pointer instead,
 * looked up again (the task's storage cache: a few loads). */
static __always_inline struct task_state *ts_map(void)
{
	return bpf_task_storage_get(&state, bpf_get_current_task_btf(), 0, 0);
}

/* Strings, sleepable: the kfunc (Linux 6.12) faults pages in as
 * bpf_copy_from_user does. Without it (have_copy_str 0: its call is dead
 * code), the string's page, and the next where the string may reach it,
 * is faulted in by a one-byte bpf_copy_from_user first, and the string
 * read from memory now there (fault_in). */
extern int bpf_copy_from_user_str(void *dst, __u32 dst__sz, const void *unsafe_ptr__ign,
				  __u64 flags) __ksym __weak;
const volatile __u32 have_copy_str = 0;

/* The pages of [addr, addr + len) faulted in, so far as they are mapped
 * (an error, at an unmapped page after the string's end, is no matter):
 * one byte of each, copied into dst (overwritten after). */
static __always_inline void fault_in(char *dst, __u64 addr, __u32 len)
{
	bpf_copy_from_user(dst, 1, (const void *)(unsigned long)addr);
	if ((addr & 4095) + len > 4096)
		bpf_copy_from_user(dst, 1, (const void *)(unsigned long)((addr | 4095) + 1));
}

/* One step of eval: instruction k of argument i (step = i * BPFENG_MAX_INSN +
 * k). A bpf_loop callback, so the verifier checks it once, not once a step. */
static __always_inline long eval_step(__u32 step, struct eval_ctx *x, bool sleepable)
{
	__u32 i = step / BPFENG_MAX_INSN, k = step % BPFENG_MAX_INSN;
	struct task_state *ts = x->ts;
	struct eval_state *c = &ts->ev;
	struct bpfeng_rec *rec = (struct bpfeng_rec *)ts->buf;
	const struct fetch_insn *in;
	struct bpfeng_val *v;
	char *dst;
	long n;
	int st;

	if (i >= BPFENG_MAX_ARGS || i >= c->nargs)
		return 1;
	v = &rec->vals[i];
	if (k == 0) {
		c->val = 0;
		c->done = 0;
		v->kind = BPFENG_INT;
		v->val = 0;
	}
	if (c->done)
		return 0;
	in = (const struct fetch_insn *)&x->site->args[i].insn[k];
	st = sleepable ? fetch_step_s(in, ts->regs, &c->where, &c->val, NULL) :
			 fetch_step_ns(in, ts->regs, &c->where, &c->val, NULL);
	switch (st) {
	case FETCH_NEXT:
		if (k < BPFENG_MAX_INSN - 1)
			return 0;
		/* fall through: the program ends with its last instruction */
	case FETCH_DONE:
		v->val = c->val;
		c->done = 1;
		return 0;
	case FETCH_NULL:
		v->kind = BPFENG_NULL;
		c->done = 1;
		return 0;
	case FETCH_STACK:
		/* copied once every argument is: copy_stack */
		v->kind = BPFENG_FAULT;
		c->stack_arg = i + 1;
		c->stack_imm = in->imm;
		c->done = 1;
		return 0;
	case FETCH_PYSTACK:
		/* walked once every argument is: walk_python */
		v->kind = BPFENG_FAULT;
		c->py_arg = i + 1;
		c->py_want = (__u32)in->imm;
		c->done = 1;
		return 0;
	case FETCH_BYTES: {	/* counted: the previous argument's value */
		if (!OP_USED(FOP_ST_BYTES))
			goto fault;
		__u64 len = fetch_bytes_len(in, i ? rec->vals[(i - 1) & (BPFENG_MAX_ARGS - 1)].val : 0,
					    BPFENG_STR_MAX - 1);

		if (c->str_off > BPFENG_REC_MAX - BPFENG_STR_MAX)
			goto fault;
		dst = ts->buf + (c->str_off & (BPFENG_REC_MAX - 1));
		/* a bound the verifier sees on the very register it checks (the
		 * clamp's branches are lost on Linux 6.1's) */
		asm volatile("%0 &= 0x7f" : "+r"(len));	/* BPFENG_STR_MAX - 1 */
		if (len && (sleepable ? bpf_copy_from_user(dst, len, (const void *)(unsigned long)c->val) :
			    bpf_probe_read_user(dst, len, (const void *)(unsigned long)c->val)))
			goto fault;
		dst[len & (BPFENG_STR_MAX - 1)] = 0;
		v->kind = BPFENG_STR;
		v->str_off = c->str_off;
		v->str_len = len;
		c->str_off += (len + 1 + 7) & ~7;
		c->done = 1;
		return 0;
	}
	case FETCH_STRING:
	case FETCH_COMM:
		if (!OP_USED(FOP_ST_STRING) && !OP_USED(FOP_COMM))
			goto fault;
		if (c->str_off > BPFENG_REC_MAX - BPFENG_STR_MAX)
			goto fault;	/* no room left: shown as a fault */
		dst = ts->buf + (c->str_off & (BPFENG_REC_MAX - 1));
		if (st == FETCH_COMM) {
			if (bpf_get_current_comm(dst, 16))
				goto fault;
			n = 1;
			for (int j = 0; j < 15; j++, n++)
				if (!dst[j])
					break;
		} else if (sleepable && prog_sleepable && have_copy_str) {
			n = bpf_copy_from_user_str(dst, BPFENG_STR_MAX, (const void *)(unsigned long)c->val,
						   0);
		} else {
			if (sleepable && prog_sleepable)
				fault_in(dst, c->val, BPFENG_STR_MAX);
			n = bpf_probe_read_user_str(dst, BPFENG_STR_MAX,
						    (const void *)(unsigned long)c->val);
		}
		if (n <= 0)
			goto fault;
		v->kind = BPFENG_STR;
		v->str_off = c->str_off;
		v->str_len = n - 1;
		c->str_off += (n + 7) & ~7;
		c->done = 1;
		return 0;
	default:
		goto fault;
	}
fault:
	v->kind = BPFENG_FAULT;
	c->done = 1;
	return 0;
}

static long eval_step_s(__u32 k, void *data)
{
	struct eval_ctx *x = data;

	return eval_step(x->ts->ev.arg * BPFENG_MAX_INSN + k, x, true);
}

static long eval_step_ns(__u32 k, void *data)
{
	struct eval_ctx *x = data;

	return eval_step(x->ts->ev.arg * BPFENG_MAX_INSN + k, x, false);
}

/* Argument i: its instructions, a step each (not the slots it leaves
 * empty: a hit pays for the instructions its arguments have). */
static __always_inline long eval_arg(__u32 i, struct eval_ctx *x, bool sleepable)
{
	__u32 n = x->site->args[i & (BPFENG_MAX_ARGS - 1)].ninsn;

	if (i >= BPFENG_MAX_ARGS || i >= x->ts->ev.nargs)
		return 1;
	x->ts->ev.arg = i;
	bpf_loop(n < BPFENG_MAX_INSN ? (n ? n : 1) : BPFENG_MAX_INSN,
		 sleepable ? eval_step_s : eval_step_ns, x, 0);
	return 0;
}

static long eval_arg_s(__u32 i, void *data)
{
	return eval_arg(i, data, true);
}

static long eval_arg_ns(__u32 i, void *data)
{
	return eval_arg(i, data, false);
}

/* The program's parts by concern (engine/bpf/prog/), each included once,
 * here, in the order each uses the ones before it; the hit itself and the
 * programs the engine attaches follow. */
#include "engine/bpf/prog/filter.h"
#include "engine/bpf/prog/agg.h"
#include "engine/bpf/prog/ustack.h"
#include "engine/bpf/prog/pystack.h"
#include "engine/bpf/prog/objtrace.h"

/* ---- a hit --------------------------------------------------------------- */

/* A record's name and time, which an aggregate has no use for (a hit of an
 * aggregating site is recorded when its stack falls back). */
static __always_inline void rec_stamp(struct bpfeng_rec *rec)
{
	if (!rec->ts)
		rec->ts = bpf_ktime_get_ns();
	bpf_get_current_comm(rec->comm, sizeof(rec->comm));
}

/* Site `idx` from the registers: record it into the ring buffer, or
 * aggregate it. via: the site that fired (idx, or the ret a tail call is
 * delivered at). */
static __always_inline void emit(struct task_state *ts, __u32 idx, __u32 via,
				 struct bpfeng_counts *cnt, bool sleepable)
{
	struct bpfeng_site *site = bpf_map_lookup_elem(&sites, &idx);
	struct bpfeng_rec *rec = (struct bpfeng_rec *)ts->buf;
	__u64 pt = bpf_get_current_pid_tgid();
	struct eval_state *c = &ts->ev;
	struct eval_ctx x = {.ts = ts, .site = site};
	__u32 nargs, len;
	__u8 why = 0;

	if (!site || !cnt)
		return;
	if (site->agg == BPFENG_AGG_RETURN) {
		lat_return(site, cnt);
		return;
	}
	rec->ts = site->agg ? 0 : bpf_ktime_get_ns();	/* a record's: aggregates have none */
	rec->ip = ts->regs[USC_REG_IP];
	rec->pid = pt >> 32;
	rec->tid = (__u32)pt;
	rec->site = idx;
	rec->via = via;
	rec->pad = 0;
	rec->cpu = bpf_get_smp_processor_id();
	nargs = site->nargs;
	if (nargs > BPFENG_MAX_ARGS)
		nargs = BPFENG_MAX_ARGS;
	rec->nargs = nargs;
	c->where.ip = ts->regs[USC_REG_IP];
	c->where.offset = site->offset;
	c->where.vaddr = site->vaddr;
	c->str_off = sizeof(struct bpfeng_rec);
	c->nargs = nargs;
	c->stack_arg = c->py_arg = 0;
	if (args_on)
		bpf_loop(nargs, sleepable ? eval_arg_s : eval_arg_ns, &x, 0);
	if (obj_on && site->obj) {
		__u64 verdict = obj_verdict(site, ts, cnt);
		struct bpfeng_val *v = &rec->vals[site->obj_verdict & (BPFENG_MAX_ARGS - 1)];

		if (!verdict)
			return;
		v->kind = BPFENG_INT;
		v->val = verdict;
	}
	if (filter_on && !filter_pass(site, ts))
		return;
	if (pystack_on && c->py_arg) {
		/* the Python frames after the strings, before a stack walked or
		 * copied (a $ustack's hidden $pystack: spliced in by uscope) */
		len = c->str_off;
		if (len > BPFENG_REC_MAX)
			len = BPFENG_REC_MAX;
		c->str_off = walk_python(ts, len, c->py_want, c->py_arg - 1, sleepable);
		/* a $pystack key (no $ustack): counted by its frames' hash */
		if (site->agg && !c->stack_arg) {
			__u32 pi = (c->py_arg - 1) & (BPFENG_MAX_ARGS - 1);
			int r = py_count(rec->vals[pi].str_off, rec->vals[pi].str_len, cnt);

			if (r == 2) {
				__sync_fetch_and_add(&cnt->full, 1);
				return;
			}
			if (r == 3) {
				__u64 l = c->str_off;

				asm volatile("%0 &= 0x1fff" : "+r"(l));
				if (l > BPFENG_STK_OFF)
					l = BPFENG_STK_OFF;
				rec->pad = BPFENG_REC_PYNAMES;
				rec->len = (__u32)l;
				rec_stamp(rec);
				/* (none sent: the frames are named when the rows are read) */
				bpf_ringbuf_output(&events, ts->buf, l, 0);
				rec->pad = 0;
			}
			if (r == 0 || r == 3) {
				rec->vals[pi].kind = BPFENG_STACKID;
				rec->vals[pi].val = ts->stk_hash;
				aggregate(site, idx, cnt);
				return;
			}
		}
	}
	if (ustack_on && c->stack_arg && stk_on && !((__u64)c->stack_imm & FETCH_STACK_COPY)) {
		/* walked: counted by its hash, or recorded; copied when it falls back */
		__u32 frames = (__u32)c->stack_imm & 0xffff, i = (c->stack_arg - 1) & (BPFENG_MAX_ARGS - 1);

		__u64 at = (c->str_off + 7) & ~7u;

		if (at > BPFENG_STK_OFF)	/* (Python frames end there at most) */
			at = BPFENG_STK_OFF;
		/* a bound the verifier sees on the very register it checks */
		asm volatile("%0 &= 0x1ff8" : "+r"(at));
		why = stk_walk(ts, frames ? (frames > USC_STACK_FRAMES_MAX ? USC_STACK_FRAMES_MAX :
					       frames) : USC_STACK_FRAMES, at);
		/* a count never loses a hit to a full ring buffer: a walk that
		 * stopped is copied for uscope to unwind while the ring buffer
		 * has room, and counted as far as it went when it has not */
		if (site->agg && (!why || stk_crowded())) {
			int r = stk_count(at, cnt);

			if (r == 2) {
				__sync_fetch_and_add(&cnt->full, 1);
				return;
			}
			if (!r) {
				if (why)
					__sync_fetch_and_add(&cnt->partial[why & 15], 1);
				rec->vals[i].kind = BPFENG_STACKID;
				rec->vals[i].val = ts->stk_hash;
				aggregate(site, idx, cnt);
				return;
			}
		}
		if (!why) {
			__u64 l = at + sizeof(struct fetch_walk_hdr) +
				  8 * (__u64)((const struct fetch_walk_hdr *)(ts->buf + at))->n;

			asm volatile("%0 &= 0x3fff" : "+r"(l));
			if (l > sizeof(ts->buf))
				l = sizeof(ts->buf);
			rec->vals[i].kind = BPFENG_WALK;
			rec->vals[i].str_off = (__u16)at;
			rec->vals[i].str_len = (__u16)(l - at);
			rec->len = (__u32)l;
			rec_stamp(rec);
		if (bpf_ringbuf_output(&events, ts->buf, l, 0))
				__sync_fetch_and_add(&cnt->lost, 1);
			return;
		}
	} else if (site->agg) {
		aggregate(site, idx, cnt);
		return;
	}
	len = c->str_off;
	if (len > BPFENG_STK_OFF)
		len = BPFENG_STK_OFF;
	if (ustack_on && c->stack_arg) {
		__u64 l = copy_stack(ts, c, sleepable, why);

		/* a bound the verifier sees on the very register it checks */
		asm volatile("%0 &= 0xffff" : "+r"(l));
		if (l > sizeof(ts->buf))
			l = sizeof(ts->buf);
		rec->len = (__u32)l;
		rec_stamp(rec);
		if (bpf_ringbuf_output(&events, ts->buf, l, 0))
			__sync_fetch_and_add(&cnt->lost, 1);
		return;
	}
	asm volatile("%0 &= 0x1fff" : "+r"(len));
	if (len > BPFENG_STK_OFF)
		len = BPFENG_STK_OFF;
	rec->len = len;
	rec_stamp(rec);
	if (bpf_ringbuf_output(&events, ts->buf, len, 0))
		__sync_fetch_and_add(&cnt->lost, 1);
}

struct pend_ctx {
	struct task_state *ts;
	__u64 sp;
	__u32 id;
	__u32 cont;		/* a ret of tail calls' callees: deliver theirs */
	struct bpfeng_counts *cnt;
};

/* Drop the tail calls whose frame is gone (deeper than this one): they
 * never returned through a ret we probe (a longjmp, an unwind). */
static long drop_stale(__u32 k, void *data)
{
	struct pend_ctx *p = data;
	__u32 n = p->ts->npend;

	if (n == 0 || n > BPFENG_PENDING || p->ts->pend[(n - 1) & (BPFENG_PENDING - 1)].sp >= p->sp)
		return 1;
	p->ts->npend = n - 1;
	__sync_fetch_and_add(&p->cnt->dropped, 1);
	return 0;
}

/* The hit's events, one a step: the site's own (one step), or at a ret
 * that returns from the frame of the tail calls waiting on this stack
 * pointer, theirs, one a step (their functions return now).
 *
 * Every event is emitted here, in this callback, and nowhere else: emit is
 * inlined once, and the probe's own frame stays small. Linux 6.1 counts a
 * callback's frame on the call chain that references it, and the chain
 * probe -> this -> stk_walk -> its step callbacks must stay within 512
 * bytes of stack. */
static __always_inline long deliver(__u32 k, struct pend_ctx *p, bool sleepable)
{
	__u32 n = p->ts->npend, t;

	if (!p->cont) {
		if (k)
			return 1;
		emit(p->ts, p->id, p->id, p->cnt, sleepable);
		return 1;
	}
	if (n == 0 || n > BPFENG_PENDING || p->ts->pend[(n - 1) & (BPFENG_PENDING - 1)].sp != p->sp)
		return 1;
	t = p->ts->pend[(n - 1) & (BPFENG_PENDING - 1)].site;
	p->ts->npend = n - 1;
	emit(p->ts, t, p->id, bpf_map_lookup_elem(&counts, &t), sleepable);
	return 0;
}

static long deliver_s(__u32 k, void *data)
{
	return deliver(k, data, true);
}

static long deliver_ns(__u32 k, void *data)
{
	return deliver(k, data, false);
}

static __always_inline int probe(struct pt_regs *regs, bool sleepable)
{
	__u32 id = (__u32)bpf_get_attach_cookie(regs);
	struct bpfeng_counts *cnt = bpf_map_lookup_elem(&counts, &id);
	struct bpfeng_site *site = bpf_map_lookup_elem(&sites, &id);
	struct pend_ctx pc = {};
	struct task_state *ts;

	if (!cnt || !site)
		return 0;
	if (follow) {
		__u32 tgid = bpf_get_current_pid_tgid() >> 32;

		if (!bpf_map_lookup_elem(&tgids, &tgid))
			return 0;	/* not COMMAND's */
	}
	__sync_fetch_and_add(&cnt->hits, 1);	/* sleepable: preemptible */
	if (count_only)
		return 0;
	ts = bpf_task_storage_get(&state, bpf_get_current_task_btf(), 0,
				  BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!ts) {
		__sync_fetch_and_add(&cnt->lost, 1);
		return 0;
	}
	pc.ts = ts;
	pc.sp = regs->rsp;
	pc.id = id;
	pc.cnt = cnt;
	if (ts->npend)
		bpf_loop(BPFENG_PENDING, drop_stale, &pc, 0);
	if (site->kind == BPFENG_TAIL) {
		__u32 n = ts->npend;

		if (n >= BPFENG_PENDING) {
			__sync_fetch_and_add(&cnt->lost, 1);	/* no room: its return goes unseen */
			return 0;
		}
		ts->pend[n & (BPFENG_PENDING - 1)].sp = pc.sp;
		ts->pend[n & (BPFENG_PENDING - 1)].site = id;
		ts->npend = n + 1;
		return 0;
	}
	ts->regs[USC_REG_AX] = regs->rax;
	ts->regs[USC_REG_BX] = regs->rbx;
	ts->regs[USC_REG_CX] = regs->rcx;
	ts->regs[USC_REG_DX] = regs->rdx;
	ts->regs[USC_REG_SI] = regs->rsi;
	ts->regs[USC_REG_DI] = regs->rdi;
	ts->regs[USC_REG_BP] = regs->rbp;
	ts->regs[USC_REG_SP] = regs->rsp;
	ts->regs[USC_REG_R8] = regs->r8;
	ts->regs[USC_REG_R9] = regs->r9;
	ts->regs[USC_REG_R10] = regs->r10;
	ts->regs[USC_REG_R11] = regs->r11;
	ts->regs[USC_REG_R12] = regs->r12;
	ts->regs[USC_REG_R13] = regs->r13;
	ts->regs[USC_REG_R14] = regs->r14;
	ts->regs[USC_REG_R15] = regs->r15;
	ts->regs[USC_REG_IP] = regs->rip;
	pc.cont = site->kind == BPFENG_CONT;
	if (pc.cont && !ts->npend)
		return 0;
	if (!pc.cont && obj_on && site->obj == BPFENG_OBJ_MATCH &&
	    !obj_mask(ts->regs, site->obj_regs))
		return 0;	/* no followed object: nothing to evaluate */
	bpf_loop(BPFENG_POPS, sleepable ? deliver_s : deliver_ns, &pc, 0);
	return 0;
}

SEC("uprobe.s")
int usc_probe_s(struct pt_regs *regs)
{
	return probe(regs, true);
}

SEC("uprobe")
int usc_probe(struct pt_regs *regs)
{
	return probe(regs, false);
}

/* A process COMMAND's tree forks is followed too (a thread needs nothing:
 * it shares its tgid). */
SEC("raw_tp/sched_process_fork")
int usc_fork(struct bpf_raw_tracepoint_args *ctx)
{
	struct task_struct *parent = (struct task_struct *)ctx->args[0];
	struct task_struct *child = (struct task_struct *)ctx->args[1];
	__u32 ptgid = BPF_CORE_READ(parent, tgid), ctgid = BPF_CORE_READ(child, tgid);
	__u8 one = 1;

	if (ptgid != ctgid && bpf_map_lookup_elem(&tgids, &ptgid))
		bpf_map_update_elem(&tgids, &ctgid, &one, BPF_ANY);
	return 0;
}

/* A process of the tree ends: out of it (its pid may be used again), when
 * its last thread exits (signal->live reached 0 before this tracepoint). */
SEC("raw_tp/sched_process_exit")
int usc_exit(struct bpf_raw_tracepoint_args *ctx)
{
	struct task_struct *task = (struct task_struct *)ctx->args[0];
	__u32 tgid = BPF_CORE_READ(task, tgid);

	if (BPF_CORE_READ(task, signal, live.counter) == 0)
		bpf_map_delete_elem(&tgids, &tgid);
	return 0;
}
