// SPDX-License-Identifier: GPL-2.0
/* uscope script in the kernel: the bpf engine's program for a script's
 * sites, an object of its own (the engine's uscope.bpf.c is not changed by
 * it: its load time and the kernels it needs stay). Attached to every site
 * of the program, the site's index its attach cookie, it evaluates the
 * site's inputs with the fetch interpreter every engine shares
 * (probe/fetch_eval.h), then runs the site's probe with the executor every
 * engine shares (script/vm.h), a step a bpf_loop turn: the maps are BPF
 * maps (plain values in one hash map, aggregations in a per-CPU one, keyed
 * by the map and its key), output records (printf ...) go through a ring
 * buffer for uscope to format. Work per hit is bounded (bpf_loop's turns),
 * a bad pointer reads as 0 or "" and is counted, a map holds its keys at
 * most (each map's count of keys, in snkeys), runtime errors are counted.
 *
 * For Linux 6.1's verifier too: every loop bounded, helper arguments on the
 * stack or in map values; the sizes the verifier needs as constants are the
 * program's (.rodata, set before load). */
#include <stdbool.h>
#include <linux/bpf.h>
#include <linux/ptrace.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

/* 1 when x is not 0, with no branch (script/prog.h's hist buckets): in
 * assembly, which the compiler cannot turn into a compare and a jump, so
 * that the verifier walks one path, not one a bucket */
#define SCRIPT_NZ(x)                                                          \
	({                                                                    \
		__u64 r_ = (x), s_;                                           \
		asm volatile("%1 = %0; %1 = -%1; %0 |= %1; %0 >>= 63"           \
			     : "+r"(r_), "=&r"(s_));                          \
		r_;                                                           \
	})

#include "probe/fetch.h"
#include "agg/agg_shared.h"
#include "engine/bpf/script_shared.h"
#include "script/vm.h"

char LICENSE[] SEC("license") = "GPL";

/* set before load */
const volatile __u32 follow = 0;	/* only the processes in tgids (COMMAND's tree) */
const volatile __u32 ninsns = 1;	/* the program's instructions */
const volatile __u32 nprobes = 1;
const volatile __u32 nmaps = 0;
const volatile __u32 nstrtab = 1;	/* bytes of its string table */
const volatile __u32 str_len = 64;	/* a string's bytes, NUL included */
const volatile __u32 val_max = 16;	/* bytes of every map's value (the largest) */
const volatile __u32 key_len = 8;	/* bytes of every map's key (the largest) */
const volatile __u64 start_ns = 0;	/* elapsed's zero */
/* the ops and map operations the program has: the verifier walks only
 * those cases of the executor (vm.h's SCRIPT_OPS, SCRIPT_MOPS) */
const volatile __u32 ops_used = ~0u;
const volatile __u32 mops_used = ~0u;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct bscript_site);
} ssites SEC(".maps");

/* The program: its probes, its instructions (one value), its maps, its
 * strings; the sizes set at load. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct script_probe);
} sprobes SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct bscript_insns);
} sinsns SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct bscript_maps);
} sdesc SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct bscript_strtab);
} sstr SEC(".maps");

/* The maps' values: plain ones, and aggregations a copy per CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 1);
	__uint(key_size, sizeof(struct bscript_key));
	__uint(value_size, 16);
} svals SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 1);
	__uint(key_size, sizeof(struct bscript_key));
	__uint(value_size, 16);
} saggs SEC(".maps");

/* A new key's value: zeros */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__uint(key_size, 4);
	__uint(value_size, 16);
} szero SEC(".maps");

/* Each map's keys, against its bound */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SCRIPT_MAPS_MAX);
	__type(key, __u32);
	__type(value, __u64);
} snkeys SEC(".maps");

/* Runtime errors (enum script_err), and each map's updates lost */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SERR_NR);
	__type(key, __u32);
	__type(value, __u64);
} serrs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SCRIPT_MAPS_MAX);
	__type(key, __u32);
	__type(value, __u64);
} sfull SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4 << 20);
} sout SEC(".maps");

/* The engine's own, shared (bpf_map__reuse_fd): the processes followed,
 * and each site's hits. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, __u8);
} tgids SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, BPFENG_MAX_SITES);
	__type(key, __u32);
	__type(value, struct bpfeng_counts);
} counts SEC(".maps");

/* The inputs: the fetch interpreter every engine shares */
#define FETCH_INLINE static __always_inline
#define FETCH_STEP bs_fetch_step
#define FETCH_READ(env, dst, addr, len) \
	bpf_probe_read_user(dst, len, (const void *)(unsigned long)(addr))
