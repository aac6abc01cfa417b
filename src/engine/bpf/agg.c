/* The bpf engine's filters and aggregation in the kernel: the per-CPU hash
 * map's geometry (its key and value sizes, its entries: --max-keys), what
 * each site is told (its filter, its role, its key's layout), and the rows
 * read back and summed over the CPUs (uscope.bpf.c does the rest). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "core/log.h"
#include "engine/bpf/bpf_int.h"
#include "agg/table.h"
#include "uscope.skel.h"

bool bpfeng_filters(struct usc_engine *e, const struct usc_site *site)
{
	(void)e;
	(void)site;
	return true;	/* the program filters records and aggregations alike */
}

/* A $pystack key (without $ustack, whose hidden Python frames uscope
 * splices in) is counted in the kernel by its frames' hash, as a walked
 * $ustack is: agg_fits leaves stacks to the engines that count them. */
static bool pystack_fits(const struct usc_agg_opts *a, const struct usc_site *site)
{
	unsigned first, n;
	int value;

	if (a->kind == USC_AGG_NONE || site->nargs > BPFENG_MAX_ARGS - 1 ||
	    !site_has_pystack(site) || site_has_ustack(site))
		return false;
	agg_layout(a, site, &first, &n, &value);
	return first == 0 && agg_key_len(site->args, first, n, a->str_max) <= BPFENG_KEY_MAX;
}

int bpfeng_agg_place(struct usc_engine *e, const struct usc_site *site)
{
	return agg_fits(&e->ctx->set->agg, site, BPFENG_MAX_ARGS - 1, BPFENG_KEY_MAX) ||
	       pystack_fits(&e->ctx->set->agg, site) ? 0 : -ENOTSUP;
}

int bpfeng_agg_prepare(struct bpfeng *u)
{
	const struct usc_engine_ctx *s = u->base.ctx;
	const struct usc_agg_opts *a = &s->set->agg;
	struct uscope_bpf *skel = u->skel;
	uint32_t keylen = 8;

	u->agg = false;
	for (size_t i = 0; i < u->base.nsites; i++) {
		const struct usc_site *site = u->base.sites[i];
		unsigned first, n;
		int value;
		uint32_t len;

		if (!site->agg_in_place)
			continue;
		u->agg = true;
		agg_layout(&s->set->agg, site, &first, &n, &value);
		len = agg_key_len(site->args, first, n, a->str_max);
		if (len > keylen)
			keylen = len;
	}
	u->agg_keylen = keylen;
	u->agg_nbuckets = u->agg ? agg_nbuckets(a) : 0;
	skel->rodata->agg_nbuckets = u->agg_nbuckets;
	skel->rodata->agg_linear = a->kind == USC_AGG_HIST && a->linear;
	skel->rodata->agg_lmin = a->lmin;
	skel->rodata->agg_lmax = a->lmax;
	skel->rodata->agg_lstep = a->lstep > 0 ? a->lstep : 1;
	skel->rodata->agg_unit_ns = a->unit_ns ? a->unit_ns : 1;
	if (!u->agg)
		return 0;
	if (bpf_map__set_key_size(skel->maps.agg, 8 + keylen) ||
	    bpf_map__set_value_size(skel->maps.agg,
				    (uint32_t)sizeof(struct agg_val) + 8 * u->agg_nbuckets) ||
	    bpf_map__set_max_entries(skel->maps.agg, a->max_rows))
		return -EINVAL;
	return 0;
}

void bpfeng_agg_site(struct bpfeng *u, const struct usc_site *site, struct bpfeng_site *us)
{
	const struct usc_engine_ctx *s = u->base.ctx;
	unsigned first, n;
	int value;

	memcpy(&us->filter, &site->filter, sizeof(us->filter));
	for (unsigned a = 0; a < site->nargs && a < BPFENG_MAX_ARGS; a++) {
		us->arg_size[a] = (unsigned char)agg_arg_size(&site->args[a]);
		us->arg_sign[a] = fetch_type_is_signed(site->args[a].type);
		us->arg_str[a] = fetch_type_is_string(site->args[a].type);
	}
	us->agg = BPFENG_AGG_NONE;
	if (!site->agg_in_place || !u->agg)
		return;
	agg_layout(&s->set->agg, site, &first, &n, &value);
	us->agg_nkey = n;
	us->agg_value = value;
	us->agg_str_max = s->set->agg.str_max;
	us->agg_func = site->agg_func >= 0 ? (unsigned)site->agg_func : 0;
	if (s->set->agg.kind != USC_AGG_LATENCY)
		us->agg = BPFENG_AGG_ROW;
	else
		us->agg = site->is_return ? BPFENG_AGG_RETURN : BPFENG_AGG_ENTRY;
}

