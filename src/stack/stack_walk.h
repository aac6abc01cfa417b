/* Stacks unwound where the probe runs: compact unwind tables compiled from a
 * module's CFI (src/stack/unwtab.c), and the walker that follows them,
 * written once in plain C as probe/fetch_eval.h is, for the three places a
 * stack is walked: the inject engine's freestanding agent, the bpf engine's
 * program and the tracer itself (tests, the benchmark, a recording's replay).
 * The walker reads only the words it needs (a return address, a saved rbp)
 * and records return addresses: no stack copy.
 *
 * ---- The tables ----------------------------------------------------------
 * A module's table is a sorted array of rows (struct stack_row, 8 bytes). A
 * row holds from its pc to the next row's pc (the last one to the table's
 * span) and says how to find the caller there:
 *   - the CFA (the caller's stack pointer) is rsp or rbp plus an offset
 *     (16 bits, in 8-byte words with STACK_CFA_X8 for frames of 32 KiB and
 *     more);
 *   - the return address is at CFA - 8 (rows whose CFI says otherwise are
 *     STACK_OP_REG);
 *   - rbp is unchanged, saved at CFA + 8 * rbp_off, or lost (unknown in the
 *     caller: a walk that needs it later falls back).
 * What a row cannot express has an op of its own, so that the walker stops
 * and says why (the engine then falls back to a copy of the stack, and
 * counts it): a CFA given by a DWARF expression (PLT entries, hand-written
 * assembly), a CFA from another register, offsets out of range, a signal
 * frame of a layout other than Linux's x86-64 rt_sigreturn (which the
 * walker follows: STACK_OP_SIGNAL), CFI libdw could not read. Ranges no FDE
 * covers are STACK_OP_NOCFI rows (below: frame pointers). Adjacent equal
 * rows are merged. Rows' pcs are link-time addresses less the table's base,
 * so one table serves every process that maps the module (at its own bias).
 *
 * ---- Code without CFI: frame pointers --------------------------------------
 * JIT-compiled code (V8, the JVM with -XX:+PreserveFramePointer, LuaJIT,
 * CPython's perf trampolines) lives in anonymous executable memory
 * (STACK_TAB_ANON mappings) or in a module without CFI for it (V8's
 * embedded builtins in node's .text), and keeps the rbp chain, as perf
 * expects of it. The walker steps such a frame by its frame pointer:
 * ra = [rbp + 8], CFA = rbp + 16, the caller's rbp = [rbp], when rbp is
 * known, 8-aligned, at or above the stack pointer and less than
 * STACK_FP_SPAN above it (so the stack pointer grows at each step, as with
 * CFI), and both words read. The walk goes back to the tables when the
 * return address lands in code they describe. Frame 0 in a module without
 * CFI is not stepped so (a probe at a function's entry has not pushed rbp
 * yet: its caller would be left out): the stack ends there, as libdw's
 * does; so does any frame whose frame pointer fails the checks. The
 * includer may define STACK_BP_USED(env): the walk used the rbp it started
 * with (a walk remembered by registers then depends on it).
 *
 * A lookup does not search the whole table: a block index (ORC's fast
 * lookup) gives, for each 2^shift bytes of the module from its base, the
 * last row starting at or before the block; a binary search between the
 * rows of the block and of the next one takes at most shift + 1 steps
 * (STACK_ROW_STEPS bounds the loop: the builder keeps shift <=
 * STACK_SHIFT_MAX).
 *
 * ---- Where the walker finds them: an image --------------------------------
 * Every place sees the same four arrays, addressed by index (never by
 * pointer, so they can live in BPF array maps or in a region mapped at
 * different addresses in the tracer and the target):
 *   struct stack_tab  tabs[]   one per module table: where its rows and
 *                              block index start in rows[] and idx[]
 *   struct stack_row  rows[]   every table's rows, one after the other
 *   uint32_t          idx[]    every table's block index (row numbers
 *                              relative to the table's first row)
 *   struct stack_map  maps[]   the process's executable mappings, sorted by
 *                              start, not overlapping: each with its bias
 *                              (runtime - link-time address) and its table
 * The includer defines how an element is fetched (STACK_TAB, STACK_ROW,
 * STACK_IDX, STACK_MAP below); each returns NULL for an index out of range,
 * which the walker takes as a table it cannot use (a fallback), never as a
 * reason to read out of bounds.
 *
 * How each engine holds the image (engine/inject/ustack.c, engine/bpf/ustack.c):
 *   - inject: one read-only memfd of tables per session, mapped into every
 *     traced process (tables are per build-id, shared by processes): a
 *     header, then tabs[], rows[], idx[], appended to as modules appear
 *     (the tracer writes the new rows first, then publishes the new counts
 *     with a store-release). Each process's maps[] lives in its own agent
 *     region, two copies: the tracer rewrites the copy not in use and
 *     switches a (generation, copy) word the agent reads once a walk,
 *     before and after (a changed word: the walk is done again, or falls
 *     back). The agent reads the stack directly within its thread's known
 *     readable stack range (inj_slot's stk_lo..stk_hi), process_vm_readv
 *     beyond.
 *   - bpf: tabs[], rows[] and idx[] are three BPF_MAP_TYPE_ARRAY maps sized
 *     at load (the modules of the traced processes, plus room for modules
 *     loaded later), so a lookup is an inlined bounds check; maps[] is a
 *     fourth array of every traced process's mappings, and a hash keyed by
 *     tgid gives a process's (first, count) in it, replaced as one value
 *     when its maps change. The frame loop is bpf_loop() calling
 *     STACK_STEP, and so are its searches (STACK_LOOP; bounded by
 *     STACK_MAP_STEPS, STACK_ROW_STEPS): as plain loops the verifier walks
 *     every path through them and gives up. Memory is bpf_probe_read_user
 *     of a 512-byte window of the stack at a time, and rows are cached per
 *     CPU by pc (STACK_CACHE_*). tests/tools/walk.bpf.c does all this: the
 *     verifier takes it (3,500 instructions), and it walks the stacks the
 *     walker walks in user space.
 *
 * ---- Including the walker ------------------------------------------------
 * The includer defines, before including this file:
 *   STACK_STEP               the step function's name
 *   STACK_INLINE             its storage and inlining
 *   STACK_READ(env, dst, addr)  8 bytes of user memory at addr into
 *                            *(uint64_t *)dst: 0, or non-zero if unreadable
 *   STACK_NMAPS(env)         the count of maps[]
 *   STACK_MAP(env, i)        const struct stack_map * of maps[i], or NULL
 *   STACK_TAB(env, i)        const struct stack_tab * of tabs[i], or NULL
 *   STACK_ROW(env, i)        const struct stack_row * of rows[i], or NULL
 *   STACK_IDX(env, i)        const uint32_t * of idx[i], or NULL
 *   STACK_READ_RBP(env, dst, addr)  the same, of a saved rbp (default:
 *                            STACK_READ): a word whose value matters to the
 *                            walk only if a later frame's CFA is rbp-based
 *                            or a frame is stepped by frame pointer
 *                            (STACK_BP_USED), which a walk remembered by the
 *                            words it read need not compare otherwise (in a
 *                            program without frame pointers rbp holds
 *                            anything: a request's pointer, a counter)
 * and may define how a search loops (the bpf program: bpf_loop, so the
 * verifier checks a step once rather than every path through the steps):
 *   STACK_LOOP(n, fn, ctx)   call long fn(uint32_t i, void *ctx) for i < n
 *                            until it returns non-zero (default: a loop)
 *   STACK_CB                 fn's storage (default STACK_INLINE)
 * and a cache of rows by lookup address, which a walk over the
 * same code (a hot path's stacks) hits instead of searching the tables:
 *   STACK_CACHE_GET(env, pc) const struct stack_row * put for pc, or NULL;
 *                            never a torn entry (another pc's row)
 *   STACK_CACHE_PUT(env, pc, row)   remember it
 * (the agent: per thread, in its slot; bpf: per CPU, with a sequence word
 * around the two words of an entry since a sleepable program can be
 * preempted; both emptied when the maps change). It may include the file
 * several times; the macros are undefined at the end. Without STACK_STEP
 * defined, it declares the types alone.
 * stack_walk_init() starts a walk at the registers of the hit; STACK_STEP
 * unwinds one frame and returns non-zero once the walk has ended
 * (w->end). The frames are those of struct usc_stack (probe/event.h):
 * pcs[0] the probed address, exact; then return addresses; a frame listed
 * in w->sig[] is the signal trampoline (exact and sigframe in usc_stack),
 * and the frame after it, the interrupted code, is exact too. */
