/* A script map's table in flat memory: uscope's own (script/run.c, for
 * the engines that stream events) and the inject agent's, in the memory it
 * shares with uscope (engine/inject/agent/script.c), written once here.
 * Plain C, no libc: compiled freestanding for the agent.
 *
 * Open addressing over nent entries (a power of two, twice the keys it
 * holds), each: a state, its row, the key's hash, the key, and a plain
 * map's value. A key is found by its hash and compared whole. A new key
 * claims a free entry (or one deleted earlier on its way) by a
 * compare-and-swap of its state and a row by an atomic add, and publishes
 * it with a store-release: no lock, in one process or several. A map holds
 * max keys; an update past that finds no row and is counted (full).
 *
 * Aggregations (count, sum, hist ...) have one copy of a row per thread
 * slot (nslots; the tracer's table has one), each with the generation of
 * the row it belongs to: a copy of an older generation (before a delete,
 * a zero()) is zero, and is made so by the thread when it next touches
 * it. A thread marks the rows it touched in its bitmap, and the reader
 * combines the touched copies of the row's generation only. So a hit adds
 * to its thread's own copy with no atomic operation and no shared line. */
#ifndef USC_SCRIPT_TABLE_H
#define USC_SCRIPT_TABLE_H

#include "script/prog.h"

#define STAB_INLINE static inline __attribute__((always_inline))

enum stab_state { STAB_FREE = 0, STAB_BUSY = 1, STAB_READY = 2, STAB_DEAD = 3 };

struct stab {
	uint32_t nent;		/* entries, a power of two */
	uint32_t max;		/* keys (rows) it holds at most */
	uint32_t keylen;	/* bytes, a multiple of 8 */
	uint32_t vallen;	/* a plain value's bytes (an aggregation's: 0) */
	uint32_t aggsize;	/* a thread's copy of a row: its generation, then
				 * the value (0: plain) */
	uint32_t entsize;	/* bytes of an entry */
	uint32_t nslots;	/* copies of an aggregation's row */
	volatile uint32_t used;	/* rows taken */
	uint64_t dir_off, copies_off, touched_off;	/* from the table's start */
	volatile uint64_t full;	/* updates that found no room */
	volatile uint64_t epoch;	/* bumped by every delete, clear and zero: a
				 * row found at one epoch is the key's while
				 * it stays (the agent's cache of rows) */
	uint64_t pad;
};

struct stab_ent {
	volatile uint32_t state;	/* enum stab_state */
	uint32_t row;
	uint64_t hash;
	volatile uint64_t gen;		/* the row's generation (aggregations) */
	/* the key, then a plain value */
};

/* The geometry of a map's table: fills t's sizes and offsets, returns its
 * bytes. */
STAB_INLINE uint64_t stab_layout(struct stab *t, const struct script_map *m, uint32_t nslots)
{
	uint64_t off = sizeof(struct stab);
	uint32_t n = 16, agg = script_vk_agg(m->vk);

	while (n < 2 * m->max && n < (1u << 30))
		n *= 2;
	t->nent = n;
	t->max = m->max;
	t->keylen = m->keylen;
	t->vallen = agg ? 0 : (m->vallen + 7) & ~7u;
	t->aggsize = agg ? 8 + ((m->vallen + 7) & ~7u) : 0;
	t->entsize = (uint32_t)sizeof(struct stab_ent) + t->keylen + t->vallen;
	t->nslots = agg ? nslots : 0;
	t->used = 0;
	t->full = 0;
	t->epoch = 0;
	off = (off + 63) & ~63ULL;
	t->dir_off = off;
	off += (uint64_t)n * t->entsize;
	off = (off + 63) & ~63ULL;
	t->touched_off = off;
	off += (uint64_t)t->nslots * ((t->max + 63) / 64) * 8;
	off = (off + 4095) & ~4095ULL;
	t->copies_off = off;
	off += (uint64_t)t->nslots * t->max * t->aggsize;
	return (off + 4095) & ~4095ULL;
}

STAB_INLINE struct stab_ent *stab_ent(const struct stab *t, uint32_t i)
{
	return (struct stab_ent *)((char *)t + t->dir_off + (uint64_t)i * t->entsize);
}

STAB_INLINE uint8_t *stab_key(struct stab_ent *e)
{
	return (uint8_t *)(e + 1);
}

