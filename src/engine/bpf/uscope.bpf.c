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
 * and the tail calls waiting for their callee's return (see usc_site).
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
#define STK_MEMO_SPAN 16384	/* the words it read lie within this many bytes */

struct stk_memo {
	__u64 ip, sp, bp;
	__u32 gen, frames;
	__u32 nreads, bp_used;
	__u32 valid, span;	/* the words read lie in [lo, lo + span) */
	__u64 lo;
	__u64 hash;		/* counted: its hash in stk_stacks; 0: not yet */
	struct fetch_walk_hdr h;
	__u64 pcs[STK_MEMO_PCS];
	__u64 addr[STK_MEMO_READS];	/* as the walk read them */
	__u64 val[STK_MEMO_READS];
	__u32 off[STK_MEMO_READS];	/* ... from lo */
};

struct task_state {
	__u32 npend;
	__u32 nlat;		/* latency: calls this thread is in */
	struct pend pend[BPFENG_PENDING];
	__u64 regs[USC_REG_NR];	/* the context's registers, in enum usc_reg order:
				 * ctx fields can only be read at constant offsets */
	struct bpfeng_agg_key key;	/* the key being made */
	struct glob_state glob;
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

/* The interpreter, twice: the sleepable program's reads fault pages in. */
#define FETCH_INLINE static __always_inline
#define FETCH_STEP fetch_step_s
#define FETCH_READ(env, dst, addr, len) \
	bpf_copy_from_user(dst, len, (const void *)(unsigned long)(addr))
#define FETCH_PID(env) (bpf_get_current_pid_tgid() >> 32)
#define FETCH_TID(env) ((__u32)bpf_get_current_pid_tgid())
#define FETCH_CPU(env) bpf_get_smp_processor_id()
#include "probe/fetch_eval.h"

#define FETCH_INLINE static __always_inline
#define FETCH_STEP fetch_step_ns
#define FETCH_READ(env, dst, addr, len) \
	bpf_probe_read_user(dst, len, (const void *)(unsigned long)(addr))
#define FETCH_PID(env) (bpf_get_current_pid_tgid() >> 32)
#define FETCH_TID(env) ((__u32)bpf_get_current_pid_tgid())
#define FETCH_CPU(env) bpf_get_smp_processor_id()
#include "probe/fetch_eval.h"

struct eval_ctx {
	const __u64 *regs;
	struct bpfeng_site *site;
	struct fetch_where where;
	char *buf;		/* the record being built */
	__u32 str_off;		/* where the next string goes */
	__u32 nargs;
	__u64 val;		/* the current argument's value */
	__u32 done;		/* the current argument is finished */
	__u32 stack_arg;	/* $ustack: its argument + 1 (0: none) */
	__u64 stack_imm;	/* ... its instruction's imm (frames, bytes) */
	__u32 arg;		/* the argument being evaluated */
	__u32 py_arg;		/* $pystack: its argument + 1 (0: none) */
	__u32 py_want;		/* ... the frames it asks for */
};

/* Strings, sleepable: the kfunc (Linux 6.12) faults pages in as
 * bpf_copy_from_user does; without it the sleepable program does not load,
 * and the engine takes the other. */
extern int bpf_copy_from_user_str(void *dst, __u32 dst__sz, const void *unsafe_ptr__ign,
				  __u64 flags) __ksym __weak;

/* One step of eval: instruction k of argument i (step = i * BPFENG_MAX_INSN +
 * k). A bpf_loop callback, so the verifier checks it once, not once a step. */
static __always_inline long eval_step(__u32 step, struct eval_ctx *c, bool sleepable)
{
	__u32 i = step / BPFENG_MAX_INSN, k = step % BPFENG_MAX_INSN;
	struct bpfeng_rec *rec = (struct bpfeng_rec *)c->buf;
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
	in = (const struct fetch_insn *)&c->site->args[i].insn[k];
	st = sleepable ? fetch_step_s(in, c->regs, &c->where, &c->val, NULL) :
			 fetch_step_ns(in, c->regs, &c->where, &c->val, NULL);
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
		__u32 len = fetch_bytes_len(in, i ? rec->vals[(i - 1) & (BPFENG_MAX_ARGS - 1)].val : 0,
					    BPFENG_STR_MAX - 1);

		if (c->str_off > BPFENG_REC_MAX - BPFENG_STR_MAX)
			goto fault;
		dst = c->buf + (c->str_off & (BPFENG_REC_MAX - 1));
		len &= BPFENG_STR_MAX - 1;
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
		if (c->str_off > BPFENG_REC_MAX - BPFENG_STR_MAX)
			goto fault;	/* no room left: shown as a fault */
		dst = c->buf + (c->str_off & (BPFENG_REC_MAX - 1));
		if (st == FETCH_COMM) {
			if (bpf_get_current_comm(dst, 16))
				goto fault;
			n = 1;
			for (int j = 0; j < 15; j++, n++)
				if (!dst[j])
					break;
		} else if (sleepable) {
			n = bpf_copy_from_user_str(dst, BPFENG_STR_MAX, (const void *)(unsigned long)c->val,
						   0);
		} else {
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
	struct eval_ctx *c = data;

	return eval_step(c->arg * BPFENG_MAX_INSN + k, data, true);
}

static long eval_step_ns(__u32 k, void *data)
{
	struct eval_ctx *c = data;

	return eval_step(c->arg * BPFENG_MAX_INSN + k, data, false);
}

/* Argument i: its instructions, a step each (not the slots it leaves
 * empty: a hit pays for the instructions its arguments have). */
static __always_inline long eval_arg(__u32 i, struct eval_ctx *c, bool sleepable)
{
	__u32 n = c->site->args[i & (BPFENG_MAX_ARGS - 1)].ninsn;

	if (i >= BPFENG_MAX_ARGS || i >= c->nargs)
		return 1;
	c->arg = i;
	bpf_loop(n < BPFENG_MAX_INSN ? (n ? n : 1) : BPFENG_MAX_INSN,
		 sleepable ? eval_step_s : eval_step_ns, c, 0);
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

/* ---- filters ------------------------------------------------------------- */

struct glob_ctx {
	const char *p;		/* the filter's strings */
	const char *s;		/* the record's buffer */
	struct glob_state *g;
};

#define PAT(c, k) (c)->p[((c)->g->poff + (k)) & (USC_FILTER_STRS - 1)]
#define STR(c, k) (c)->s[((c)->g->soff & (BPFENG_REC_MAX - 1)) + ((k) & 255)]

/* No match here: back to the last '*', or no match at all. */
static __always_inline long glob_back(struct glob_state *g)
{
	if (g->star == ~0u) {
		g->result = 0;
		return 1;
	}
	g->pi = g->star + 1;
	g->si = ++g->mark;
	return 0;
}

/* One step of the glob match of filter_eval.h's filter_glob_full (a class
 * [...] one character of it a step): bpf_loop runs it, so the verifier
 * sees one step, not a loop. */
static long glob_step(__u32 n, void *data)
{
	struct glob_ctx *c = data;
	struct glob_state *g = c->g;

	if (g->literal) {
		if (g->si >= g->sn || g->pi >= g->pn) {
			g->result = g->si >= g->sn && g->pi >= g->pn;
			return 1;
		}
		if (PAT(c, g->pi) != STR(c, g->si)) {
			g->result = 0;
			return 1;
		}
		g->pi++;
		g->si++;
		return 0;
	}
	if (g->in_class) {
		__u32 q = g->cq;
		char ch = STR(c, g->si);

		if (q >= g->pn) {
			g->in_class = 0;	/* unterminated: matches nothing */
			return glob_back(g);
		}
		if (PAT(c, q) == ']' && q != g->pi + 1 + g->cneg) {
			g->in_class = 0;
			if (g->chit == g->cneg)
				return glob_back(g);
			g->pi = q + 1;
			g->si++;
			return 0;
		}
		if (q + 2 < g->pn && PAT(c, q + 1) == '-' && PAT(c, q + 2) != ']') {
			g->chit |= ch >= PAT(c, q) && ch <= PAT(c, q + 2);
			g->cq = q + 3;
		} else {
			g->chit |= ch == PAT(c, q);
			g->cq = q + 1;
		}
		return 0;
	}
	if (g->si >= g->sn) {
		if (g->pi < g->pn && PAT(c, g->pi) == '*') {
			g->pi++;
			return 0;
		}
		g->result = g->pi == g->pn;
		return 1;
	}
	if (g->pi < g->pn && PAT(c, g->pi) == '*') {
		g->star = g->pi++;
		g->mark = g->si;
		return 0;
	}
	if (g->pi < g->pn && PAT(c, g->pi) == '[') {
		g->in_class = 1;
		g->cneg = g->pi + 1 < g->pn && PAT(c, g->pi + 1) == '!';
		g->cq = g->pi + 1 + g->cneg;
		g->chit = 0;
		return 0;
	}
	if (g->pi < g->pn && (PAT(c, g->pi) == '?' || PAT(c, g->pi) == STR(c, g->si))) {
		g->pi++;
		g->si++;
		return 0;
	}
	return glob_back(g);
}

struct fil_ctx {
	const struct bpfeng_site *site;
	const struct bpfeng_rec *rec;
	const char *buf;
	struct task_state *ts;
	__u32 stack;
};

static __always_inline int fil_int(struct fil_ctx *f, __u32 i, __u64 *u)
{
	const struct bpfeng_val *v = &f->rec->vals[i & (BPFENG_MAX_ARGS - 1)];

	if (i >= BPFENG_MAX_ARGS || v->kind != BPFENG_INT)
		return 1;
	*u = v->val;
	return 0;
}

static __always_inline int fil_str(struct fil_ctx *f, __u32 i, const char **s, __u32 *n)
{
	const struct bpfeng_val *v = &f->rec->vals[i & (BPFENG_MAX_ARGS - 1)];

	if (i >= BPFENG_MAX_ARGS || v->kind != BPFENG_STR)
		return 1;
	*s = (const char *)(unsigned long)v->str_off;	/* an offset: see FILTER_SCHAR */
	*n = v->str_len;
	return 0;
}

static __always_inline int fil_glob(struct fil_ctx *f, const char *strs, __u32 off, __u32 pn,
				    const char *s, __u32 sn, __u32 literal)
{
	struct glob_state *g = &f->ts->glob;
	struct glob_ctx c = {strs, f->buf, g};
	__u32 steps;

	if (sn > 255 || (literal && sn != pn))
		return 0;
	__builtin_memset(g, 0, sizeof(*g));
	g->poff = off;
	g->pn = pn;
	g->soff = (__u32)(unsigned long)s;
	g->sn = sn;
	g->star = ~0u;
	g->literal = literal;
	/* steps enough for any backtracking, classes scanned again included */
	steps = 2 * (pn + 2) * (sn + 2) * (pn + 2);
	bpf_loop(steps < (1 << 22) ? steps : (1 << 22), glob_step, &c, 0);
	return g->result;
}

/* strings are offsets into the record (f->buf), masked for the verifier */
#define FILTER_INLINE static __always_inline
#define FILTER_STEP filter_step
#define FILTER_INT(env, i, u) fil_int(env, i, u)
#define FILTER_STR(env, i, s, n) fil_str(env, i, s, n)
#define FILTER_GLOB(env, strs, off, pn, s, sn) fil_glob(env, strs, off, pn, s, sn, 0)
#define FILTER_STREQ(env, strs, off, ln, s, n) fil_glob(env, strs, off, ln, s, n, 1)
#include "probe/filter_eval.h"

static long fil_step(__u32 k, void *data)
{
	struct fil_ctx *f = data;

	if (k >= USC_FILTER_MAX)
		return 1;
	filter_step(&f->site->filter.insn[k], f->site->filter.strs, &f->stack, f);
	return 0;
}

/* Global functions (not static) are verified once, on their own, not at
 * every call in every state: what keeps the program within the verifier's
 * limits. Their pointer arguments may be NULL to the verifier. */
__noinline int filter_pass(const struct bpfeng_site *site, struct task_state *ts)
{
	struct fil_ctx f = {};
	__u32 n;

	if (!site || !ts)
		return 0;
	f.site = site;
	f.rec = (const struct bpfeng_rec *)ts->buf;
	f.buf = ts->buf;
	f.ts = ts;
	n = site->filter.n;
	if (!n)
		return 1;
	bpf_loop(n < USC_FILTER_MAX ? n : USC_FILTER_MAX, fil_step, &f, 0);
	return f.stack & 1;
}

/* ---- aggregation --------------------------------------------------------- */

struct key_ctx {
	const struct bpfeng_site *site;
	struct task_state *ts;
	__u32 at;
};

/* Key slot i from the record's value i (agg/agg_shared.h's layout). */
static long key_step(__u32 i, void *data)
{
	struct key_ctx *k = data;
	const struct bpfeng_site *site = k->site;
	const struct bpfeng_rec *rec = (const struct bpfeng_rec *)k->ts->buf;
	const struct bpfeng_val *v;
	__u32 str = site->arg_str[i & (BPFENG_MAX_ARGS - 1)], len;
	__u32 smax = site->agg_str_max & 255;
	struct agg_slot *sl;

	if (i >= BPFENG_MAX_ARGS || i >= site->agg_nkey)
		return 1;
	len = str ? 8 + smax : 16;
	if (k->at + len > BPFENG_KEY_MAX || k->at > BPFENG_KEY_MAX - 16)
		return 1;
	v = &rec->vals[i & (BPFENG_MAX_ARGS - 1)];
	sl = (struct agg_slot *)&k->ts->key.key[k->at & (BPFENG_KEY_MAX - 1)];
	if (v->kind == BPFENG_FAULT) {
		sl->kind = AGG_K_FAULT;
	} else if (v->kind == BPFENG_STACKID) {
		sl->kind = AGG_K_STACK;	/* the tracer makes it its own id */
		sl->pad = rec->pid;
		sl->v = v->val;
	} else if (v->kind == BPFENG_NULL) {
		sl->kind = AGG_K_NULL;
	} else if (str && v->kind == BPFENG_STR) {
		__u32 n = v->str_len < smax ? v->str_len : smax;
		__u32 at = (k->at + 8) & (BPFENG_KEY_MAX - 1);

		sl->kind = AGG_K_STR;
		sl->cut = v->str_len > smax;
		sl->len = n;
		if (n > 248 || at + n > BPFENG_KEY_MAX)
			return 1;
		bpf_probe_read_kernel(&k->ts->key.key[at], n & 255,
				      &k->ts->buf[v->str_off & (BPFENG_REC_MAX - 1)]);
	} else {
		sl->kind = AGG_K_INT;
		sl->v = (__u64)agg_value_of(v->val, site->arg_size[i & (BPFENG_MAX_ARGS - 1)], 0);
	}
	k->at += len;
	return 0;
}

static __always_inline void make_key(const struct bpfeng_site *site, __u32 idx,
				     struct task_state *ts)
{
	struct key_ctx k = {site, ts, 0};

	__builtin_memset(&ts->key, 0, sizeof(ts->key));
	ts->key.site = idx;
	bpf_loop(BPFENG_MAX_ARGS, key_step, &k, 0);
}

/* One value into the row of key. */
static __always_inline void row_add(struct bpfeng_agg_key *key, __s64 v, struct bpfeng_counts *cnt)
{
	struct agg_val *a = bpf_map_lookup_elem(&agg, key);
	__u64 ep = agg_epoch;
	__u64 b;

	if (!a) {
		long err = bpf_map_update_elem(&agg, key, agg_zeros, BPF_NOEXIST);

		if (err && err != -17 /* EEXIST: another CPU's just now */) {
			__sync_fetch_and_add(&cnt->full, 1);
			return;
		}
		a = bpf_map_lookup_elem(&agg, key);
		if (!a)
			return;
	}
	agg_val_add(a, v, ep);	/* this CPU's values */
	if (!agg_nbuckets)
		return;
	b = agg_linear ? agg_linear_bucket(v, agg_lmin, agg_lmax, agg_lstep, agg_nbuckets) :
			 agg_log_bucket(v);
	/* a 64-bit index, bounded where it is used: the value's size is the
	 * buckets' (agg_nbuckets, a constant to the verifier) */
	asm volatile("" : "+r"(b));
	if (b < agg_nbuckets && b < BPFENG_BUCKETS_MAX)
		__sync_fetch_and_add((__u64 *)(a + 1) + b, 1);
}

struct lat_ctx {
	struct task_state *ts;
	__u32 func;
	__s32 found;
};

static long lat_find(__u32 k, void *data)
{
	struct lat_ctx *l = data;
	__u32 n = l->ts->nlat, i;

	if (k >= n || k >= BPFENG_LAT_DEPTH)
		return 1;
	i = (n - 1 - k) & (BPFENG_LAT_DEPTH - 1);
	if (l->ts->lat[i].func == l->func) {
		l->found = i;
		return 1;
	}
	return 0;
}

/* Latency: the call of func ends; its frame, and those above it (calls
 * whose return was not seen: a longjmp), go. As src/flow pairs events. */
__noinline int lat_return(struct task_state *ts, const struct bpfeng_site *site,
			  struct bpfeng_counts *cnt)
{
	struct lat_ctx l = {ts, 0, -1};
	struct lat_frame *f;
	__u64 dt;

	if (!ts || !site || !cnt || !ts->nlat)
		return 0;
	l.func = site->agg_func;
	bpf_loop(BPFENG_LAT_DEPTH, lat_find, &l, 0);
	if (l.found < 0)
		return 0;	/* no entry seen: tracing began inside the call */
	f = &ts->lat[l.found & (BPFENG_LAT_DEPTH - 1)];
	ts->nlat = l.found;
	if (f->nokey)
		return 0;
	dt = bpf_ktime_get_ns() - f->ts;
	row_add(&f->key, (__s64)(dt / (agg_unit_ns ? agg_unit_ns : 1)), cnt);
	return 0;
}

__noinline int aggregate(struct task_state *ts, const struct bpfeng_site *site, __u32 idx,
			 struct bpfeng_counts *cnt)
{
	const struct bpfeng_rec *rec;
	__s32 vi;
	__s64 v = 0;

	if (!ts || !site || !cnt)
		return 0;
	rec = (const struct bpfeng_rec *)ts->buf;
	vi = site->agg_value;

	if (site->agg == BPFENG_AGG_ROW && vi >= 0) {
		const struct bpfeng_val *val = &rec->vals[vi & (BPFENG_MAX_ARGS - 1)];

		if (vi >= BPFENG_MAX_ARGS || val->kind != BPFENG_INT) {
			__sync_fetch_and_add(&cnt->fault, 1);
			return 0;
		}
		v = agg_value_of(val->val, site->arg_size[vi & (BPFENG_MAX_ARGS - 1)],
				 site->arg_sign[vi & (BPFENG_MAX_ARGS - 1)]);
	}
	make_key(site, idx, ts);
	if (site->agg == BPFENG_AGG_ENTRY) {
		__u32 n = ts->nlat;
		struct lat_frame *f;

		if (n >= BPFENG_LAT_DEPTH) {
			__sync_fetch_and_add(&cnt->lost, 1);	/* deeper than we keep */
			return 0;
		}
		f = &ts->lat[n & (BPFENG_LAT_DEPTH - 1)];
		f->func = site->agg_func;
		f->nokey = 0;
		__builtin_memcpy(&f->key, &ts->key, sizeof(f->key));
		ts->nlat = n + 1;
		f->ts = bpf_ktime_get_ns();
		return 0;
	}
	row_add(&ts->key, v, cnt);
	return 0;
}

/* ---- $ustack ---------------------------------------------------------------- */

struct stk_ctx {
	char *buf;		/* the stack's bytes: the record's at BPFENG_STK_OFF + hdr */
	__u64 sp;
	__u32 want, got;
	bool sleepable;
};

/* One page of the stack (the first from sp to its page's end): a copy
 * stops at the first page it cannot read, the end of the stack's mapping,
 * as the inject agent's process_vm_readv does. */
static long stk_page(__u32 k, void *data)
{
	struct stk_ctx *s = data;
	__u64 at = s->sp + s->got, n = 4096 - (at & 4095), left, off;
	long err;

	if (s->got >= s->want || s->got >= USC_STACK_BYTES_MAX)
		return 1;
	left = s->want - s->got;
	off = s->got & (USC_STACK_BYTES_MAX - 1);
	if (n > left)
		n = left;
	/* bounds the verifier sees on the registers it checks */
	asm volatile("%0 &= 0x1fff" : "+r"(n));
	if (n == 0 || n > 4096)
		return 1;
	err = s->sleepable ? bpf_copy_from_user(s->buf + off, n, (const void *)(unsigned long)at) :
			     bpf_probe_read_user(s->buf + off, n, (const void *)(unsigned long)at);
	if (err)
		return 1;
	s->got += n;
	return 0;
}

/* The registers and the top of the stack into the record at BPFENG_STK_OFF
 * (fetch_stack_hdr): the record's length. */
static __always_inline __u32 copy_stack(struct task_state *ts, struct eval_ctx *c, bool sleepable,
					__u8 why)
{
	struct bpfeng_rec *rec = (struct bpfeng_rec *)ts->buf;
	struct fetch_stack_hdr *h = (struct fetch_stack_hdr *)(ts->buf + BPFENG_STK_OFF);
	__u32 i = (c->stack_arg - 1) & (BPFENG_MAX_ARGS - 1);
	struct stk_ctx s = {};
	__u32 frames = (__u32)c->stack_imm, bytes = (__u32)(c->stack_imm >> 32);

	for (int r = 0; r < USC_REG_NR; r++)
		h->regs[r] = ts->regs[r];
	frames = frames ? (frames > USC_STACK_FRAMES_MAX ? USC_STACK_FRAMES_MAX : frames) :
			  USC_STACK_FRAMES;
	bytes = bytes ? (bytes > USC_STACK_BYTES_MAX ? USC_STACK_BYTES_MAX : bytes) :
			USC_STACK_BYTES;
	s.buf = ts->buf + BPFENG_STK_OFF + sizeof(*h);
	s.sp = ts->regs[USC_REG_SP];
	s.want = bytes & ~7u;
	s.sleepable = sleepable;
	bpf_loop(USC_STACK_BYTES_MAX / 4096 + 1, stk_page, &s, 0);
	h->len = s.got;
	h->frames = (__u16)frames;
	h->end = s.got == s.want ? FETCH_STACK_FULL : s.got ? FETCH_STACK_MAPEND :
		 FETCH_STACK_UNREAD;
	h->why = why;
	rec->vals[i].kind = BPFENG_STACK;
	rec->vals[i].str_off = BPFENG_STK_OFF;
	rec->vals[i].str_len = (__u16)(sizeof(*h) + s.got);
	return BPFENG_STK_OFF + sizeof(*h) + ((s.got + 7) & ~7u);
}

/* ---- $ustack walked where the probe runs ---------------------------------- */

/* Set before load: some site walks its $ustack (bpf/ustack.c fills the
 * maps). The tables' counts, published by the tracer after their entries. */
const volatile __u32 stk_on = 0;
volatile __u32 stk_ntabs = 0, stk_nrows = 0, stk_nidx = 0;

/* sizes set before load */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct stack_tab);
} stk_tabs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct stack_row);
} stk_rows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} stk_idx SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct stack_map);
} stk_maps SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, struct bpfeng_stk_proc);
} stk_procs SEC(".maps");