#ifndef USC_STACK_WALK_ONCE
#define USC_STACK_WALK_ONCE

#include "probe/fetch.h"	/* stored walks; for bpf, the integer types */
#ifdef __bpf__
typedef __s8 int8_t;
typedef __s16 int16_t;
#else
#include <stdint.h>
#endif

#define STACK_WALK_MAX 256	/* frames (USC_STACK_FRAMES_MAX) */
#define STACK_SIGS_MAX 4	/* signal trampolines on one stack */
#define STACK_SHIFT_MAX 14	/* block index: 2^shift bytes a block, at most */
#define STACK_ROW_STEPS 16	/* >= STACK_SHIFT_MAX + 1 */
#define STACK_MAPS_MAX 1024	/* mappings of one process */
#define STACK_MAP_STEPS 11	/* >= log2(STACK_MAPS_MAX) + 1 */
#define STACK_TAB_NONE 0xffffffffu	/* stack_map.tab: the module has no CFI */
#define STACK_TAB_FAIL 0xfffffffeu	/* ... its table could not be built */
#define STACK_TAB_NOFILE 0xfffffffdu	/* ... it is no file (the vDSO): a walk
					 * ends there, no module, as libdw's */
#define STACK_TAB_ANON 0xfffffffcu	/* ... anonymous executable memory (JIT
					 * code): stepped by frame pointer */
