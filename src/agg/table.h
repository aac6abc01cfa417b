/* A table of aggregated rows: by an id (the aggregating sinks' probe
 * label, the session's site) and a key, each with its count, sum, min, max
 * and histogram buckets. The session keeps one of what the engines
 * aggregated where the probe runs (to hand the sinks what is new at each
 * report); the aggregating sinks (count, hist, latency) keep theirs, fed by
 * those rows and by the events of the engines that cannot aggregate. Keys
 * are in the byte layout of agg/agg_shared.h, whatever their source. */
#ifndef USC_AGG_TABLE_H
#define USC_AGG_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <sys/types.h>

#include "probe/event.h"
#include "probe/probe.h"
#include "agg/agg_shared.h"

struct agg_row {
	uint64_t id;
	const char *label;		/* the sinks': the probe label */
	const struct usc_site *site;	/* the first site it came from: its args name the keys */
	uint32_t keylen;
	uint8_t key[AGG_KEY_MAX] __attribute__((aligned(8)));	/* slots of 8-byte words */
	struct agg_stats st;
	uint64_t *buckets;		/* nbuckets, or NULL */
	bool cut;			/* a string of its key was cut */
};

struct agg_table {
	struct agg_row **rows;		/* in insertion order */
	size_t n, cap;
	size_t *slots;			/* open addressing: index + 1, 0 empty */
	size_t nslots;
	uint32_t nbuckets;		/* 0: no histogram */
};

int agg_table_init(struct agg_table *t, uint32_t nbuckets);
void agg_table_free(struct agg_table *t);
/* Forget every row's values (a new interval); the rows stay. */
void agg_table_clear(struct agg_table *t);

/* The row of (id, key), made empty when new (label and site NULL: the
 * caller's to set). NULL: out of memory. */
struct agg_row *agg_table_get(struct agg_table *t, uint64_t id, const uint8_t *key,
			      uint32_t keylen);

/* The row of (id, key), or NULL. */
struct agg_row *agg_table_find(const struct agg_table *t, uint64_t id, const uint8_t *key,
			       uint32_t keylen);

/* Add a row's worth: counts and sums add, min and max combine (min > max:
 * none known, left as they are). */
void agg_row_merge(struct agg_row *r, const struct agg_stats *st, const uint64_t *buckets,
		   uint32_t nbuckets);
/* A thread's (a CPU's) part of a row, where min > max says none is known
 * for it: counts, sums and buckets add, min and max combine. */
void agg_row_sum(struct agg_row *r, const struct agg_stats *st, const uint64_t *buckets,
		 uint32_t nbuckets);
/* The bytes of an integer argument's value (0: all 8, a bitfield's bits
 * already extracted), to mask it with. */
unsigned agg_arg_size(const struct usc_fetcharg *a);

/* One value into a row (its bucket by bucket_of). */
void agg_row_add(struct agg_row *r, int64_t v, uint32_t bucket);

/* The key of an event: its values args[first..first+n) in agg.h's layout
 * (a stack by its number in c: stack_intern); its length, cut set when a
 * string was cut. */
struct usc_cache;
uint32_t agg_key_of(struct usc_cache *c, const struct usc_event *ev, unsigned first, unsigned n,
		    uint32_t str_max, uint8_t *key, bool *cut);

/* Key slot i (of the arguments args[first..]) as a value, for output (a
 * string points into key, a stack into c, *pid its process). */
void agg_key_value(struct usc_cache *c, const uint8_t *key, uint32_t keylen,
		   const struct usc_fetcharg *args, unsigned first, unsigned i, uint32_t str_max,
		   struct usc_value *v, bool *cut, pid_t *pid);

/* The bytes of n key slots whose strings take str_max each, given which
 * are strings: their layout's length. */
uint32_t agg_key_len(const struct usc_fetcharg *args, unsigned first, unsigned n,
		     uint32_t str_max);

/* Percentile p (0..100) of a row's log2 histogram: the bucket's lower
 * bound, interpolated within the bucket. */
int64_t agg_percentile(const struct agg_row *r, uint32_t nbuckets, double p);

#endif
