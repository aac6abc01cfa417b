/* uscope script in the traced process: a site's probe of the program run
 * by the executor every engine shares (script/vm.h), at the hit, on the
 * thread's own machine state; maps in the shared memory (script/table.h,
 * an aggregation's row a copy per thread: no atomic operation on the hit's
 * path); printf and the other outputs as records in the thread's ring,
 * which uscope formats. A read of a bad pointer goes through
 * process_vm_readv: 0 or "", counted, never a fault. */
#include "engine/inject/agent/hit.h"
#include "engine/inject/script_shared.h"
#include "script/table.h"
#include "script/vm.h"

uint32_t agent_script_fast(const struct inj_site *site, uint64_t a, uint64_t b) HIDDEN
	__attribute__((no_caller_saved_registers));

/* Out of line, each saving the registers it uses (OOL): what a hit rarely
 * needs stays out of the fast path's code, which then saves few registers
 * and spills few values (a fast path, no_caller_saved_registers, saves
 * every register its code uses anywhere). */
#define OOL static __attribute__((noinline, no_caller_saved_registers))

struct senv {
	struct inj_ctl *c;
	uint64_t a, b;		/* agent_script_fast: inputs 0 and 1 */
	struct inj_slot *s;
	uint64_t slot;
	uint64_t *counts;
	const struct inj_site *site;
	uint64_t *regs;
	uint32_t tgid;
	struct inj_script *sc;
	char *str;		/* the slot's string input */
};

struct iov {
	void *base;
	uint64_t len;
};

static long rd(const struct senv *e, void *dst, uint64_t addr, uint64_t len)
{
	struct iov l = {dst, len}, r = {(void *)addr, len};

	return sys6(SYS_process_vm_readv, e->tgid, (long)&l, 1, (long)&r, 1, 0);
}

static int s_read(const struct senv *e, void *dst, uint64_t addr, uint32_t len)
{
	return !addr || rd(e, dst, addr, len) != (long)len;
}

/* A string at addr: a page at a time, to its NUL. */
static long s_read_str(const struct senv *e, char *dst, uint64_t addr, uint32_t cap)
{
	uint32_t got = 0;

	if (!addr)
		return -1;
	while (got < cap) {
		uint64_t a = addr + got;
		uint32_t n = (uint32_t)(4096 - (a & 4095));
		long k;

		if (n > cap - got)
			n = cap - got;
		k = rd(e, dst + got, a, n);
		if (k <= 0)
			break;
		for (uint32_t i = 0; i < (uint32_t)k; i++)
			if (!dst[got + i])
				return got + i;
		got += (uint32_t)k;
		if ((uint32_t)k < n)
			break;
	}
	if (!got)
		return -1;
	dst[got < cap ? got : cap - 1] = 0;
	return got < cap ? got : cap - 1;
}

/* Input k of the fast path: its registers as they are (a, b), cut to the
 * argument's size. */
ALWAYS int s_in_fast(struct senv *e, uint32_t k, uint64_t *u)
{
	const struct inj_site *site = e->site;
	uint64_t x = k ? e->b : e->a;
	uint32_t size = site->arg_size[k & 1];

	if (k >= site->nargs || k >= 2)
		return 1;
	/* agg_value_of, kept inline */
	if (size && size < 8) {
		x &= (1ULL << (8 * size)) - 1;
		if (site->arg_sign[k & 1] && (x >> (8 * size - 1)))
			x |= ~0ULL << (8 * size);
	}
	*u = x;
	return 0;
}

static int s_in(struct senv *e, uint32_t k, uint64_t *u)
{
	const struct inj_site *site = e->site;
	struct inj_val v;
	uint32_t off = 0;

	if (k >= site->nargs || k >= INJ_MAX_ARGS)
		return 1;
	if (site->reg_only[k] < USC_REG_NR) {
		v.val = e->regs[site->reg_only[k]];
	} else {
		agent_arg(e->c, e->s, site, e->regs, e->tgid, k, &v, e->str, &off);
		if (v.kind != INJ_INT)
			return 1;
	}
	*u = (uint64_t)agg_value_of(v.val, site->arg_size[k], site->arg_sign[k]);
	return 0;
}