STAB_INLINE uint8_t *stab_val(const struct stab *t, struct stab_ent *e)
{
	return (uint8_t *)(e + 1) + t->keylen;
}

/* Slot s's copy of row r: its generation word, then the value. */
STAB_INLINE uint64_t *stab_copy(const struct stab *t, uint32_t s, uint32_t r)
{
	return (uint64_t *)((char *)t + t->copies_off + ((uint64_t)s * t->max + r) * t->aggsize);
}

STAB_INLINE uint64_t *stab_touched(const struct stab *t, uint32_t s)
{
	return (uint64_t *)((char *)t + t->touched_off) + (uint64_t)s * ((t->max + 63) / 64);
}

STAB_INLINE uint64_t stab_hash(const uint8_t *key, uint32_t len)
{
	uint64_t h = 0x9e3779b97f4a7c15ULL;

	if (len == 8) {		/* one integer: the common key */
		uint64_t w;

		__builtin_memcpy(&w, key, 8);
		h = (h ^ w) * 0xff51afd7ed558ccdULL;
		h ^= h >> 32;
		return h ? h : 1;
	}

	for (uint32_t i = 0; i + 8 <= len && i < SCRIPT_KEY_MAX; i += 8) {
		uint64_t w;

		__builtin_memcpy(&w, key + i, 8);
		h = (h ^ w) * 0xff51afd7ed558ccdULL;
		h ^= h >> 32;
	}
	return h ? h : 1;
}

STAB_INLINE int stab_keyeq(const uint8_t *a, const uint8_t *b, uint32_t len)
{
	if (len == 8) {
		uint64_t x, y;

		__builtin_memcpy(&x, a, 8);
		__builtin_memcpy(&y, b, 8);
		return x == y;
	}
	for (uint32_t i = 0; i + 8 <= len && i < SCRIPT_KEY_MAX; i += 8) {
		uint64_t x, y;

		__builtin_memcpy(&x, a + i, 8);
		__builtin_memcpy(&y, b + i, 8);
		if (x != y)
			return 0;
	}
	return 1;
}

STAB_INLINE void stab_zero(void *p, uint64_t n)
{
	volatile uint64_t *w = (volatile uint64_t *)p;

	for (uint64_t i = 0; i < n / 8; i++)
		w[i] = 0;
}

/* Wait a bounded while for an entry another thread is writing. */
STAB_INLINE uint32_t stab_wait(struct stab_ent *e)
{
	uint32_t st = __atomic_load_n(&e->state, __ATOMIC_ACQUIRE);

	for (uint32_t spin = 0; st == STAB_BUSY && spin < 100000; spin++) {
#if defined(__x86_64__)
		__asm__ volatile("pause");
#endif
		st = __atomic_load_n(&e->state, __ATOMIC_ACQUIRE);
	}
	return st;
}

/* The entry of key, or 0; made when absent and create (0 when full). */
STAB_INLINE struct stab_ent *stab_find(struct stab *t, const uint8_t *key, int create)
{
	uint64_t h = stab_hash(key, t->keylen);
	uint32_t mask = t->nent - 1, at = (uint32_t)h & mask;
	struct stab_ent *dead = 0;

	for (uint32_t i = 0; i <= mask; i++, at = (at + 1) & mask) {
		struct stab_ent *e = stab_ent(t, at);
		uint32_t st = stab_wait(e);

		if (st == STAB_READY) {
			if (e->hash == h && stab_keyeq(stab_key(e), key, t->keylen))
				return e;
			continue;
		}
		if (st == STAB_DEAD) {
			if (!dead)
				dead = e;
			continue;
		}
		if (st != STAB_FREE)
			return 0;	/* another thread never finished: give up on it */
		if (!create)
			return 0;
		/* absent: an entry deleted on the way, else this free one */
		if (dead && __sync_bool_compare_and_swap(&dead->state, STAB_DEAD, STAB_BUSY)) {
			e = dead;
		} else if (__sync_bool_compare_and_swap(&e->state, STAB_FREE, STAB_BUSY)) {
			uint32_t row = __sync_fetch_and_add(&t->used, 1);

			if (row >= t->max) {
				__atomic_store_n(&e->state, STAB_FREE, __ATOMIC_RELEASE);
				__sync_fetch_and_add(&t->full, 1);
				return 0;
			}
			e->row = row;
		} else {
			/* another thread took it: look again from there */
			st = stab_wait(e);
			if (st == STAB_READY && e->hash == h &&
			    stab_keyeq(stab_key(e), key, t->keylen))
				return e;
			continue;
		}
		e->hash = h;
		for (uint32_t w = 0; w < t->keylen && w < SCRIPT_KEY_MAX; w += 8)
			__builtin_memcpy(stab_key(e) + w, key + w, 8);
		if (t->vallen)
			stab_zero(stab_val(t, e), t->vallen);
		e->gen++;	/* every copy of the row is of an older one: zero */
		__atomic_store_n(&e->state, STAB_READY, __ATOMIC_RELEASE);
		return e;
	}
	if (create)
		__sync_fetch_and_add(&t->full, 1);
	return 0;
}