int bpfeng_agg_read(struct usc_engine *e, usc_agg_fn fn, void *ctx)
{
	struct bpfeng *u = bpfeng_of(e);
	int ncpu = libbpf_num_possible_cpus(), fd, ret = 0;
	size_t ksize = 8 + u->agg_keylen;
	size_t vsize = (sizeof(struct agg_val) + 8 * u->agg_nbuckets + 7) & ~7UL;
	uint8_t *key = NULL, *next = NULL, skey[BPFENG_KEY_MAX];
	char *vals = NULL;
	uint64_t *sum = NULL;
	uint64_t ep;
	struct agg_table t;

	if (!u->agg || !u->skel || ncpu <= 0)
		return 0;
	if (agg_table_init(&t, u->agg_nbuckets))
		return -ENOMEM;
	key = calloc(1, ksize);
	next = calloc(1, ksize);
	vals = calloc((size_t)ncpu, vsize);
	sum = calloc(u->agg_nbuckets + 1, sizeof(*sum));
	if (!key || !next || !vals || !sum) {
		ret = -ENOMEM;
		goto out;
	}
	fd = bpf_map__fd(u->skel->maps.agg);
	ep = u->skel->data->agg_epoch;
	/* every key, each CPU's values summed */
	for (void *prev = NULL; bpf_map_get_next_key(fd, prev, next) == 0; prev = key) {
		const struct bpfeng_agg_key *k = (const void *)next;
		struct agg_row *r;

		memcpy(key, next, ksize);
		if (k->site >= e->nsites || bpf_map_lookup_elem(fd, next, vals))
			continue;	/* gone since, or not a site's */
		if ((u->stk && site_has_ustack(e->sites[k->site])) ||
		    site_has_pystack(e->sites[k->site])) {
			/* the program's stacks, the session's ids: in a copy */
			memcpy(skey, k->key, u->agg_keylen);
			bpfeng_stk_key(u, e->sites[k->site], skey, u->agg_keylen);
			r = agg_table_get(&t, k->site, skey, u->agg_keylen);
		} else {
			r = agg_table_get(&t, k->site, k->key, u->agg_keylen);
		}
		if (!r) {
			ret = -ENOMEM;
			goto out;
		}
		r->site = e->sites[k->site];
		for (int c = 0; c < ncpu; c++) {
			const struct agg_val *a = (const void *)(vals + (size_t)c * vsize);
			struct agg_stats st = {a->count, a->sum, a->ep == ep ? a->min : INT64_MAX,
					       a->ep == ep ? a->max : INT64_MIN};

			memcpy(sum, a + 1, 8 * u->agg_nbuckets);
			agg_row_sum(r, &st, sum, u->agg_nbuckets);
		}
	}
	/* min and max start again */
	u->skel->data->agg_epoch = ep + 1;
	for (size_t i = 0; i < t.n && !ret; i++) {
		struct agg_row *r = t.rows[i];
		unsigned first, n;
		int value;

		if (!r->st.count)
			continue;
		/* the key as long as the site's own: the sinks' rows by event
		 * have that length */
		agg_layout(&e->ctx->set->agg, r->site, &first, &n, &value);
		ret = fn(ctx, r->site, r->key,
			 agg_key_len(r->site->args, first, n, e->ctx->set->agg.str_max),
			 &r->st, r->buckets);
	}
out:
	free(key);
	free(next);
	free(vals);
	free(sum);
	agg_table_free(&t);
	return ret;
}