static long s_in_str(struct senv *e, uint32_t k, char *dst, uint32_t cap)
{
	struct inj_val v;
	uint32_t off = 0, n;

	if (k >= e->site->nargs || k >= INJ_MAX_ARGS)
		return -1;
	agent_arg(e->c, e->s, e->site, e->regs, e->tgid, k, &v, e->str, &off);
	if (v.kind == INJ_NULL)
		return 0;
	if (v.kind != INJ_STR || v.str_off >= INJ_SCRIPT_STR)
		return -1;
	n = v.str_len < cap - 1 ? v.str_len : cap - 1;
	for (uint32_t i = 0; i < n && v.str_off + i < INJ_SCRIPT_STR; i++)
		dst[i] = e->str[v.str_off + i];
	dst[n] = 0;
	return n;
}

ALWAYS uint64_t s_nsecs(const struct inj_script *sc)
{
	uint64_t t = rd_tsc();

	return sc->ns0 + (uint64_t)(((unsigned __int128)(t - sc->tsc0) * sc->mult) >> 32);
}

/* The builtins that call out (a system call, the CPU's number). */
OOL uint64_t s_builtin_ool(struct inj_ctl *c, uint32_t which)
{
	uint32_t cpu;

	switch (which) {
	case SB_CPU:
		(void)stamp(c, &cpu);
		return cpu;
	case SB_UID: return (uint64_t)sys6(102 /* getuid */, 0, 0, 0, 0, 0, 0);
	case SB_GID: return (uint64_t)sys6(104 /* getgid */, 0, 0, 0, 0, 0, 0);
	default: return 0;
	}
}

ALWAYS uint64_t s_builtin(struct senv *e, uint32_t which)
{
	switch (which) {
	case SB_PID: return e->tgid;
	case SB_TID: return e->s->tid;
	case SB_NSECS: return s_nsecs(e->sc);
	case SB_ELAPSED: {
		uint64_t t = s_nsecs(e->sc);

		return t > e->sc->start_ns ? t - e->sc->start_ns : 0;
	}
	case SB_SITE: return e->site->script_site;
	case SB_LIVE: return 1;
	default: return s_builtin_ool(e->c, which);
	}
}

static int s_comm(struct senv *e, char *dst)
{
	(void)e;
	return sys6(SYS_prctl, PR_GET_NAME, (long)dst, 0, 0, 0, 0) != 0;
}

/* A thread's rows of one-integer keys it found last (after its machine,
 * in its slot's INJ_SCRIPT_VM bytes): a hit on the same key and map goes
 * straight to its value while the table's epoch is the one it was found
 * at (no delete, clear or zero since). */
#define KC_N 16
struct kc {
	uint64_t key;
	uint32_t map;
	uint32_t pad;
	uint8_t *val;
	uint64_t epoch;
};
_Static_assert(sizeof(struct script_vm) + KC_N * sizeof(struct kc) <= INJ_SCRIPT_VM,
	       "a slot's machine and key cache fit");

/* A per-thread map's value of this thread (key its tid), or 0: the map's
 * table has it. */
ALWAYS struct inj_pt *s_pt(struct senv *e, uint32_t idx, uint64_t k)
{
	const struct inj_script *sc = e->sc;
	uint32_t o = sc->pt_map_off[idx & (SCRIPT_MAPS_MAX - 1)];
	struct inj_pt *p;

	if (o == INJ_PT_NONE || k != e->s->tid)
		return 0;
	p = (struct inj_pt *)((char *)e->c + sc->pt_off + e->slot * sc->pt_size + o);
	if (p->tid != k) {	/* the slot's last thread's: not this one's */
		p->present = 0;
		p->tid = k;
	}
	return p;
}