#define STACK_FP_SPAN (16u << 20)	/* a frame pointer at most this far above
					 * the stack pointer */

enum stack_op {
	STACK_OP_NOCFI = 0,	/* no CFI covers these addresses: no caller */
	STACK_OP_RSP = 1,	/* CFA = rsp + cfa_off */
	STACK_OP_RBP = 2,	/* CFA = rbp + cfa_off */
	STACK_OP_OUTERMOST = 3,	/* the return address is undefined (_start,
				 * clone): the outermost frame */
	STACK_OP_SIGNAL = 4,	/* Linux's x86-64 signal trampoline: the
				 * interrupted registers in the ucontext at rsp */
	/* what the walker cannot follow: the walk stops, a fallback */
	STACK_OP_EXPR = 5,	/* CFA by a DWARF expression (PLT entries) */
	STACK_OP_REG = 6,	/* CFA from another register; the return
				 * address or rsp by an unusual rule */
	STACK_OP_RANGE = 7,	/* an offset the row cannot hold */
	STACK_OP_SIGOTHER = 8,	/* a signal frame of another layout */
	STACK_OP_BAD = 9,	/* CFI libdw could not read */
	STACK_OP_NR
};

/* stack_row.op's high bits: where the caller's rbp is */
#define STACK_RBP_SAME 0	/* unchanged */
#define STACK_RBP_SAVED 1	/* saved at CFA + 8 * rbp_off */
#define STACK_RBP_LOST 2	/* unknown: a later row that needs it falls back */
#define STACK_OP_MASK 0x0f
#define STACK_RBP_SHIFT 4
#define STACK_RBP_MASK 0x30
#define STACK_CFA_X8 0x40	/* cfa_off is in 8-byte words (frames of 32 KiB
				 * and more) */

struct stack_row {
	uint32_t pc;		/* link-time address - the table's base */
	int16_t cfa_off;
	uint8_t op;		/* enum stack_op | rbp rule << STACK_RBP_SHIFT
				 * | STACK_CFA_X8 */
	int8_t rbp_off;		/* STACK_RBP_SAVED: in 8-byte words from the CFA */
};

struct stack_tab {
	uint64_t base;		/* link-time address of row 0 */
	uint32_t span;		/* bytes from base the rows cover */
	uint32_t nrows;		/* >= 1 */
	uint32_t rows;		/* its row 0 in rows[] */
	uint32_t idx;		/* its block 0 in idx[] */
	uint32_t nidx;		/* blocks: (span - 1) >> shift + 1 */
	uint8_t shift;		/* a block is 2^shift bytes */
	uint8_t pad[3];
};

struct stack_map {
	uint64_t start, end;	/* runtime addresses, end exclusive */
	uint64_t bias;		/* runtime - link-time address */
	uint32_t tab;		/* in tabs[], or STACK_TAB_NONE, STACK_TAB_FAIL */
	uint32_t pad;
};

