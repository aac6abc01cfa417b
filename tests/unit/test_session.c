/* The session, without root: resolve and engine planning over a fixture
 * binary, and whole runs, through two fake engines that place sites by a
 * rule, report a footprint, deliver scripted events and count hits.
 *
 * fakeA stands for an in-process engine: preferred, it patches bytes (a
 * footprint), follows tail calls, and refuses what its rule refuses. fakeB
 * stands for a kernel engine: it takes anything, has no footprint and does
 * not follow tail calls. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/log.h"
#include "session/session.h"
#include "session/session_int.h"
#include "sink/sink.h"

#include "fixture.h"

static char fx_dir[PATH_MAX], fx_tmp[PATH_MAX], fns[PATH_MAX];

/* ---- the fake engines ----------------------------------------------------- */

struct fake_cfg {
	const char *refuse;		/* refuse sites whose symbol starts so */
	const char *create_why;		/* non-NULL: create fails so */
	uint32_t patch_len;		/* a footprint [vaddr, vaddr + patch_len) */
	/* events its first poll delivers: symbol and time */
	struct {
		const char *symbol;
		uint64_t time;
		uint64_t value;		/* every argument's */
	} ev[16];
	size_t nev;
	bool agg;			/* aggregates in place: 4 hits of key 7 a read */
	int agg_reads;
	/* what happened */
	int created, asked, attached, started, stopped, detached, destroyed;
	size_t nsites;
};

static struct fake_cfg cfg_a, cfg_b;

struct fake {
	struct usc_engine base;
	struct fake_cfg *cfg;
	bool polled;
	struct usc_site_stats *stats;
};

static struct fake_cfg *cfg_of(const struct usc_engine_ops *ops);

static int fake_create_a(const struct usc_engine_ctx *s, struct usc_engine **out, char *why, size_t len);
static int fake_create_b(const struct usc_engine_ctx *s, struct usc_engine **out, char *why, size_t len);

static int fake_can_place(struct usc_engine *e, const struct usc_site *site, char *why,
			  size_t len)
{
	struct fake *f = container_of(e, struct fake, base);

	f->cfg->asked++;
	if (f->cfg->refuse && ((site->symbol && !strncmp(site->symbol, f->cfg->refuse,
							  strlen(f->cfg->refuse))) ||
			       (site->spec->event_given &&
				!strcmp(site->spec->event, f->cfg->refuse)))) {
		snprintf(why, len, "refused by rule (%s)", site->symbol);
		return -ENOTSUP;
	}
	return 0;
}

static size_t fake_footprint(struct usc_engine *e, const struct usc_site *site,
			     uint64_t (*r)[2], size_t max)
{
	struct fake *f = container_of(e, struct fake, base);

	if (!f->cfg->patch_len || !max)
		return 0;
	r[0][0] = site->vaddr;
	r[0][1] = site->vaddr + f->cfg->patch_len;
	return 1;
}

static int fake_attach(struct usc_engine *e)
{
	struct fake *f = container_of(e, struct fake, base);

	f->cfg->attached++;
	f->cfg->nsites = e->nsites;
	f->stats = calloc(e->nsites + 1, sizeof(*f->stats));
	return f->stats ? 0 : -ENOMEM;
}

static int fake_start(struct usc_engine *e, pid_t pid, bool follow)
{
	struct fake *f = container_of(e, struct fake, base);

	(void)pid;
	(void)follow;
	f->cfg->started++;
	return 0;
}

static int fake_poll(struct usc_engine *e, int timeout_ms, usc_event_fn fn, void *ctx)
{
	struct fake *f = container_of(e, struct fake, base);
	int n = 0;

	(void)timeout_ms;
	if (f->polled)
		return 0;
	f->polled = true;
	for (size_t k = 0; k < f->cfg->nev; k++)
		for (size_t i = 0; i < e->nsites; i++) {
			struct usc_value v[4];
			struct usc_event ev = {
				.time_ns = f->cfg->ev[k].time, .pid = 1, .tid = 1, .comm = "fake",
				.site = e->sites[i], .ip = e->sites[i]->vaddr,
				.nvals = e->sites[i]->nargs < 4 ? e->sites[i]->nargs : 4, .vals = v,
			};

			for (int a = 0; a < 4; a++)
				v[a] = (struct usc_value){.kind = USC_V_INT, .u = f->cfg->ev[k].value};

			if (!e->sites[i]->symbol || strcmp(e->sites[i]->symbol, f->cfg->ev[k].symbol))
				continue;
			f->stats[i].events++;
			n++;
			if (fn(&ev, ctx))
				return n;
		}
	return n;
}

