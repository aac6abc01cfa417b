/* A recording as a source: an engine whose sites are the recorded ones and
 * whose events are the file's, in time order (reader.c). The session runs
 * it as it runs a live engine, into the same sinks: `trace -r FILE` prints
 * what a live run printed, `flow`, `count`, `latency` and `hist -r`
 * aggregate offline. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "record/reader.h"
#include "record/source.h"

struct src {
	struct usc_engine base;
	struct rec_file *f;
	bool done;
	uint64_t bad;
	struct usc_site_stats *stats;	/* e->sites' order */
	uint64_t *events;		/* per session site: delivered */
	bool *mine;			/* per session site: the session gave it here */
	usc_event_fn fn;
	void *ctx;
	int delivered;
};

static struct src *src_of(struct usc_engine *e)
{
	return container_of(e, struct src, base);
}

static int src_create(const struct usc_engine_ctx *s, struct usc_engine **out, char *why,
		      size_t len)
{
	(void)s;
	snprintf(why, len, "a recording is read with -r FILE");
	*out = NULL;
	return -ENOTSUP;	/* never chosen for a live session */
}

static int src_can_place(struct usc_engine *e, const struct usc_site *site, char *why,
			 size_t len)
{
	(void)e;
	(void)site;
	(void)why;
	(void)len;
	return 0;
}

static int src_attach(struct usc_engine *e)
{
	struct src *r = src_of(e);

	r->stats = calloc(e->nsites + 1, sizeof(*r->stats));
	r->events = calloc(e->ctx->nsites + 1, sizeof(*r->events));
	r->mine = calloc(e->ctx->nsites + 1, sizeof(*r->mine));
	if (!r->stats || !r->events || !r->mine)
		return -ENOMEM;
	for (size_t k = 0; k < e->nsites; k++)
		r->mine[e->sites[k] - e->ctx->sites] = true;
	return 0;
}

static int src_start(struct usc_engine *e, pid_t pid, bool follow)
{
	(void)e;
	(void)pid;
	(void)follow;
	return 0;
}

/* A recorded event: only the sites the PROBEs selected, and what passes
 * their filters, as a live run would have delivered (and counted). */
static int one(const struct usc_event *ev, void *ctx)
{
	struct src *r = ctx;
	const struct usc_engine_ctx *s = r->base.ctx;
	size_t i = (size_t)(ev->site - s->sites);

	if (i >= s->nsites || !r->mine[i] || ev->site->hidden)
		return 0;
	if (!engine_filter_pass(ev))
		return 0;	/* the session does not filter again: filter_in_place */
	r->events[i]++;
	r->delivered++;
	return r->fn(ev, r->ctx);
}

static int src_poll(struct usc_engine *e, int timeout_ms, usc_event_fn fn, void *ctx)
{
	struct src *r = src_of(e);
	int ret;

	(void)timeout_ms;
	if (r->done)
		return 0;
	r->fn = fn;
	r->ctx = ctx;
	r->delivered = 0;
	ret = rec_file_events(r->f, one, r, &r->bad);
	r->done = true;
	if (ret)
		return ret;
	if (r->bad)
		log_warn("%llu records of the recording do not read as their engine writes them: "
			 "skipped", (unsigned long long)r->bad);
	return r->delivered;
}

static bool src_ended(struct usc_engine *e)
{
	return src_of(e)->done;
}

static void src_stop(struct usc_engine *e)
{
	(void)e;
}

static int src_stats(struct usc_engine *e, struct usc_stats *st)
{
	struct src *r = src_of(e);
	uint64_t events, lost;
	const struct rec_site_stats *rs = rec_file_stats(r->f, &events, &lost);
	const uint64_t *lw = rec_file_lost_wait(r->f);

	st->events = st->lost = 0;
	for (size_t k = 0; k < e->nsites; k++) {
		/* the session's site index: the recorded counts are by it */
		size_t i = (size_t)(e->sites[k] - e->ctx->sites);

		/* the recorded counts: what the engines lost and hit then */
		r->stats[k].events = r->events[i];
		r->stats[k].lost = rs ? rs[i].lost : 0;
		r->stats[k].hits = rs ? rs[i].hits : -1;
		r->stats[k].agg_full = rs ? rs[i].agg_full : 0;
		r->stats[k].agg_fault = rs ? rs[i].agg_fault : 0;
		r->stats[k].lost_wait = lw ? lw[i] : 0;
		st->events += r->stats[k].events;
		st->lost += r->stats[k].lost > 0 ? (uint64_t)r->stats[k].lost : 0;
	}
	/* every probe read: the losses the file counts in all (some not
	 * attributed to a probe) */
	if (rs && lost > st->lost && e->nsites == e->ctx->nsites)
		st->lost = lost;
	st->sites = r->stats;
	return 0;
}

static void src_detach(struct usc_engine *e)
{
	(void)e;
}

static void src_destroy(struct usc_engine *e)
{
	struct src *r = src_of(e);

	rec_file_free(r->f);
	free(r->stats);
	free(r->events);
	free(r->mine);
	free(r);
}

const struct usc_engine_ops source_engine_ops = {
	.name = "recording",
	.create = src_create,
	.can_place = src_can_place,
	.attach = src_attach,
	.start = src_start,
	.poll = src_poll,
	.stop = src_stop,
	.stats = src_stats,
	.detach = src_detach,
	.destroy = src_destroy,
	.ended = src_ended,
};

int source_open(const struct usc_engine_ctx *ctx, const char *path, struct usc_engine **out)
{
	struct src *r = calloc(1, sizeof(*r));
	const char *damage, *snap;
	int ret;

	*out = NULL;
	if (!r)
		return -ENOMEM;
	ret = rec_file_open(path, &r->f);
	if (ret) {
		free(r);
		return ret;
	}
	damage = rec_file_damage(r->f);
	if (damage)
		log_warn("%s ends early, %s: read up to there", path, damage);
	snap = rec_file_snapshot(r->f);
	if (snap)
		log_info("%s is a flight recorder's snapshot: %s", path, snap);
	r->base.ops = &source_engine_ops;
	r->base.ctx = ctx;
	*out = &r->base;
	return 0;
}

struct rec_file *source_file(struct usc_engine *e)
{
	return src_of(e)->f;
}
