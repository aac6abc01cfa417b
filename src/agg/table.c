/* A table of aggregated rows: see table.h. */
#include "agg/table.h"
#include "core/grow.h"
#include "resolve/resolve.h"
#include "stack/stack.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int agg_table_init(struct agg_table *t, uint32_t nbuckets)
{
	memset(t, 0, sizeof(*t));
	t->nbuckets = nbuckets;
	t->nslots = 1024;
	t->slots = calloc(t->nslots, sizeof(*t->slots));
	return t->slots ? 0 : -ENOMEM;
}

void agg_table_free(struct agg_table *t)
{
	for (size_t i = 0; i < t->n; i++) {
		free(t->rows[i]->buckets);
		free(t->rows[i]);
	}
	free(t->rows);
	free(t->slots);
	memset(t, 0, sizeof(*t));
}

void agg_table_clear(struct agg_table *t)
{
	for (size_t i = 0; i < t->n; i++) {
		struct agg_row *r = t->rows[i];

		memset(&r->st, 0, sizeof(r->st));
		if (r->buckets)
			memset(r->buckets, 0, t->nbuckets * sizeof(*r->buckets));
	}
}

static uint64_t row_hash(uint64_t id, const uint8_t *key, uint32_t keylen)
{
	uint64_t h = 0xcbf29ce484222325ULL ^ (id * 0x9e3779b97f4a7c15ULL);

	for (uint32_t i = 0; i < keylen; i++)
		h = (h ^ key[i]) * 0x100000001b3ULL;
	return h;
}

static int grow(struct agg_table *t)
{
	size_t ns = t->nslots * 2, *s = calloc(ns, sizeof(*s));

	if (!s)
		return -ENOMEM;
	for (size_t i = 0; i < t->n; i++) {
		const struct agg_row *r = t->rows[i];
		size_t at = row_hash(r->id, r->key, r->keylen) & (ns - 1);

		while (s[at])
			at = (at + 1) & (ns - 1);
		s[at] = i + 1;
	}
	free(t->slots);
	t->slots = s;
	t->nslots = ns;
	return 0;
}

struct agg_row *agg_table_find(const struct agg_table *t, uint64_t id, const uint8_t *key,
			       uint32_t keylen)
{
	if (keylen > AGG_KEY_MAX)
		keylen = AGG_KEY_MAX;
	for (size_t at = row_hash(id, key, keylen) & (t->nslots - 1); t->slots[at];
	     at = (at + 1) & (t->nslots - 1)) {
		struct agg_row *r = t->rows[t->slots[at] - 1];

		if (r->keylen == keylen && r->id == id && (!keylen || !memcmp(r->key, key, keylen)))
			return r;
	}
	return NULL;
}

struct agg_row *agg_table_get(struct agg_table *t, uint64_t id, const uint8_t *key,
			      uint32_t keylen)
{
	size_t at;
	struct agg_row *r;

	if (keylen > AGG_KEY_MAX)
		keylen = AGG_KEY_MAX;
	if ((t->n + 1) * 2 > t->nslots && grow(t))
		return NULL;
	at = row_hash(id, key, keylen) & (t->nslots - 1);
	for (; t->slots[at]; at = (at + 1) & (t->nslots - 1)) {
		r = t->rows[t->slots[at] - 1];
		if (r->keylen == keylen && r->id == id && (!keylen || !memcmp(r->key, key, keylen)))
			return r;
	}
	if (core_reserve(t->rows, t->cap, t->n + 1, 64))
		return NULL;
	r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	if (t->nbuckets && !(r->buckets = calloc(t->nbuckets, sizeof(*r->buckets)))) {
		free(r);
		return NULL;
	}
	r->id = id;
	r->keylen = keylen;
	if (keylen)
		memcpy(r->key, key, keylen);
	t->rows[t->n++] = r;
	t->slots[at] = t->n;
	return r;
}

void agg_row_merge(struct agg_row *r, const struct agg_stats *st, const uint64_t *buckets,
		   uint32_t nbuckets)
{
	bool first = !r->st.count;

	if (!st->count)
		return;
	/* min > max: none known (a read raced the hits) */
	if (st->min <= st->max) {
		if (first || st->min < r->st.min)
			r->st.min = st->min;
		if (first || st->max > r->st.max)
			r->st.max = st->max;
	}
	r->st.count += st->count;
	r->st.sum = (int64_t)((uint64_t)r->st.sum + (uint64_t)st->sum);
	for (uint32_t b = 0; r->buckets && buckets && b < nbuckets; b++)
		r->buckets[b] += buckets[b];
}

void agg_row_sum(struct agg_row *r, const struct agg_stats *st, const uint64_t *buckets,
		 uint32_t nbuckets)
{
	if (!r->st.count) {
		r->st.min = INT64_MAX;
		r->st.max = INT64_MIN;
	}
	if (!st->count)
		return;
	if (st->min < r->st.min)
		r->st.min = st->min;
	if (st->max > r->st.max)
		r->st.max = st->max;
	r->st.count += st->count;
	r->st.sum = (int64_t)((uint64_t)r->st.sum + (uint64_t)st->sum);
	for (uint32_t b = 0; r->buckets && buckets && b < nbuckets; b++)
		r->buckets[b] += buckets[b];
}