/* A row not in the thread's cache: the table's, then cached. */
OOL void *map8_find(struct inj_ctl *c, const struct inj_script *sc, uint64_t slot, uint32_t idx,
		    uint64_t k, int create, struct kc *kc, uint64_t epoch)
{
	struct stab *t = (struct stab *)((char *)c + sc->tab_off[idx & (SCRIPT_MAPS_MAX - 1)]);
	uint8_t *v = stab_get(t, (const uint8_t *)&k, create, (uint32_t)slot);

	if (v && kc) {
		kc->key = k;
		kc->map = idx + 1;
		kc->val = v;
		kc->epoch = epoch;
	}
	return v;
}

/* A per-thread map's value, made (zero) for a thread that had none. */
OOL void *pt_make(struct inj_ctl *c, const struct inj_script *sc, uint32_t idx, struct inj_pt *p)
{
	struct stab *t = (struct stab *)((char *)c + sc->tab_off[idx & (SCRIPT_MAPS_MAX - 1)]);

	stab_zero(p + 1, ((t->vallen ? t->vallen : t->aggsize - 8) + 7) & ~7ULL);
	__atomic_store_n(&p->present, 1, __ATOMIC_RELEASE);
	return p + 1;
}

ALWAYS void *s_map8(struct senv *e, uint32_t idx, uint64_t k, int create)
{
	const struct inj_script *sc = e->sc;
	struct stab *t = (struct stab *)((char *)e->c + sc->tab_off[idx & (SCRIPT_MAPS_MAX - 1)]);
	struct inj_pt *p;
	struct kc *kc;
	uint64_t epoch;

	if (t->keylen != 8)
		return map8_find(e->c, sc, e->slot, idx, k, create, 0, 0);
	if ((p = s_pt(e, idx, k))) {
		if (__builtin_expect(p->present, 1))
			return p + 1;
		if (!create)
			return 0;
		if (t->vallen == 8) {	/* one word (@s[tid] = nsecs) */
			*(uint64_t *)(p + 1) = 0;
			__atomic_store_n(&p->present, 1, __ATOMIC_RELEASE);
			return p + 1;
		}
		return pt_make(e->c, sc, idx, p);
	}
	kc = (struct kc *)((char *)e->c + sc->vm_off + e->slot * INJ_SCRIPT_VM +
			   sizeof(struct script_vm)) + ((k ^ (k >> 17) ^ idx * 0x9e37u) & (KC_N - 1));
	epoch = __atomic_load_n(&t->epoch, __ATOMIC_ACQUIRE);
	if (kc->key == k && kc->map == idx + 1 && kc->epoch == epoch)
		return kc->val;
	return map8_find(e->c, sc, e->slot, idx, k, create, kc, epoch);
}

ALWAYS void *s_map(struct senv *e, uint32_t idx, const uint8_t *key, int create)
{
	struct stab *t = (struct stab *)((char *)e->c + e->sc->tab_off[idx & (SCRIPT_MAPS_MAX - 1)]);
	uint64_t k;

	if (t->keylen != 8)
		return stab_get(t, key, create, (uint32_t)e->slot);
	__builtin_memcpy(&k, key, 8);
	return s_map8(e, idx, k, create);
}

ALWAYS void s_del8(struct senv *e, uint32_t idx, uint64_t k)
{
	struct inj_pt *p;

	if ((p = s_pt(e, idx, k))) {
		__atomic_store_n(&p->present, 0, __ATOMIC_RELEASE);
		return;
	}
	stab_del((struct stab *)((char *)e->c + e->sc->tab_off[idx & (SCRIPT_MAPS_MAX - 1)]),
		 (const uint8_t *)&k);
}

ALWAYS void s_del(struct senv *e, uint32_t idx, const uint8_t *key)
{
	struct stab *t = (struct stab *)((char *)e->c + e->sc->tab_off[idx & (SCRIPT_MAPS_MAX - 1)]);
	uint64_t k;

	if (t->keylen != 8) {
		stab_del(t, key);
		return;
	}
	__builtin_memcpy(&k, key, 8);
	s_del8(e, idx, k);
}