#define FETCH_PID(env) (bpf_get_current_pid_tgid() >> 32)
#define FETCH_TID(env) ((__u32)bpf_get_current_pid_tgid())
#define FETCH_CPU(env) bpf_get_smp_processor_id()
#include "probe/fetch_eval.h"

/* A thread's state (task storage: a hit may be preempted, another task run
 * this program on its CPU meanwhile): the registers, the inputs, the
 * machine, the key being looked up. The output header is just before the
 * machine, whose record comes first: the two go out as one. */
struct bs_task {
	__u64 regs[USC_REG_NR];
	__u64 in[BPFENG_MAX_ARGS];
	__u8 in_kind[BPFENG_MAX_ARGS];	/* enum bpfeng_kind */
	char ins[BPFENG_MAX_ARGS][SCRIPT_STR_CAP];
	/* the fetch programs' progress */
	struct fetch_where where;
	__u64 val;
	__u32 arg, done, pc, pad;
	struct bscript_key bkey;
	struct bscript_out h;
	struct script_vm vm;
	/* an index masked for the verifier (SCRIPT_OFF) may reach past the
	 * machine's key buffer, its last member, by a string: still here */
	__u8 slack[SCRIPT_STR_CAP * 2];
};

_Static_assert(sizeof(struct bscript_out) % 8 == 0, "the header ends where the machine starts");

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct bs_task);
} sstate SEC(".maps");

/* A hit's walk: its state, site and probe */
struct bs_ctx {
	struct bs_task *ts;
	struct bscript_site *site;
	struct bscript_maps *maps;
	const struct bscript_strtab *strtab;
	const struct bscript_insns *insns;
	__u32 id, first, n, pad;
};

/* ---- the inputs: the fetch interpreter ------------------------------------- */


/* Instruction k of the current argument (a bpf_loop turn). */
static long eval_step(__u32 k, void *data)
{
	struct bs_ctx *x = data;
	struct bs_task *ts = x->ts;
	__u32 i = ts->arg;
	const struct fetch_insn *in;
	long n;
	int st;

	if (i >= BPFENG_MAX_ARGS || k >= BPFENG_MAX_INSN)
		return 1;
	asm volatile("%0 &= 0xf" : "+r"(i));
	asm volatile("%0 &= 0xf" : "+r"(k));
	if (k == 0) {
		ts->val = 0;
		ts->done = 0;
		ts->in[i] = 0;
		ts->in_kind[i] = BPFENG_INT;
	}
	if (ts->done)
		return 1;
	in = (const struct fetch_insn *)&x->site->args[i].insn[k];
	st = bs_fetch_step(in, ts->regs, &ts->where, &ts->val, NULL);
	switch (st) {
	case FETCH_NEXT:
		if (k < BPFENG_MAX_INSN - 1)
			return 0;
		/* fall through: the program ends with its last instruction */
	case FETCH_DONE:
		ts->in[i] = ts->val;
		break;
	case FETCH_NULL:
		ts->in_kind[i] = BPFENG_NULL;
		break;
	case FETCH_STRING:
	case FETCH_COMM:
		if (st == FETCH_COMM)
			n = bpf_get_current_comm(ts->ins[i], 16) ? -1 : 1;
		else
			n = bpf_probe_read_user_str(ts->ins[i], SCRIPT_STR_CAP,
						    (const void *)(unsigned long)ts->val);
		ts->in_kind[i] = n > 0 ? BPFENG_STR : BPFENG_FAULT;
		break;
	default:
		ts->in_kind[i] = BPFENG_FAULT;
		break;
	}
	ts->done = 1;
	return 1;
}

static long eval_arg(__u32 i, void *data)
{
	struct bs_ctx *x = data;
	__u32 n;

	if (i >= BPFENG_MAX_ARGS || i >= x->site->nargs)
		return 1;
	asm volatile("%0 &= 0xf" : "+r"(i));
	n = x->site->args[i].ninsn;
	x->ts->arg = i;
	bpf_loop(n < BPFENG_MAX_INSN ? (n ? n : 1) : BPFENG_MAX_INSN, eval_step, x, 0);
	return 0;
}

/* ---- the executor's driver ------------------------------------------------- */

