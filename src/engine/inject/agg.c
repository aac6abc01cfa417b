/* The inject engine's aggregation where the probe runs: the geometry of the
 * key directory and the threads' values in the shared memory, what the
 * agent is told per site (its role, its key's layout, its filter), and
 * reading the rows back (agent/agent.c does the rest, inject_shared.h has
 * the layout). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/log.h"
#include "engine/inject/inject_int.h"
#include "agg/table.h"

bool inj_filters(struct usc_engine *e, const struct usc_site *site)
{
	(void)e;
	(void)site;
	return true;	/* the agent filters records and aggregations alike */
}

int inj_agg_place(struct usc_engine *e, const struct usc_site *site)
{
	return agg_fits(&e->ctx->set->agg, site, INJ_MAX_ARGS, AGG_KEY_MAX) ? 0 : -ENOTSUP;
}

/* Every site that aggregates, its key length; the largest. */
static uint32_t max_keylen(const struct inj *j)
{
	const struct usc_engine_ctx *s = j->base.ctx;
	uint32_t max = 8;

	for (size_t i = 0; i < j->base.nsites; i++) {
		const struct usc_site *site = j->base.sites[i];
		unsigned first, n;
		int value;
		uint32_t len;

		if (!site->agg_in_place)
			continue;
		agg_layout(&s->set->agg, site, &first, &n, &value);
		len = agg_key_len(site->args, first, n, s->set->agg.str_max);
		if (len > max)
			max = len;
	}
	return max;
}

void inj_agg_geometry(struct inj *j)
{
	const struct usc_engine_ctx *s = j->base.ctx;
	struct inj_agg_geom *g = &j->agg;
	bool any = false;

	memset(g, 0, sizeof(*g));
	for (size_t i = 0; i < j->base.nsites && !any; i++)
		any = j->base.sites[i]->agg_in_place;
	if (!any)
		return;
	g->kind = (uint32_t)s->set->agg.kind;
	g->max_rows = s->set->agg.max_rows;
	g->nslots = 64;
	while (g->nslots < 2 * g->max_rows)
		g->nslots *= 2;
	g->dir_size = (uint32_t)sizeof(struct inj_dir) + ((max_keylen(j) + 7) & ~7u);
	g->nbuckets = agg_nbuckets(&s->set->agg);
	g->val_size = (uint32_t)sizeof(struct agg_val) + 8 * g->nbuckets;
}

uint64_t inj_agg_reserve(struct inj *j, uint64_t off, struct inj_ctl *c)
{
	const struct inj_agg_geom *g = &j->agg;

	if (!g->kind)
		return off;
	off = (off + 4095) & ~4095ULL;
	c->agg_dir_off = off;
	off += (uint64_t)g->nslots * g->dir_size;
	off = (off + 4095) & ~4095ULL;
	c->agg_touched_off = off;
	off += (uint64_t)INJ_NSLOTS * ((g->max_rows + 63) / 64) * sizeof(uint64_t);
	off = (off + 63) & ~63ULL;
	c->agg_lat_off = off;
	off += (uint64_t)INJ_NSLOTS * sizeof(struct inj_lat);
	off = (off + 4095) & ~4095ULL;
	c->agg_scratch_off = off;
	off += (uint64_t)INJ_NSLOTS * INJ_SCRATCH;
	off = (off + 4095) & ~4095ULL;
	c->agg_vals_off = off;
	off += (uint64_t)INJ_NSLOTS * g->max_rows * g->val_size;
	return (off + 4095) & ~4095ULL;
}

/* The TSC's rate, measured over at least 10 ms (the engine's first clock
 * sample was taken when it was created), as the agent's multiplier: units
 * of the latency (ns, us, ms) per tick, times 2^32. */
static uint64_t tsc_mult(struct inj *j)
{
	const struct tsc_clock *k = j->clock;
	const struct usc_engine_ctx *s = j->base.ctx;
	uint64_t t0, n0, t1, n1;

	for (int tries = 0; tries < 3; tries++) {
		if (k->n >= 2) {
			t0 = k->s[0].tsc;
			n0 = k->s[0].ns;
			t1 = k->s[k->n - 1].tsc;
			n1 = k->s[k->n - 1].ns;
			if (n1 - n0 >= 10000000ULL && t1 > t0)
				return (uint64_t)((double)(n1 - n0) / (double)(t1 - t0) /
						  (double)s->set->agg.unit_ns * 4294967296.0);
		}
		struct timespec ts = {0, 10000000L};

		nanosleep(&ts, NULL);
		tsc_sample(j->clock, 1);
	}
	return 0;
}