static void fake_stop(struct usc_engine *e)
{
	container_of(e, struct fake, base)->cfg->stopped++;
}

static int fake_stats(struct usc_engine *e, struct usc_stats *st)
{
	struct fake *f = container_of(e, struct fake, base);

	st->events = st->lost = 0;
	for (size_t i = 0; i < e->nsites; i++) {
		f->stats[i].hits = 10 + (int64_t)i;
		st->events += f->stats[i].events;
	}
	st->sites = f->stats;
	return 0;
}

static void fake_detach(struct usc_engine *e)
{
	container_of(e, struct fake, base)->cfg->detached++;
}

static void fake_destroy(struct usc_engine *e)
{
	struct fake *f = container_of(e, struct fake, base);

	f->cfg->destroyed++;
	free(f->stats);
	free(f);
}

static int fake_agg_place(struct usc_engine *e, const struct usc_site *site)
{
	(void)site;
	return container_of(e, struct fake, base)->cfg->agg ? 0 : -ENOTSUP;
}

/* Rows as an in-process engine keeps them: cumulative since attach, 4 more
 * hits of the key x=7 at every read, min and max since the last read. */
static int fake_agg_read(struct usc_engine *e,
			 int (*fn)(void *ctx, const struct usc_site *site, const uint8_t *key,
				   uint32_t keylen, const struct agg_stats *st,
				   const uint64_t *buckets),
			 void *ctx)
{
	struct fake *f = container_of(e, struct fake, base);
	struct agg_slot key = {.kind = AGG_K_INT, .v = 7};
	int reads = ++f->cfg->agg_reads;
	struct agg_stats st = {(uint64_t)(4 * reads), 28 * reads, 7, 7};

	for (size_t i = 0; i < e->nsites; i++)
		if (e->sites[i]->agg_in_place) {
			int ret = fn(ctx, e->sites[i], (const uint8_t *)&key, sizeof(key), &st, NULL);

			if (ret)
				return ret;
		}
	return 0;
}

static const struct usc_engine_ops fake_a = {
	.name = "fakeA", .follows_tail_calls = true, .create = fake_create_a,
	.can_place = fake_can_place, .footprint = fake_footprint, .attach = fake_attach,
	.start = fake_start, .poll = fake_poll, .stop = fake_stop, .stats = fake_stats,
	.detach = fake_detach, .destroy = fake_destroy, .agg_place = fake_agg_place,
	.agg_read = fake_agg_read,
};

static const struct usc_engine_ops fake_b = {
	.name = "fakeB", .create = fake_create_b, .can_place = fake_can_place,
	.attach = fake_attach, .start = fake_start, .poll = fake_poll, .stop = fake_stop,
	.stats = fake_stats, .detach = fake_detach, .destroy = fake_destroy,
};

static struct fake_cfg *cfg_of(const struct usc_engine_ops *ops)
{
	return ops == &fake_a ? &cfg_a : &cfg_b;
}

static int fake_create(const struct usc_engine_ops *ops, const struct usc_engine_ctx *s,
		       struct usc_engine **out, char *why, size_t len)
{
	struct fake_cfg *c = cfg_of(ops);
	struct fake *f;

	c->created++;
	if (c->create_why) {
		snprintf(why, len, "%s", c->create_why);
		return -EPERM;
	}
	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	f->base.ops = ops;
	f->base.ctx = s;
	f->cfg = c;
	*out = &f->base;
	return 0;
}

static int fake_create_a(const struct usc_engine_ctx *s, struct usc_engine **out, char *why, size_t len)
{
	return fake_create(&fake_a, s, out, why, len);
}

static int fake_create_b(const struct usc_engine_ctx *s, struct usc_engine **out, char *why, size_t len)
{
	return fake_create(&fake_b, s, out, why, len);
}

static const struct usc_engine_ops *const both[] = {&fake_a, &fake_b};

/* ---- a sink that keeps what it gets ---------------------------------------- */