/* counted stacks: a walk's header and its pcs (max_entries set at load) */
#define STK_VALUE (sizeof(struct fetch_walk_hdr) + 8 * STACK_WALK_MAX)

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 1);
	__uint(key_size, sizeof(struct bpfeng_stk_key));
	__uint(value_size, STK_VALUE);
} stk_stacks SEC(".maps");

/* Rows by lookup address and mappings (their gen), per CPU: a hot path's
 * stacks skip the searches. An entry is written between two increments of
 * its seq (odd: being written), so a reader another task preempted (the
 * sleepable program) cannot take a torn one for another pc's row. */
#define STK_RC 1024

struct stk_rc {
	__u32 seq;
	__u32 gen;
	struct stack_row row;
	__u64 pc;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, STK_RC);
	__type(key, __u32);
	__type(value, struct stk_rc);
} stk_rcache SEC(".maps");

#define STK_WIN 512	/* bytes of stack read at once: one read of 512 costs
			 * about one of 8, and a walk's words are close together */

struct wenv {
	struct task_state *ts;
	__u64 *pcs;
	__u32 first, n, gen;
	struct stack_row got;	/* the row a cache lookup found */
};

#define WENV(env) ((struct wenv *)(env))

static __always_inline const void *stk_elem(void *map, __u32 i)
{
	return bpf_map_lookup_elem(map, &i);
}