void inj_agg_ctl(struct inj *j, struct inj_ctl *c)
{
	const struct inj_agg_geom *g = &j->agg;
	const struct usc_agg_opts *a = &j->base.ctx->set->agg;

	if (!g->kind)
		return;
	c->agg_kind = g->kind;
	c->agg_nslots = g->nslots;
	c->agg_max_rows = g->max_rows;
	c->agg_used = 0;
	c->agg_dir_size = g->dir_size;
	c->agg_val_size = g->val_size;
	c->agg_nbuckets = g->nbuckets;
	c->agg_linear = a->kind == USC_AGG_HIST && a->linear;
	c->agg_lmin = a->lmin;
	c->agg_lmax = a->lmax;
	c->agg_lstep = a->lstep;
	c->agg_epoch = 1;
	if (g->kind == USC_AGG_LATENCY) {
		if (!j->tsc_mult)
			j->tsc_mult = tsc_mult(j);
		c->tsc_mult = j->tsc_mult;
	}
}

/* agent_fast's addresses in the process whose shared memory is at remote. */
static void fast_addresses(const struct inj_agg_geom *g, const struct inj_ctl *c, uint64_t remote,
			   struct inj_site *d)
{
	uint64_t h = 0x9e3779b97f4a7c15ULL * (d->index + 1);

	d->fast.self = c->self;
	d->fast.slots = remote + c->slots_off;
	d->fast.counts = remote + c->counts_off + INJ_NCOUNTS * 8 * (uint64_t)d->index;
	d->fast.count_stride = INJ_NCOUNTS * 8 * (uint64_t)c->nsites;
	d->fast.dir = remote + c->agg_dir_off;
	d->fast.vals = remote + c->agg_vals_off;
	d->fast.slot_vals = (uint64_t)g->max_rows * g->val_size;
	d->fast.touched = remote + c->agg_touched_off;
	d->fast.slot_words = 8 * (uint64_t)((g->max_rows + 63) / 64);
	d->fast.lat = remote + c->agg_lat_off;
	/* agg_hash's first step, over the word AGG_K_INT */
	h = (h ^ AGG_K_INT) * 0xff51afd7ed558ccdULL;
	d->fast.hash0 = h ^ (h >> 32);
}

void inj_agg_site(struct inj *j, const struct usc_site *site, struct inj_site *d,
		  const struct inj_ctl *c, uint64_t remote)
{
	const struct usc_engine_ctx *s = j->base.ctx;
	unsigned first, n;
	int value;

	d->filter = site->filter;
	for (unsigned a = 0; a < d->nargs; a++) {
		const struct usc_fetcharg *fa = &site->args[a];

		d->arg_size[a] = (uint8_t)agg_arg_size(fa);
		d->arg_sign[a] = fetch_type_is_signed(fa->type);
		d->arg_str[a] = fetch_type_is_string(fa->type);
	}
	d->agg = INJ_AGG_NONE;
	if (!site->agg_in_place || !j->agg.kind)
		return;
	agg_layout(&s->set->agg, site, &first, &n, &value);
	d->agg_nkey = n;
	d->agg_value = value;
	d->agg_str_max = s->set->agg.str_max;
	d->agg_keylen = agg_key_len(site->args, first, n, s->set->agg.str_max);
	if (!d->agg_keylen)
		d->agg_keylen = 8;	/* no key: one word of zeros */
	d->agg_func = site->agg_func >= 0 ? (uint32_t)site->agg_func : 0;
	if (s->set->agg.kind != USC_AGG_LATENCY)
		d->agg = INJ_AGG_ROW;
	else
		d->agg = site->is_return ? INJ_AGG_RETURN : INJ_AGG_ENTRY;
	/* the fast path (agent_fast): no filter, a plain site (no tail call to
	 * follow), at most two arguments, each a register as it is (not the
	 * stack pointer: the trampoline has moved it) */
	d->agg_fast = !site->filter.n && d->kind == INJ_PLAIN && d->nargs <= 2 &&
		      n + (value >= 0) == d->nargs;
	for (unsigned a = 0; a < d->nargs && d->agg_fast; a++)
		d->agg_fast = d->reg_only[a] < USC_REG_NR && d->reg_only[a] != USC_REG_SP &&
			      !d->arg_str[a];
	if (d->agg_fast)
		fast_addresses(&j->agg, c, remote, d);
}

void inj_rec_fast_site(struct inj *j, struct inj_site *d, const struct inj_ctl *c, uint64_t remote)
{
	/* what agent_fast's record holds: two words, integers taken from
	 * registers as they are (not the stack pointer: the trampoline has
	 * moved it), or at a return where it returns to and one such integer;
	 * a site that neither aggregates, follows objects nor follows tail
	 * calls, with nothing that record() would add (strings, stacks) and no
	 * filter */
	d->rec_fast = d->agg == INJ_AGG_NONE && !d->obj && !d->filter.n && d->kind == INJ_PLAIN &&
		      !d->nstr && !d->stack_need && d->nargs + (d->ret_site ? 1 : 0) <= 2;
	for (unsigned a = 0; a < d->nargs && d->rec_fast; a++)
		d->rec_fast = d->reg_only[a] < USC_REG_NR && d->reg_only[a] != USC_REG_SP &&
			      !d->arg_str[a];
	if (d->rec_fast)
		fast_addresses(&j->agg, c, remote, d);
}

