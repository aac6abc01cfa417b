/* The agent's fast path: a hit that only counts or aggregates integers
 * from registers (agent_fast), or records at most two of them in the short
 * form (agent_fast_rec), done whole without agent_hit's register saves.
 * Anything it cannot finish in a few stores it hands back (return 1), and
 * the trampoline calls agent_hit (agent.c). */
#include "engine/inject/agent/hit.h"

uint32_t agent_fast(const struct inj_site *site, uint64_t a, uint64_t b) HIDDEN
	__attribute__((no_caller_saved_registers));
uint32_t agent_fast_rec(const struct inj_site *site, uint64_t a, uint64_t b) HIDDEN
	__attribute__((no_caller_saved_registers));

/* The row of a key already in the directory, or INJ_NO_ROW: finding a free
 * entry first, or one being written, is the slow path's (it claims). h is
 * the key's agg_hash. */
ALWAYS uint32_t row_find(const struct inj_ctl *c, const struct inj_site *site,
			 const uint64_t *key, uint32_t nw, uint64_t h)
{
	const char *dir = (const char *)site->fast.dir;
	uint32_t mask = c->agg_nslots - 1;

	for (uint32_t i = 0, at = (uint32_t)h & mask; i <= mask; i++, at = (at + 1) & mask) {
		const struct inj_dir *e = (const struct inj_dir *)(dir + (uint64_t)at * c->agg_dir_size);
		uint32_t w = 0;

		if (__atomic_load_n(&e->state, __ATOMIC_ACQUIRE) != INJ_DIR_READY)
			return INJ_NO_ROW;
		if (e->hash != h || e->site != site->index || e->keylen != 8 * nw)
			continue;
		while (w < nw && ((const uint64_t *)(e + 1))[w] == key[w])
			w++;
		if (w == nw)
			return e->row;
	}
	return INJ_NO_ROW;
}

/* The same, by agent_fast's addresses. */
ALWAYS void row_add_fast(const struct inj_ctl *c, const struct inj_site *site, uint64_t slot,
			 uint32_t row, int64_t v)
{
	val_add(c, (struct agg_val *)(site->fast.vals + slot * site->fast.slot_vals +
				      (uint64_t)row * c->agg_val_size),
		(uint64_t *)(site->fast.touched + slot * site->fast.slot_words) + row / 64, row, v);
}

static inline __attribute__((always_inline)) uint64_t hash_step(uint64_t h, uint64_t w)
{
	h = (h ^ w) * 0xff51afd7ed558ccdULL;
	return h ^ (h >> 32);
}

/* agent_fast's record (inj_site.rec_fast): record()'s, in the short form
 * (struct inj_rec_short), written whole here when nothing needs more than
 * a store: no tail call's return pending, no wrap at the ring's end, room
 * by the tail seen last, the tracer awake or its ring short of the
 * watermark. Else 1, nothing changed: agent_hit's. The trampoline passed
 * the record's words in order: at a return where it returns to, then the
 * argument. */
static inline uint32_t fast_record(struct inj_ctl *c, const struct inj_site *site,
				   struct inj_slot *s, uint64_t slot, uint64_t *counts,
				   uint64_t a, uint64_t b, uint64_t tsc, uint32_t cpu)
{
	uint32_t size = c->ring_size, nw = site->nargs + (site->ret_site ? 1 : 0), pos;
	uint32_t need = (uint32_t)(sizeof(struct inj_rec_short) + nw * sizeof(uint64_t));
	uint64_t head, fill;
	struct inj_rec_short *h;

	/* ours before the ring is read: a signal handler's hit from here on
	 * is only counted, not written where this record goes */
	s->nest = 1;
	__asm__ volatile("" ::: "memory");
	head = s->head;
	fill = head + need - s->tail_seen;
	pos = (uint32_t)head & (size - 1);
	if (s->npend || pos + need > size || fill > size ||
	    (c->asleep && fill >= c->watermark)) {
		__asm__ volatile("" ::: "memory");
		s->nest = 0;
		return 1;
	}
	h = (struct inj_rec_short *)((char *)c + c->rings_off + slot * size + pos);
	h->tsc = tsc;
	if (nw > 0)
		h->w[0] = a;
	if (nw > 1)
		h->w[1] = b;
	h->site = site->index;
	h->len = INJ_REC_SHORT | cpu << INJ_REC_SHORT_CPU | need;
	__atomic_store_n(&s->head, head + need, __ATOMIC_RELEASE);
	counts[0]++;
	__asm__ volatile("" ::: "memory");
	s->nest = 0;
	return 0;
}

/* A recording site's fast path (inj_site.rec_fast), called as agent_fast:
 * a function of its own, so that it saves only the few registers it uses. */