unsigned agg_arg_size(const struct usc_fetcharg *a)
{
	return a->type == USC_T_BITFIELD ? 0 : fetch_type_size(a->type);
}

void agg_row_add(struct agg_row *r, int64_t v, uint32_t bucket)
{
	struct agg_stats st = {1, v, v, v};

	agg_row_merge(r, &st, NULL, 0);
	if (r->buckets)
		r->buckets[bucket]++;
}

/* The slot size of an argument of this type. */
static uint32_t slot_len(bool str, uint32_t str_max)
{
	return str ? (uint32_t)(8 + ((str_max + 7) & ~7u)) : (uint32_t)sizeof(struct agg_slot);
}

uint32_t agg_key_len(const struct usc_fetcharg *args, unsigned first, unsigned n,
		     uint32_t str_max)
{
	uint32_t len = 0;

	for (unsigned i = first; i < first + n; i++)
		len += slot_len(fetch_type_is_string(args[i].type), str_max);
	return len;
}

uint32_t agg_key_of(struct usc_cache *c, const struct usc_event *ev, unsigned first, unsigned n,
		    uint32_t str_max, uint8_t *key, bool *cut)
{
	uint32_t at = 0;

	*cut = false;
	memset(key, 0, AGG_KEY_MAX);
	for (unsigned i = first; i < first + n && i < ev->nvals; i++) {
		const struct usc_fetcharg *a = &ev->site->args[i];
		const struct usc_value *v = &ev->vals[i];
		bool str = fetch_type_is_string(a->type);
		uint32_t len = slot_len(str, str_max);
		struct agg_slot *s = (struct agg_slot *)(key + at);

		if (at + len > AGG_KEY_MAX)
			break;
		if (v->kind == USC_V_FAULT || a->unavailable || a->optimized_out) {
			s->kind = AGG_K_FAULT;
		} else if (v->kind == USC_V_NULL) {
			s->kind = AGG_K_NULL;
		} else if (v->kind == USC_V_STACK) {
			s->kind = AGG_K_STACK;
			s->v = c ? stack_intern(c, ev->pid, v->stack) : 0;
			if (!s->v)
				s->kind = AGG_K_FAULT;
		} else if (str && v->kind == USC_V_STR) {
			uint32_t l = v->len < str_max ? v->len : str_max;

			s->kind = AGG_K_STR;
			s->cut = v->len > str_max;
			s->len = (uint16_t)l;
			memcpy(key + at + 8, v->str, l);
			*cut |= s->cut;
		} else {
			s->kind = AGG_K_INT;
			s->v = (uint64_t)agg_value_of(v->u, agg_arg_size(a), 0);
		}
		at += len;
	}
	return at;
}

void agg_key_value(struct usc_cache *c, const uint8_t *key, uint32_t keylen,
		   const struct usc_fetcharg *args, unsigned first, unsigned i, uint32_t str_max,
		   struct usc_value *v, bool *cut, pid_t *pid)
{
	uint32_t at = 0;

	memset(v, 0, sizeof(*v));
	v->kind = USC_V_FAULT;
	*cut = false;
	for (unsigned k = 0; k < i; k++)
		at += slot_len(fetch_type_is_string(args[first + k].type), str_max);
	if (at + sizeof(struct agg_slot) > keylen)
		return;

	const struct agg_slot *s = (const struct agg_slot *)(key + at);

	if (s->kind == AGG_K_INT) {
		v->kind = USC_V_INT;
		v->u = s->v;
	} else if (s->kind == AGG_K_STR && at + 8 + s->len <= keylen) {
		v->kind = USC_V_STR;
		v->str = (const char *)key + at + 8;
		v->len = s->len;
		*cut = s->cut;
	} else if (s->kind == AGG_K_NULL) {
		v->kind = USC_V_NULL;
	} else if (s->kind == AGG_K_STACK && c) {
		v->stack = stack_interned(c, s->v, pid);
		v->kind = v->stack ? USC_V_STACK : USC_V_FAULT;
	}
}

int64_t agg_percentile(const struct agg_row *r, uint32_t nbuckets, double p)
{
	uint64_t want, seen = 0;

	if (!r->buckets || !r->st.count)
		return 0;
	want = (uint64_t)((double)r->st.count * p / 100.0 + 0.5);
	if (want < 1)
		want = 1;
	for (uint32_t b = 0; b < nbuckets; b++) {
		if (seen + r->buckets[b] >= want) {
			int64_t lo = agg_log_low(b), hi = b + 1 < nbuckets ? agg_log_low(b + 1) : lo;
			double f = (double)(want - seen) / (double)r->buckets[b];
			/* in double: hi - lo overflows near the top bucket */
			double v = (double)lo + ((double)hi - (double)lo) * f;

			/* never outside what was seen */
			if (v <= (double)r->st.min)
				return r->st.min;
			if (v >= (double)r->st.max)
				return r->st.max;
			return (int64_t)v;
		}
		seen += r->buckets[b];
	}
	return r->st.max;
}
