/* $ustack walked where the probe runs: the agent's half (the tables it
 * reads, and how they change, are inject_shared.h's "$ustack walked where
 * the probe runs"; the walker is src/stack/stack_walk.h's, written once).
 *
 * A walk reads only the words the tables say (a return address, a saved
 * rbp a frame) and records return addresses. It reads the stack directly
 * where it is known readable: the thread's slot keeps a range, from the
 * page of a stack pointer (mapped: the thread runs on it) up to what
 * process_vm_readv could read above it, a page at a time, into the slot's
 * read page (several iovecs on one page: nothing is kept, the count read
 * is what it learns), which stops at the end of the stack's mapping. A
 * word outside the range is read with process_vm_readv alone (an rbp
 * that points elsewhere). So a walk never faults, and only a thread's
 * first walks make system calls. Rows found are kept per thread by pc,
 * for the generation of mappings they were found with.
 *
 * A walk is a function of the registers it starts from (ip, sp, bp), the
 * tables and mappings (their generation) and the words it reads, each
 * read where the words before it said. So a thread remembers its last
 * walks (MEMO_N, by ip and sp): the words each read, where, and what it
 * found. A hit from the same registers, with the same mappings, whose
 * words read the same, walks the same: the words are read again (all at
 * once: none waits for another, as in a walk), compared, and the walk
 * remembered is the answer, its id in the counted stacks' table too. A
 * saved rbp is compared only when the walk used rbp (a CFA from it, a
 * step by frame pointer): in code without frame pointers rbp holds any
 * value (redis keeps a client's pointer there), and a walk that did not
 * use it is the same whatever it was (redis -P 16 under count 'zmalloc
 * $ustack': the walks remembered went from missing at nearly every hit to
 * holding). A walk that read a word outside the readable range is not
 * remembered.
 *
 * A walk that cannot go on (a row the tables cannot express, a pc in no
 * mapping the tracer has told us of, a process it has told us nothing of
 * yet, mappings that changed under it) says why: the caller copies the
 * stack instead, as --stack-mode copy does, and uscope counts it. */
#include "engine/inject/agent/agent.h"

#define PAGE 4096ULL
#define EXTEND_PAGES 16		/* a range grows by at most 64 KiB a read */
#define MEMO_N 8		/* walks a thread remembers: a power of two */
#define MEMO_READS 40		/* words a remembered walk read, at most */
#define MEMO_PCS 32		/* frames of a remembered walk, at most */

/* A walk remembered. */
struct memo {
	uint64_t ip, sp, bp;
	uint32_t proc1;		/* its process's entry + 1; 0: none */
	uint32_t gen;		/* ... and the generation of its mappings */
	uint32_t frames;	/* frames asked for */
	uint16_t nreads;
	uint16_t bp_used;	/* a CFA from rbp: the walk may have used bp */
	uint64_t rbp_reads;	/* the reads (bits) that were saved rbps: compared
				 * only where the walk used bp (STACK_READ_RBP) */
	uint64_t id;		/* its id in the counted stacks' table; 0: none yet */
	struct fetch_walk_hdr h;
	uint64_t addr[MEMO_READS];
	uint64_t val[MEMO_READS];
	uint64_t pcs[MEMO_PCS];
};
_Static_assert(MEMO_N * sizeof(struct memo) <= INJ_STK_SLOT - INJ_STK_MEMO, "the memo's room");

struct iov {
	void *base;
	uint64_t len;
};

/* What a walk reads. */
struct uw {
	struct inj_slot *s;
	uint32_t tgid;
	uint64_t lo, hi;	/* readable directly */
	char *page;		/* the slot's read page */
	const struct stack_map *maps;
	uint32_t nmaps;
	const struct stack_tab *tabs;
	const struct stack_row *rows;
	const uint32_t *idx;
	uint32_t ntabs, nrows, nidx;
	struct inj_stk_rc *rc;	/* the slot's rows, by pc */
	struct memo *log;	/* where the words read go; 0: not remembered */
	uint32_t bp_used;	/* a row with a CFA from rbp was used */
};

