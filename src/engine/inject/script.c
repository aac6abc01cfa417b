/* uscope script in the inject engine, the tracer's side: which sites the
 * agent runs the program of (agent/script.c), the program, its maps'
 * tables and each thread slot's machine in the shared memory
 * (script_shared.h), and the maps' rows read back, cleared, and their
 * errors counted, across every image (a process and the children it
 * forked share one). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/log.h"
#include "engine/inject/inject_int.h"
#include "engine/inject/script_shared.h"
#include "script/table.h"
#include "script/vm.h"

_Static_assert(sizeof(struct script_vm) <= INJ_SCRIPT_VM, "a slot's machine fits");

static const struct script_blob *blob_of(const struct inj *j)
{
	return j->base.ctx->set->script;
}

int inj_script_place(struct usc_engine *e, const struct usc_site *site)
{
	const struct usc_engine_ctx *s = e->ctx;

	if (!s->set->script || site->script < 0 || site->python || s->set->record.on)
		return -ENOTSUP;
	if (site->nargs > INJ_MAX_ARGS)
		return -ENOTSUP;
	for (unsigned a = 0; a < site->nargs; a++) {
		uint8_t op = site->args[a].ninsn ? site->args[a].insn[0].op : FOP_END;

		/* stacks are the tracer's to name: the events bring them */
		if (op == FOP_USTACK || op == FOP_PYSTACK || op == FOP_PYFUNC ||
		    op == FOP_PYARGS || op == FOP_PYARG || op == FOP_PYRETVAL)
			return -ENOTSUP;
	}
	return 0;
}

/* A slot's bytes of per-thread maps (struct inj_pt and its value each);
 * their offsets in off[] when given. */
static uint32_t pt_size_of(const struct script_blob *b, uint32_t *off)
{
	uint32_t n = 0;

	for (uint32_t m = 0; m < b->nmaps && m < SCRIPT_MAPS_MAX; m++) {
		const struct script_map *sm = &script_maps(b)[m];

		if (off)
			off[m] = INJ_PT_NONE;
		if (!(sm->flags & SCRIPT_MAP_PERTHREAD) || sm->keylen != 8)
			continue;
		if (off)
			off[m] = n;
		n += (uint32_t)sizeof(struct inj_pt) + ((sm->vallen + 7) & ~7u);
	}
	return (n + 63) & ~63u;
}

static uint32_t pt_size(const struct script_blob *b)
{
	return pt_size_of(b, NULL);
}

uint64_t inj_script_reserve(struct inj *j, uint64_t off, uint64_t *script_off)
{
	const struct script_blob *b = blob_of(j);
	bool any = false;

	*script_off = 0;
	for (size_t i = 0; i < j->base.nsites && !any; i++)
		any = j->base.sites[i]->script_in_place;
	if (!b || !any)
		return off;
	off = (off + 4095) & ~4095ULL;
	*script_off = off;
	off += (sizeof(struct inj_script) + 63) & ~63ULL;
	off += (b->size + 63) & ~63ULL;
	off = (off + 4095) & ~4095ULL;
	off += (uint64_t)INJ_NSLOTS * INJ_SCRIPT_VM;
	off += (uint64_t)INJ_NSLOTS * INJ_SCRIPT_STR;
	off = (off + 4095) & ~4095ULL;
	off += (uint64_t)INJ_NSLOTS * pt_size(b);
	for (uint32_t m = 0; m < b->nmaps && m < SCRIPT_MAPS_MAX; m++) {
		struct stab t;

		off = (off + 4095) & ~4095ULL;
		off += stab_layout(&t, &script_maps(b)[m], INJ_NSLOTS);
	}
	return (off + 4095) & ~4095ULL;
}

/* nsecs in the process: the TSC's rate over at least 10 ms of the
 * engine's clock samples, from its newest sample. */