struct keep {
	struct usc_sink base;
	int begun, flushes, reports, finals;
	char events[64][64];
	uint64_t times[64];
	size_t nevents;
	int stop_after;			/* stop the session after so many events (0: never) */
	uint64_t hits[16];		/* the final report's hits, per site */
};

static int keep_begin(struct usc_sink *k, const struct usc_sink_ctx *s)
{
	(void)s;
	container_of(k, struct keep, base)->begun++;
	return 0;
}

static int keep_event(struct usc_sink *k, const struct usc_event *ev)
{
	struct keep *kp = container_of(k, struct keep, base);

	if (kp->nevents < 64) {
		snprintf(kp->events[kp->nevents], 64, "%s", ev->site->symbol);
		kp->times[kp->nevents] = ev->time_ns;
		kp->nevents++;
	}
	return kp->stop_after && (int)kp->nevents >= kp->stop_after;
}

static int keep_flush(struct usc_sink *k)
{
	container_of(k, struct keep, base)->flushes++;
	return 0;
}

static int keep_report(struct usc_sink *k, const struct usc_sink_ctx *s,
		       const struct usc_stats *st, bool final)
{
	struct keep *kp = container_of(k, struct keep, base);

	kp->reports++;
	if (final) {
		kp->finals++;
		for (size_t i = 0; i < s->nsites && i < 16; i++)
			kp->hits[i] = (uint64_t)st->sites[i].hits;
	}
	return 0;
}

static void keep_destroy(struct usc_sink *k)
{
	(void)k;
}

static const struct usc_sink_ops keep_ops = {
	.begin = keep_begin, .event = keep_event, .flush = keep_flush, .report = keep_report,
	.destroy = keep_destroy,
};

/* ---- helpers -------------------------------------------------------------- */

static char logged[8][512];
static int nlogged;

static void test_log(enum usc_log_level level, const char *msg, void *ctx)
{
	(void)ctx;
	if (level <= USC_LOG_WARN && nlogged < 8)
		snprintf(logged[nlogged++], sizeof(logged[0]), "%s%s",
			 level == USC_LOG_WARN ? "warning: " : "", msg);
}

static int setup(void **state)
{
	(void)state;
	memset(&cfg_a, 0, sizeof(cfg_a));
	memset(&cfg_b, 0, sizeof(cfg_b));
	nlogged = 0;
	memset(logged, 0, sizeof(logged));
	usc_set_log(test_log, NULL);
	return 0;
}

static struct usc_probe_spec *specs_of(const char **texts, size_t n)
{
	struct usc_probe_spec *v = calloc(n, sizeof(*v));
	struct usc_parse_error err;

	assert_non_null(v);
	for (size_t i = 0; i < n; i++) {
		char text[PATH_MAX + 128];

		snprintf(text, sizeof(text), texts[i], fns);
		assert_int_equal(usc_probe_parse(text, &v[i], &err), 0);
	}
	return v;
}

static struct usc_session *session_of(const char **texts, size_t n, struct usc_probe_spec **sp,
				      int *ret)
{
	struct usc_session_opts o = {.engines = both, .nengines = 2, .duration = 0.05};
	struct usc_session *s;

	assert_int_equal(usc_session_new(&o, &s), 0);
	*sp = specs_of(texts, n);
	*ret = usc_session_plan(s, *sp, n);
	return s;
}

/* The engine name of the first site of symbol sym, or NULL. */
static const char *engine_of(const struct usc_session *s, const char *sym)
{
	for (size_t i = 0; i < s->nsites; i++)
		if (!s->sites[i].hidden && s->sites[i].symbol && !strcmp(s->sites[i].symbol, sym))
			return usc_session_engine_of(s, i);
	return NULL;
}

/* ---- planning --------------------------------------------------------------- */