enum stack_walk_end {
	STACK_WALK_GOING = 0,	/* not ended */
	STACK_WALK_OUTERMOST,	/* complete */
	STACK_WALK_LIMIT,	/* max frames; end_pc the first left out */
	STACK_WALK_NOCFI,	/* end_pc's code has no CFI */
	STACK_WALK_NOMODULE,	/* end_pc is in no mapping the walker knows (why 0),
				 * or in one that is no file (why 1: the vDSO) */
	STACK_WALK_UNREAD,	/* the stack could not be read where the CFI says */
	STACK_WALK_FALLBACK,	/* a row it cannot follow at end_pc: why */
};

/* fetch_walk_valid (probe/fetch.h) knows the ends a stored walk has */
_Static_assert(STACK_WALK_OUTERMOST == 1 && STACK_WALK_UNREAD == 5 &&
	       STACK_SIGS_MAX == FETCH_WALK_SIGS && STACK_WALK_MAX == 256, "stored walks");

/* STACK_WALK_FALLBACK's why, besides the row's op (STACK_OP_EXPR ...) */
#define STACK_WHY_RBP 16	/* the CFA is rbp-based and rbp is lost */
#define STACK_WHY_TABLE 17	/* a table that is missing, failed, or bad */
#define STACK_WHY_SIGS 18	/* more signal frames than STACK_SIGS_MAX */

/* Why a walk fell back to a copy of the stack (fetch_stack_hdr.why, the
 * counts of each run): a row it cannot follow (the op, or a STACK_WHY_*),
 * or where it could not start or go on. */
enum stack_fallback {
	STACK_FB_NONE = 0,	/* no fallback: the copy was asked for */
	STACK_FB_EXPR,		/* STACK_OP_EXPR ... STACK_OP_BAD, in order */
	STACK_FB_REG,
	STACK_FB_RANGE,
	STACK_FB_SIGOTHER,
	STACK_FB_BADCFI,
	STACK_FB_RBP,		/* STACK_WHY_RBP, STACK_WHY_TABLE, STACK_WHY_SIGS */
	STACK_FB_TABLE,
	STACK_FB_SIGS,
	STACK_FB_NOMODULE,	/* STACK_WALK_NOMODULE: a pc in no mapping the
				 * tables know (a module loaded since, JIT code) */
	STACK_FB_NOPROC,	/* the process's mappings are not known yet */
	STACK_FB_CHANGED,	/* they changed while it walked */
	STACK_FB_NR
};

#define STACK_W_EXACT 1		/* pc is exact: look it up as is, not pc - 1 */
#define STACK_W_BP 2		/* bp is known */
#define STACK_W_BPUNREAD 4	/* bp is not known: where it was saved could
				 * not be read */

struct stack_walk {
	uint64_t pc, sp, bp;	/* the frame being unwound: pcs[n - 1] */
	uint64_t end_pc;
	uint32_t n;		/* frames in pcs[] */
	uint32_t max;		/* frames wanted, <= STACK_WALK_MAX */
	uint32_t map;		/* the mapping last found: looked at first */
	uint8_t flags;		/* STACK_W_* */
	uint8_t end;		/* enum stack_walk_end */
	uint8_t why;		/* STACK_WALK_FALLBACK: STACK_OP_* or STACK_WHY_* */
	uint8_t nsig;
	uint8_t sig[STACK_SIGS_MAX];	/* frames that are the signal trampoline */
};

/* A binary search, a step at a time (a loop in C, a bpf_loop callback in
 * the bpf program, which the verifier then checks once, not once a path). */
struct stack_search {
	uint64_t key;		/* the lookup address, or the offset of a row */
	uint32_t lo, n;		/* the candidates: [lo, lo + n) */
	uint32_t base;		/* rows: the table's first in rows[] */
	uint32_t bad;		/* an element could not be had */
	void *env;
};

/* Offsets in the ucontext the kernel pushes for a signal handler, which
 * the trampoline (glibc's __restore_rt) finds at its rsp. */
#define STACK_UC_RBP 120
#define STACK_UC_RSP 160
#define STACK_UC_RIP 168

static inline void stack_walk_init(struct stack_walk *w, uint64_t pc, uint64_t sp, uint64_t bp,
				   uint32_t max, uint64_t *pcs)
{
	w->pc = pc;
	w->sp = sp;
	w->bp = bp;
	w->end_pc = 0;
	w->map = 0;
	w->flags = STACK_W_EXACT | STACK_W_BP;
	w->why = 0;
	w->nsig = 0;
	w->max = max < STACK_WALK_MAX ? max : STACK_WALK_MAX;
	if (!w->max) {
		w->n = 0;
		w->end = STACK_WALK_LIMIT;
		w->end_pc = pc;
		return;
	}
	pcs[0] = pc;
	w->n = 1;
	w->end = STACK_WALK_GOING;
}