static __always_inline __u32 stk_rc_slot(__u64 pc)
{
	return (__u32)((pc * 0x9e3779b97f4a7c15ULL) >> 54);	/* STK_RC: 1024 */
}

static __always_inline const struct stack_row *stk_rc_get(struct wenv *e, __u64 pc)
{
	struct stk_rc *r = (struct stk_rc *)stk_elem(&stk_rcache, stk_rc_slot(pc));
	__u32 s1;

	if (!r)
		return NULL;
	s1 = r->seq;
	if (s1 & 1)
		return NULL;
	e->got = r->row;
	if (r->pc != pc || r->gen != e->gen || r->seq != s1)
		return NULL;
	if ((e->got.op & STACK_OP_MASK) == STACK_OP_RBP)
		e->ts->mbp = 1;
	return &e->got;
}

static __always_inline void stk_rc_put(struct wenv *e, __u64 pc, const struct stack_row *row)
{
	struct stk_rc *r = (struct stk_rc *)stk_elem(&stk_rcache, stk_rc_slot(pc));

	if ((row->op & STACK_OP_MASK) == STACK_OP_RBP)
		e->ts->mbp = 1;
	if (!r)
		return;
	r->seq++;
	r->row = *row;
	r->pc = pc;
	r->gen = e->gen;
	r->seq++;
}

