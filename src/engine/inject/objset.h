/* uscope objtrace in the inject engine: the set of followed objects, in the
 * shared memory, written by the agent itself on --from and --until hits and
 * read on every hit of a probe that follows them. Several threads hit at
 * once, so it takes no lock:
 *
 *   struct objset                           at inj_ctl.obj_off
 *   uint16_t filter[1 << (64 - fshift)]     a counter per hash bucket: how
 *                                           many followed objects hash there
 *   uint64_t table[tmask + 1]               open addressing, linear probing:
 *                                           0 free, OBJSET_TOMB a removed
 *                                           object, else an object
 *
 * A probe's test is the filter's: one load a register, and a call that
 * passes no followed object stops there (the trampoline tests it inline,
 * tramp.c); the table is read
 * only when a counter is not 0. An object is added by a compare-and-swap
 * of a free (or removed) slot after its count is reserved (objset.used,
 * at most objset.max: beyond, the set is full, counted and reported), then
 * its filter counter goes up; removing it is a compare-and-swap to
 * OBJSET_TOMB, then its counter goes down. The table has at least twice as
 * many slots as objects, so an add always finds one; removed slots are
 * reused by adds, never freed, so a lookup of an absent object may walk
 * far: the filter keeps that off the common path. The filter has 8
 * counters an object (4096 at least: 8 KiB, so that it stays in the L1
 * cache of a thread that calls the probed functions: at 64 KiB the test
 * cost twice as much in make bench); a value that is no object finds a
 * counter not 0 with a chance of at most objects / counters.
 *
 * One object is added and removed by one thread at a time (an allocator
 * does not give out an address twice before it is freed): the same object
 * is never added twice concurrently.
 *
 * Plain C, freestanding: the agent includes it, and so do the tracer and
 * the unit tests. */
#ifndef USC_ENGINE_INJECT_OBJSET_H
#define USC_ENGINE_INJECT_OBJSET_H

#include <stdint.h>

#define OBJSET_TOMB (~0ULL)	/* at most 65535 objects (USC_OBJ_MAX): a filter
				 * counter never wraps */

struct objset {
	volatile uint32_t used;		/* objects in the set (or being added) */
	uint32_t max;			/* --max-objects */
	uint32_t tmask;			/* table slots - 1 (a power of two - 1) */
	uint32_t fshift;		/* 64 - log2(filter counters) */
	uint64_t filter_off;		/* from the struct's start */
	uint64_t table_off;
	volatile uint64_t full;		/* adds refused: the set was full */
	uint64_t pad[3];
};

enum objset_add_result {
	OBJSET_ADDED = 1,
	OBJSET_PRESENT = 2,
	OBJSET_FULL = 3,
};

static inline __attribute__((always_inline)) uint64_t objset_hash(uint64_t k)
{
	return k * 0x9e3779b97f4a7c15ULL;
}

/* Its bytes for max objects (the struct, the filter, the table); the
 * geometry into *o. */
static inline uint64_t objset_layout(uint32_t max, struct objset *o)
{
	uint64_t fn = 4096, tn = 64;

	while (fn < 8ULL * max && fn < (1ULL << 20))
		fn *= 2;
	while (tn < 4ULL * max)
		tn *= 2;
	o->max = max;
	o->tmask = (uint32_t)(tn - 1);
	o->fshift = 64 - (uint32_t)__builtin_ctzll(fn);
	o->filter_off = (sizeof(*o) + 63) & ~63ULL;
	o->table_off = (o->filter_off + 2 * fn + 63) & ~63ULL;
	return o->table_off + 8 * tn;
}

static inline __attribute__((always_inline)) uint16_t *objset_filter(struct objset *o)
{
	return (uint16_t *)((char *)o + o->filter_off);
}

static inline __attribute__((always_inline)) uint64_t *objset_table(struct objset *o)
{
	return (uint64_t *)((char *)o + o->table_off);
}

/* Could k be in the set? 0: certainly not. */
static inline __attribute__((always_inline)) uint32_t objset_maybe(const uint16_t *filter,
								  uint32_t fshift, uint64_t k)
{
	return filter[objset_hash(k) >> fshift];
}

/* k's slot in the table, or -1. */
static inline long objset_find(struct objset *o, uint64_t k)
{
	const volatile uint64_t *t = objset_table(o);
	uint64_t h = objset_hash(k);
	uint32_t at = (uint32_t)(h >> 24) & o->tmask;

	if (!k || k == OBJSET_TOMB || !objset_maybe(objset_filter(o), o->fshift, k))
		return -1;
	for (uint32_t i = 0; i <= o->tmask; i++, at = (at + 1) & o->tmask) {
		uint64_t v = t[at];

		if (v == k)
			return (long)at;
		if (!v)
			return -1;
	}
	return -1;
}

/* Follow k: enum objset_add_result, or 0 for an address that cannot be an
 * object (0, or OBJSET_TOMB). */
static inline int objset_add(struct objset *o, uint64_t k)
{
	volatile uint64_t *t = objset_table(o);
	uint32_t at = (uint32_t)(objset_hash(k) >> 24) & o->tmask;

	if (!k || k == OBJSET_TOMB)
		return 0;
	if (objset_find(o, k) >= 0)
		return OBJSET_PRESENT;
	if (__sync_fetch_and_add(&o->used, 1) >= o->max) {
		__sync_fetch_and_sub(&o->used, 1);
		__sync_fetch_and_add(&o->full, 1);
		return OBJSET_FULL;
	}
	for (uint32_t i = 0; i <= o->tmask; i++, at = (at + 1) & o->tmask) {
		uint64_t v = t[at];

		if ((v == 0 || v == OBJSET_TOMB) && __sync_bool_compare_and_swap(&t[at], v, k)) {
			__sync_fetch_and_add(&objset_filter(o)[objset_hash(k) >> o->fshift], 1);
			return OBJSET_ADDED;
		}
	}
	/* not reached: the table has room for twice max */
	__sync_fetch_and_sub(&o->used, 1);
	__sync_fetch_and_add(&o->full, 1);
	return OBJSET_FULL;
}

/* Follow k no more: 1 when it was followed, else 0. */
static inline int objset_del(struct objset *o, uint64_t k)
{
	long at = objset_find(o, k);

	if (at < 0 || !__sync_bool_compare_and_swap(&objset_table(o)[at], k, OBJSET_TOMB))
		return 0;
	__sync_fetch_and_sub(&objset_filter(o)[objset_hash(k) >> o->fshift], 1);
	__sync_fetch_and_sub(&o->used, 1);
	return 1;
}

#endif