static inline int stack_walk_stop(struct stack_walk *w, uint8_t end, uint8_t why, uint64_t pc)
{
	w->end = end;
	w->why = why;
	w->end_pc = pc;
	return 1;
}

/* A walk that ended so falls back to a copy: why (enum stack_fallback),
 * or STACK_FB_NONE for a walk that stands. */
static inline uint8_t stack_walk_fallback(const struct stack_walk *w)
{
	if (w->end == STACK_WALK_NOMODULE)
		return w->why ? STACK_FB_NONE : STACK_FB_NOMODULE;	/* 1: a known mapping */
	if (w->end != STACK_WALK_FALLBACK)
		return w->end == STACK_WALK_GOING ? STACK_FB_TABLE : STACK_FB_NONE;
	if (w->why >= STACK_OP_EXPR && w->why <= STACK_OP_BAD)
		return (uint8_t)(STACK_FB_EXPR + (w->why - STACK_OP_EXPR));
	if (w->why >= STACK_WHY_RBP && w->why <= STACK_WHY_SIGS)
		return (uint8_t)(STACK_FB_RBP + (w->why - STACK_WHY_RBP));
	return STACK_FB_TABLE;
}

/* the step's helpers are named after it */
#define STACK_FN2(a, b) a##b
#define STACK_FN(a, b) STACK_FN2(a, b)

#endif /* USC_STACK_WALK_ONCE */

#ifdef STACK_STEP	/* the types alone without it */

#ifndef STACK_LOOP
#define STACK_LOOP(n, fn, ctx)                                                  \
	do {                                                                    \
		for (uint32_t stack_i_ = 0; stack_i_ < (n); stack_i_++)        \
			if (fn(stack_i_, ctx))                                  \
				break;                                          \
	} while (0)
#endif
#ifndef STACK_CB
#define STACK_CB STACK_INLINE
#endif
#ifndef STACK_READ_RBP
#define STACK_READ_RBP(env, dst, addr) STACK_READ(env, dst, addr)
#endif

/* One step of the search for the mapping of a lookup address: the first
 * mapping whose end is above it, in [lo, lo + n). 1: done. */
STACK_CB long STACK_FN(STACK_STEP, _mstep)(uint32_t i, void *ctx)
{
	struct stack_search *s = (struct stack_search *)ctx;
	const struct stack_map *m;
	uint32_t half;

	(void)i;
	if (!s->n)
		return 1;
	half = s->n / 2;
	m = STACK_MAP(s->env, s->lo + half);
	if (!m) {
		s->bad = 1;
		return 1;
	}
	if (m->end <= s->key) {
		s->lo += half + 1;
		s->n -= half + 1;
	} else {
		s->n = half;
	}
	return 0;
}

/* The mapping of a lookup address: the last one found, else a binary
 * search. NULL: none. */
STACK_INLINE const struct stack_map *STACK_FN(STACK_STEP, _map)(struct stack_walk *w,
								  uint64_t look, void *env)
{
	const struct stack_map *m = STACK_MAP(env, w->map);
	struct stack_search s = {look, 0, STACK_NMAPS(env), 0, 0, env};

	if (m && look >= m->start && look < m->end)
		return m;
	if (s.n > STACK_MAPS_MAX)
		s.n = STACK_MAPS_MAX;
	STACK_LOOP(STACK_MAP_STEPS, STACK_FN(STACK_STEP, _mstep), &s);
	if (s.bad || s.n)
		return 0;
	m = STACK_MAP(env, s.lo);
	if (!m || look < m->start || look >= m->end)
		return 0;
	w->map = s.lo;
	return m;
}

/* One step of the search for a row: the last row at or before key, in
 * [lo, lo + n) of the rows from base, row lo being at or before. */
STACK_CB long STACK_FN(STACK_STEP, _rstep)(uint32_t i, void *ctx)
{
	struct stack_search *s = (struct stack_search *)ctx;
	const struct stack_row *r;
	uint32_t half;

	(void)i;
	if (s->n <= 1)
		return 1;
	half = s->n / 2;
	r = STACK_ROW(s->env, s->base + s->lo + half);
	if (!r) {
		s->bad = 1;
		return 1;
	}
	if (r->pc <= s->key)
		s->lo += half;
	s->n -= half;
	return 0;
}