/* 8 bytes of the stack: from the window of it last read, else a new window
 * read there, else the 8 bytes alone (the window would cross the stack's
 * end). */
static __always_inline void stk_log(struct task_state *ts, __u64 addr, __u64 v)
{
	struct stk_memo *m;
	__u32 n;

	if (!ts->mlog)
		return;
	m = &ts->memo[(ts->mlog - 1) & (STK_MEMO_N - 1)];
	n = m->nreads;
	if (n >= STK_MEMO_READS) {
		ts->mlog = 0;	/* too many: not remembered */
		return;
	}
	m->addr[n & (STK_MEMO_READS - 1)] = addr;
	m->val[n & (STK_MEMO_READS - 1)] = v;
	m->nreads = n + 1;
}

static __always_inline int stk_read(struct task_state *ts, __u64 *dst, __u64 addr)
{
	__u64 off = addr - ts->wbase;

	if (ts->wbase && addr >= ts->wbase && off <= STK_WIN - 8 && !(off & 7)) {
		*dst = *(__u64 *)&ts->win[off & (STK_WIN - 8)];
		stk_log(ts, addr, *dst);
		return 0;
	}
	if (!(addr & 7) && !bpf_probe_read_user(ts->win, STK_WIN, (const void *)addr)) {
		ts->wbase = addr;
		*dst = *(__u64 *)&ts->win[0];
		stk_log(ts, addr, *dst);
		return 0;
	}
	ts->mlog = 0;	/* a word alone: the walk is not remembered */
	return bpf_probe_read_user(dst, 8, (const void *)addr);
}