static long readv_pages(uint32_t tgid, char *page, uint64_t addr, uint64_t len)
{
	struct iov l[EXTEND_PAGES], r = {(void *)addr, len};
	uint64_t n = (len + PAGE - 1) / PAGE;

	if (n > EXTEND_PAGES)
		n = EXTEND_PAGES;
	for (uint64_t i = 0; i < n; i++) {
		l[i].base = page;
		l[i].len = PAGE;
	}
	if (len > n * PAGE)
		r.len = n * PAGE;
	return sys6(SYS_process_vm_readv, tgid, (long)l, (long)n, (long)&r, 1, 0);
}

/* A word outside the range: the range grows up to it, if it is just
 * above it and the stack's mapping does not end before; otherwise the
 * word alone. */
static __attribute__((noinline)) int uread_slow(struct uw *e, uint64_t *dst, uint64_t addr)
{
	struct inj_slot *s = e->s;
	struct iov l = {dst, 8}, r = {(void *)addr, 8};

	e->log = 0;	/* a walk that read outside the range: not remembered */
	if (addr >= e->hi && !s->stk_end && addr - e->hi < EXTEND_PAGES * PAGE - 8) {
		uint64_t want = (addr + 8 - e->hi + PAGE - 1) & ~(PAGE - 1);
		long got = readv_pages(e->tgid, e->page, e->hi, want);

		if (got > 0)
			e->hi += (uint64_t)got;
		if (got < (long)want)
			s->stk_end = 1;
		s->stk_hi = e->hi;
		if (addr + 8 <= e->hi) {
			*dst = *(const volatile uint64_t *)addr;
			return 0;
		}
	}
	return sys6(SYS_process_vm_readv, e->tgid, (long)&l, 1, (long)&r, 1, 0) != 8;
}

static inline __attribute__((always_inline)) int uread(struct uw *e, uint64_t *dst,
						       uint64_t addr, int rbp)
{
	if (addr >= e->lo && addr + 8 <= e->hi && addr + 8 > addr) {
		uint64_t v = *(const volatile uint64_t *)addr;
		struct memo *m = e->log;

		*dst = v;
		if (m) {
			if (m->nreads < MEMO_READS) {
				m->rbp_reads |= (uint64_t)rbp << m->nreads;
				m->addr[m->nreads] = addr;
				m->val[m->nreads++] = v;
			} else {
				e->log = 0;
			}
		}
		return 0;
	}
	return uread_slow(e, dst, addr);
}

/* The range at the stack pointer: the slot's when sp is in it (or just
 * below it, the pages between readable), else sp's page. */
static void range_at(struct uw *e, uint64_t sp)
{
	struct inj_slot *s = e->s;
	uint64_t lo = s->stk_lo, hi = s->stk_hi, page = sp & ~(PAGE - 1);

	if (!(hi > lo && sp >= lo && sp < hi)) {
		if (hi > lo && page < lo && lo - page <= EXTEND_PAGES * PAGE &&
		    readv_pages(e->tgid, e->page, page, lo - page) == (long)(lo - page)) {
			lo = page;	/* one mapping, readable from sp on */
		} else {
			lo = page;
			hi = page + PAGE;
			s->stk_end = 0;
		}
		s->stk_lo = lo;
		s->stk_hi = hi;
	}
	e->lo = lo;
	e->hi = hi;
}

static inline __attribute__((always_inline)) uint32_t rc_slot(uint64_t pc)
{
	return (uint32_t)((pc * 0x9e3779b97f4a7c15ULL) >> 58);	/* INJ_STK_CACHE: 64 */
}

static inline __attribute__((always_inline)) const struct stack_row *rc_get(struct uw *e,
									  uint64_t pc)
{
	const struct inj_stk_rc *r = &e->rc[rc_slot(pc)];

	if (r->pc != pc)
		return 0;
	e->bp_used |= (r->row.op & STACK_OP_MASK) == STACK_OP_RBP;
	return &r->row;
}