/* The row of a table at off (< t->span); NULL: the table is bad. */
STACK_INLINE const struct stack_row *STACK_FN(STACK_STEP, _row)(const struct stack_tab *t,
								  uint32_t off, void *env)
{
	uint32_t b = off >> (t->shift & 31), lo, hi;
	struct stack_search s;
	const uint32_t *ip;
	const struct stack_row *r;

	if (b >= t->nidx)
		return 0;
	ip = STACK_IDX(env, t->idx + b);
	if (!ip)
		return 0;
	lo = *ip;
	if (b + 1 < t->nidx) {
		ip = STACK_IDX(env, t->idx + b + 1);
		if (!ip)
			return 0;
		hi = *ip;
	} else {
		hi = t->nrows - 1;
	}
	if (hi >= t->nrows || lo > hi)
		return 0;
	s.key = off;
	s.lo = lo;
	s.n = hi - lo + 1;
	s.base = t->rows;
	s.bad = 0;
	s.env = env;
	STACK_LOOP(STACK_ROW_STEPS, STACK_FN(STACK_STEP, _rstep), &s);
	if (s.bad || s.n != 1)
		return 0;
	r = STACK_ROW(env, t->rows + s.lo);
	if (!r || r->pc > off)
		return 0;
	return r;
}

/* The frame pcs[w->n - 1] has no CFI: its caller by its frame pointer, or
 * the walk ends as it would without (end, why). */
STACK_INLINE int STACK_FN(STACK_STEP, _fp)(struct stack_walk *__restrict w,
					    uint64_t *__restrict pcs, void *env, uint8_t end,
					    uint8_t why, int anon)
{
	uint64_t ra, bp;

	if (!(w->flags & STACK_W_BP) || (w->n <= 1 && !anon) || (w->bp & 7) || w->bp < w->sp ||
	    w->bp - w->sp >= STACK_FP_SPAN)
		return stack_walk_stop(w, end, why, w->pc);
#ifdef STACK_BP_USED
	STACK_BP_USED(env);
#endif
	if (STACK_READ(env, &ra, w->bp + 8) || STACK_READ(env, &bp, w->bp))
		return stack_walk_stop(w, end, why, w->pc);
	if (ra == 0)
		return stack_walk_stop(w, STACK_WALK_OUTERMOST, 0, 0);
	if (w->n >= w->max || w->n >= STACK_WALK_MAX)
		return stack_walk_stop(w, STACK_WALK_LIMIT, 0, ra);
	pcs[w->n] = ra;
	w->n++;
	w->pc = ra;
	w->sp = w->bp + 16;
	w->bp = bp;
	w->flags = STACK_W_BP;
	return 0;
}

/* Unwind the frame pcs[w->n - 1]: add its caller, or end the walk (1).
 * (w and pcs never overlap each other nor what env reaches: restrict lets
 * a compiler keep the walk in registers across the stores to pcs.) */