static void test_each_site_on_the_first_engine_that_takes_it(void **state)
{
	const char *probes[] = {"%s:alpha", "%s:beta"};
	struct usc_probe_spec *sp;
	int ret;
	struct usc_session *s;

	(void)state;
	cfg_a.refuse = "beta";
	s = session_of(probes, 2, &sp, &ret);
	assert_int_equal(ret, 0);
	assert_string_equal(engine_of(s, "alpha"), "fakeA");
	assert_string_equal(engine_of(s, "beta"), "fakeB");
	/* why beta left the preferred engine */
	for (size_t i = 0; i < s->nsites; i++)
		if (!strcmp(s->sites[i].symbol, "beta"))
			assert_string_equal(s->place[i].why, "refused by rule (beta)");
	assert_int_equal(s->engines[0].nsites, 1);
	assert_int_equal(s->engines[1].nsites, 1);
	usc_session_free(s);
	/* both engines were made, neither attached (nothing ran) */
	assert_int_equal(cfg_a.destroyed, 1);
	assert_int_equal(cfg_b.destroyed, 1);
	assert_int_equal(cfg_a.attached + cfg_b.attached, 0);
	free(sp);
}

static void test_each_site_asked_once(void **state)
{
	const char *probes[] = {"%s:alpha", "%s:beta", "%s:bravo"};
	struct usc_probe_spec *sp;
	int ret;
	struct usc_session *s;

	(void)state;
	cfg_a.refuse = "b";
	s = session_of(probes, 3, &sp, &ret);
	assert_int_equal(ret, 0);
	assert_int_equal(cfg_a.asked, 3);
	assert_int_equal(cfg_b.asked, 2);	/* only what fakeA refused */
	usc_session_free(s);
	free(sp);
}

static void test_glob_skips_what_no_engine_takes_with_one_warning(void **state)
{
	const char *probes[] = {"%s:[ab]*"};
	struct usc_session_opts o = {.engines = both, .nengines = 2, .engine = "fakeA"};
	struct usc_probe_spec *sp = specs_of(probes, 1);
	struct usc_session *s;
	size_t placed = 0;

	(void)state;
	cfg_a.refuse = "b";
	assert_int_equal(usc_session_new(&o, &s), 0);
	assert_int_equal(usc_session_plan(s, sp, 1), 0);
	assert_int_equal(s->nengines, 1);
	for (size_t i = 0; i < s->nsites; i++)
		placed += s->place[i].engine >= 0;
	assert_int_equal(s->nsites, 3);		/* alpha, beta, bravo */
	assert_int_equal(placed, 1);
	assert_int_equal(nlogged, 1);
	assert_non_null(strstr(logged[0], "skipping 2 of its functions that fakeA cannot probe: "
					  "2 refused by rule"));
	usc_session_free(s);
	free(sp);
}

static void test_named_probe_no_engine_takes_is_an_error(void **state)
{
	const char *probes[] = {"%s:beta"};
	struct usc_session_opts o = {.engines = both, .nengines = 2, .engine = "fakeA"};
	struct usc_probe_spec *sp = specs_of(probes, 1);
	struct usc_session *s;

	(void)state;
	cfg_a.refuse = "beta";
	assert_int_equal(usc_session_new(&o, &s), 0);
	assert_int_equal(usc_session_plan(s, sp, 1), -ENOTSUP);
	assert_int_equal(nlogged, 1);
	assert_non_null(strstr(logged[0], "cannot probe beta at 0x"));
	assert_non_null(strstr(logged[0], "fakeA: refused by rule (beta)"));
	usc_session_free(s);
	free(sp);
}

static void test_an_engine_that_cannot_run_is_passed_over(void **state)
{
	const char *probes[] = {"%s:alpha"};
	struct usc_probe_spec *sp;
	struct usc_session *s;
	int ret;

	(void)state;
	cfg_a.create_why = "needs something";
	s = session_of(probes, 1, &sp, &ret);
	assert_int_equal(ret, 0);
	assert_string_equal(engine_of(s, "alpha"), "fakeB");
	assert_int_equal(cfg_a.asked, 0);
	usc_session_free(s);
	free(sp);

	/* named, it is an error with its reason */
	struct usc_session_opts o = {.engines = both, .nengines = 2, .engine = "fakeA"};

	nlogged = 0;
	sp = specs_of(probes, 1);
	assert_int_equal(usc_session_new(&o, &s), 0);
	assert_int_equal(usc_session_plan(s, sp, 1), -ENOTSUP);
	assert_int_equal(nlogged, 1);
	assert_string_equal(logged[0], "needs something");
	usc_session_free(s);
	free(sp);
}