#define STACK_STEP usc_stk_step
#define STACK_INLINE static __always_inline
#define STACK_READ(env, dst, addr) stk_read(WENV(env)->ts, dst, addr)
#define STACK_NMAPS(env) WENV(env)->n
#define STACK_MAP(env, i) \
	((i) < WENV(env)->n ? (const struct stack_map *)stk_elem(&stk_maps, WENV(env)->first + (i)) : \
			      NULL)
#define STACK_TAB(env, i) ((i) < stk_ntabs ? (const struct stack_tab *)stk_elem(&stk_tabs, i) : NULL)
#define STACK_ROW(env, i) ((i) < stk_nrows ? (const struct stack_row *)stk_elem(&stk_rows, i) : NULL)
#define STACK_IDX(env, i) ((i) < stk_nidx ? (const __u32 *)stk_elem(&stk_idx, i) : NULL)
#define STACK_LOOP(n, fn, ctx) bpf_loop(n, fn, ctx, 0)
#define STACK_CACHE_GET(env, pc) stk_rc_get(WENV(env), pc)
#define STACK_CACHE_PUT(env, pc, row) stk_rc_put(WENV(env), pc, row)
#define STACK_BP_USED(env) (WENV(env)->ts->mbp = 1)
#define STACK_CB static __attribute__((noinline))
#include "stack/stack_walk.h"

static long stk_step_cb(__u32 i, void *ctx)
{
	struct wenv *e = ctx;

	return usc_stk_step(&e->ts->walk, e->pcs, e) ? 1 : 0;
}

/* Does the walk m remembered hold for this hit: made from the same
 * registers, with the same mappings, and the words it read read the same?
 * They are read again in one read of the span they lie in (a read's cost is
 * mostly its own, not its bytes'), into the copy's room. */
static __always_inline int stk_memo_holds(struct task_state *ts, struct stk_memo *m, __u32 gen,
					  __u32 frames)
{
	__u8 *span = (__u8 *)ts->buf + BPFENG_STK_OFF + sizeof(struct fetch_stack_hdr);
	__u32 n = m->nreads, len = m->span;

	if (!m->valid || m->gen != gen || m->ip != ts->regs[USC_REG_IP] ||
	    m->sp != ts->regs[USC_REG_SP] || (m->bp_used && m->bp != ts->regs[USC_REG_BP]) ||
	    m->frames != frames || !len || len > STK_MEMO_SPAN || n > STK_MEMO_READS)
		return 0;
	if (bpf_probe_read_user(span, len & (2 * STK_MEMO_SPAN - 1), (const void *)m->lo))
		return 0;
	for (__u32 i = 0; i < STK_MEMO_READS; i++) {
		__u64 off;

		if (i >= n)
			break;
		off = m->off[i];
		if (*(__u64 *)(span + (off & (STK_MEMO_SPAN - 8))) != m->val[i])
			return 0;
	}
	return 1;
}

/* The walk just made, remembered in m (when it can be: every word it read
 * read from a window, close enough together, few enough frames). */