static __always_inline int bs_in(struct bs_ctx *x, __u32 k, __u64 *u)
{
	struct bs_task *ts = x->ts;

	if (k >= BPFENG_MAX_ARGS || k >= x->site->nargs || ts->in_kind[k] != BPFENG_INT)
		return 1;
	*u = (__u64)agg_value_of(ts->in[k], x->site->arg_size[k], x->site->arg_sign[k]);
	return 0;
}

static __always_inline long bs_in_str(struct bs_ctx *x, __u32 k, char *dst, __u32 cap)
{
	struct bs_task *ts = x->ts;
	long n;

	if (k >= BPFENG_MAX_ARGS || k >= x->site->nargs)
		return -1;
	if (ts->in_kind[k] == BPFENG_NULL)
		return 0;
	if (ts->in_kind[k] != BPFENG_STR)
		return -1;
	if (cap > SCRIPT_STR_CAP)
		cap = SCRIPT_STR_CAP;
	n = bpf_probe_read_kernel_str(dst, cap, ts->ins[k]);
	return n > 0 ? n - 1 : -1;
}

static __always_inline __u64 bs_builtin(struct bs_ctx *x, __u32 which)
{
	__u64 t;

	switch (which) {
	case SB_PID: return bpf_get_current_pid_tgid() >> 32;
	case SB_TID: return (__u32)bpf_get_current_pid_tgid();
	case SB_NSECS: return bpf_ktime_get_ns();
	case SB_ELAPSED:
		t = bpf_ktime_get_ns();
		return t > start_ns ? t - start_ns : 0;
	case SB_CPU: return bpf_get_smp_processor_id();
	case SB_UID: return (__u32)bpf_get_current_uid_gid();
	case SB_GID: return bpf_get_current_uid_gid() >> 32;
	case SB_SITE: return x->site->session_site;
	case SB_LIVE: return 1;
	default: return 0;
	}
}

static __always_inline void bs_err(__u32 err, __u32 idx)
{
	__u64 *c;

	if (err == SERR_FULL) {
		c = bpf_map_lookup_elem(&sfull, &idx);
	} else {
		c = bpf_map_lookup_elem(&serrs, &err);
	}
	if (c)
		*c += 1;
}

/* Map idx's value of key (its keylen bytes): NULL when absent (and not
 * create) or when the map holds its keys already (counted). */
static __always_inline void *bs_map(struct bs_ctx *x, __u32 idx, const struct script_map *m,
				    const __u8 *key, int create)
{
	struct bs_task *ts = x->ts;
	__u32 kl = m->keylen, zk = 0;
	bool agg = script_vk_agg(m->vk);
	__u64 *nk;
	void *v, *zero;

	if (kl > SCRIPT_KEY_MAX || kl > key_len)
		return NULL;
	ts->bkey.map = idx;
	ts->bkey.pad = 0;
	if (kl < key_len) {	/* the rest of the longest key: zeros */
		zero = bpf_map_lookup_elem(&szero, &zk);
		if (!zero)
			return NULL;
		bpf_probe_read_kernel(ts->bkey.key, key_len & (2 * SCRIPT_KEY_MAX - 1), zero);
	}
	bpf_probe_read_kernel(ts->bkey.key, kl & (2 * SCRIPT_KEY_MAX - 1), key);
	v = agg ? bpf_map_lookup_elem(&saggs, &ts->bkey) : bpf_map_lookup_elem(&svals, &ts->bkey);
	if (v || !create)
		return v;
	nk = bpf_map_lookup_elem(&snkeys, &idx);
	zero = bpf_map_lookup_elem(&szero, &zk);
	if (!nk || !zero)
		return NULL;
	if (*nk >= m->max)
		return NULL;	/* full: the executor counts it */
	if (!(agg ? bpf_map_update_elem(&saggs, &ts->bkey, zero, BPF_NOEXIST) :
		    bpf_map_update_elem(&svals, &ts->bkey, zero, BPF_NOEXIST)))
		__sync_fetch_and_add(nk, 1);
	return agg ? bpf_map_lookup_elem(&saggs, &ts->bkey) : bpf_map_lookup_elem(&svals, &ts->bkey);
}