OOL void s_err(struct inj_script *sc, uint32_t err, uint32_t idx)
{
	if (err == SERR_FULL)
		__sync_fetch_and_add(&sc->full[idx & (SCRIPT_MAPS_MAX - 1)], 1);
	else if (err < SERR_NR)
		__sync_fetch_and_add(&sc->errs[err], 1);
}

static uint32_t s_rand(struct senv *e)
{
	uint64_t x = rd_tsc() ^ ((uint64_t)e->s->tid << 32);

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return (uint32_t)(x >> 16);
}

#define SCRIPT_STEP script_step
#define SCRIPT_IN(env, k, u) s_in((struct senv *)(env), k, u)
#include "engine/inject/agent/script_env.h"

/* the same, integers and maps only: agent_script_fast's */
#define SCRIPT_STEP script_step_fast
#define SCRIPT_FAST_ONLY
#define SCRIPT_IN(env, k, u) s_in_fast((struct senv *)(env), k, u)
#include "engine/inject/agent/script_env.h"

/* The probe of site on the slot's machine, stepped by STEP. Its last
 * instruction is the SOP_END the compiler ends every probe with: not run. */
#define RUN(NAME, STEP, FAST)							\
ALWAYS void NAME(struct senv *env, const struct inj_script *sc)			\
{										\
	const char *c = (const char *)env->c;					\
	const struct script_probe *p = (const struct script_probe *)(c + sc->probes_at) + \
				       (env->site->script - 1);			\
	const struct script_map *maps = (const struct script_map *)(c + sc->maps_at);	\
	const char *strtab = c + sc->strtab_at;					\
	uint32_t nmaps = sc->nmaps, nstrtab = sc->nstrtab;			\
	const struct script_insn *insns;					\
	struct script_vm *vm;							\
	uint32_t pc = 0, last;							\
										\
	if (env->site->script - 1 >= sc->nprobes || !p->n)			\
		return;								\
	insns = (const struct script_insn *)(c + sc->insns_at) + p->first;	\
	if (p->flags & SCRIPT_PROBE_UPDATES) {					\
		for (uint32_t i = 0; i < p->n; i = STEP##_unit(insns, p->n, i, maps, nmaps, env)) \
			;							\
		return;								\
	}									\
	vm = (struct script_vm *)(c + sc->vm_off + env->slot * INJ_SCRIPT_VM);	\
	last = p->n - 1;							\
	if (!FAST)								\
		vm->strlen = sc->strlen;					\
	vm->back = 0;								\
	if (p->flags & SCRIPT_PROBE_TID)					\
		vm->r[SCRIPT_REG_TID] = env->s->tid;				\
	if (p->flags & SCRIPT_PROBE_PID)					\
		vm->r[SCRIPT_REG_PID] = env->tgid;				\
	while (pc < last)							\
		pc = STEP(vm, &insns[pc], pc, maps, nmaps, strtab, nstrtab, env);	\
}
RUN(run, script_step, 0)
RUN(run_fast, script_step_fast, 1)

void agent_script(struct inj_ctl *c, struct inj_slot *s, uint64_t slot, uint64_t *counts,
		  const struct inj_site *site, uint64_t *regs, uint32_t tgid)
{
	struct inj_script *sc = (struct inj_script *)((char *)c + c->script_off);
	struct senv env;

	if (!c->script_off || slot >= c->nslots)
		return;
	env = (struct senv){.c = c, .s = s, .slot = slot, .counts = counts, .site = site,
			    .regs = regs, .tgid = tgid, .sc = sc,
			    .str = (char *)c + sc->str_off + slot * INJ_SCRIPT_STR};
	run(&env, sc);
}

/* A fast path's environment: field by field, not a compound literal (which
 * would clear the whole struct at every hit). */
ALWAYS void fast_env(struct senv *env, const struct inj_site *site, struct inj_slot *s,
		     uint64_t slot, uint64_t a, uint64_t b, uint32_t tgid)
{
	env->c = (struct inj_ctl *)site->ctl;
	env->a = a;
	env->b = b;
	env->s = s;
	env->slot = slot;
	env->site = site;
	env->tgid = tgid;
	env->sc = (struct inj_script *)site->fast.script;	/* (no load of the ctl's) */
}

/* agent_script_fast's probe when it is not one update: the machine, out
 * of line (agent_script_fast has saved every register already: a plain
 * call saves nothing more). */
static __attribute__((noinline)) void
fast_machine(const struct inj_site *site, struct inj_slot *s, uint64_t slot, uint64_t a,
	     uint64_t b, uint32_t tgid)
{
	struct senv env;

	fast_env(&env, site, s, slot, a, b, tgid);
	run_fast(&env, env.sc);
}

/* A site whose probe needs no call out (SCRIPT_PROBE_FAST) and reads its
 * inputs from registers as they are (a and b), called by its trampoline
 * before (or instead of) agent_hit, as agent_fast is: it keeps every
 * register but the flags. 0 when it ran the probe; 1 when the hit is
 * agent_hit's (a thread's first hit: it claims a slot), nothing done. */
uint32_t agent_script_fast(const struct inj_site *site, uint64_t a, uint64_t b)
{
	struct inj_ctl *c = (struct inj_ctl *)site->ctl;
	struct inj_slot *slots = (struct inj_slot *)site->fast.slots, *s;
	const struct script_probe *p;
	struct inj_script *sc;
	uint64_t slot;
	uint32_t tgid;

	s = fast_slot(site, c);
	if (!s || !c->script_off)
		return 1;
	s->nest = 1;
	__asm__ volatile("" ::: "memory");
	slot = (uint64_t)(s - slots);
	tgid = *(volatile uint32_t *)site->fast.self;
	sc = (struct inj_script *)((char *)c + c->script_off);
	p = (const struct script_probe *)((const char *)c + sc->probes_at) + (site->script - 1);
	if (site->script - 1 < sc->nprobes && (p->flags & SCRIPT_PROBE_UPDATES)) {
		const struct script_insn *in = (const struct script_insn *)((const char *)c +
									    sc->insns_at) + p->first;
		const struct script_map *maps = (const struct script_map *)((const char *)c +
									   sc->maps_at);
		struct senv env;

		fast_env(&env, site, s, slot, a, b, tgid);

		for (uint32_t i = 0; i < p->n;
		     i = script_step_fast_unit(in, p->n, i, maps, sc->nmaps, &env))
			;
	} else {
		fast_machine(site, s, slot, a, b, tgid);
	}
	((uint64_t *)(site->fast.counts + slot * site->fast.count_stride))[0]++;
	__asm__ volatile("" ::: "memory");
	s->nest = 0;
	return 0;
}

/* A site whose probe is a few updates, decoded once into the site
 * (inj_site.script_units, engine/inject/script.c): agent_script_fast's,
 * with no instruction read at the hit, the units run straight from the
 * site's own lines. Called by the trampoline as agent_script_fast is. */
uint32_t agent_script_units(const struct inj_site *site, uint64_t a, uint64_t b)
{
	struct inj_ctl *c = (struct inj_ctl *)site->ctl;
	const struct script_map *maps;
	struct inj_slot *s;
	struct senv env;
	uint64_t slot;

	s = fast_slot(site, c);
	if (!s || !c->script_off)
		return 1;
	s->nest = 1;
	__asm__ volatile("" ::: "memory");
	slot = (uint64_t)(s - (struct inj_slot *)site->fast.slots);
	fast_env(&env, site, s, slot, a, b, *(volatile uint32_t *)site->fast.self);
	maps = (const struct script_map *)((const char *)c + env.sc->maps_at);
	for (uint32_t k = 0; k < site->script_nunits && k < INJ_SCRIPT_UNITS; k++)
		if (script_step_fast_unit_run(&site->script_units[k], maps, &env))
			break;
	((uint64_t *)(site->fast.counts + slot * site->fast.count_stride))[0]++;
	__asm__ volatile("" ::: "memory");
	s->nest = 0;
	return 0;
}