void inj_agg_reclaim(struct inj_shm *m, uint32_t slot)
{
	if (m->ctl->agg_kind)
		((struct inj_lat *)((char *)m->map + m->ctl->agg_lat_off))[slot].n = 0;
}

/* ---- reading ------------------------------------------------------------ */

/* An image's rows, summed over its threads, into t (by site and key: the
 * images of one engine add up). Nothing read is trusted. */
static int read_image(struct inj *j, struct inj_image *img, struct agg_table *t, uint64_t *tmp)
{
	struct inj_shm *m = &img->shm;
	const struct inj_ctl *c = m->ctl;
	const struct inj_agg_geom *g = &j->agg;
	const char *dir = (const char *)m->map + c->agg_dir_off;
	const uint64_t *touched = (const uint64_t *)((const char *)m->map + c->agg_touched_off);
	const uint32_t words = (g->max_rows + 63) / 64;
	uint64_t ep = c->agg_epoch;
	struct agg_row **rows;
	int ret = 0;

	/* the rows, by number */
	rows = calloc(g->max_rows, sizeof(*rows));
	if (!rows)
		return -ENOMEM;
	for (uint32_t at = 0; at < g->nslots; at++) {
		const struct inj_dir *e = (const void *)(dir + (uint64_t)at * g->dir_size);
		const uint8_t *key = (const uint8_t *)(e + 1);
		uint8_t mine[AGG_KEY_MAX];
		struct agg_row *r;

		if (__atomic_load_n(&e->state, __ATOMIC_ACQUIRE) != INJ_DIR_READY ||
		    e->site >= j->base.nsites || e->row >= g->max_rows ||
		    e->keylen > g->dir_size - sizeof(*e) || e->keylen > AGG_KEY_MAX)
			continue;
		if (j->stk.nents && site_has_ustack(j->base.sites[e->site])) {
			/* the image's ids of its stacks, made the session's */
			memcpy(mine, key, e->keylen);
			inj_stk_key(j, img, j->base.sites[e->site], mine, e->keylen);
			key = mine;
		}
		r = agg_table_get(t, e->site, key, e->keylen);
		if (!r) {
			ret = -ENOMEM;
			break;
		}
		r->site = j->base.sites[e->site];
		rows[e->row] = r;
	}
	/* each thread's values of the rows it touched */
	for (uint32_t sl = 0; sl < INJ_NSLOTS && !ret; sl++) {
		const uint64_t *tw = touched + (uint64_t)sl * words;

		for (uint32_t w = 0; w < words; w++) {
			uint64_t bits = tw[w];

			while (bits) {
				uint32_t row = w * 64 + (uint32_t)__builtin_ctzll(bits);
				const struct agg_val *a;
				struct agg_stats st;

				bits &= bits - 1;
				if (row >= g->max_rows || !rows[row])
					continue;
				a = (const void *)((const char *)m->map + c->agg_vals_off +
						   ((uint64_t)sl * g->max_rows + row) * g->val_size);
				st.count = a->count;
				st.sum = a->sum;
				/* min and max only of this epoch's hits (the rest is older) */
				st.min = a->ep == ep ? a->min : INT64_MAX;
				st.max = a->ep == ep ? a->max : INT64_MIN;
				memcpy(tmp, a + 1, 8 * (size_t)g->nbuckets);
				agg_row_sum(rows[row], &st, tmp, g->nbuckets);
			}
		}
	}
	free(rows);
	/* min and max start again */
	__atomic_store_n(&m->ctl->agg_epoch, ep + 1, __ATOMIC_RELEASE);
	return ret;
}

int inj_agg_read(struct usc_engine *e, usc_agg_fn fn, void *ctx)
{
	struct inj *j = inj_of(e);
	struct agg_table t;
	uint64_t *tmp;
	int ret = 0;

	if (!j->agg.kind)
		return 0;
	if (agg_table_init(&t, j->agg.nbuckets))
		return -ENOMEM;
	tmp = calloc(j->agg.nbuckets + 1, sizeof(*tmp));
	if (!tmp) {
		agg_table_free(&t);
		return -ENOMEM;
	}
	for (size_t i = 0; i < j->nimages && !ret; i++)
		if (j->images[i]->shm.map && j->images[i]->shm.ctl->agg_kind)
			ret = read_image(j, j->images[i], &t, tmp);
	for (size_t i = 0; i < t.n && !ret; i++) {
		struct agg_row *r = t.rows[i];

		unsigned first, n;
		int value;
		uint32_t len;

		if (!r->st.count)
			continue;
		/* the key as long as the site's own (a key of none is a word of
		 * zeros here): the sinks' rows by event have that length */
		agg_layout(&e->ctx->set->agg, r->site, &first, &n, &value);
		len = agg_key_len(r->site->args, first, n, e->ctx->set->agg.str_max);
		ret = fn(ctx, r->site, r->key, len < r->keylen ? len : r->keylen, &r->st,
			 r->buckets);
	}
	free(tmp);
	agg_table_free(&t);
	return ret;
}
