/* uscope script's sink: the script's runtime (src/script/run.h) in a
 * session. BEGIN when every probe is in place, each event through the
 * executor (or an output record an engine's executor made, formatted),
 * interval probes at each flush, END and the maps at the final report.
 * exit() stops the session as a write error would, but cleanly. */
#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include "script/run.h"
#include "sink/sink.h"

struct script_sink {
	struct usc_sink base;
	struct script_rt *rt;
	bool ended;
};

static struct script_rt *rt_of(struct usc_sink *k)
{
	return ((struct script_sink *)k)->rt;
}

static int ss_begin(struct usc_sink *k, const struct usc_sink_ctx *c)
{
	struct script_rt *rt = rt_of(k);

	script_rt_session(rt, c->cache, c->sites, c->nsites, c->specs);
	if (c->script_src && script_rt_add_source(rt, c->script_src))
		return -ENOMEM;
	script_rt_begin(rt);
	return 0;
}

static int ss_event(struct usc_sink *k, const struct usc_event *ev)
{
	struct script_rt *rt = rt_of(k);
	int ret = ev->script_rec ? script_rt_record(rt, ev, ev->script_rec, ev->script_len) :
		  script_rt_event(rt, ev);

	return ret < 0 ? ret : script_rt_exited(rt);
}

static int ss_flush(struct usc_sink *k)
{
	struct script_rt *rt = rt_of(k);
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	script_rt_tick(rt, (uint64_t)t.tv_sec * 1000000000ULL + (uint64_t)t.tv_nsec);
	return script_rt_exited(rt);
}

static int ss_report(struct usc_sink *k, const struct usc_sink_ctx *c, const struct usc_stats *st,
		     bool final)
{
	struct script_sink *s = (struct script_sink *)k;

	(void)c;
	(void)st;
	if (!final || s->ended)
		return 0;
	s->ended = true;
	return script_rt_end(s->rt) ? EIO : 0;
}

static void ss_destroy(struct usc_sink *k)
{
	script_rt_free(rt_of(k));
	free(k);
}

static const struct usc_sink_ops script_ops = {
	.begin = ss_begin,
	.event = ss_event,
	.flush = ss_flush,
	.report = ss_report,
	.destroy = ss_destroy,
};

struct usc_sink *usc_sink_script(struct usc_script *s, FILE *fp, bool json)
{
	struct script_sink *k = calloc(1, sizeof(*k));

	if (!k)
		return NULL;
	k->base.ops = &script_ops;
	k->rt = script_rt_new(s, fp, json);
	if (!k->rt) {
		free(k);
		return NULL;
	}
	return &k->base;
}
