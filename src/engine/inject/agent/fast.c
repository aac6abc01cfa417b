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
 * watermark; and where the ring is full and nobody waits for room (a live
 * command), the loss, counted. Else 1, nothing changed: agent_hit's. The
 * trampoline passed the record's words in order: at a return where it
 * returns to, then the argument. */
static inline __attribute__((always_inline)) uint32_t
fast_record(struct inj_ctl *c, const struct inj_site *site, struct inj_slot *s, uint64_t slot,
	    uint64_t *counts, uint64_t a, uint64_t b, uint64_t tsc, uint32_t cpu, int late)
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
	if (__builtin_expect(fill > size, 0) && !s->npend) {
		/* full by the tail seen last: the tracer's, read once */
		uint64_t tail = __atomic_load_n(&s->tail, __ATOMIC_ACQUIRE);

		s->tail_seen = tail;
		fill = head + need - tail;
		if (fill > size && !c->lossless && !c->overwrite) {
			/* a live consumer behind: the record is lost and
			 * counted here, as record() would (a sustained trace
			 * drops most hits: each one through agent_hit cost
			 * a full register save and a second lookup) */
			counts[0]++;
			counts[INJ_C_LOST]++;
			if (!site->fast.full)	/* the next hits: the room first */
				((struct inj_site *)site)->fast.full = 1;
			__asm__ volatile("" ::: "memory");
			s->nest = 0;
			return 0;
		}
	}
	if (s->npend || pos + need > size || fill > size ||
	    (c->asleep && fill >= c->watermark)) {
		__asm__ volatile("" ::: "memory");
		s->nest = 0;
		return 1;
	}
	if (late)	/* the clock once the record is sure to be written */
		tsc = stamp(c, &cpu);
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
 * a function of its own, so that it saves only the few registers it uses.
 * The time stamp counter takes ~11 ns to read on this project's CPU: read
 * first, the lookups run under it (a written record, 10 M in a row: ~5 ns
 * a call less than after them). But where this site dropped a hit on a
 * full ring since the tracer last drained (site->fast.full: a live command
 * behind, most of whose hits are dropped), the room is checked first, and
 * a dropped hit never reads it (a drop: ~3 ns of the program's CPU, not
 * ~13). */
uint32_t agent_fast_rec(const struct inj_site *site, uint64_t a, uint64_t b)
{
	struct inj_ctl *c = (struct inj_ctl *)site->ctl;
	struct inj_slot *s;
	uint64_t slot, tsc = 0;
	uint32_t cpu = 0;
	int late = site->fast.full != 0;

	if (!late)
		tsc = stamp(c, &cpu);
	s = fast_slot(site, c);
	if (!s)
		return 1;
	slot = (uint64_t)(s - (struct inj_slot *)site->fast.slots);
	return fast_record(c, site, s, slot,
			   (uint64_t *)(site->fast.counts + slot * site->fast.count_stride), a, b,
			   tsc, cpu, late);
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
					     tsc_units(c, dt));
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


/* ---- latency: its entries and returns -------------------------------------
 * A latency's entry whose row is known (no key: the function's one row)
 * and its return, called by their trampolines as agent_fast is: agent_fast's
 * work, each in a function small enough to save few registers. A call's
 * time is two rdtsc, ~10 ns each on this project's CPU, and what waits for
 * them: each hit reads the clock first, and its lookups run while the read
 * completes (agent_fast_rec does the same); at the return only the value's
 * own arithmetic follows it, a 64-bit multiply where it fits (tsc_units).
 * Side by side with the clock read last at the entry and after the lookups
 * at the return: ~5 ns a call less (the fastest of 15 interleaved runs,
 * 26.2 against 31.4). The call's time gains the entry's few stores after
 * its read and loses the return's lookups before it: a wash, within the
 * hits' own cost. Anything else is agent_fast's. */
uint32_t agent_fast_lat_in(const struct inj_site *site, uint64_t a, uint64_t b) HIDDEN
	__attribute__((no_caller_saved_registers));
uint32_t agent_fast_lat_out(const struct inj_site *site, uint64_t a, uint64_t b) HIDDEN
	__attribute__((no_caller_saved_registers));

/* ours: a signal handler's hit is only counted, and the latency stack stays
 * as this hit leaves it */
#define LAT_BEGIN(s) do { (s)->nest = 1; __asm__ volatile("" ::: "memory"); } while (0)
#define LAT_END(s) do { __asm__ volatile("" ::: "memory"); (s)->nest = 0; } while (0)

uint32_t agent_fast_lat_in(const struct inj_site *site, uint64_t a, uint64_t b)
{
	struct inj_slot *s;
	struct inj_lat *lat;
	uint64_t slot, tsc;
	uint32_t n;

	if (site->agg_nkey || !site->fast.row1)
		return agent_fast(site, a, b);
	tsc = rd_tsc();
	s = fast_slot(site, (struct inj_ctl *)site->ctl);
	if (!s)
		return 1;
	LAT_BEGIN(s);
	slot = (uint64_t)(s - (struct inj_slot *)site->fast.slots);
	lat = (struct inj_lat *)site->fast.lat + slot;
	n = lat->n;
	if (n >= INJ_LAT_DEPTH) {
		LAT_END(s);
		return 1;	/* too deep: agent_hit's */
	}
	lat->f[n].func = site->agg_func;
	lat->f[n].row = site->fast.row1 - 1;
	lat->n = n + 1;
	((uint64_t *)(site->fast.counts + slot * site->fast.count_stride))[0]++;
	lat->f[n].tsc = tsc;
	LAT_END(s);
	return 0;
}

uint32_t agent_fast_lat_out(const struct inj_site *site, uint64_t a, uint64_t b)
{
	struct inj_ctl *c = (struct inj_ctl *)site->ctl;
	struct inj_slot *s;
	struct inj_lat *lat;
	uint64_t slot, tsc;
	uint32_t n;

	(void)a;
	(void)b;
	tsc = rd_tsc();
	s = fast_slot(site, c);
	if (!s)
		return 1;
	LAT_BEGIN(s);
	slot = (uint64_t)(s - (struct inj_slot *)site->fast.slots);
	lat = (struct inj_lat *)site->fast.lat + slot;
	n = lat->n < INJ_LAT_DEPTH ? lat->n : INJ_LAT_DEPTH;
	for (uint32_t i = n; i-- > 0;) {
		uint64_t dt;
		uint32_t row;

		if (lat->f[i].func != site->agg_func)
			continue;
		dt = tsc - lat->f[i].tsc;
		row = lat->f[i].row;
		lat->n = i;
		if (row != INJ_NO_ROW)
			row_add_fast(c, site, slot, row,
				     tsc_units(c, dt));
		break;
	}
	((uint64_t *)(site->fast.counts + slot * site->fast.count_stride))[0]++;
	LAT_END(s);
	return 0;
}