static inline __attribute__((always_inline)) void rc_put(struct uw *e, uint64_t pc,
							 const struct stack_row *row)
{
	struct inj_stk_rc *r = &e->rc[rc_slot(pc)];

	e->bp_used |= (row->op & STACK_OP_MASK) == STACK_OP_RBP;
	r->pc = pc;
	r->row = *row;
}

#define UW(env) ((struct uw *)(env))
#define STACK_STEP agent_step
#define STACK_INLINE static inline __attribute__((always_inline))
#define STACK_READ(env, dst, addr) uread(UW(env), dst, addr, 0)
#define STACK_READ_RBP(env, dst, addr) uread(UW(env), dst, addr, 1)
#define STACK_NMAPS(env) UW(env)->nmaps
#define STACK_MAP(env, i) ((i) < UW(env)->nmaps ? &UW(env)->maps[i] : 0)
#define STACK_TAB(env, i) ((i) < UW(env)->ntabs ? &UW(env)->tabs[i] : 0)
#define STACK_ROW(env, i) ((i) < UW(env)->nrows ? &UW(env)->rows[i] : 0)
#define STACK_IDX(env, i) ((i) < UW(env)->nidx ? &UW(env)->idx[i] : 0)
#define STACK_CACHE_GET(env, pc) rc_get(UW(env), pc)
#define STACK_CACHE_PUT(env, pc, row) rc_put(UW(env), pc, row)
#define STACK_BP_USED(env) (UW(env)->bp_used = 1)
#include "stack/stack_walk.h"

static inline __attribute__((always_inline)) uint32_t min32(uint32_t a, uint32_t b)
{
	return a < b ? a : b;
}

/* The process's entry: the slot's, while it is still the thread's
 * process's; else found by tgid. INJ_STK_PROCS: none. */
static uint32_t proc_of(const struct inj_stk *k, struct inj_slot *s, uint32_t tgid)
{
	uint32_t p = s->stk_proc;

	if (p < INJ_STK_PROCS && k->tgids[p] == tgid)
		return p;
	for (p = 0; p < INJ_STK_PROCS; p++)
		if (k->tgids[p] == tgid)
			return s->stk_proc = p;
	return INJ_STK_PROCS;
}

/* Was the walk m remembered made from these registers, with these
 * mappings, and do the words it read read the same? */
static inline __attribute__((always_inline)) int memo_holds(const struct memo *m, uint32_t p1,
							   uint32_t gen, const uint64_t *regs,
							   uint32_t frames, uint64_t lo, uint64_t hi)
{
	uint32_t n = m->nreads, same = 1;
	/* saved rbps matter only to a walk that used rbp */
	uint64_t skip = m->bp_used ? 0 : m->rbp_reads;

	if (m->proc1 != p1 || m->gen != gen || m->ip != regs[USC_REG_IP] ||
	    m->sp != regs[USC_REG_SP] || (m->bp_used && m->bp != regs[USC_REG_BP]) ||
	    m->frames != frames || n > MEMO_READS)
		return 0;
	for (uint32_t i = 0; i < n; i++) {
		uint64_t a = m->addr[i];

		if (a < lo || a + 8 > hi || a + 8 < a)
			return 0;
		same &= (*(const volatile uint64_t *)a == m->val[i]) | (uint32_t)(skip >> i & 1);
	}
	return same;
}

/* The walk of the hit: a remembered one (*mp), or walked now (and then
 * remembered when it can be: *mp, else 0), into h and pcs. */