static void test_unknown_engine(void **state)
{
	const char *probes[] = {"%s:alpha"};
	struct usc_session_opts o = {.engines = both, .nengines = 2, .engine = "nope"};
	struct usc_probe_spec *sp = specs_of(probes, 1);
	struct usc_session *s;

	(void)state;
	assert_int_equal(usc_session_new(&o, &s), 0);
	assert_int_equal(usc_session_plan(s, sp, 1), -ENOENT);
	assert_string_equal(logged[0], "unknown engine 'nope' (available: auto, fakeA, fakeB)");
	usc_session_free(s);
	free(sp);
}

/* A kernel uprobe never sits in bytes a patch moves: the patch's site
 * moves to the next engine. */
static void test_patch_over_a_kernel_probe_moves(void **state)
{
	const char *probes[] = {"%s:patchy", "%s:patchy+1"};
	struct usc_probe_spec *sp;
	struct usc_session *s;
	int ret;

	(void)state;
	cfg_a.patch_len = 8;
	s = session_of(probes, 2, &sp, &ret);
	/* both on fakeA, no kernel probe: nothing moves */
	assert_int_equal(ret, 0);
	assert_int_equal(s->engines[0].nsites, 2);
	usc_session_free(s);
	free(sp);

	/* patchy+2 goes to fakeB (the fake refuses the probe by its event
	 * name): it sits inside patchy's patch, which moves to fakeB too */
	memset(&cfg_a, 0, sizeof(cfg_a));
	cfg_a.patch_len = 8;
	cfg_a.refuse = "inner";
	probes[1] = "p:inner %s:patchy+2";
	s = session_of(probes, 2, &sp, &ret);
	assert_int_equal(ret, 0);
	for (size_t i = 0; i < s->nsites; i++)
		assert_string_equal(usc_session_engine_of(s, i), "fakeB");
	for (size_t i = 0; i < s->nsites; i++)
		if (s->sites[i].vaddr == s->sites[i].func_vaddr)
			assert_non_null(strstr(s->place[i].why, "is inside its patch"));
	usc_session_free(s);
	free(sp);
}

/* A tail call's return goes with its callee's rets to an engine that
 * follows tail calls; elsewhere its $retval is unavailable. */
static void test_tail_call_group_placed_together(void **state)
{
	const char *probes[] = {"r:%s:chain r=$retval"};
	struct usc_probe_spec *sp;
	struct usc_session *s;
	size_t tail = SIZE_MAX, hidden = 0;
	int ret;

	(void)state;
	s = session_of(probes, 1, &sp, &ret);
	assert_int_equal(ret, 0);
	for (size_t i = 0; i < s->nsites; i++) {
		if (s->sites[i].tail_call)
			tail = i;
		if (s->sites[i].hidden) {
			hidden++;
			assert_true(s->sites[i].cont);
			assert_string_equal(usc_session_engine_of(s, i), "fakeA");
		}
	}
	assert_true(tail != SIZE_MAX);
	assert_true(hidden >= 1);	/* leaf's ret */
	assert_true(s->sites[tail].follow_tail);
	assert_false(s->sites[tail].args[0].unavailable);
	assert_string_equal(usc_session_engine_of(s, tail), "fakeA");
	usc_session_free(s);
	free(sp);

	/* fakeA refuses leaf's ret: the group goes to... fakeB, which does
	 * not follow: the tail call alone, on fakeA, $retval unavailable */
	memset(&cfg_a, 0, sizeof(cfg_a));
	nlogged = 0;
	cfg_a.refuse = "leaf";
	s = session_of(probes, 1, &sp, &ret);
	assert_int_equal(ret, 0);
	for (size_t i = 0; i < s->nsites; i++) {
		if (s->sites[i].hidden)
			assert_null(usc_session_engine_of(s, i));
		if (s->sites[i].tail_call) {
			assert_false(s->sites[i].follow_tail);
			assert_true(s->sites[i].args[0].unavailable);
		}
	}
	assert_int_equal(nlogged, 1);
	assert_non_null(strstr(logged[0], "$retval is (unavailable) at 1 tail call"));
	usc_session_free(s);
	free(sp);
}

/* ---- runs ------------------------------------------------------------------- */

