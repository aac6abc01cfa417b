/* The agent and its tracer, seen from the traced process: never freeze the
 * program (inject_shared.h, "Never freezing the program").
 *
 * Waking the tracer: a producer whose ring passes the watermark while the
 * tracer sleeps moves the doorbell on and wakes it (a futex the tracer waits
 * on, in the shared memory). Waiting for room: a producer waits only while
 * the tracer is alive and making progress, at most max_wait_ns, on its slot's
 * wake word (moved on by the tracer when it frees room) and on the owner word
 * at once (futex_waitv), so the tracer's death ends the wait at once.
 *
 * Letting go, with no ptrace: the first hit that sees the tracer dead writes
 * back the bytes of every patch. Other threads may be running those bytes
 * meanwhile, so each patch goes back in one atomic store, as HotSpot patches
 * a call MT-safely: an aligned 8-byte store when the patch lies within an
 * aligned 8 bytes, a cmpxchg16b on the aligned 16 bytes that hold it
 * otherwise (the page made writable for it, then its protection restored),
 * and a membarrier SYNC_CORE after them, so no thread runs a stale copy of
 * the jump. A thread that saw the jump before still goes through the
 * trampoline, which stays mapped forever and passes through. A patch that no
 * atomic store covers stays as it is (a jump to a trampoline that passes
 * through), and so does a springboard (dead filler that a thread may have
 * jumped towards): both are marked left in the undo table, and the next
 * tracer takes them out with every thread stopped (image.c, undo.c).
 *
 * Forks, with no ptrace: a child forked while the tracer follows forks (-p,
 * system-wide) runs a copy of the patched code and maps the same shared
 * memory, but its self word (a MADV_WIPEONFORK page) reads 0. Its first
 * hit claims it: its pid, and an entry in the control block's list of
 * children, which the tracer reads at its next drain (their janitor
 * entries, names, mappings). So nothing stops a child for the tracer, and a
 * stopped tracer holds no process; a child that dies before it is taken up
 * lets go by itself, as any process of the tracer's. */
#include "engine/inject/agent/agent.h"

#define CLOCK_MONOTONIC 1
#define FUTEX2_SIZE_U32 2
#define SYS_getpid 39
#define PROT_EXEC 4
#define SPINS 2000

struct ts {
	long sec, nsec;
};

struct waitv {
	uint64_t val;
	uint64_t uaddr;
	uint32_t flags;
	uint32_t reserved;
};

static uint64_t now_ns(void)
{
	struct ts t;

	if (sys6(SYS_clock_gettime, CLOCK_MONOTONIC, (long)&t, 0, 0, 0, 0))
		return 0;
	return (uint64_t)t.sec * 1000000000ULL + (uint64_t)t.nsec;
}

void agent_ring(struct inj_ctl *c)
{
	if (__atomic_exchange_n(&c->asleep, 0, __ATOMIC_SEQ_CST)) {
		__atomic_add_fetch(&c->doorbell, 1, __ATOMIC_SEQ_CST);
		sys6(SYS_futex, (long)&c->doorbell, FUTEX_WAKE, 1, 0, 0, 0);
	}
}

static inline int fits(struct inj_ctl *c, struct inj_slot *s, uint64_t head, uint64_t want)
{
	return head + want - __atomic_load_n(&s->tail, __ATOMIC_SEQ_CST) <= c->ring_size;
}

/* Sleep until the slot's wake word moves from seen, the owner word from
 * own, or the deadline (CLOCK_MONOTONIC ns). Without futex_waitv (before
 * Linux 5.16), the wake word alone, 10 ms at most: the tracer's death is
 * then seen within 10 ms. */
static void sleep2(struct inj_ctl *c, struct inj_slot *s, uint32_t seen, uint32_t own,
		   uint64_t deadline)
{
	struct waitv w[2] = {
		{seen, (uint64_t)&s->wake, FUTEX2_SIZE_U32, 0},
		{own, c->owner, FUTEX2_SIZE_U32, 0},
	};
	struct ts t = {(long)(deadline / 1000000000ULL), (long)(deadline % 1000000000ULL)};

	if (sys6(SYS_futex_waitv, (long)w, 2, 0, (long)&t, CLOCK_MONOTONIC, 0) == -ENOSYS) {
		struct ts rel = {0, 10000000};

		sys6(SYS_futex, (long)&s->wake, FUTEX_WAIT, seen, (long)&rel, 0, 0);
	}
}