static void clock_of(struct inj *j, struct inj_script *sc)
{
	const struct tsc_clock *k = j->clock;

	for (int tries = 0; tries < 4; tries++) {
		if (k->n >= 2 && k->s[k->n - 1].ns - k->s[0].ns >= 10000000ULL &&
		    k->s[k->n - 1].tsc > k->s[0].tsc) {
			const struct tsc_pair *a = &k->s[0], *z = &k->s[k->n - 1];

			sc->tsc0 = z->tsc;
			sc->ns0 = z->ns;
			sc->mult = (uint64_t)((double)(z->ns - a->ns) / (double)(z->tsc - a->tsc) *
					      4294967296.0);
			return;
		}
		struct timespec ts = {0, 10000000L};

		nanosleep(&ts, NULL);
		tsc_sample(j->clock, 1);
	}
	log_warn("script: the TSC's rate could not be measured: nsecs in the process is wrong");
}

void inj_script_ctl(struct inj *j, struct inj_shm *m, uint64_t script_off)
{
	const struct script_blob *b = blob_of(j);
	struct inj_script *sc;
	struct timespec now;
	uint64_t off;

	if (!script_off || !b)
		return;
	sc = (struct inj_script *)((char *)m->map + script_off);
	off = script_off + ((sizeof(*sc) + 63) & ~63ULL);
	sc->blob_off = off;
	memcpy((char *)m->map + off, b, b->size);
	off += (b->size + 63) & ~63ULL;
	off = (off + 4095) & ~4095ULL;
	sc->vm_off = off;
	off += (uint64_t)INJ_NSLOTS * INJ_SCRIPT_VM;
	sc->str_off = off;
	off += (uint64_t)INJ_NSLOTS * INJ_SCRIPT_STR;
	off = (off + 4095) & ~4095ULL;
	sc->pt_off = off;
	sc->pt_size = pt_size_of(b, sc->pt_map_off);
	off += (uint64_t)INJ_NSLOTS * sc->pt_size;
	sc->nmaps = b->nmaps;
	sc->insns_at = sc->blob_off + b->insns_off;
	sc->maps_at = sc->blob_off + b->maps_off;
	sc->strtab_at = sc->blob_off + b->strtab_off;
	sc->probes_at = sc->blob_off + b->probes_off;
	sc->nprobes = b->nprobes;
	sc->nstrtab = b->nstrtab;
	sc->strlen = b->strlen >= 2 && b->strlen <= SCRIPT_STR_CAP ? b->strlen : SCRIPT_STRLEN;
	for (uint32_t i = 0; i < b->nmaps && i < SCRIPT_MAPS_MAX; i++) {
		struct stab t;
		uint64_t size;

		off = (off + 4095) & ~4095ULL;
		size = stab_layout(&t, &script_maps(b)[i], INJ_NSLOTS);
		sc->tab_off[i] = off;
		memcpy((char *)m->map + off, &t, sizeof(t));
		off += size;
	}
	clock_of(j, sc);
	clock_gettime(CLOCK_MONOTONIC, &now);
	sc->start_ns = (uint64_t)now.tv_sec * 1000000000ULL + (uint64_t)now.tv_nsec;
	m->ctl->script_off = script_off;
}

/* agent_script_units: a probe of a few updates, its units decoded here
 * once (script/vm.h's decoder, the one every executor's _unit runs), so
 * the hit runs them with no instruction to read. More units than a site
 * holds, or one the decoder stops at: agent_script_fast steps them. */
static void units_of(const struct script_blob *b, const struct script_probe *p,
		     struct inj_site *d)
{
	const struct script_insn *in = script_insns(b) + p->first;
	uint32_t i = 0, k = 0;

	d->script_nunits = 0;
	if (!(p->flags & SCRIPT_PROBE_UPDATES) || p->first + p->n > b->ninsns)
		return;
	while (i + 1 < p->n) {
		if (k == INJ_SCRIPT_UNITS)
			return;
		i = script_unit_decode(in, p->n, i, b->nmaps, &d->script_units[k++]);
		if (i == SCRIPT_DONE)
			return;
	}
	d->script_nunits = k;
}