static __always_inline void bs_del(struct bs_ctx *x, __u32 idx, const struct script_map *m,
				   const __u8 *key)
{
	struct bs_task *ts = x->ts;
	__u32 kl = m->keylen, zk = 0;
	__u64 *nk;
	void *zero;

	if (kl > SCRIPT_KEY_MAX || kl > key_len)
		return;
	ts->bkey.map = idx;
	ts->bkey.pad = 0;
	if (kl < key_len) {
		zero = bpf_map_lookup_elem(&szero, &zk);
		if (!zero)
			return;
		bpf_probe_read_kernel(ts->bkey.key, key_len & (2 * SCRIPT_KEY_MAX - 1), zero);
	}
	bpf_probe_read_kernel(ts->bkey.key, kl & (2 * SCRIPT_KEY_MAX - 1), key);
	if (script_vk_agg(m->vk) ? bpf_map_delete_elem(&saggs, &ts->bkey) :
				   bpf_map_delete_elem(&svals, &ts->bkey))
		return;
	nk = bpf_map_lookup_elem(&snkeys, &idx);
	if (nk && *nk)
		__sync_fetch_and_sub(nk, 1);
}

static __always_inline int bs_emit(struct bs_ctx *x, __u32 len)
{
	struct bs_task *ts = x->ts;
	__u64 pt = bpf_get_current_pid_tgid();

	ts->h.ts = bpf_ktime_get_ns();
	ts->h.pid = pt >> 32;
	ts->h.tid = (__u32)pt;
	ts->h.site = x->id;
	ts->h.cpu = bpf_get_smp_processor_id();
	bpf_get_current_comm(ts->h.comm, sizeof(ts->h.comm));
	if (len > sizeof(struct script_rec) + SCRIPT_OUT_MAX)
		len = sizeof(struct script_rec) + SCRIPT_OUT_MAX;
	return (int)bpf_ringbuf_output(&sout, &ts->h, sizeof(ts->h) + len, 0);
}

#define SCRIPT_STEP bs_step
#define SCRIPT_INLINE static __always_inline
/* indices bounded on the very register used (the checks before them are
 * vm.h's): masks of the bound's bits */
#define BS_F1(n) ((n) | (n) >> 1)
#define BS_F2(n) (BS_F1(n) | BS_F1(n) >> 2)
#define BS_F4(n) (BS_F2(n) | BS_F2(n) >> 4)
#define BS_F8(n) (BS_F4(n) | BS_F4(n) >> 8)
#define BS_FILL(n) (BS_F8(n) | BS_F8(n) >> 16)
#define SCRIPT_OFF(o, n)                                                          \
	({                                                                        \
		__u32 o_ = (o);                                                   \
		asm volatile("%0 &= %1" : "+r"(o_) : "i"(BS_FILL(n)));           \
		o_;                                                               \
	})
#define SCRIPT_STRTAB_MAX BSCRIPT_STRTAB
#define SCRIPT_OPS(mask) (ops_used & (mask))
#define SCRIPT_MOPS(mask) (mops_used & (mask))
#define SCRIPT_VAL_MAX val_max
#define SCRIPT_COPY(dst, src, n, max)                                              \
	do {                                                                       \
		__u32 n_ = (__u32)(n);                                             \
		if (n_ > (__u32)(max))                                             \
			n_ = (__u32)(max);                                         \
		bpf_probe_read_kernel(dst, n_ & (2 * SCRIPT_OUT_MAX - 1), src);     \
	} while (0)
/* the byte loops as helpers: one step for the verifier, not 256 */
static const char zeros[SCRIPT_STR_CAP * 2];
#define SCRIPT_ZERO(s, k)                                                         \
	do {                                                                      \
		__u32 k_ = (k), z_ = k_ < SCRIPT_STR_CAP ? SCRIPT_STR_CAP - k_ : 0; \
		k_ &= SCRIPT_STR_CAP - 1;                                         \
		z_ &= SCRIPT_STR_CAP * 2 - 1;                                     \
		bpf_probe_read_kernel((char *)(s) + k_, z_, zeros);               \
	} while (0)
#define SCRIPT_STRCPY(dst, src, cap, max)                                         \
	({                                                                        \
		__u32 c_ = (cap) < (max) + 1 ? (cap) : (max) + 1;                 \
		long n_;                                                          \
		if (c_ > SCRIPT_STR_CAP)                                          \
			c_ = SCRIPT_STR_CAP;                                      \
		n_ = bpf_probe_read_kernel_str(dst, c_ & (SCRIPT_STR_CAP * 2 - 1), src); \
		n_ > 0 ? (__u32)(n_ - 1) : 0;                                     \
	})
#define SCRIPT_IN(env, k, u) bs_in((struct bs_ctx *)(env), k, u)
#define SCRIPT_IN_STR(env, k, dst, cap) bs_in_str((struct bs_ctx *)(env), k, dst, cap)
#define SCRIPT_BUILTIN(env, w) bs_builtin((struct bs_ctx *)(env), w)
#define SCRIPT_COMM(env, dst) bpf_get_current_comm(dst, 16)
#define SCRIPT_READ(env, dst, addr, len)                                          \
	bpf_probe_read_user(dst, (len) & 15, (const void *)(unsigned long)(addr))
