/* The geometry of an aggregation: which of a site's arguments make its key
 * and which is the value, whether a key fits an engine's table, and the
 * buckets of a histogram (agg.h). */
#include <stdbool.h>
#include <stdint.h>

#include "agg/agg.h"
#include "agg/table.h"
#include "resolve/resolve.h"

void agg_layout(const struct usc_agg_opts *a, const struct usc_site *site, unsigned *first,
		    unsigned *n, int *value)
{
	unsigned shown = probe_shown_args(site->args, site->nargs);

	*first = 0;
	*n = shown;
	*value = -1;
	switch (a->kind) {
	case USC_AGG_HIST:
		if (shown) {
			*n = shown - 1;
			*value = (int)shown - 1;
		}
		break;
	case USC_AGG_LATENCY:
		if (site->is_return)
			*n = 0;		/* the key is its entry's */
		break;
	default:
		break;
	}
}

bool agg_fits(const struct usc_agg_opts *a, const struct usc_site *site, unsigned max_args,
		  uint32_t key_max)
{
	unsigned first, n;
	int value;

	if (a->kind == USC_AGG_NONE || site->nargs > max_args)
		return false;
	/* a stack copied is unwound by the tracer (src/stack/), Python frames
	 * named there (src/python/): its events are aggregated there, each
	 * distinct stack a row; a walked one is counted where the probe runs,
	 * by the engine's id of it */
	if (site_copies_ustack(site) || site_has_pystack(site))
		return false;
	agg_layout(a, site, &first, &n, &value);
	return first == 0 && agg_key_len(site->args, first, n, a->str_max) <= key_max;
}

uint32_t agg_nbuckets(const struct usc_agg_opts *a)
{
	if (a->kind == USC_AGG_LATENCY || (a->kind == USC_AGG_HIST && !a->linear))
		return AGG_LOG_BUCKETS;
	if (a->kind == USC_AGG_HIST)
		return (uint32_t)((a->lmax - a->lmin + a->lstep - 1) / a->lstep) + 2;
	return 0;
}

uint32_t agg_bucket(const struct usc_agg_opts *a, int64_t v)
{
	if (a->kind == USC_AGG_HIST && a->linear)
		return agg_linear_bucket(v, a->lmin, a->lmax, a->lstep, agg_nbuckets(a));
	return agg_log_bucket(v);
}

void agg_key_stacks(const struct usc_agg_opts *a, const struct usc_site *site, uint8_t *key,
		    uint32_t keylen, uint64_t (*id)(void *ctx, uint32_t pad, uint64_t v),
		    void *ctx)
{
	unsigned first, n;
	uint32_t at = 0;
	int value;

	agg_layout(a, site, &first, &n, &value);
	for (unsigned i = first; i < first + n && at + sizeof(struct agg_slot) <= keylen; i++) {
		struct agg_slot *sl = (struct agg_slot *)(key + at);
		bool str = fetch_type_is_string(site->args[i].type);

		at += str ? (uint32_t)(8 + ((a->str_max + 7) & ~7u)) : sizeof(struct agg_slot);
		if (sl->kind != AGG_K_STACK)
			continue;
		sl->v = id(ctx, sl->pad, sl->v);
		sl->pad = 0;
		if (!sl->v)
			sl->kind = AGG_K_FAULT;
	}
}
