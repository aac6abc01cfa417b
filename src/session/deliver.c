/* A session's events on their way to its sinks: stacks unwound and named,
 * objtrace's and filters' verdicts, the recorder, the merge of several
 * engines, the sinks' flushes, reports and snapshots; and each round of
 * the engines' polls (session.c runs the rounds). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/log.h"
#include "session/session_int.h"
#include "sink/sink.h"
#include "stack/mapwatch.h"
#include "stack/stack.h"
#include "stack/unwtab.h"

/* How long events of several engines wait for older ones (merge.c). */
#define MERGE_HOLD_NS 100000000ULL

/* Stacks as the engines stored them, as frames (src/stack/): a walk is
 * taken as it is, a copy unwound; the event the sinks see has USC_V_STACK
 * values instead. A copy that a walk fell back to is counted, by why. */
static const struct usc_event *unwind_stacks(struct usc_session *s, const struct usc_event *ev,
					     struct usc_event *copy)
{
	for (unsigned i = 0; i < ev->nvals && i < USC_MAX_ARGS; i++) {
		const struct usc_value *v = &ev->vals[i];
		int ret;

		s->stack_vals[i] = *v;
		if (!usc_value_is_raw_stack(v->kind))
			continue;
		if (!s->stacks[i]) {
			s->stacks[i] = malloc(stack_size(USC_STACK_FRAMES_MAX));
			if (!s->stacks[i])
				return NULL;
		}
		if (v->kind == USC_V_PYSTACK) {
			/* $pystack: its frames by name (session/python.c) */
			session_python_value(s, ev, i, s->stacks[i], &s->stack_vals[i]);
			continue;
		}
		if (v->kind == USC_V_WALK) {
			ret = stack_walked(v->str, v->len, s->stacks[i], USC_STACK_FRAMES_MAX);
		} else {
			struct fetch_stack_hdr h;

			ret = stack_unwind(s->cache, ev->pid, ev->tid, v->str, v->len, s->stacks[i],
					   USC_STACK_FRAMES_MAX);
			if (!ret) {
				memcpy(&h, v->str, sizeof(h));
				size_t k = (size_t)(ev->site - s->sites);

				if (h.why && h.why < USC_STACK_FB_NR && k < s->nsites)
					s->stack_fb[k * USC_STACK_FB_NR + h.why]++;
			}
		}
		if (ret) {
			s->stack_vals[i] = (struct usc_value){.kind = USC_V_FAULT};
		} else {
			s->stack_vals[i] = (struct usc_value){.kind = USC_V_STACK,
							      .stack = s->stacks[i]};
			s->stacks_unwound++;
		}
	}
	if (s->python && session_python_splice(s, ev, s->stack_vals))
		return NULL;
	*copy = *ev;
	copy->vals = s->stack_vals;
	return copy;
}

static int sinks_event(const struct usc_event *ev0, void *ctx)
{
	struct usc_session *s = ctx;
	struct usc_event copy;
	const struct usc_event *ev = ev0;

	for (unsigned i = 0; s->ectx.has_stacks && i < ev0->nvals; i++)
		if (usc_value_is_raw_stack(ev0->vals[i].kind)) {
			ev = unwind_stacks(s, ev0, &copy);
			break;
		}

	if (!ev) {
		log_error("out of memory");
		s->sink_stop = -ENOMEM;
		return -ENOMEM;
	}

	for (size_t k = 0; k < s->nsinks; k++) {
		int ret;

		if (!s->sinks[k]->ops->event)
			continue;
		ret = s->sinks[k]->ops->event(s->sinks[k], ev);
		if (ret) {
			s->sink_stop = ret;
			return ret;
		}
	}
	return 0;
}

/* An event the engine counted as delivered goes no further. */
static void dropped(struct usc_session *s, const struct usc_event *ev)
{
	size_t i = (size_t)(ev->site - s->sites);

	if (!s->dropped)
		s->dropped = calloc(s->nsites + 1, sizeof(*s->dropped));
	if (s->dropped && i < s->nsites)
		s->dropped[i]++;
}

