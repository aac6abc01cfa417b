/* Aggregations: count by key, hist, latency, computed where the probe runs
 * when the engine can, otherwise from events. This header is where to start;
 * the pieces are:
 *
 *   agg/agg.h          the options (what a command aggregates) and the
 *                      geometry: a site's key arguments, its value, the
 *                      buckets (geometry.c)
 *   agg/agg_shared.h   the key bytes, buckets and per-row values the tracer
 *                      shares with the code that runs at the probe (plain C:
 *                      compiled freestanding for the agent and for BPF)
 *   agg/table.h        the tracer's table of rows: keys, merging, percentiles
 *   where the probe runs:
 *     engine/inject/agg.c and agent/agent.c (agg_*): a lock-free key
 *       directory and per-thread values in the shared memory
 *     engine/bpf/agg.c and uscope.bpf.c: per-CPU BPF hash maps
 *     an engine says what it takes through usc_engine_ops.agg_place and
 *     hands its rows over with agg_read (engine/engine.h)
 *   session/agg.c      which sites aggregate in place, and collecting their
 *                      rows for the sinks at each report
 *   sink/aggsink.c     what count (sink/count.c), hist (sink/hist.c) and
 *                      latency (sink/latency.c) share: rows by probe label
 *                      and key, fed by both the engines' rows and events */
#ifndef USC_AGG_AGG_H
#define USC_AGG_AGG_H

#include <stdbool.h>
#include <stdint.h>

#include "agg/agg_shared.h"

struct usc_site;

/* What an aggregating command computes (count by key, hist, latency).
 * Keys are a probe's fetch arguments written in it: for count all of them,
 * for hist all but the last (the value), for latency the entry's. */
enum usc_agg_kind {
	USC_AGG_NONE,		/* events (trace, flow), or hit counts without keys */
	USC_AGG_COUNT,
	USC_AGG_HIST,
	USC_AGG_LATENCY,
};

struct usc_agg_opts {
	enum usc_agg_kind kind;
	bool linear;			/* hist --linear MIN,MAX,STEP */
	int64_t lmin, lmax, lstep;
	uint32_t str_max;		/* bytes of a string in a key (AGG_STR_DEFAULT) */
	uint32_t max_rows;		/* keys a table holds; beyond, counted as lost */
	bool per_call;			/* latency --per-call: events, paired in the sink */
	uint32_t unit_ns;		/* latency: ns of its unit (1, 1000, 1000000) */
};

/* A row aggregated where the probe runs: the site, the key's bytes
 * (agg/agg_shared.h), its statistics and buckets (agg_nbuckets). */
typedef int (*usc_agg_fn)(void *ctx, const struct usc_site *site, const uint8_t *key,
			  uint32_t keylen, const struct agg_stats *st, const uint64_t *buckets);

/* The key arguments of a site under the aggregation a: args
 * [*first, *first + *n), and the value's index (-1: none: a count, or the
 * latency's duration). */
void agg_layout(const struct usc_agg_opts *a, const struct usc_site *site, unsigned *first,
		unsigned *n, int *value);
/* A row's key as an engine keeps it, its stacks made the session's: each
 * AGG_K_STACK slot's engine id (v, with pad: the engine's word beside it)
 * becomes id(ctx, pad, v), the stack's interned id (0: unknown, the slot
 * then a fault). */
void agg_key_stacks(const struct usc_agg_opts *a, const struct usc_site *site, uint8_t *key,
		    uint32_t keylen, uint64_t (*id)(void *ctx, uint32_t pad, uint64_t v),
		    void *ctx);
/* Can an engine that takes max_args arguments and keys of key_max bytes
 * aggregate the site where the probe runs? */
bool agg_fits(const struct usc_agg_opts *a, const struct usc_site *site, unsigned max_args,
	      uint32_t key_max);
/* Buckets of a row's histogram (0: none). */
uint32_t agg_nbuckets(const struct usc_agg_opts *a);
/* The bucket of a value. */
uint32_t agg_bucket(const struct usc_agg_opts *a, int64_t v);

#endif