uint32_t agent_fast_rec(const struct inj_site *site, uint64_t a, uint64_t b)
{
	struct inj_ctl *c = (struct inj_ctl *)site->ctl;
	struct inj_slot *s;
	uint64_t slot, tsc;
	uint32_t cpu;

	/* first: the time stamp counter takes ~11 ns to read on this
	 * project's CPU, in which the lookups below are made */
	tsc = stamp(c, &cpu);
	s = fast_slot(site, c);
	if (!s)
		return 1;
	slot = (uint64_t)(s - (struct inj_slot *)site->fast.slots);
	return fast_record(c, site, s, slot,
			   (uint64_t *)(site->fast.counts + slot * site->fast.count_stride), a, b,
			   tsc, cpu);
}

/* A site that aggregates integers from registers (inj_site.agg_fast), called
 * by its trampoline with the registers of its first two arguments before
 * (or instead of) agent_hit: it keeps every register but the flags, so the
 * trampoline saves almost nothing. It does the common case whole: a thread
 * that has its slot, a key already in the directory, a latency's calls
 * within INJ_LAT_DEPTH. 0 when it did; 1 when the hit is agent_hit's (it
 * has changed nothing then). No call: a call would make the compiler save
 * every register here. Addresses come precomputed in site->fast. */
uint32_t agent_fast(const struct inj_site *site, uint64_t a, uint64_t b)
{
	struct inj_ctl *c = (struct inj_ctl *)site->ctl;
	struct inj_slot *slots = (struct inj_slot *)site->fast.slots, *s;
	uint32_t row, nk = site->agg_nkey;
	uint64_t slot, *counts, fkey[4], h;
	struct inj_lat *lat;
	__typeof__(&slots->kc[0]) kc = 0;

	s = fast_slot(site, c);
	if (!s)
		return 1;
	/* ours from here: a signal handler's hit is only counted, and the
	 * thread's latency stack and key cache stay as this hit leaves them */
	s->nest = 1;
	__asm__ volatile("" ::: "memory");
	slot = (uint64_t)(s - slots);
	counts = (uint64_t *)(site->fast.counts + slot * site->fast.count_stride);
	lat = (struct inj_lat *)site->fast.lat + slot;
	if (site->agg == INJ_AGG_RETURN) {
		uint32_t n = lat->n < INJ_LAT_DEPTH ? lat->n : INJ_LAT_DEPTH;

		for (uint32_t i = n; i-- > 0;) {
			if (lat->f[i].func != site->agg_func)
				continue;
			uint64_t dt = rd_tsc() - lat->f[i].tsc;

			row = lat->f[i].row;
			lat->n = i;
			if (row != INJ_NO_ROW)
				row_add_fast(c, site, slot, row,
					     (int64_t)(((unsigned __int128)dt * c->tsc_mult) >> 32));
			break;
		}
		goto done;
	}
	/* the key: args [0, agg_nkey), the first two in a and b */
	if (nk == 0 && site->fast.row1) {
		row = site->fast.row1 - 1;	/* the one row of a site of no key */
		goto found;
	}
	if (nk == 0) {
		fkey[0] = 0;
		h = agg_hash(site->index, fkey, 1);
	} else {
		fkey[0] = AGG_K_INT;
		fkey[1] = (uint64_t)agg_value_of(a, site->arg_size[0], 0);
		if (nk == 1) {
			kc = &s->kc[(fkey[1] ^ site->index) & (INJ_KEY_CACHE - 1)];
			if (kc->row1 && kc->v == fkey[1] && kc->site == site->index) {
				row = kc->row1 - 1;
				goto found;
			}
		}
		h = hash_step(site->fast.hash0, fkey[1]);
		if (nk >= 2) {
			fkey[2] = AGG_K_INT;
			fkey[3] = (uint64_t)agg_value_of(b, site->arg_size[1], 0);
			h = hash_step(hash_step(h, AGG_K_INT), fkey[3]);
		}
		h = h ? h : 1;
	}
	row = row_find(c, site, fkey, nk ? 2 * nk : 1, h);
	if (row == INJ_NO_ROW)
		goto slow;	/* a new key: agent_hit's */
	if (nk == 0)
		((struct inj_site *)site)->fast.row1 = row + 1;
	if (kc) {
		kc->v = fkey[1];
		kc->site = site->index;
		kc->row1 = row + 1;
	}
found:
	if (site->agg == INJ_AGG_ENTRY && lat->n >= INJ_LAT_DEPTH)
		goto slow;	/* too deep: agent_hit's */
	if (site->agg == INJ_AGG_ENTRY) {
		uint32_t n = lat->n;

		lat->f[n].func = site->agg_func;
		lat->f[n].row = row;
		lat->n = n + 1;
		lat->f[n].tsc = rd_tsc();	/* last: the call's time starts here */
	} else {
		uint64_t v = site->agg_value == 0 ? a : b;
		uint32_t vi = (uint32_t)site->agg_value & 1;

		row_add_fast(c, site, slot, row, site->agg_value < 0 ? 0 :
			     agg_value_of(v, site->arg_size[vi], site->arg_sign[vi]));
	}
done:
	counts[0]++;
	__asm__ volatile("" ::: "memory");
	s->nest = 0;
	return 0;
slow:
	__asm__ volatile("" ::: "memory");
	s->nest = 0;
	return 1;
}