static void test_run_merges_engines_in_time_order(void **state)
{
	const char *probes[] = {"%s:alpha", "%s:beta"};
	struct keep k = {.base.ops = &keep_ops};
	struct usc_run_result res;
	struct usc_probe_spec *sp;
	struct usc_session *s;
	int ret;

	(void)state;
	cfg_a.refuse = "beta";
	cfg_a.ev[cfg_a.nev++] = (typeof(cfg_a.ev[0])){"alpha", 100, 0};
	cfg_a.ev[cfg_a.nev++] = (typeof(cfg_a.ev[0])){"alpha", 300, 0};
	cfg_b.ev[cfg_b.nev++] = (typeof(cfg_b.ev[0])){"beta", 200, 0};
	cfg_b.ev[cfg_b.nev++] = (typeof(cfg_b.ev[0])){"beta", 400, 0};
	s = session_of(probes, 2, &sp, &ret);
	assert_int_equal(ret, 0);
	assert_int_equal(usc_session_add_sink(s, &k.base), 0);
	assert_int_equal(usc_session_run(s, &res), 0);
	assert_int_equal(res.err, 0);
	assert_false(res.target_exited);
	assert_int_equal(k.begun, 1);
	assert_int_equal(k.nevents, 4);
	assert_string_equal(k.events[0], "alpha");
	assert_string_equal(k.events[1], "beta");
	assert_string_equal(k.events[2], "alpha");
	assert_string_equal(k.events[3], "beta");
	for (size_t i = 1; i < k.nevents; i++)
		assert_true(k.times[i - 1] < k.times[i]);
	assert_true(k.flushes >= 1);
	assert_int_equal(k.finals, 1);
	/* the engines' hit counts, by the session's sites */
	assert_int_equal(k.hits[0], 10);
	assert_int_equal(k.hits[1], 10);
	assert_int_equal(s->totals.events, 4);
	/* the whole lifecycle, once */
	assert_int_equal(cfg_a.attached, 1);
	assert_int_equal(cfg_a.started, 1);
	assert_int_equal(cfg_a.stopped, 1);
	assert_int_equal(cfg_a.detached, 1);
	assert_int_equal(cfg_b.detached, 1);
	usc_session_free(s);
	assert_int_equal(cfg_a.destroyed, 1);
	assert_int_equal(cfg_b.destroyed, 1);
	free(sp);
}

static void test_unused_engine_is_destroyed_before_the_run(void **state)
{
	const char *probes[] = {"%s:alpha"};
	struct keep k = {.base.ops = &keep_ops};
	struct usc_run_result res;
	struct usc_probe_spec *sp;
	struct usc_session *s;
	int ret;

	(void)state;
	s = session_of(probes, 1, &sp, &ret);
	assert_int_equal(ret, 0);
	assert_int_equal(usc_session_add_sink(s, &k.base), 0);
	assert_int_equal(usc_session_run(s, &res), 0);
	assert_int_equal(cfg_b.attached, 0);
	assert_int_equal(cfg_b.destroyed, 1);	/* at attach time, not at the end */
	assert_int_equal(cfg_a.started, 1);
	usc_session_free(s);
	free(sp);
}

static void test_sink_stops_the_run(void **state)
{
	const char *probes[] = {"%s:alpha"};
	struct keep k = {.base.ops = &keep_ops, .stop_after = 1};
	struct usc_session_opts o = {.engines = both, .nengines = 2, .duration = 30};
	struct usc_run_result res;
	struct usc_probe_spec *sp = specs_of(probes, 1);
	struct usc_session *s;

	(void)state;
	cfg_a.ev[cfg_a.nev++] = (typeof(cfg_a.ev[0])){"alpha", 100, 0};
	cfg_a.ev[cfg_a.nev++] = (typeof(cfg_a.ev[0])){"alpha", 200, 0};
	assert_int_equal(usc_session_new(&o, &s), 0);
	assert_int_equal(usc_session_plan(s, sp, 1), 0);
	assert_int_equal(usc_session_add_sink(s, &k.base), 0);
	/* long before the 30 s: the sink asked to stop at its first event */
	assert_int_equal(usc_session_run(s, &res), 0);
	assert_int_equal(k.nevents, 1);
	assert_int_equal(cfg_a.detached, 1);
	usc_session_free(s);
	free(sp);
}

/* ---- aggregation ------------------------------------------------------------ */