int agent_wait_room(struct inj_ctl *c, struct inj_slot *s, uint64_t head, uint64_t want,
		    uint64_t *counts)
{
	uint64_t deadline = 0;

	if (!c->lossless || !c->max_wait_ns || owner_died(c->owner))
		return 0;
	if (c->stall && c->stall == c->progress + 1) {
		/* a wait timed out, and the tracer has made no progress since */
		counts[INJ_C_LOST_WAIT]++;
		return 0;
	}
	agent_ring(c);
	for (uint32_t spin = 0; spin < SPINS; spin++) {
		if (fits(c, s, head, want))
			return 1;
		__asm__ volatile("pause");
	}
	for (;;) {
		uint32_t seen = __atomic_load_n(&s->wake, __ATOMIC_SEQ_CST);
		uint32_t own = __atomic_load_n((volatile uint32_t *)c->owner, __ATOMIC_SEQ_CST);
		uint64_t t = now_ns();

		if (own & INJ_OWNER_DIED) {
			/* the kernel woke one waiter: the others too */
			sys6(SYS_futex, (long)c->owner, FUTEX_WAKE, 0x7fffffff, 0, 0, 0);
			return 0;
		}
		if (!(own & ~INJ_OWNER_WAITERS) || !c->lossless)
			return 0;	/* no tracer holds it; or it ends */
		if (!deadline) {
			deadline = t + c->max_wait_ns;
		} else if (t >= deadline) {
			c->stall = c->progress + 1;
			__atomic_add_fetch(&c->timeouts, 1, __ATOMIC_RELAXED);
			counts[INJ_C_LOST_WAIT]++;
			return 0;
		}
		/* (FUTEX_WAITERS is in it, set by the tracer: the kernel wakes a
		 * waiter of a dead owner's word only then) */
		__atomic_store_n(&s->waiting, 1, __ATOMIC_SEQ_CST);
		if (!fits(c, s, head, want))
			sleep2(c, s, seen, own, deadline);
		__atomic_store_n(&s->waiting, 0, __ATOMIC_RELEASE);
		if (fits(c, s, head, want))
			return 1;
	}
}

/* ---- letting go -------------------------------------------------------------- */

struct iov {
	void *base;
	uint64_t len;
};

/* Are the n bytes at addr these, but for another kernel uprobe's int3s (its
 * breakpoint over our jump: engine/inject/foreign.c)? Read without
 * faulting: the module may have been unmapped since (dlclose). The bytes
 * there into now. */
static int holds(long pid, uint64_t addr, const uint8_t *bytes, uint32_t n, uint8_t *now)
{
	struct iov l = {now, n}, r = {(void *)addr, n};

	if (n > 8 || sys6(SYS_process_vm_readv, pid, (long)&l, 1, (long)&r, 1, 0) != n)
		return 0;
	for (uint32_t i = 0; i < n; i++)
		if (now[i] != bytes[i] && now[i] != 0xcc)
			return 0;
	return 1;
}

union block {
	uint64_t q[2];
	uint8_t b[16];
};

/* Write the n bytes at a back to orig in one atomic store. 0, or -1 when
 * no aligned 8 or 16 bytes hold them. The page is writable. */
static int put_back(uint64_t a, const uint8_t *orig, uint32_t n)
{
	uint32_t off = (uint32_t)(a & 15);

	if ((a & 7) + n <= 8) {
		volatile uint64_t *w = (volatile uint64_t *)(a & ~7ULL);
		union block v = {{*w, 0}};

		for (uint32_t i = 0; i < n; i++)
			v.b[(a & 7) + i] = orig[i];
		__atomic_store_n(w, v.q[0], __ATOMIC_RELEASE);
		return 0;
	}
	if (off + n > 16)
		return -1;

	volatile uint64_t *w = (volatile uint64_t *)(a & ~15ULL);
	uint64_t lo = w[0], hi = w[1];

	for (;;) {
		union block v = {{lo, hi}};
		uint8_t done;

		for (uint32_t i = 0; i < n; i++)
			v.b[off + i] = orig[i];
		/* on failure, rdx:rax get the bytes there now: again with them */
		__asm__ volatile("lock cmpxchg16b %1\n\tsete %0"
				 : "=q"(done), "+m"(*(volatile __int128 *)w), "+a"(lo), "+d"(hi)
				 : "b"(v.q[0]), "c"(v.q[1])
				 : "memory", "cc");
		if (done)
			return 0;
	}
}