static __always_inline void stk_memo_keep(struct task_state *ts, struct stk_memo *m,
					  const struct fetch_walk_hdr *h, const __u64 *pcs,
					  __u32 gen, __u32 frames)
{
	__u64 lo = ~0ULL, hi = 0;
	__u32 n = m->nreads;

	if (!ts->mlog || h->n > STK_MEMO_PCS || !n || n > STK_MEMO_READS)
		return;
	for (__u32 i = 0; i < STK_MEMO_READS; i++) {
		if (i >= n)
			break;
		if (m->addr[i] < lo)
			lo = m->addr[i];
		if (m->addr[i] + 8 > hi)
			hi = m->addr[i] + 8;
	}
	if (hi - lo > STK_MEMO_SPAN || (lo & 7))
		return;
	for (__u32 i = 0; i < STK_MEMO_READS; i++) {
		if (i >= n)
			break;
		m->off[i] = (__u32)(m->addr[i] - lo);
	}
	m->lo = lo;
	m->span = (__u32)(hi - lo);
	m->ip = ts->regs[USC_REG_IP];
	m->sp = ts->regs[USC_REG_SP];
	m->bp = ts->regs[USC_REG_BP];
	m->bp_used = ts->mbp;
	m->gen = gen;
	m->frames = frames;
	m->hash = 0;
	m->h = *h;
	for (__u32 i = 0; i < STK_MEMO_PCS; i++) {
		if (i >= h->n)
			break;
		m->pcs[i] = pcs[i];
	}
	m->valid = 1;
}

/* The hit's stack walked into the record at `at` (after its strings):
 * struct fetch_walk_hdr, then the pcs. STACK_FB_NONE, or why it falls back.
 *
 * A walk is a function of the registers it starts from, the mappings (their
 * gen) and the words it reads, each where the ones before said. So a thread
 * remembers its last walks (STK_MEMO_N, by ip and sp): a hit from the same
 * registers with the same mappings whose words read the same walks the
 * same, and takes the walk remembered (and its hash, counted): its words
 * are read again, in one read, and no row is looked up. */
__noinline int stk_walk(struct task_state *ts, __u32 frames, __u32 at)
{
	struct fetch_walk_hdr *h;
	const struct bpfeng_stk_proc *pr;
	struct wenv e = {};
	__u32 tgid = bpf_get_current_pid_tgid() >> 32, gen;
	struct stack_walk *w;
	struct stk_memo *m;
	__u64 *pcs;
	__u32 mi;
	__u8 why;

	if (!ts)
		return STACK_FB_TABLE;
	h = (struct fetch_walk_hdr *)(ts->buf + (at & (2 * BPFENG_REC_MAX - 8)));
	pcs = (__u64 *)(h + 1);
	w = &ts->walk;
	ts->stk_hash = 0;
	pr = bpf_map_lookup_elem(&stk_procs, &tgid);
	if (!pr)
		return STACK_FB_NOPROC;
	gen = pr->gen;
	mi = (__u32)(((ts->regs[USC_REG_IP] ^ (ts->regs[USC_REG_SP] >> 4)) *
		      0x9e3779b97f4a7c15ULL) >> 62) & (STK_MEMO_N - 1);
	m = &ts->memo[mi];
	if (stk_memo_holds(ts, m, gen, frames)) {
		*h = m->h;
		for (__u32 i = 0; i < STK_MEMO_PCS; i++) {
			if (i >= m->h.n)
				break;
			pcs[i] = m->pcs[i];
		}
		ts->stk_hash = m->hash;
		ts->mlog = mi + 1;	/* its hash goes there, once counted */
		return STACK_FB_NONE;
	}
	m->valid = 0;
	m->nreads = 0;
	ts->mlog = mi + 1;
	ts->mbp = 0;
	e.ts = ts;
	e.pcs = pcs;
	e.first = pr->first;
	e.n = pr->n;
	e.gen = gen;
	ts->wbase = 0;
	stack_walk_init(w, ts->regs[USC_REG_IP], ts->regs[USC_REG_SP], ts->regs[USC_REG_BP],
			frames, e.pcs);
	bpf_loop(STACK_WALK_MAX, stk_step_cb, &e, 0);
	pr = bpf_map_lookup_elem(&stk_procs, &tgid);
	if (!pr || pr->gen != gen)
		return STACK_FB_CHANGED;	/* its range may have been rewritten */
	h->end_pc = w->end_pc;
	h->n = (__u16)w->n;
	h->frames = (__u16)frames;
	h->end = w->end;
	h->nsig = w->nsig;
	for (int i = 0; i < FETCH_WALK_SIGS; i++)
		h->sig[i] = i < w->nsig ? w->sig[i] : 0;
	for (int i = 0; i < 6; i++)
		h->pad[i] = 0;
	why = stack_walk_fallback(w);
	if (!why)
		stk_memo_keep(ts, m, h, pcs, gen, frames);
	return why;
}

struct stk_hash_ctx {
	const __u64 *w;		/* the header's words, then the pcs */
	__u64 h;
	const __u64 *other;	/* comparing: the stored one */
	__u32 n;		/* words */
	__u32 same;
};

static __always_inline __u64 stk_mix(__u64 h, __u64 w)
{
	h = (h ^ w) * 0xff51afd7ed558ccdULL;
	return h ^ (h >> 32);
}

static long stk_hash_step(__u32 i, void *ctx)
{
	struct stk_hash_ctx *c = ctx;
	__u64 k = i;

	/* a bound the verifier sees on the very register it checks */
	asm volatile("%0 &= 0x1ff" : "+r"(k));
	if (k >= c->n || k >= 3 + STACK_WALK_MAX)
		return 1;
	c->h = stk_mix(c->h, c->w[k]);
	return 0;
}

static long stk_cmp_step(__u32 i, void *ctx)
{
	struct stk_hash_ctx *c = ctx;
	__u64 k = i;

	asm volatile("%0 &= 0x1ff" : "+r"(k));
	if (k >= c->n || k >= 3 + STACK_WALK_MAX)
		return 1;
	if (c->w[k] != c->other[k]) {
		c->same = 0;
		return 1;
	}
	return 0;
}

/* The walk is in stk_stacks by hash: so is the walk remembered. */
static __always_inline void stk_counted(struct task_state *ts, __u64 hash)
{
	struct stk_memo *m = &ts->memo[(ts->mlog - 1) & (STK_MEMO_N - 1)];

	ts->stk_hash = hash;
	if (ts->mlog && m->valid)
		m->hash = hash;
}

/* A count's walk (the record's, at `at`) in stk_stacks: its hash in
 * ts->stk_hash. 0; 1: no room, or another stack has its hash (counted):
 * the hit is recorded instead, walked. */