static uint8_t walk(struct inj_ctl *c, struct inj_slot *s, uint32_t tgid, const uint64_t *regs,
		    uint32_t frames, struct fetch_walk_hdr *h, uint64_t *pcs, struct memo **mp)
{
	const char *base = (const char *)c;
	const struct inj_stk *k = (const struct inj_stk *)(base + c->stk_off);
	uint64_t slot = (uint64_t)(s - (struct inj_slot *)(base + c->slots_off));
	char *mine = (char *)c + k->slots_off + slot * INJ_STK_SLOT;
	uint64_t ip = regs[USC_REG_IP], sp = regs[USC_REG_SP];
	struct memo *m = (struct memo *)(mine + INJ_STK_MEMO) +
			 (((ip ^ (sp >> 4)) * 0x9e3779b97f4a7c15ULL) >> 61);
	const struct inj_stk_proc *pr;
	struct stack_walk w;
	struct uw e;
	uint32_t p, g1, g2, cp;
	uint8_t why;

	*mp = 0;
	p = proc_of(k, s, tgid);
	if (p >= INJ_STK_PROCS)
		return STACK_FB_NOPROC;
	pr = (const struct inj_stk_proc *)(base + k->procs_off) + p;
	g1 = __atomic_load_n(&pr->gen, __ATOMIC_ACQUIRE);
	e.s = s;
	e.tgid = tgid;
	e.page = mine + INJ_STK_PAGE;
	range_at(&e, sp);
	if (memo_holds(m, p + 1, g1, regs, frames, e.lo, e.hi)) {
		*mp = m;
		return STACK_FB_NONE;
	}
	cp = g1 & 1;
	e.maps = pr->maps[cp];
	e.nmaps = min32(pr->nmaps[cp], STACK_MAPS_MAX);
	e.ntabs = min32(__atomic_load_n(&k->ntabs, __ATOMIC_ACQUIRE), k->max_tabs);
	e.nrows = min32(__atomic_load_n(&k->nrows, __ATOMIC_ACQUIRE), k->max_rows);
	e.nidx = min32(__atomic_load_n(&k->nidx, __ATOMIC_ACQUIRE), k->max_idx);
	e.tabs = (const struct stack_tab *)(base + k->tabs_off);
	e.rows = (const struct stack_row *)(base + k->rows_off);
	e.idx = (const uint32_t *)(base + k->idx_off);
	e.rc = (struct inj_stk_rc *)mine;
	if (s->stk_gen != g1 || s->stk_rcp != p + 1) {
		/* rows found with other mappings: forgotten */
		for (uint32_t i = 0; i < INJ_STK_CACHE; i++)
			e.rc[i].pc = 0;
		s->stk_gen = g1;
		s->stk_rcp = p + 1;
	}
	m->proc1 = 0;		/* being written */
	m->nreads = 0;
	m->rbp_reads = 0;
	e.log = m;
	e.bp_used = 0;
	stack_walk_init(&w, ip, sp, regs[USC_REG_BP], frames, pcs);
	while (!agent_step(&w, pcs, &e))
		;
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	g2 = __atomic_load_n(&pr->gen, __ATOMIC_ACQUIRE);
	if (g2 - g1 >= 2)
		return STACK_FB_CHANGED;	/* its copy may have been rewritten */
	h->end_pc = w.end_pc;
	h->n = (uint16_t)w.n;
	h->frames = (uint16_t)frames;
	h->end = w.end;
	h->nsig = w.nsig;
	for (uint32_t i = 0; i < FETCH_WALK_SIGS; i++)
		h->sig[i] = i < w.nsig ? w.sig[i] : 0;
	for (uint32_t i = 0; i < sizeof(h->pad); i++)
		h->pad[i] = 0;
	why = stack_walk_fallback(&w);
	if (why || !e.log || w.n > MEMO_PCS)
		return why;
	/* remembered */
	m->ip = ip;
	m->sp = sp;
	m->bp = regs[USC_REG_BP];
	m->bp_used = (uint16_t)e.bp_used;
	m->gen = g1;
	m->frames = frames;
	m->id = 0;
	m->h = *h;
	for (uint32_t i = 0; i < w.n; i++)
		m->pcs[i] = pcs[i];
	m->proc1 = p + 1;
	*mp = m;
	return STACK_FB_NONE;
}

uint8_t agent_ustack_walk(struct inj_ctl *c, struct inj_slot *s, uint32_t tgid,
			  const uint64_t *regs, uint32_t frames, struct fetch_walk_hdr *h,
			  uint64_t *pcs)
{
	struct memo *m;
	uint8_t why = walk(c, s, tgid, regs, frames, h, pcs, &m);

	if (why || !m)
		return why;
	*h = m->h;	/* remembered: its frames as they were */
	for (uint32_t i = 0; i < m->h.n && i < MEMO_PCS; i++)
		pcs[i] = m->pcs[i];
	return STACK_FB_NONE;
}

