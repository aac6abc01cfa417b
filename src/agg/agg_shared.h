/* Aggregations by key: what the engines that aggregate where the probe runs
 * (the inject agent, the bpf program) and the tracer (from events, and to
 * read those) share. Plain C types only: compiled freestanding and for BPF
 * too.
 *
 * A key is the values of a probe's key arguments, laid out in AGG_KEY_MAX
 * bytes: one 16-byte slot an integer (and a fault), a string's slot its
 * header then str_max bytes, NUL-padded (cut, and said so, when longer).
 * Equal values give equal bytes, so a row is found by its key's bytes.
 *
 * A histogram's buckets: for log2, bucket 0 holds the negative values, 1
 * the zeros, then each power of two [2^k, 2^(k+1)) four quarter-octave
 * buckets (2 + 4k ... 2 + 4k + 3), so percentiles come within a quarter of
 * an octave; output shows them by power of two, as bpftrace does. For
 * linear, bucket 0 holds what is below min, then one bucket a step, the last
 * what is at or above max. */
#ifndef USC_AGG_AGG_SHARED_H
#define USC_AGG_AGG_SHARED_H

#ifdef __bpf__
#include <linux/types.h>
#else
#include <stdint.h>
#endif

#define AGG_KEY_MAX 256		/* bytes of a key */
#define AGG_STR_DEFAULT 64	/* bytes of a string in a key */
#define AGG_ROWS_DEFAULT 4096	/* keys a table holds (bpftrace's map default) */
#define AGG_LOG_BUCKETS 258
#define AGG_LINEAR_MAX 1024	/* buckets of a linear histogram, at most */

enum agg_slot_kind {
	AGG_K_INT = 1,
	AGG_K_STR = 2,
	AGG_K_FAULT = 3,	/* the value could not be read */
	AGG_K_NULL = 4,		/* a string behind a NULL pointer */
	AGG_K_STACK = 5,	/* a stack: v is its id (stack_intern), the
				 * tracer's: stacks are unwound there */
};

/* The header of a key slot; an integer's value follows it (8 bytes), a
 * string's bytes (str_max). */
struct agg_slot {
	uint8_t kind;		/* enum agg_slot_kind */
	uint8_t cut;		/* a string longer than str_max: cut */
	uint16_t len;		/* a string's length (not past str_max) */
	uint32_t pad;
	uint64_t v;		/* an integer */
};

/* The statistics of a row; the buckets follow. */
struct agg_stats {
	uint64_t count;
	int64_t sum, min, max;
};

/* A row's values where the probe runs (a thread's in the inject agent, a
 * CPU's in the bpf program); its buckets follow. min and max are of the
 * epoch ep: the reader moves the epoch on as it reads, so they start again
 * for each report. */
struct agg_val {
	uint64_t count;
	int64_t sum, min, max;
	uint64_t ep;
};

/* How a count or a sum is added: plain in the agent (each thread its own
 * values), atomic in the bpf program (a sleepable program is preemptible).
 * The includer may define it before the first inclusion. */
#ifndef AGG_ADD
#define AGG_ADD(p, x) (*(p) += (x))
#endif

/* One value into a's count, sum, min and max (epoch ep); the bucket is the
 * caller's (where it is bounded differs). */
static inline void agg_val_add(struct agg_val *a, int64_t v, uint64_t ep)
{
	if (a->ep != ep) {
		a->ep = ep;
		a->min = a->max = v;
	} else {
		if (v < a->min)
			a->min = v;
		if (v > a->max)
			a->max = v;
	}
	AGG_ADD(&a->count, 1);
	AGG_ADD(&a->sum, v);
}

static inline uint32_t agg_msb(uint64_t v)
{
#if !defined(__bpf__) && defined(__GNUC__)
	return 63 - (uint32_t)__builtin_clzll(v | 1);	/* bsr: the agent's hot path */
#else
	uint32_t n = 0;

	if (v >> 32) { n += 32; v >>= 32; }
	if (v >> 16) { n += 16; v >>= 16; }
	if (v >> 8) { n += 8; v >>= 8; }
	if (v >> 4) { n += 4; v >>= 4; }
	if (v >> 2) { n += 2; v >>= 2; }
	if (v >> 1) { n += 1; }
	return n;
#endif
}

static inline uint32_t agg_log_bucket(int64_t v)
{
	uint64_t u = (uint64_t)v;
	uint32_t m, sub;

	if (v < 0)
		return 0;
	if (v == 0)
		return 1;
	m = agg_msb(u);
	sub = m >= 2 ? (uint32_t)(u >> (m - 2)) & 3 : (uint32_t)(u << (2 - m)) & 3;
	return 2 + 4 * m + sub;
}

/* The smallest value of a log2 bucket (0: negatives start at INT64_MIN). */
static inline int64_t agg_log_low(uint32_t b)
{
	uint32_t m, sub;

	if (b <= 1)
		return b == 0 ? (int64_t)(-9223372036854775807LL - 1) : 0;
	m = (b - 2) / 4;
	sub = (b - 2) % 4;
	if (m < 2)
		return (int64_t)(((uint64_t)(4 + sub) >> (2 - m)));
	return (int64_t)((4ULL + sub) << (m - 2));
}

static inline uint32_t agg_linear_bucket(int64_t v, int64_t min, int64_t max, int64_t step,
					 uint32_t nb)
{
	if (v < min)
		return 0;
	if (v >= max || step <= 0)
		return nb - 1;
	return 1 + (uint32_t)((uint64_t)(v - min) / (uint64_t)step);	/* BPF has no signed div */
}

/* A key's hash, a word at a time (keys are whole words), with the site:
 * where the agent looks for its row. */
static inline uint64_t agg_hash(uint32_t site, const uint64_t *w, uint32_t nwords)
{
	uint64_t h = 0x9e3779b97f4a7c15ULL * (site + 1);

	for (uint32_t i = 0; i < nwords && i < AGG_KEY_MAX / 8; i++) {
		h = (h ^ w[i]) * 0xff51afd7ed558ccdULL;
		h ^= h >> 32;
	}
	return h ? h : 1;
}

/* An integer argument's value as its type means it: its size's bits (0:
 * all 8 bytes), sign-extended when signed. */
static inline int64_t agg_value_of(uint64_t u, uint32_t size, uint32_t sign)
{
	if (size && size < 8) {
		u &= (1ULL << (8 * size)) - 1;
		if (sign && (u >> (8 * size - 1)))
			u |= ~0ULL << (8 * size);
	}
	return (int64_t)u;
}

#endif