STACK_INLINE int STACK_STEP(struct stack_walk *__restrict w, uint64_t *__restrict pcs, void *env)
{
	uint64_t look, rel, cfa, ra = 0, v;
	const struct stack_map *m;
	const struct stack_tab *t;
	const struct stack_row *r;
	uint8_t op, next = 0;

	if (w->end != STACK_WALK_GOING)
		return 1;
	look = (w->flags & STACK_W_EXACT) ? w->pc : w->pc - 1;
#ifdef STACK_CACHE_GET
	r = STACK_CACHE_GET(env, look);
	if (r)
		goto row;
#endif
	m = STACK_FN(STACK_STEP, _map)(w, look, env);
	if (!m)
		return stack_walk_stop(w, STACK_WALK_NOMODULE, 0, w->pc);
	if (m->tab == STACK_TAB_NONE)
		return STACK_FN(STACK_STEP, _fp)(w, pcs, env, STACK_WALK_NOCFI, 0, 0);
	if (m->tab == STACK_TAB_ANON)
		return STACK_FN(STACK_STEP, _fp)(w, pcs, env, STACK_WALK_NOCFI, 0, 1);
	if (m->tab == STACK_TAB_NOFILE)
		return stack_walk_stop(w, STACK_WALK_NOMODULE, 1, w->pc);
	t = STACK_TAB(env, m->tab);
	if (!t)
		return stack_walk_stop(w, STACK_WALK_FALLBACK, STACK_WHY_TABLE, w->pc);
	rel = look - m->bias - t->base;
	if (look - m->bias < t->base || rel >= t->span)
		return STACK_FN(STACK_STEP, _fp)(w, pcs, env, STACK_WALK_NOCFI, 0, 0);
	r = STACK_FN(STACK_STEP, _row)(t, (uint32_t)rel, env);
	if (!r)
		return stack_walk_stop(w, STACK_WALK_FALLBACK, STACK_WHY_TABLE, w->pc);
#ifdef STACK_CACHE_PUT
	STACK_CACHE_PUT(env, look, r);
#endif
#ifdef STACK_CACHE_GET
row:
#endif
	op = r->op & STACK_OP_MASK;
	/* the common rows first: a CFA from rsp, then from rbp */
	if (__builtin_expect(op == STACK_OP_RSP, 1)) {
		cfa = w->sp + ((int64_t)r->cfa_off << ((r->op & STACK_CFA_X8) ? 3 : 0));
	} else if (op == STACK_OP_RBP) {
		if (w->flags & STACK_W_BPUNREAD)
			return stack_walk_stop(w, STACK_WALK_UNREAD, 0, w->pc);
		if (!(w->flags & STACK_W_BP))
			return stack_walk_stop(w, STACK_WALK_FALLBACK, STACK_WHY_RBP, w->pc);
		cfa = w->bp + ((int64_t)r->cfa_off << ((r->op & STACK_CFA_X8) ? 3 : 0));
	} else if (op == STACK_OP_NOCFI) {
		return STACK_FN(STACK_STEP, _fp)(w, pcs, env, STACK_WALK_NOCFI, 0, 0);
	} else if (op == STACK_OP_OUTERMOST) {
		return stack_walk_stop(w, STACK_WALK_OUTERMOST, 0, 0);
	} else if (op == STACK_OP_SIGNAL) {
		if (w->nsig >= STACK_SIGS_MAX)
			return stack_walk_stop(w, STACK_WALK_FALLBACK, STACK_WHY_SIGS, w->pc);
		if (STACK_READ(env, &ra, w->sp + STACK_UC_RIP) ||
		    STACK_READ(env, &cfa, w->sp + STACK_UC_RSP) ||
		    STACK_READ(env, &v, w->sp + STACK_UC_RBP))
			return stack_walk_stop(w, STACK_WALK_UNREAD, 0, w->pc);
		w->sig[w->nsig & (STACK_SIGS_MAX - 1)] = (uint8_t)(w->n - 1);
		w->nsig++;
		w->bp = v;
		next = STACK_W_EXACT | STACK_W_BP;
		goto caller;
	} else {
		return stack_walk_stop(w, STACK_WALK_FALLBACK, op, w->pc);
	}
	if (STACK_READ(env, &ra, cfa - 8))
		return stack_walk_stop(w, STACK_WALK_UNREAD, 0, w->pc);
	next = w->flags & (STACK_W_BP | STACK_W_BPUNREAD);
	if ((r->op & STACK_RBP_MASK) == (STACK_RBP_SAVED << STACK_RBP_SHIFT)) {
		/* unreadable: unknown, as libdw has it (a later frame may not
		 * need it; one that does ends there, unread) */
		if (STACK_READ_RBP(env, &v, cfa + 8 * (int64_t)r->rbp_off)) {
			next = STACK_W_BPUNREAD;
		} else {
			w->bp = v;
			next = STACK_W_BP;
		}
	} else if (r->op & STACK_RBP_MASK) {
		next = 0;	/* lost */
	}
caller:
	if (ra == 0)
		return stack_walk_stop(w, STACK_WALK_OUTERMOST, 0, 0);
	if (w->n >= w->max || w->n >= STACK_WALK_MAX)
		return stack_walk_stop(w, STACK_WALK_LIMIT, 0, ra);
	pcs[w->n] = ra;
	w->n++;
	w->pc = ra;
	w->sp = cfa;
	w->flags = next;
	return 0;
}

#undef STACK_STEP
#undef STACK_INLINE
#undef STACK_READ
#undef STACK_READ_RBP
#undef STACK_NMAPS
#undef STACK_MAP
#undef STACK_TAB
#undef STACK_ROW
#undef STACK_IDX
#undef STACK_CACHE_GET
#undef STACK_CACHE_PUT
#undef STACK_BP_USED
#undef STACK_LOOP
#undef STACK_CB

#endif /* STACK_STEP */