static inline __attribute__((always_inline)) uint64_t mix(uint64_t h, uint64_t w)
{
	h = (h ^ w) * 0xff51afd7ed558ccdULL;
	return h ^ (h >> 32);
}

/* The walk's id in the image's table of counted stacks (> 0), added if it
 * is new; 0: no room for it. */
static uint64_t stack_id(struct inj_ctl *c, uint32_t tgid, const struct fetch_walk_hdr *h,
			 const uint64_t *pcs)
{
	const struct inj_stk *k = (const struct inj_stk *)((const char *)c + c->stk_off);
	char *ents = (char *)c + k->ents_off;
	const uint64_t *hw = (const uint64_t *)h;
	uint32_t n = h->n, mask = k->nents - 1;
	uint64_t hash = mix(mix(mix(mix(0x9e3779b97f4a7c15ULL, tgid), hw[0]), hw[1]), hw[2]);

	if (n > k->ent_frames || !k->nents)
		return 0;
	for (uint32_t i = 0; i < n; i++)
		hash = mix(hash, pcs[i]);
	hash |= 1;
	for (uint32_t probe = 0; probe < INJ_STK_PROBES && probe <= mask; probe++) {
		uint32_t at = ((uint32_t)hash + probe) & mask;
		struct inj_stkent *e = (struct inj_stkent *)(ents + (uint64_t)at * k->ent_size);
		uint64_t *epcs = (uint64_t *)(e + 1), *ew = (uint64_t *)&e->h;
		uint32_t st = __atomic_load_n(&e->state, __ATOMIC_ACQUIRE), i;

		if (st == INJ_DIR_FREE) {
			if (__sync_bool_compare_and_swap(&e->state, INJ_DIR_FREE, INJ_DIR_BUSY)) {
				e->tgid = tgid;
				e->hash = hash;
				ew[0] = hw[0];
				ew[1] = hw[1];
				ew[2] = hw[2];
				for (i = 0; i < n; i++)
					epcs[i] = pcs[i];
				__atomic_store_n(&e->state, INJ_DIR_READY, __ATOMIC_RELEASE);
				return (uint64_t)at + 1;
			}
			st = __atomic_load_n(&e->state, __ATOMIC_ACQUIRE);
		}
		/* another thread is writing this entry: wait for it, briefly */
		for (uint32_t spin = 0; st == INJ_DIR_BUSY && spin < 100000; spin++) {
			__asm__ volatile("pause");
			st = __atomic_load_n(&e->state, __ATOMIC_ACQUIRE);
		}
		if (st != INJ_DIR_READY || e->hash != hash || e->tgid != tgid || ew[0] != hw[0] ||
		    ew[1] != hw[1] || ew[2] != hw[2])
			continue;
		for (i = 0; i < n && epcs[i] == pcs[i]; i++)
			;
		if (i == n)
			return (uint64_t)at + 1;
	}
	return 0;
}

uint8_t agent_ustack_count(struct inj_ctl *c, struct inj_slot *s, uint32_t tgid,
			   const uint64_t *regs, uint32_t frames, uint64_t *id)
{
	const struct inj_stk *k = (const struct inj_stk *)((const char *)c + c->stk_off);
	uint64_t slot = (uint64_t)(s - (struct inj_slot *)((char *)c + c->slots_off));
	struct fetch_walk_hdr *h = (struct fetch_walk_hdr *)((char *)c + k->slots_off +
							    slot * INJ_STK_SLOT + INJ_STK_PCS);
	struct memo *m;
	uint8_t why = walk(c, s, tgid, regs, frames, h, (uint64_t *)(h + 1), &m);

	*id = 0;
	if (why)
		return why;
	if (m && m->id) {
		*id = m->id;
		return STACK_FB_NONE;
	}
	*id = m ? stack_id(c, tgid, &m->h, m->pcs) : stack_id(c, tgid, h, (uint64_t *)(h + 1));
	if (m)
		m->id = *id;
	return STACK_FB_NONE;
}