__noinline int stk_count(struct task_state *ts, __u32 at, struct bpfeng_counts *cnt)
{
	struct stk_hash_ctx c = {};
	struct bpfeng_stk_key key = {};
	const __u64 *v;
	long err;

	if (!ts || !cnt)
		return 1;
	if (ts->stk_hash)
		return 0;	/* the walk remembered: counted already */
	c.w = (const __u64 *)(ts->buf + (at & (2 * BPFENG_REC_MAX - 8)));
	c.n = 3 + ((const struct fetch_walk_hdr *)c.w)->n;
	key.tgid = bpf_get_current_pid_tgid() >> 32;
	c.h = stk_mix(0x9e3779b97f4a7c15ULL, key.tgid);
	bpf_loop(3 + STACK_WALK_MAX, stk_hash_step, &c, 0);
	key.hash = c.h | 1;
	v = bpf_map_lookup_elem(&stk_stacks, &key);
	if (!v) {
		err = bpf_map_update_elem(&stk_stacks, &key, c.w, BPF_NOEXIST);
		if (!err) {
			stk_counted(ts, key.hash);
			return 0;
		}
		if (err != -17 /* EEXIST: another CPU's just now */)
			return 1;
		v = bpf_map_lookup_elem(&stk_stacks, &key);
		if (!v)
			return 1;
	}
	c.other = v;
	c.same = 1;
	bpf_loop(3 + STACK_WALK_MAX, stk_cmp_step, &c, 0);
	if (!c.same) {
		__sync_fetch_and_add(&cnt->collided, 1);
		return 1;
	}
	stk_counted(ts, key.hash);
	return 0;
}

/* ---- $pystack ---------------------------------------------------------------- */

/* The walker every engine shares (python/walk.h), twice: the sleepable
 * program's reads fault pages in. */
#define PYWALK_FN(n) pws_##n
#define PYWALK_INLINE static __always_inline
#define PYWALK_READ(env, dst, addr, len) \
	bpf_copy_from_user(dst, len, (const void *)(unsigned long)(addr))
#include "python/walk.h"

#define PYWALK_FN(n) pwn_##n
#define PYWALK_INLINE static __always_inline
#define PYWALK_READ(env, dst, addr, len) \
	bpf_probe_read_user(dst, len, (const void *)(unsigned long)(addr))
#include "python/walk.h"

struct thread_struct {
	unsigned long fsbase;
} __attribute__((preserve_access_index));

struct signal_struct {
	struct {
		int counter;
	} live;
} __attribute__((preserve_access_index));

struct task_struct {
	int pid;
	int tgid;
	struct thread_struct thread;
	struct signal_struct *signal;
} __attribute__((preserve_access_index));

struct py_ctx {
	const struct python_offsets *off;
	struct python_walk w;
	struct python_frame *out;
	__u32 max;
	bool sleepable;
};

/* One frame a step: bpf_loop runs it, so the verifier checks one step. */
static long py_step(__u32 k, void *data)
{
	struct py_ctx *p = data;

	return p->sleepable ? pws_step(p->off, &p->w, p->out, p->max, NULL) :
			      pwn_step(p->off, &p->w, p->out, p->max, NULL);
}

/* The thread's Python frames into the record at off (python_stack_hdr,
 * then the frames, as many as fit before the stack copy's place): the
 * thread state by CPython's key from the thread's fs base (the task's),
 * then its frame chain. The record's new length. */
static __noinline __u32 walk_python(struct task_state *ts, __u32 off, __u32 want, __u32 argi,
				    bool sleepable)
{
	struct bpfeng_rec *rec = (struct bpfeng_rec *)ts->buf;
	__u32 tgid = bpf_get_current_pid_tgid() >> 32, key = 0, room, i;
	struct bpfeng_py *py = bpf_map_lookup_elem(&pyprocs, &tgid);
	struct python_stack_hdr *h;
	struct py_ctx p = {};
	__u64 fsbase, tstate = 0;
	int init = 0;

	off = (off + 7) & ~7u;
	/* bounds the verifier sees on the register it checks */
	asm volatile("%0 &= 0x1fff" : "+r"(off));
	if (off > BPFENG_STK_OFF - sizeof(*h) || argi >= BPFENG_MAX_ARGS)
		return off;
	h = (struct python_stack_hdr *)(ts->buf + off);
	room = (BPFENG_STK_OFF - off - sizeof(*h)) / sizeof(struct python_frame);
	if (want > room)
		want = room;
	if (want > PYTHON_FRAMES_MAX)
		want = PYTHON_FRAMES_MAX;
	h->n = 0;
	h->want = (__u16)want;
	h->status = PYWALK_NONE;
	h->pad = 0;
	if (py && want) {
		struct task_struct *task = (struct task_struct *)bpf_get_current_task_btf();

		fsbase = BPF_CORE_READ(task, thread.fsbase);
		if (!bpf_probe_read_user(&init, 4, (void *)(py->runtime + py->off.rt_tss_init)) &&
		    init &&
		    !bpf_probe_read_user(&key, 4, (void *)(py->runtime + py->off.rt_tss_key)) &&
		    !pwn_tss(&py->glibc, fsbase, key, &tstate, NULL) && tstate) {
			p.off = &py->off;
			p.out = (struct python_frame *)(h + 1);
			p.max = want;
			p.sleepable = sleepable;
			if (!(sleepable ? pws_start(&py->off, tstate, &p.w, NULL) :
					  pwn_start(&py->off, tstate, &p.w, NULL)))
				bpf_loop(2 * PYTHON_FRAMES_MAX + 2, py_step, &p, 0);
			if (p.w.status == PYWALK_MORE)
				p.w.status = PYWALK_FULL;
			h->n = p.w.n;
			h->status = (__u8)p.w.status;
		}
	}
	i = argi;
	asm volatile("%0 &= 15" : "+r"(i));	/* BPFENG_MAX_ARGS - 1, seen by the verifier */
	rec->vals[i].kind = BPFENG_PYSTACK;
	rec->vals[i].str_off = (__u16)off;
	rec->vals[i].str_len = (__u16)(sizeof(*h) + h->n * sizeof(struct python_frame));
	return off + sizeof(*h) + h->n * sizeof(struct python_frame);
}

/* ---- objtrace ------------------------------------------------------------ */

/* The mask of the argument registers (rdi, rsi, rdx, rcx, r8, r9) among
 * those tested (the site's obj_regs) that hold a followed object. */