int session_deliver(const struct usc_event *ev, void *ctx)
{
	struct usc_session *s = ctx;
	struct usc_value vals[USC_MAX_ARGS];
	struct usc_event obj_ev;

	if (ev->site->hidden) {
		dropped(s, ev);	/* not a probe of the user's: not one of its events */
		return 0;
	}
	if (session_obj_here(s, ev->site)) {
		/* objtrace on an engine that keeps no set: the session does */
		if (!session_obj_event(s, ev, &obj_ev, vals)) {
			dropped(s, ev);
			return 0;
		}
		ev = &obj_ev;
	}
	if (!ev->site->filter_in_place && !engine_filter_pass(ev)) {
		dropped(s, ev);
		return 0;	/* the engine could not filter it */
	}
	if (s->rec)
		return session_record_event(s, ev);
	if (!s->merge)
		return sinks_event(ev, s);
	if (merge_push(s->merge, ev)) {
		log_error("out of memory");
		s->sink_stop = -ENOMEM;
		return -ENOMEM;
	}
	return 0;
}

int session_sinks_flush(struct usc_session *s)
{
	for (size_t k = 0; k < s->nsinks && !s->sink_stop; k++)
		if (s->sinks[k]->ops->flush) {
			int ret = s->sinks[k]->ops->flush(s->sinks[k]);

			if (ret)
				s->sink_stop = ret;
		}
	return s->sink_stop;
}

/* Every live engine's counts, per site of the session. */
static void collect_stats(struct usc_session *s)
{
	memset(s->stats, 0, s->nsites * sizeof(*s->stats));
	for (size_t i = 0; i < s->nsites; i++)
		s->stats[i].lost = 0;
	s->totals.events = s->totals.lost = 0;
	for (size_t k = 0; k < s->nengines; k++) {
		struct usc_engine *e = s->engines[k].e;
		struct usc_stats st = {0};

		if (!s->engines[k].live || e->ops->stats(e, &st))
			continue;
		s->totals.events += st.events;
		s->totals.lost += st.lost;
		for (size_t j = 0; j < e->nsites && st.sites; j++)
			if (s->engines[k].fallback)	/* the same sites as inject's */
				session_fallback_stats(&s->stats[e->sites[j] - s->sites],
						       &st.sites[j]);
			else
				s->stats[e->sites[j] - s->sites] = st.sites[j];
	}
	/* what the session dropped was never an event of the user's */
	for (size_t i = 0; s->dropped && i < s->nsites; i++) {
		uint64_t d = s->dropped[i] < s->stats[i].events ? s->dropped[i] :
								   s->stats[i].events;

		s->stats[i].events -= d;
		s->totals.events -= d < s->totals.events ? d : s->totals.events;
	}
	for (size_t i = 0; i < s->nsites && s->stack_fb; i++)
		memcpy(s->stats[i].stack_fallback, &s->stack_fb[i * USC_STACK_FB_NR],
		       sizeof(s->stats[i].stack_fallback));
}

/* The sinks' reports. Returns, for the final one, the first failure of a
 * sink that wrote nothing else but did not succeed (a flame graph with
 * nothing to draw, out of memory): the run failed, though its output may
 * look fine; a reader gone (EPIPE) is not one. */
int session_sinks_report(struct usc_session *s, bool final)
{
	int ret = session_agg_collect(s), failed = 0;

	if (final)
		s->rec = NULL;	/* the recorder closes its file now */

	if (ret)
		s->sink_stop = s->sink_stop ? s->sink_stop : ret;
	collect_stats(s);
	for (size_t k = 0; final && k < s->nengines; k++)
		if (s->engines[k].live && s->engines[k].ops->procs)
			s->engines[k].ops->procs(s->engines[k].e, &s->sctx.nlate);
	s->sctx.nlate += final ? s->nfallback[1] : 0;
	for (size_t k = 0; k < s->nsinks; k++) {
		int r = s->sinks[k]->ops->report ?
			s->sinks[k]->ops->report(s->sinks[k], &s->sctx, &s->totals, final) : 0;

		if (!r)
			continue;
		s->sink_stop = s->sink_stop ? s->sink_stop : -EIO;
		if (final && !failed && r != EPIPE && r != -EPIPE)
			failed = r < 0 ? r : -r;
	}
	return failed;
}