void inj_script_site(struct inj *j, const struct usc_site *site, struct inj_site *d,
		     const struct inj_ctl *c, uint64_t remote)
{
	const struct script_blob *b = blob_of(j);
	const struct script_probe *p;

	d->script = 0;
	d->script_fast = 0;
	d->script_nunits = 0;
	d->script_site = (uint32_t)(site - j->base.ctx->sites);
	if (!site->script_in_place || site->script < 0 || !d->ctl || !b ||
	    (uint32_t)site->script >= b->nprobes)
		return;
	d->script = (uint32_t)site->script + 1;
	/* the agent's fast paths record or count: not a program's */
	d->agg_fast = 0;
	d->rec_fast = 0;
	/* agent_script_fast: a plain site (no tail call to follow), a probe of
	 * integers and maps, its inputs registers as they are (not the stack
	 * pointer: the trampoline has moved it) */
	p = &script_probes(b)[site->script];
	d->script_fast = (p->flags & SCRIPT_PROBE_FAST) && d->kind == INJ_PLAIN && !d->obj;
	for (unsigned a = 0; a < d->nargs && a < 2 && d->script_fast; a++)
		d->script_fast = d->reg_only[a] < USC_REG_NR && d->reg_only[a] != USC_REG_SP &&
				 !d->arg_str[a];
	if (!d->script_fast || !c->script_off) {
		d->script_fast = 0;
		return;
	}
	units_of(b, p, d);
	d->fast.script = remote + c->script_off;
	d->fast.self = c->self;
	d->fast.slots = remote + c->slots_off;
	d->fast.counts = remote + c->counts_off + INJ_NCOUNTS * 8 * (uint64_t)d->index;
	d->fast.count_stride = INJ_NCOUNTS * 8 * (uint64_t)c->nsites;
}

/* Map mi's table in an image's region, checked against what we wrote. */
static struct stab *table_of(struct inj *j, const struct inj_shm *m, int mi, struct stab *want)
{
	const struct script_blob *b = blob_of(j);
	const struct inj_script *sc;
	struct stab *t;

	if (!m->map || !m->ctl || !m->ctl->script_off || !b || mi < 0 || (uint32_t)mi >= b->nmaps)
		return NULL;
	sc = (const struct inj_script *)((const char *)m->map + m->ctl->script_off);
	stab_layout(want, &script_maps(b)[mi], INJ_NSLOTS);
	if (sc->tab_off[mi] + sizeof(*t) > m->size)
		return NULL;
	t = (struct stab *)((char *)m->map + sc->tab_off[mi]);
	/* the process writes only entries and values: the geometry is ours */
	if (t->nent != want->nent || t->entsize != want->entsize || t->keylen != want->keylen ||
	    t->aggsize != want->aggsize || t->max != want->max)
		return NULL;
	return t;
}

/* The slot of ent, a per-thread map's value, in the region. */
static struct inj_pt *pt_of(const struct inj_shm *shm, const struct inj_script *sc, uint32_t slot,
			    int mi)
{
	uint64_t off = sc->pt_off + (uint64_t)slot * sc->pt_size + sc->pt_map_off[mi];

	if (sc->pt_map_off[mi] == INJ_PT_NONE || off + sizeof(struct inj_pt) > shm->size)
		return NULL;
	return (struct inj_pt *)((char *)shm->map + off);
}

/* A per-thread map's values, each thread's with its tid the key. */
static void pt_rows(const struct inj_shm *shm, int mi, const struct script_map *m,
		    void (*fn)(void *arg, int m, const uint8_t *key, const uint8_t *val), void *arg)
{
	const struct inj_script *sc = (const struct inj_script *)((const char *)shm->map +
								  shm->ctl->script_off);

	if (sc->pt_map_off[mi] == INJ_PT_NONE || m->vallen > SCRIPT_VAL_BYTES)
		return;
	for (uint32_t s = 0; s < INJ_NSLOTS; s++) {
		struct inj_pt *p = pt_of(shm, sc, s, mi);
		uint8_t val[SCRIPT_VAL_BYTES];
		uint64_t tid;

		if (!p || !__atomic_load_n(&p->present, __ATOMIC_ACQUIRE))
			continue;
		tid = p->tid;
		memcpy(val, p + 1, m->vallen);
		fn(arg, mi, (const uint8_t *)&tid, val);
	}
}