#define SCRIPT_READ_STR(env, dst, addr, cap)                                      \
	({                                                                        \
		long n_ = bpf_probe_read_user_str(dst, (cap) & (SCRIPT_STR_CAP * 2 - 1), \
						  (const void *)(unsigned long)(addr)); \
		n_ > 0 ? n_ - 1 : -1;                                             \
	})
#define SCRIPT_MAP(env, idx, m, key, create) bs_map((struct bs_ctx *)(env), idx, m, key, create)
#define SCRIPT_MAP_DEL(env, idx, m, key) bs_del((struct bs_ctx *)(env), idx, m, key)
#define SCRIPT_EMIT(env, rec, len) bs_emit((struct bs_ctx *)(env), len)
#define SCRIPT_USTACK(env, frames, id) 1
#define SCRIPT_ERR(env, err, idx) bs_err(err, idx)
#define SCRIPT_RAND(env) bpf_get_prandom_u32()
#include "script/vm.h"

/* One instruction (a bpf_loop turn). */
static long vm_step(__u32 k, void *data)
{
	struct bs_ctx *x = data;
	struct bs_task *ts = x->ts;
	__u32 pc = ts->pc, at;

	if (pc >= x->n)
		return 1;
	at = x->first + pc;
	if (at >= ninsns || at >= BSCRIPT_INSNS)
		return 1;
	/* a bound the verifier sees on the very register it indexes with */
	asm volatile("%0 &= 0xfff" : "+r"(at));
	ts->pc = bs_step(&ts->vm, &x->insns->i[at], pc, x->maps->m, nmaps, x->strtab->s,
			 nstrtab, x);
	return ts->pc >= x->n;
}

SEC("uprobe")
int usc_script(struct pt_regs *regs)
{
	__u32 id = (__u32)bpf_get_attach_cookie(regs), zk = 0;
	struct bpfeng_counts *cnt = bpf_map_lookup_elem(&counts, &id);
	struct bscript_site *site = bpf_map_lookup_elem(&ssites, &id);
	struct bs_ctx x = {};
	const struct script_probe *p;
	struct bs_task *ts;
	__u32 pi;

	if (!cnt || !site)
		return 0;
	if (follow) {
		__u32 tgid = bpf_get_current_pid_tgid() >> 32;

		if (!bpf_map_lookup_elem(&tgids, &tgid))
			return 0;	/* not COMMAND's */
	}
	cnt->hits++;
	pi = site->probe;
	p = bpf_map_lookup_elem(&sprobes, &pi);
	x.insns = bpf_map_lookup_elem(&sinsns, &zk);
	x.maps = bpf_map_lookup_elem(&sdesc, &zk);
	x.strtab = bpf_map_lookup_elem(&sstr, &zk);
	if (!p || !x.insns || !x.maps || !x.strtab || !p->n)
		return 0;
	ts = bpf_task_storage_get(&sstate, bpf_get_current_task_btf(), 0,
				  BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!ts) {
		cnt->lost++;
		return 0;
	}
	x.ts = ts;
	x.site = site;
	x.id = id;
	x.first = p->first;
	x.n = p->n;
	if (site->nargs) {
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
		ts->where.ip = regs->rip;
		ts->where.offset = site->offset;
		ts->where.vaddr = site->vaddr;
		bpf_loop(site->nargs < BPFENG_MAX_ARGS ? site->nargs : BPFENG_MAX_ARGS, eval_arg,
			 &x, 0);
	}
	/* a probe of a few updates (SCRIPT_PROBE_UPDATES) runs on the machine
	 * here: a units path (vm.h's _unit, a bpf_loop turn each) beside it
	 * made the verifier's walk, the load, tens of ms longer */
	ts->vm.strlen = str_len;
	ts->vm.back = 0;
	ts->vm.r[SCRIPT_REG_TID] = (__u32)bpf_get_current_pid_tgid();
	ts->vm.r[SCRIPT_REG_PID] = bpf_get_current_pid_tgid() >> 32;
	ts->pc = 0;
	bpf_loop(BSCRIPT_STEPS, vm_step, &x, 0);
	if (ts->pc < x.n)	/* stopped by bpf_loop's bound */
		bs_err(SERR_STEPS, 0);
	return 0;
}
