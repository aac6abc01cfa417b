/* Aggregations and filters in the session: which sites an engine
 * aggregates or filters where the probe runs, the layout of their keys, and
 * the events of the others filtered here (with the interpreter the agent
 * and the bpf program include: probe/filter_eval.h). */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "agg/table.h"
#include "session/session.h"
#include "session/session_int.h"
#include "sink/sink.h"

/* Latency: the sites of one function (its entry, its returns, the hidden
 * rets of its tail calls) share an id. */
static void latency_funcs(struct usc_session *s)
{
	int32_t next = 0;

	for (size_t i = 0; i < s->nsites; i++) {
		struct usc_site *a = &s->sites[i];

		/* functions only: USDT probes pair by name, from events */
		if (a->agg_func >= 0 || !a->func_vaddr || a->spec->loc_kind != USC_LOC_SYMBOL ||
		    a->spec->has_offset)
			continue;
		a->agg_func = next;
		for (size_t k = i + 1; k < s->nsites; k++)
			if (s->sites[k].agg_func < 0 && s->sites[k].func_vaddr == a->func_vaddr &&
			    s->sites[k].spec->loc_kind == USC_LOC_SYMBOL &&
			    !s->sites[k].spec->has_offset && !strcmp(s->sites[k].path, a->path))
				s->sites[k].agg_func = next;
		next++;
	}
}

/* Can the site's engine take it whole: filter, then aggregate? */
static bool in_place(struct usc_session *s, size_t i)
{
	const struct usc_site *site = &s->sites[i];
	const struct session_engine *se;

	if (site->hidden)
		return true;	/* goes with its tail call */
	if (s->place[i].engine < 0)
		return false;
	se = &s->engines[s->place[i].engine];
	if (site->filter.n && !site->filter_in_place)
		return false;
	/* a Go function's calls pair by goroutine (flow_ctx_of); the engines
	 * pair per thread: uscope pairs them from the events */
	if (s->set.agg.kind == USC_AGG_LATENCY && site_go_ctx(site))
		return false;
	return se->ops->agg_place && se->ops->agg_place(se->e, site) == 0;
}

int session_plan_agg(struct usc_session *s)
{
	const struct usc_agg_opts *a = &s->set.agg;

	for (size_t i = 0; i < s->nsites; i++) {
		struct usc_site *site = &s->sites[i];
		const struct session_engine *se;

		if (s->place[i].engine < 0)
			continue;
		se = &s->engines[s->place[i].engine];
		site->filter_in_place = !site->filter.n ||
					(se->ops->filters && se->ops->filters(se->e, site));
	}
	if (a->kind == USC_AGG_LATENCY)
		latency_funcs(s);
	if (a->kind == USC_AGG_NONE || a->per_call)
		return 0;	/* events (a line per call wants them all) */
	for (size_t i = 0; i < s->nsites; i++) {
		struct usc_site *site = &s->sites[i];
		bool ok;

		if (s->place[i].engine < 0 || site->hidden)
			continue;
		if (a->kind != USC_AGG_LATENCY) {
			site->agg_in_place = in_place(s, i);
			continue;
		}
		if (site->agg_in_place || site->agg_func < 0)
			continue;
		/* a function's sites, all on one engine that aggregates them */
		ok = true;
		for (size_t k = 0; k < s->nsites && ok; k++)
			if (s->sites[k].agg_func == site->agg_func && s->place[k].engine >= 0)
				ok = s->place[k].engine == s->place[i].engine && in_place(s, k);
		for (size_t k = 0; k < s->nsites && ok; k++)
			if (s->sites[k].agg_func == site->agg_func)
				s->sites[k].agg_in_place = true;
	}
	for (size_t i = 0; i < s->nsites; i++)
		if (s->place[i].engine >= 0 && !s->sites[i].hidden)
			log_info("%s at 0x%llx: %s on %s", s->sites[i].label,
				 (unsigned long long)s->sites[i].vaddr,
				 s->sites[i].agg_in_place ? "aggregated where the probe runs" :
				 "aggregated by uscope from its events",
				 s->engines[s->place[i].engine].ops->name);
	return 0;
}

/* ---- rows aggregated in place --------------------------------------------- */

struct collect {
	struct usc_session *s;
	uint32_t nbuckets;
	uint64_t *delta;	/* nbuckets */
	uint64_t engine;	/* the engine read: rows are kept per engine */
	int err;
};

/* An engine's row as it stands: what is new since the last read goes to
 * the sinks. */
static int collect_row(void *ctx, const struct usc_site *site, const uint8_t *key, uint32_t keylen,
		       const struct agg_stats *st, const uint64_t *buckets)
{
	struct collect *c = ctx;
	struct usc_session *s = c->s;
	/* (the fallback's rows are the inject engine's sites' too) */
	struct agg_row *r = agg_table_get(s->agg_seen,
					  (uint64_t)(site - s->sites) + c->engine * s->nsites, key,
					  keylen);
	struct agg_stats d;

	if (!r)
		return c->err = -ENOMEM;
	if (st->count == r->st.count)
		return 0;
	d.count = st->count - r->st.count;
	d.sum = (int64_t)((uint64_t)st->sum - (uint64_t)r->st.sum);
	d.min = st->min;
	d.max = st->max;
	for (uint32_t b = 0; b < c->nbuckets && buckets; b++)
		c->delta[b] = buckets[b] - r->buckets[b];
	r->st = *st;
	if (buckets && c->nbuckets)
		memcpy(r->buckets, buckets, c->nbuckets * sizeof(*buckets));
	for (size_t k = 0; k < s->nsinks; k++) {
		const struct usc_sink *sk = s->sinks[k];
		int ret;

		if (!sk->ops->agg_row)
			continue;
		ret = sk->ops->agg_row(s->sinks[k], site, key, keylen, &d,
				       buckets ? c->delta : NULL);
		if (ret)
			return c->err = ret;
	}
	return 0;
}

int session_agg_collect(struct usc_session *s)
{
	struct collect c = {.s = s, .nbuckets = agg_nbuckets(&s->set.agg)};
	bool any = false;

	for (size_t i = 0; i < s->nsites && !any; i++)
		any = s->sites[i].agg_in_place;
	if (!any)
		return 0;
	if (!s->agg_seen) {
		s->agg_seen = calloc(1, sizeof(*s->agg_seen));
		if (!s->agg_seen || agg_table_init(s->agg_seen, c.nbuckets)) {
			free(s->agg_seen);
			s->agg_seen = NULL;
			log_error("out of memory");
			return -ENOMEM;
		}
	}
	c.delta = calloc(c.nbuckets + 1, sizeof(*c.delta));
	if (!c.delta) {
		log_error("out of memory");
		return -ENOMEM;
	}
	for (size_t k = 0; k < s->nengines && !c.err; k++) {
		const struct session_engine *se = &s->engines[k];
		int ret;

		if (!se->live || !se->ops->agg_read)
			continue;
		c.engine = k;
		ret = se->ops->agg_read(se->e, collect_row, &c);
		if (ret && !c.err) {
			log_error("reading what the %s engine aggregated failed: %s", se->ops->name,
				  strerror(-ret));
			c.err = ret;
		}
	}
	if (c.err == -ENOMEM)
		log_error("out of memory");
	free(c.delta);
	return c.err;
}

void session_agg_free(struct usc_session *s)
{
	if (s->agg_seen)
		agg_table_free(s->agg_seen);
	free(s->agg_seen);
	s->agg_seen = NULL;
}