/* One patch back to the file's bytes, when our jump is still there (an
 * int3 another uprobe wrote over it stays: the kernel puts its byte back). */
static void undo_one(long pid, struct inj_undo *u)
{
	uint64_t page = u->addr & ~4095ULL;
	uint8_t now[8], orig[8];

	if (u->n && u->n <= 8 && holds(pid, u->addr, u->jump, u->n, now)) {
		for (uint32_t i = 0; i < u->n; i++)
			orig[i] = now[i] == 0xcc && u->jump[i] != 0xcc ? 0xcc : u->orig[i];
		if ((u->addr & 15) + u->n > 16 || !(u->prot & PROT_EXEC) ||
		    sys6(SYS_mprotect, (long)page, 4096, u->prot | PROT_WRITE, 0, 0, 0)) {
			u->left |= INJ_LEFT_JUMP;
		} else {
			if (put_back(u->addr, orig, u->n))
				u->left |= INJ_LEFT_JUMP;
			sys6(SYS_mprotect, (long)page, 4096, u->prot, 0, 0, 0);
		}
	}
	if (u->spring && holds(pid, u->spring, u->jump_spring, 5, now))
		u->left |= INJ_LEFT_SPRING;
}

/* A USDT semaphore we raised, lowered. */
static void sem_lower(long pid, uint64_t addr)
{
	volatile uint16_t *w = (volatile uint16_t *)addr;
	uint16_t v;
	struct iov l = {&v, 2}, r = {(void *)addr, 2};

	if (sys6(SYS_process_vm_readv, pid, (long)&l, 1, (long)&r, 1, 0) != 2)
		return;		/* unmapped since */
	while (v && !__atomic_compare_exchange_n(w, &v, (uint16_t)(v - 1), 0, __ATOMIC_RELAXED,
						 __ATOMIC_RELAXED))
		;
}

void agent_let_go(struct inj_ctl *c)
{
	volatile uint32_t *st = (volatile uint32_t *)(c->self + INJ_SELF_LETGO);
	struct inj_undo *u = (struct inj_undo *)((char *)c + c->undo_off);
	const uint64_t *sem = (const uint64_t *)((const char *)c + c->sem_off);
	uint32_t n = c->nundo, ns = c->nsem;
	long pid;

	if (*st != INJ_LETGO_NONE || !__sync_bool_compare_and_swap(st, INJ_LETGO_NONE, INJ_LETGO_BUSY))
		return;		/* done, or another thread is at it: pass through */
	pid = sys6(SYS_getpid, 0, 0, 0, 0, 0, 0);
	for (uint32_t i = 0; i < n && i < c->nsites; i++)
		undo_one(pid, &u[i]);
	for (uint32_t i = 0; i < ns && i < c->nsites; i++)
		sem_lower(pid, sem[i]);
	if (c->sync_core)
		sys6(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE, 0, 0, 0, 0, 0);
	__atomic_store_n(st, INJ_LETGO_AGENT, __ATOMIC_RELEASE);
	/* threads waiting for room, the kernel having woken only one */
	sys6(SYS_futex, (long)c->owner, FUTEX_WAKE, 0x7fffffff, 0, 0, 0);
}

/* ---- a forked child ------------------------------------------------------------ */

uint32_t agent_claim(struct inj_ctl *c)
{
	volatile uint32_t *self = (volatile uint32_t *)c->self;
	struct inj_kid_ent *kids = (struct inj_kid_ent *)((char *)c + c->kids_off);
	uint32_t pid, seen = 0, n;

	if (!c->follow_forks || !c->kids_off || owner_died(c->owner))
		return 0;
	pid = (uint32_t)sys6(SYS_getpid, 0, 0, 0, 0, 0, 0);
	/* (another thread of the child may be first: its value then) */
	if (!__atomic_compare_exchange_n(self, &seen, pid, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
		return seen;
	n = __atomic_fetch_add(&c->nkids, 1, __ATOMIC_SEQ_CST);
	if (n < INJ_MAX_KIDS) {
		sys6(SYS_prctl, PR_GET_NAME, (long)kids[n].comm, 0, 0, 0, 0);
		__atomic_store_n(&kids[n].pid, pid, __ATOMIC_RELEASE);
	}
	agent_ring(c);	/* the tracer takes it up soon */
	return pid;
}
