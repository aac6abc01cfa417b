/* Part of the bpf engine's program (engine/bpf/uscope.bpf.c includes it
 * once, in this place: it uses the maps, state and helpers defined above
 * it there and is no header of its own).
 *
 * $ustack: copied at a hit, or walked where the probe runs with the unwind
 * tables (stack/stack_walk.h) and counted by stack. */

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
static __always_inline __u32 copy_stack(struct task_state *ts, struct eval_state *c, bool sleepable,
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
static __always_inline void stk_log(struct task_state *ts, __u64 addr, __u64 v, __u64 rbp)
{
	struct stk_memo *m;
	__u32 n, nr;

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
	m->rbp_reads |= rbp << (n & 63);
	m->nreads = n + 1;
	/* its range, as it is read (not in a loop over the reads at the end,
	 * which Linux 6.1's verifier walks every path of: 3^32). A walk reads
	 * up the stack: a word joins the last range when that stays within
	 * STK_MEMO_RANGE bytes, else starts the next one. */
	nr = m->nranges;
	if (nr && addr >= m->clo && addr + 8 <= m->clo + STK_MEMO_RANGE) {
		if (addr + 8 > m->chi)
			m->chi = addr + 8;
	} else if (nr && addr < m->clo && m->chi - addr <= STK_MEMO_RANGE) {
		m->clo = addr;
	} else {
		if (nr >= STK_MEMO_RANGES) {
			ts->mlog = 0;	/* too scattered: not remembered */
			return;
		}
		if (nr) {
			m->rlo[(nr - 1) & (STK_MEMO_RANGES - 1)] = m->clo;
			m->rlen[(nr - 1) & (STK_MEMO_RANGES - 1)] = (__u32)(m->chi - m->clo);
		}
		m->clo = addr;
		m->chi = addr + 8;
		m->nranges = ++nr;
	}
	m->off[n & (STK_MEMO_READS - 1)] = nr - 1;	/* its range, for now */
}

/* rbp: the word is a saved rbp (STACK_READ_RBP) */
static __always_inline int stk_read(struct task_state *ts, __u64 *dst, __u64 addr, __u64 rbp)
{
	__u64 off = addr - ts->wbase;

	if (ts->wbase && addr >= ts->wbase && off <= STK_WIN - 8 && !(off & 7)) {
		*dst = *(__u64 *)&ts->win[off & (STK_WIN - 8)];
		stk_log(ts, addr, *dst, rbp);
		return 0;
	}
	if (!(addr & 7) && !bpf_probe_read_user(ts->win, STK_WIN, (const void *)addr)) {
		ts->wbase = addr;
		*dst = *(__u64 *)&ts->win[0];
		stk_log(ts, addr, *dst, rbp);
		return 0;
	}
	ts->mlog = 0;	/* a word alone: the walk is not remembered */
	return bpf_probe_read_user(dst, 8, (const void *)addr);
}

#define STACK_STEP usc_stk_step
#define STACK_INLINE static __always_inline
#define STACK_READ(env, dst, addr) stk_read(WENV(env)->ts, dst, addr, 0)
#define STACK_READ_RBP(env, dst, addr) stk_read(WENV(env)->ts, dst, addr, 1)
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
 * They are read again a range at a time (the words of a few frames lie
 * close together; a frame's buffer may lie between them, as main's 4 KiB in
 * stacks.c: one read of the whole span cost ~450 ns there), into the
 * copy's room, one range after the other. */
static __noinline int stk_memo_holds(struct task_state *ts, struct stk_memo *m, __u32 gen,
					  __u32 frames)
{
	__u8 *span = (__u8 *)ts->buf + BPFENG_STK_OFF + sizeof(struct fetch_stack_hdr);
	__u32 n = m->nreads, at = 0;
	/* saved rbps matter only to a walk that used rbp */
	__u64 skip = m->bp_used ? 0 : m->rbp_reads;

	if (!m->valid || m->gen != gen || m->ip != ts->regs[USC_REG_IP] ||
	    m->sp != ts->regs[USC_REG_SP] || (m->bp_used && m->bp != ts->regs[USC_REG_BP]) ||
	    m->frames != frames || !m->nranges || m->nranges > STK_MEMO_RANGES ||
	    n > STK_MEMO_READS)
		return 0;
	for (__u32 k = 0; k < STK_MEMO_RANGES; k++) {
		__u32 len;

		if (k >= m->nranges)
			break;
		len = m->rlen[k];
		if (!len || len > STK_MEMO_RANGE ||
		    bpf_probe_read_user(span + (at & ((STK_MEMO_RANGES - 1) * STK_MEMO_RANGE)),
					len & (2 * STK_MEMO_RANGE - 1), (const void *)m->rlo[k]))
			return 0;
		at += STK_MEMO_RANGE;
	}
	for (__u32 i = 0; i < STK_MEMO_READS; i++) {
		__u64 off;

		if (i >= n)
			break;
		off = m->off[i];
		if (*(__u64 *)(span + (off & (STK_MEMO_RANGES * STK_MEMO_RANGE - 8))) != m->val[i] &&
		    !((skip >> (i & 63)) & 1))
			return 0;
	}
	return 1;
}

/* The walk just made, remembered in m (when it can be: every word it read
 * read from a window, in few enough ranges, few enough frames). A walk
 * reads up the stack: a word joins the range of the one before when that
 * stays within STK_MEMO_RANGE bytes, else starts the next range. Range k
 * is read to STK_MEMO_RANGE * k in the copy's room. */
static __always_inline void stk_memo_keep(struct task_state *ts, struct stk_memo *m,
					  const struct fetch_walk_hdr *h, const __u64 *pcs,
					  __u32 gen, __u32 frames)
{
	__u32 n = m->nreads, nr = m->nranges;

	if (!ts->mlog || h->n > STK_MEMO_PCS || !n || n > STK_MEMO_READS || !nr ||
	    nr > STK_MEMO_RANGES)
		return;
	m->rlo[(nr - 1) & (STK_MEMO_RANGES - 1)] = m->clo;
	m->rlen[(nr - 1) & (STK_MEMO_RANGES - 1)] = (__u32)(m->chi - m->clo);
	for (__u32 i = 0; i < STK_MEMO_READS; i++) {
		__u32 k;

		if (i >= n)
			break;
		k = m->off[i] & (STK_MEMO_RANGES - 1);
		m->off[i] = k * STK_MEMO_RANGE + (__u32)(m->addr[i] - m->rlo[k]);
	}
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
 * are read again, a few ranges at a time, and no row is looked up. */
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
	/* a walk that cannot start: frame 0 alone, the rest unknown */
	h->end_pc = ts->regs[USC_REG_IP];
	h->n = 1;
	h->frames = (__u16)frames;
	h->end = STACK_WALK_NOMODULE;
	h->nsig = 0;
	*(__u32 *)h->sig = 0;
	pcs[0] = ts->regs[USC_REG_IP];
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
	m->nranges = 0;
	m->rbp_reads = 0;
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
	if (!pr || pr->gen != gen) {
		/* its range may have been rewritten: frame 0 alone */
		h->end_pc = ts->regs[USC_REG_IP];
		h->n = 1;
		h->end = STACK_WALK_NOMODULE;
		return STACK_FB_CHANGED;
	}
	h->end_pc = w->end_pc;
	h->n = (__u16)w->n;
	h->frames = (__u16)frames;
	/* (a walk not ended, or stopped at a row it cannot follow: counted
	 * so when there is no room for a copy, stack_walked reads it) */
	h->end = w->end == STACK_WALK_GOING ? STACK_WALK_FALLBACK : w->end;
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
 * ts->stk_hash. 0; 1: another stack has its hash (counted): the hit is
 * recorded instead; 2: the table is full (it holds as many stacks as the
 * aggregation holds rows, --max-keys): the hit is counted as one whose key
 * found no room, as any key past --max-keys is. */
__noinline int stk_count(__u32 at, struct bpfeng_counts *cnt)
{
	struct task_state *ts = ts_map();	/* the walk stored: a map value's */
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
	key.hash = (c.h & ~BPFENG_STK_PY) | 1;	/* (bit 1 clear: not a $pystack) */
	v = bpf_map_lookup_elem(&stk_stacks, &key);
	if (!v) {
		err = bpf_map_update_elem(&stk_stacks, &key, c.w, BPF_NOEXIST);
		if (!err) {
			stk_counted(ts, key.hash);
			return 0;
		}
		if (err != -17 /* EEXIST: another CPU's just now */)
			return 2;
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

/* ---- $pystack counted where the probe runs ---------------------------------- */

/* counted Python stacks: python_stack_hdr and the frames (max_entries set
 * at load: as many as the aggregation's rows), in values as large as
 * stk_stacks' (the hash and compare steps, shared, read up to that) */
#define PY_VALUE (sizeof(struct python_stack_hdr) + sizeof(struct python_frame) * PYTHON_FRAMES_MAX)
_Static_assert(PY_VALUE <= STK_VALUE, "py_stacks' values");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 1);
	__uint(key_size, sizeof(struct bpfeng_stk_key));
	__uint(value_size, STK_VALUE);
} py_stacks SEC(".maps");

/* A count's $pystack (the record's, len bytes at off) in py_stacks: its
 * hash (with BPFENG_STK_PY set) in ts->stk_hash. 0, or 3 the first time
 * it is seen (uscope is told, to name its frames while the process runs);
 * 1: another has its hash (counted); 2: the table is full, as stk_count. */
__noinline int py_count(__u32 off, __u32 len, struct bpfeng_counts *cnt)
{
	struct task_state *ts = ts_map();	/* the frames stored: a map value's */
	struct stk_hash_ctx c = {};
	struct bpfeng_stk_key key = {};
	const __u64 *v;
	long err;

	if (!ts || !cnt || (off & 7) || len < sizeof(struct python_stack_hdr) || len > PY_VALUE)
		return 1;
	c.w = (const __u64 *)(ts->buf + (off & (2 * BPFENG_REC_MAX - 8)));
	c.n = (len + 7) / 8;
	key.tgid = bpf_get_current_pid_tgid() >> 32;
	c.h = stk_mix(0x7f4a7c159e3779b9ULL, key.tgid);
	bpf_loop(3 + STACK_WALK_MAX, stk_hash_step, &c, 0);
	key.hash = c.h | 1 | BPFENG_STK_PY;
	ts->stk_hash = key.hash;
	v = bpf_map_lookup_elem(&py_stacks, &key);
	if (!v) {
		/* (the value's bytes past the frames are the record's: never read) */
		err = bpf_map_update_elem(&py_stacks, &key, c.w, BPF_NOEXIST);
		if (!err)
			return 3;
		if (err != -17 /* EEXIST: another CPU's just now */)
			return 2;
		v = bpf_map_lookup_elem(&py_stacks, &key);
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
	return 0;
}