static __always_inline __u64 obj_mask(const __u64 *regs, __u32 tested)
{
	static const __u8 r[BPFENG_OBJ_NREGS] = {USC_REG_DI, USC_REG_SI, USC_REG_DX, USC_REG_CX,
					     USC_REG_R8, USC_REG_R9};
	__u64 mask = 0;

	for (int i = 0; i < BPFENG_OBJ_NREGS; i++) {
		__u64 k = regs[r[i]];

		if (k && (tested >> i & 1) && bpf_map_lookup_elem(&objs, &k))
			mask |= 1ULL << i;
	}
	return mask;
}

/* A site's verdict on a hit (enum bpfeng_obj_role), its arguments evaluated
 * into the record: FROM 1 (followed) or 2 (the set is full: counted),
 * UNTIL 1 (released), MATCH the mask; 0: no record. */
static __always_inline __u64 obj_verdict(const struct bpfeng_site *site, struct task_state *ts,
					 struct bpfeng_counts *cnt)
{
	const struct bpfeng_rec *rec = (const struct bpfeng_rec *)ts->buf;
	__u64 k;
	__u8 one = 1;
	long err;

	if (site->obj == BPFENG_OBJ_MATCH)
		return obj_mask(ts->regs, site->obj_regs);
	if (rec->vals[0].kind != BPFENG_INT || !(k = rec->vals[0].val))
		return 0;
	if (site->obj == BPFENG_OBJ_UNTIL)
		return bpf_map_delete_elem(&objs, &k) == 0;
	err = bpf_map_update_elem(&objs, &k, &one, BPF_NOEXIST);
	if (err && err != -17 /* EEXIST: followed already */) {
		__sync_fetch_and_add(&cnt->full, 1);
		return 2;
	}
	return 1;
}

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
	struct eval_ctx c = {};
	__u32 nargs, len;
	__u8 why = 0;

	if (!site || !cnt)
		return;
	if (site->agg == BPFENG_AGG_RETURN) {
		lat_return(ts, site, cnt);
		return;
	}
	rec->ts = site->agg ? 0 : bpf_ktime_get_ns();	/* a record's: aggregates have none */
	rec->ip = ts->regs[USC_REG_IP];
	rec->pid = pt >> 32;
	rec->tid = (__u32)pt;
	rec->site = idx;
	rec->via = via;
	rec->cpu = bpf_get_smp_processor_id();
	nargs = site->nargs;
	if (nargs > BPFENG_MAX_ARGS)
		nargs = BPFENG_MAX_ARGS;
	rec->nargs = nargs;
	c.regs = ts->regs;
	c.site = site;
	c.where.ip = ts->regs[USC_REG_IP];
	c.where.offset = site->offset;
	c.where.vaddr = site->vaddr;
	c.buf = ts->buf;
	c.str_off = sizeof(struct bpfeng_rec);
	c.nargs = nargs;
	bpf_loop(nargs, sleepable ? eval_arg_s : eval_arg_ns, &c, 0);
	if (site->obj) {
		__u64 verdict = obj_verdict(site, ts, cnt);
		struct bpfeng_val *v = &rec->vals[site->obj_verdict & (BPFENG_MAX_ARGS - 1)];

		if (!verdict)
			return;
		v->kind = BPFENG_INT;
		v->val = verdict;
	}
	if (!filter_pass(site, ts))
		return;
	if (c.py_arg) {
		/* the Python frames after the strings, before a stack walked or
		 * copied (a $ustack's hidden $pystack: spliced in by uscope) */
		len = c.str_off;
		if (len > BPFENG_REC_MAX)
			len = BPFENG_REC_MAX;
		c.str_off = walk_python(ts, len, c.py_want, c.py_arg - 1, sleepable);
	}
	if (c.stack_arg && stk_on && !((__u64)c.stack_imm & FETCH_STACK_COPY)) {
		/* walked: counted by its hash, or recorded; copied when it falls back */
		__u32 frames = (__u32)c.stack_imm & 0xffff, i = (c.stack_arg - 1) & (BPFENG_MAX_ARGS - 1);

		__u64 at = (c.str_off + 7) & ~7u;

		if (at > BPFENG_STK_OFF)	/* (Python frames end there at most) */
			at = BPFENG_STK_OFF;
		/* a bound the verifier sees on the very register it checks */
		asm volatile("%0 &= 0x1ff8" : "+r"(at));
		why = stk_walk(ts, frames ? (frames > USC_STACK_FRAMES_MAX ? USC_STACK_FRAMES_MAX :
					       frames) : USC_STACK_FRAMES, at);
		if (!why && site->agg && !stk_count(ts, at, cnt)) {
			rec->vals[i].kind = BPFENG_STACKID;
			rec->vals[i].val = ts->stk_hash;
			aggregate(ts, site, idx, cnt);
			return;
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
		aggregate(ts, site, idx, cnt);
		return;
	}
	len = c.str_off;
	if (len > BPFENG_STK_OFF)
		len = BPFENG_STK_OFF;
	if (c.stack_arg) {
		__u64 l = copy_stack(ts, &c, sleepable, why);

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

/* At a ret that returns from the frame of the tail calls waiting on this
 * stack pointer: their functions return now, one a step. */
static __always_inline long pop_one(struct pend_ctx *p, bool sleepable)
{
	__u32 n = p->ts->npend, t;

	if (n == 0 || n > BPFENG_PENDING || p->ts->pend[(n - 1) & (BPFENG_PENDING - 1)].sp != p->sp)
		return 1;
	t = p->ts->pend[(n - 1) & (BPFENG_PENDING - 1)].site;
	p->ts->npend = n - 1;
	emit(p->ts, t, p->id, bpf_map_lookup_elem(&counts, &t), sleepable);
	return 0;
}

static long pop_s(__u32 k, void *data)
{
	return pop_one(data, true);
}

static long pop_ns(__u32 k, void *data)
{
	return pop_one(data, false);
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
	if (site->kind == BPFENG_CONT) {
		if (ts->npend)
			bpf_loop(BPFENG_POPS, sleepable ? pop_s : pop_ns, &pc, 0);
		return 0;
	}
	if (site->obj == BPFENG_OBJ_MATCH && !obj_mask(ts->regs, site->obj_regs))
		return 0;	/* no followed object: nothing to evaluate */
	emit(ts, id, id, cnt, sleepable);
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