int inj_script_rows(struct usc_engine *e, int mi,
		    void (*fn)(void *arg, int m, const uint8_t *key, const uint8_t *val), void *arg)
{
	struct inj *j = inj_of(e);
	const struct script_blob *b = blob_of(j);
	uint8_t *acc = NULL, key[SCRIPT_KEY_MAX];

	for (size_t i = 0; i < j->nimages; i++) {
		struct stab want, *t = table_of(j, &j->images[i]->shm, mi, &want);
		const struct script_map *m;

		if (!t)
			continue;
		m = &script_maps(b)[mi];
		pt_rows(&j->images[i]->shm, mi, m, fn, arg);
		if (t->aggsize && !acc && !(acc = malloc(t->aggsize)))
			return -ENOMEM;
		for (uint32_t k = 0; k < t->nent; k++) {
			struct stab_ent *en = stab_ent(t, k);
			uint32_t row = en->row;
			uint64_t gen = en->gen;

			if (__atomic_load_n(&en->state, __ATOMIC_ACQUIRE) != STAB_READY ||
			    t->keylen > sizeof(key))
				continue;
			memcpy(key, stab_key(en), t->keylen);
			if (!t->aggsize) {
				fn(arg, mi, key, stab_val(t, en));
				continue;
			}
			if (row >= t->max)
				continue;
			/* the row's copies of its generation, over the slots that
			 * touched it */
			memset(acc, 0, t->aggsize);
			for (uint32_t s = 0; s < t->nslots; s++) {
				const uint64_t *c;

				if (!((stab_touched(t, s)[row / 64] >> (row % 64)) & 1))
					continue;
				c = stab_copy(t, s, row);
				if (*c == gen)
					stab_combine(m, acc, (const uint8_t *)(c + 1), false);
			}
			fn(arg, mi, key, acc);
		}
	}
	free(acc);
	return 0;
}

void inj_script_clear(struct usc_engine *e, int mi, bool zero)
{
	struct inj *j = inj_of(e);

	for (size_t i = 0; i < j->nimages; i++) {
		struct stab want, *t = table_of(j, &j->images[i]->shm, mi, &want);
		const struct inj_shm *shm = &j->images[i]->shm;

		if (!t)
			continue;
		stab_clear(t, zero);
		for (uint32_t s = 0; s < INJ_NSLOTS; s++) {
			struct inj_pt *p = pt_of(shm, (const struct inj_script *)
						 ((const char *)shm->map + shm->ctl->script_off), s, mi);

			if (!p || !p->present)
				continue;
			if (zero)
				memset(p + 1, 0, script_maps(blob_of(j))[mi].vallen);
			else
				__atomic_store_n(&p->present, 0, __ATOMIC_RELEASE);
		}
	}
}

void inj_script_errors(struct usc_engine *e, uint64_t *errs, uint64_t *full)
{
	struct inj *j = inj_of(e);
	const struct script_blob *b = blob_of(j);

	for (size_t i = 0; b && i < j->nimages; i++) {
		const struct inj_shm *m = &j->images[i]->shm;
		const struct inj_script *sc;

		if (!m->map || !m->ctl || !m->ctl->script_off)
			continue;
		sc = (const struct inj_script *)((const char *)m->map + m->ctl->script_off);
		for (int k = 1; k < SERR_NR; k++)
			errs[k] += sc->errs[k];
		for (uint32_t k = 0; k < b->nmaps && k < SCRIPT_MAPS_MAX; k++)
			full[k] += sc->full[k];
	}
}