/* count with keys: fakeA aggregates alpha where the probe runs (the rows it
 * reads back are cumulative; what each report adds is the difference),
 * fakeB delivers beta's events, which the session filters (fakeB cannot)
 * and the count sink aggregates. */
static void test_count_rows_in_place_and_from_filtered_events(void **state)
{
	const char *probes[] = {"%s:alpha x=$arg1:u32", "%s:beta x=$arg1:u32 if x > 5"};
	struct usc_session_opts o = {.engines = both, .nengines = 2, .duration = 0.08,
				     .interval = 0.02, .agg = {.kind = USC_AGG_COUNT}};
	struct usc_probe_spec *sp = specs_of(probes, 2);
	struct usc_run_result res;
	struct usc_session *s;
	struct usc_sink *count;
	char *out = NULL, want[256];
	size_t outlen = 0;
	FILE *fp = open_memstream(&out, &outlen);

	(void)state;
	cfg_a.refuse = "beta";
	cfg_a.agg = true;
	cfg_b.ev[cfg_b.nev++] = (typeof(cfg_b.ev[0])){"beta", 100, 3};	/* filtered out */
	cfg_b.ev[cfg_b.nev++] = (typeof(cfg_b.ev[0])){"beta", 200, 9};
	cfg_b.ev[cfg_b.nev++] = (typeof(cfg_b.ev[0])){"beta", 300, 9};
	count = usc_sink_count(fp, true, true, 0, false, false);
	assert_int_equal(usc_session_new(&o, &s), 0);
	assert_int_equal(usc_session_plan(s, sp, 2), 0);
	assert_true(s->sites[0].agg_in_place && s->sites[0].filter_in_place);
	assert_false(s->sites[1].agg_in_place || s->sites[1].filter_in_place);
	assert_int_equal(usc_session_add_sink(s, count), 0);
	assert_int_equal(usc_session_run(s, &res), 0);
	fclose(fp);
	/* every report read fakeA once: its last cumulative count is the total */
	assert_true(cfg_a.agg_reads >= 2);
	snprintf(want, sizeof(want),
		 "{\"probe\":\"alpha\",\"key\":{\"x\":7},\"count\":%d,\"cut\":false,"
		 "\"final\":true,\"v\":1}\n"
		 "{\"probe\":\"beta\",\"key\":{\"x\":9},\"count\":2,\"cut\":false,"
		 "\"final\":true,\"v\":1}\n", 4 * cfg_a.agg_reads);
	assert_non_null(out);
	assert_non_null(strstr(out, want));
	/* each interval's alpha row is what that read added: 4 */
	assert_non_null(strstr(out, "{\"probe\":\"alpha\",\"key\":{\"x\":7},\"count\":4,"
				    "\"cut\":false,\"final\":false,\"v\":1}"));
	assert_null(strstr(out, "\"x\":3"));
	usc_session_free(s);
	usc_sink_free(count);
	free(out);
	free(sp);
}

static int group_setup(void **state)
{
	(void)state;
	if (fixture_build("session", fx_dir, sizeof(fx_dir), fx_tmp, sizeof(fx_tmp)))
		return -1;
	if ((size_t)snprintf(fns, sizeof(fns), "%.4000s/fns", fx_tmp) >= sizeof(fns))
		return -1;
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	return fixture_remove(fx_tmp);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_each_site_on_the_first_engine_that_takes_it, setup),
		cmocka_unit_test_setup(test_each_site_asked_once, setup),
		cmocka_unit_test_setup(test_glob_skips_what_no_engine_takes_with_one_warning, setup),
		cmocka_unit_test_setup(test_named_probe_no_engine_takes_is_an_error, setup),
		cmocka_unit_test_setup(test_an_engine_that_cannot_run_is_passed_over, setup),
		cmocka_unit_test_setup(test_unknown_engine, setup),
		cmocka_unit_test_setup(test_patch_over_a_kernel_probe_moves, setup),
		cmocka_unit_test_setup(test_tail_call_group_placed_together, setup),
		cmocka_unit_test_setup(test_run_merges_engines_in_time_order, setup),
		cmocka_unit_test_setup(test_unused_engine_is_destroyed_before_the_run, setup),
		cmocka_unit_test_setup(test_sink_stops_the_run, setup),
		cmocka_unit_test_setup(test_count_rows_in_place_and_from_filtered_events, setup),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