/* The value of key for thread slot s: a plain map's, or s's copy of an
 * aggregation's row (made zero if it is of an older generation); 0 when
 * absent (and not create) or full. */
STAB_INLINE uint8_t *stab_get(struct stab *t, const uint8_t *key, int create, uint32_t s)
{
	struct stab_ent *e = stab_find(t, key, create);
	uint64_t *c, *tw, bit;

	if (!e)
		return 0;
	if (!t->aggsize)
		return stab_val(t, e);
	if (s >= t->nslots || e->row >= t->max)
		return 0;
	c = stab_copy(t, s, e->row);
	if (*c != e->gen) {
		stab_zero(c + 1, t->aggsize - 8);
		*c = e->gen;
	}
	tw = stab_touched(t, s) + e->row / 64;
	bit = 1ULL << (e->row % 64);
	if (!(*tw & bit))
		*tw |= bit;
	return (uint8_t *)(c + 1);
}

STAB_INLINE void stab_del(struct stab *t, const uint8_t *key)
{
	struct stab_ent *e = stab_find(t, key, 0);

	if (e && __sync_bool_compare_and_swap(&e->state, STAB_READY, STAB_DEAD))
		__atomic_add_fetch(&t->epoch, 1, __ATOMIC_RELEASE);
}

/* src's value into dst's, as map m's values combine (first: dst is new;
 * a plain value is then copied). */
STAB_INLINE void stab_combine(const struct script_map *m, uint8_t *dst, const uint8_t *src,
				int first)
{
	switch (m->vk) {
	case SVK_COUNT:
	case SVK_SUM:
		*(uint64_t *)dst += *(const uint64_t *)src;
		return;
	case SVK_MIN:
	case SVK_MAX: {
		struct script_mm *d = (struct script_mm *)dst;
		const struct script_mm *s = (const struct script_mm *)src;

		if (s->set && (!d->set || (m->vk == SVK_MIN ? s->v < d->v : s->v > d->v)))
			*d = *s;
		return;
	}
	case SVK_AVG:
	case SVK_STATS:
		((struct script_cs *)dst)->count += ((const struct script_cs *)src)->count;
		((struct script_cs *)dst)->sum += ((const struct script_cs *)src)->sum;
		return;
	case SVK_HIST:
	case SVK_LHIST:
		for (uint32_t b = 0; b < m->nbuckets && b < SCRIPT_LHIST_MAX; b++)
			((uint64_t *)dst)[b] += ((const uint64_t *)src)[b];
		return;
	default:
		if (first)
			for (uint32_t i = 0; i < m->vallen; i++)
				dst[i] = src[i];
		return;
	}
}

/* clear(): every key deleted; zero(): every value zero, the keys kept. */
STAB_INLINE void stab_clear(struct stab *t, int zero_only)
{
	for (uint32_t i = 0; i < t->nent; i++) {
		struct stab_ent *e = stab_ent(t, i);

		if (__atomic_load_n(&e->state, __ATOMIC_ACQUIRE) != STAB_READY)
			continue;
		if (!zero_only) {
			__sync_bool_compare_and_swap(&e->state, STAB_READY, STAB_DEAD);
			continue;
		}
		if (t->vallen)
			stab_zero(stab_val(t, e), t->vallen);
		__atomic_add_fetch(&e->gen, 1, __ATOMIC_RELEASE);
	}
	__atomic_add_fetch(&t->epoch, 1, __ATOMIC_RELEASE);
}

#endif