/* The sinks that keep a snapshot up to date (a served one): what the
 * engines aggregated and counted so far, without a report. */
bool session_sinks_refresh_wanted(const struct usc_session *s)
{
	for (size_t k = 0; k < s->nsinks; k++)
		if (s->sinks[k]->ops->refresh)
			return true;
	return false;
}

void session_sinks_refresh(struct usc_session *s)
{
	struct timespec taken;
	int ret;

	/* every hit before taken is in the snapshot: what the engines hold
	 * (rings, buffers) is delivered first (with several engines, events
	 * the merge holds back for order reach the sinks up to 0.1 s later) */
	clock_gettime(CLOCK_REALTIME, &taken);
	ret = session_poll_engines(s, false);
	if (ret < 0) {
		s->sink_stop = s->sink_stop ? s->sink_stop : ret;
		return;
	}
	ret = session_agg_collect(s);
	if (ret) {
		s->sink_stop = s->sink_stop ? s->sink_stop : ret;
		return;
	}
	collect_stats(s);
	for (size_t k = 0; k < s->nsinks && !s->sink_stop; k++)
		if (s->sinks[k]->ops->refresh &&
		    (ret = s->sinks[k]->ops->refresh(s->sinks[k], &s->sctx, &s->totals, &taken)))
			s->sink_stop = ret;
}

/* One round: every engine's new events, then what may leave the merge. */
static void poll_maps(struct usc_session *s);

static void maps_hook(void *ctx)
{
	poll_maps(ctx);
}

/* $ustack: the maps a stack is symbolized with, as they change; opened
 * before COMMAND execs, or on the running process (-p), or every process. */
void session_watch_maps(struct usc_session *s, pid_t pid, bool on_exec)
{
	size_t n;
	int ret;

	/* (a script names addresses at its end: usym, ustack) */
	if ((!s->ectx.has_stacks && !s->set.script) || s->mapwatch)
		return;
	ret = mapwatch_open(pid, on_exec, &s->mapwatch);
	if (!ret)
		cache_maps_hook(s->cache, maps_hook, s);
	if (ret)
		log_warn("the kernel's mmap records are not available (%s): stacks are "
			 "symbolized with the maps read from /proc, and code a process maps "
			 "just before it ends may not symbolize", strerror(-ret));
	if (!on_exec && pid > 0)
		cache_maps(s->cache, pid, true, &n);
}

static void poll_maps(struct usc_session *s)
{
	int changed = 0;

	if (!s->mapwatch || mapwatch_poll(s->mapwatch, s->cache, &changed) <= 0 || !changed)
		return;
	session_record_maps(s, changed);
}

int session_poll_engines(struct usc_session *s, bool drain)
{
	uint64_t start = session_mono_ns();
	int total = 0;

	poll_maps(s);	/* first: a hit's maps are older than the hit */
	session_python_poll(s);	/* engines told where CPython is, once it is there */
	session_interpose_poll(s);

	for (size_t k = 0; k < s->nengines && !s->sink_stop; k++) {
		struct usc_engine *e = s->engines[k].e;
		int n;

		if (!s->engines[k].live)
			continue;
		if (s->rec && e->ops->record) {
			n = session_record_poll(s, e);
			if (n < 0)
				return n;	/* the writer has said why */
			total += n;
			continue;
		}
		n = e->ops->poll(e, 0, session_deliver, s);
		if (n < 0) {
			log_error("reading the events of the %s engine failed: %s", e->ops->name,
				  strerror(-n));
			return n;
		}
		total += n;
	}
	if (s->rec && total > 0 && session_record_round(s))
		return -EIO;
	if (s->merge && !s->sink_stop) {
		int ret = merge_flush(s->merge, drain ? UINT64_MAX :
					 start > MERGE_HOLD_NS ? start - MERGE_HOLD_NS : 0,
					 sinks_event, s);

		if (ret == -ENOMEM) {
			log_error("out of memory");
			return ret;
		}
	}
	return total;
}
