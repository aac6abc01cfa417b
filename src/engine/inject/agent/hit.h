/* What the hit paths share (agent.c: agent_hit, the slow path; fast.c:
 * agent_fast and agent_fast_rec, the fast one): the time stamp and the
 * CPU, and a value added to a row. Inline, so that each path keeps its
 * registers to itself. */
#ifndef USC_ENGINE_INJECT_AGENT_HIT_H
#define USC_ENGINE_INJECT_AGENT_HIT_H

#include "agg/agg_shared.h"
#include "engine/inject/agent/agent.h"

/* The TSC, and the CPU it runs on (*cpu): rdtsc and the thread's rseq
 * cpu_id (a load, where every thread has one); or rdtsc and rdpid; or
 * rdtscp's aux; or, where the CPU says it has neither (the kernel then sets
 * no TSC_AUX: rdtscp's aux is whatever the host left there), rdtsc and the
 * limit of the kernel's per-CPU segment, as the vDSO's getcpu reads it.
 * The CPU is in the low 12 bits of each. */
#define CPUNODE_SEG 0x7bu	/* GDT_ENTRY_CPUNODE * 8 + 3 */
ALWAYS uint64_t stamp(const struct inj_ctl *c, uint32_t *cpu)
{
	uint32_t lo, hi, aux = 0;

	if (c->cpu_read == INJ_CPU_RDTSCP) {
		__asm__ volatile("rdtscp" : "=a"(lo), "=d"(hi), "=c"(aux));
	} else {
		__asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
		if (c->cpu_read == INJ_CPU_RSEQ) {
			__asm__ volatile("movl %%fs:(%1), %0" : "=r"(aux)
					 : "r"((uint64_t)c->rseq_cpu_off));
			if ((int32_t)aux < 0)	/* this thread registered none */
				__asm__ volatile("lsl %1, %0" : "+r"(aux) : "r"(CPUNODE_SEG) : "cc");
		} else if (c->cpu_read == INJ_CPU_RDPID) {
			uint64_t id;

			__asm__ volatile("rdpid %0" : "=r"(id));
			aux = (uint32_t)id;
		} else {
			__asm__ volatile("lsl %1, %0" : "+r"(aux) : "r"(CPUNODE_SEG) : "cc");
		}
	}
	*cpu = aux & 0xfff;
	return (uint64_t)hi << 32 | lo;
}

ALWAYS uint64_t rd_tsc(void)
{
	uint32_t lo, hi;

	__asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
	return (uint64_t)hi << 32 | lo;
}

/* A latency's ticks in its units (ns, us, ms): ticks * tsc_mult >> 32,
 * in 64 bits where both fit in 32 (any call under a second or so, with a
 * TSC faster than 1 GHz: an imul, where the 128-bit product is a mul and
 * a shrd on the path that waits for the clock), else in 128. */
ALWAYS int64_t tsc_units(const struct inj_ctl *c, uint64_t dt)
{
	uint64_t m = c->tsc_mult;

	if (__builtin_expect(!((dt | m) >> 32), 1))
		return (int64_t)((dt * m) >> 32);
	return (int64_t)(((unsigned __int128)dt * m) >> 32);
}

/* One value into the thread's own values a of a row; touched gets the
 * row's bit. */
ALWAYS void val_add(const struct inj_ctl *c, struct agg_val *a, uint64_t *touched, uint32_t row,
		    int64_t v)
{
	uint64_t bit = 1ULL << (row % 64);

	if (!(*touched & bit))
		*touched |= bit;
	agg_val_add(a, v, c->agg_epoch);
	if (c->agg_nbuckets) {
		uint32_t b = c->agg_linear ? agg_linear_bucket(v, c->agg_lmin, c->agg_lmax,
							       c->agg_lstep, c->agg_nbuckets) :
					     agg_log_bucket(v);

		if (b < c->agg_nbuckets)
			((uint64_t *)(a + 1))[b]++;
	}
}

/* A thread's key where it is not its tid (fs_base: a load, or a system
 * call where the CPU cannot read it), out of line and saving what it uses:
 * the fast paths of glibc's threads keep no register for it. */
static __attribute__((noinline, unused, no_caller_saved_registers)) uint64_t
fast_fs_base(const struct inj_ctl *c)
{
	return fs_base(c);
}

/* Where a thread's key starts its search of the slots (agent.c's claim
 * and fast_slot alike): a tid as it is (tids are dense: the low bits tell
 * threads apart), a thread pointer (aligned alike in every thread)
 * hashed. */
ALWAYS uint32_t slot_hash(const struct inj_ctl *c, uint64_t key)
{
	if (c->key_mode == INJ_KEY_TID_AT_FS)
		return (uint32_t)key;
	return (uint32_t)((key * 0x9e3779b97f4a7c15ULL) >> 40);
}

/* The fast paths' thread (agent_fast, agent_script_fast): its slot when
 * the hit is the fast path's (the tracer alive, the process followed,
 * recording on, the slot claimed already by this process, no hit of ours
 * under way in the thread), else NULL. */
ALWAYS struct inj_slot *fast_slot(const struct inj_site *site, struct inj_ctl *c)
{
	struct inj_slot *slots = (struct inj_slot *)site->fast.slots;
	uint32_t mask = c->nslots - 1, hs, self = *(volatile uint32_t *)site->fast.self;
	uint64_t key;

	if (owner_died(site->owner) || !self || !c->enabled)
		return 0;	/* (a dead tracer: agent_hit lets go) */
	if (c->key_mode == INJ_KEY_TID_AT_FS) {
		uint32_t tid;

		__asm__ volatile("movl %%fs:(%1), %0" : "=r"(tid) : "r"((uint64_t)c->tid_off));
		key = tid;
	} else {
		key = fast_fs_base(c);
	}
	if (!key)
		return 0;
	hs = slot_hash(c, key);
	for (uint32_t i = 0; i <= mask; i++) {
		struct inj_slot *t = &slots[(hs + i) & mask];
		uint64_t k = t->key;

		if (k == key && t->tgid == self)
			return t->nest ? 0 : t;
		if (!k)
			return 0;	/* the thread's first hit: it claims a slot */
	}
	return 0;
}

#endif
