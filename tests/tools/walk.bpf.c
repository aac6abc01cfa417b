// SPDX-License-Identifier: GPL-2.0
/* The stack walker (src/stack/stack_walk.h) in a bpf program, held as the
 * bpf engine will hold it: the image's four arrays in BPF array maps, the
 * frame loop a bpf_loop whose callback is one STACK_STEP, the searches
 * bpf_loops too (STACK_LOOP: the verifier checks a search step once; as
 * plain loops, it tried every path through them and gave up at a million
 * instructions). The stack is read 512 bytes at a time (a read of 512 costs
 * about one of 8, and a walk's words are close together: 3 reads instead
 * of 28 for 14 frames), and rows are cached per CPU by pc (STACK_CACHE_GET,
 * STACK_CACHE_PUT) when config says so. A uprobe on a function of
 * tests/tools/bpfwalk.c, which compares what it finds with the walker run
 * in user space on the same image. Not the engine's program: a check that
 * the verifier takes the walker as written, that it walks the same stacks
 * in the kernel, and what a walk costs there. */
#include <linux/bpf.h>
#include <linux/ptrace.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "stack/stack_walk.h"

char LICENSE[] SEC("license") = "GPL";

/* sizes set before load */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct stack_tab);
} tabs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct stack_row);
} rows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} idx SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, STACK_MAPS_MAX);
	__type(key, __u32);
	__type(value, struct stack_map);
} maps SEC(".maps");

#define WIN 512		/* bytes of stack read at once */

struct result {
	struct stack_walk w;
	__u64 pcs[STACK_WALK_MAX];
	__u64 hits;
	__u64 ns;		/* the walks' time, all hits */
	__u64 reads;		/* bpf_probe_read_user calls, all hits */
	__u64 wbase;		/* the window: WIN bytes of stack from wbase */
	__u8 win[WIN];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct result);
} out SEC(".maps");

struct cfg {
	__u32 nmaps;		/* in maps[] */
	__u32 max_frames;
	__u32 use_cache;	/* rows by pc */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cfg);
} config SEC(".maps");

/* rows by lookup address, per CPU: a hot path's stacks skip the searches.
 * An entry is written between two increments of its seq (odd: being
 * written), so a reader that another task preempted cannot take a torn
 * one for another pc's row. */
#define CACHE_SLOTS 1024

struct centry {
	__u32 seq;
	struct stack_row row;
	__u64 pc;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, CACHE_SLOTS);
	__type(key, __u32);
	__type(value, struct centry);
} rcache SEC(".maps");

struct wctx {
	struct result *r;
	__u32 nmaps;
	__u32 use_cache;
	struct stack_row got;	/* the row a cache lookup found */
};

static __always_inline __u32 slot_of(__u64 pc)
{
	return (__u32)((pc * 0x9e3779b97f4a7c15ULL) >> 54);
}

static __always_inline const struct stack_row *cache_get(struct wctx *c, __u64 pc)
{
	__u32 k = slot_of(pc);
	struct centry *e;
	__u32 s1;

	if (!c->use_cache)
		return NULL;
	e = bpf_map_lookup_elem(&rcache, &k);
	if (!e)
		return NULL;
	s1 = e->seq;
	if (s1 & 1)
		return NULL;
	c->got = e->row;
	if (e->pc != pc || e->seq != s1)
		return NULL;
	return &c->got;
}

static __always_inline void cache_put(struct wctx *c, __u64 pc, const struct stack_row *r)
{
	__u32 k = slot_of(pc);
	struct centry *e;

	if (!c->use_cache)
		return;
	e = bpf_map_lookup_elem(&rcache, &k);
	if (!e)
		return;
	e->seq++;
	e->row = *r;
	e->pc = pc;
	e->seq++;
}

static __always_inline const void *elem(void *map, __u32 i)
{
	return bpf_map_lookup_elem(map, &i);
}

/* 8 bytes of the stack: from the window of it last read, else a new
 * window read there (one read of 512 bytes costs about one of 8), else
 * the 8 bytes alone (the window would cross the stack's end). */
static __always_inline int read_word(struct result *r, __u64 *dst, __u64 addr)
{
	__u64 off = addr - r->wbase;

	if (r->wbase && addr >= r->wbase && off <= WIN - 8) {
		*dst = *(__u64 *)&r->win[off & (WIN - 8)];	/* 8-aligned in the window */
		if (!(off & 7))
			return 0;
	}
	r->reads++;
	if (!(addr & 7) && !bpf_probe_read_user(r->win, WIN, (const void *)addr)) {
		r->wbase = addr;
		*dst = *(__u64 *)&r->win[0];
		return 0;
	}
	return bpf_probe_read_user(dst, 8, (const void *)addr);
}

#define STACK_STEP bpf_step
#define STACK_INLINE static __always_inline
#define STACK_READ(env, dst, addr) read_word(((struct wctx *)(env))->r, dst, addr)
#define STACK_NMAPS(env) ((struct wctx *)(env))->nmaps
#define STACK_MAP(env, i) \
	((i) < ((struct wctx *)(env))->nmaps ? (const struct stack_map *)elem(&maps, i) : NULL)
#define STACK_TAB(env, i) ((const struct stack_tab *)elem(&tabs, i))
#define STACK_ROW(env, i) ((const struct stack_row *)elem(&rows, i))
#define STACK_IDX(env, i) ((const __u32 *)elem(&idx, i))
#define STACK_LOOP(n, fn, ctx) bpf_loop(n, fn, ctx, 0)
#define STACK_CACHE_GET(env, pc) cache_get((struct wctx *)(env), pc)
#define STACK_CACHE_PUT(env, pc, row) cache_put((struct wctx *)(env), pc, row)
#define STACK_CB static __attribute__((noinline))
#include "stack/stack_walk.h"

static long step_cb(__u32 i, void *ctx)
{
	struct wctx *c = ctx;

	(void)i;
	return bpf_step(&c->r->w, c->r->pcs, c) ? 1 : 0;
}

SEC("uprobe")
int walk(struct pt_regs *ctx)
{
	struct result *r = (struct result *)elem(&out, 0);
	const struct cfg *g = (const struct cfg *)elem(&config, 0);
	struct wctx c;
	__u64 t0 = bpf_ktime_get_ns();

	if (!r || !g)
		return 0;
	c.r = r;
	c.nmaps = g->nmaps;
	c.use_cache = g->use_cache;
	r->wbase = 0;
	stack_walk_init(&r->w, PT_REGS_IP(ctx), PT_REGS_SP(ctx), PT_REGS_FP(ctx), g->max_frames,
			r->pcs);
	bpf_loop(STACK_WALK_MAX, step_cb, &c, 0);
	r->ns += bpf_ktime_get_ns() - t0;
	r->hits++;
	return 0;
}
