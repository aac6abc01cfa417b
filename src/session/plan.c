/* Choosing an engine for every site.
 *
 * Each engine says which sites it can place (can_place, asked at most once
 * a site and engine); each site goes to the first engine, in the session's
 * order of preference, that can place it (with -e NAME, there is one). Then:
 *  - a tail call's group (the tail-call site and the hidden sites on its
 *    callees' rets) goes whole to the first engine that follows tail calls
 *    and can place every site of it; where none can, the hidden sites are
 *    dropped and the tail call's $retval is unavailable;
 *  - a kernel uprobe never lands in the bytes an in-process patch moves:
 *    such a patch goes to the next engine instead (the kernel would write
 *    its breakpoint into code that no longer runs, or our patch over it);
 *  - a kernel uprobe is never placed over code that is not the file's
 *    (codecheck.c): the plan is refused, with the process and the reason;
 *  - a site no engine can place is an error, unless its probe is a glob:
 *    a glob is never refused as a whole, its unplaceable functions are
 *    skipped with one warning line that counts them and names the main
 *    reasons. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "session/session.h"
#include "session/session_int.h"

/* can_place, asked once: 1 ok, -1 refused, 0 not asked yet */
struct answers {
	int8_t *ok;		/* [engine][site] */
	char **why;		/* [engine][site]: the refusal, malloc'd */
};

static int ask(struct usc_session *s, struct answers *a, size_t e, size_t i)
{
	size_t k = e * s->nsites + i;
	char why[512] = "";

	if (!s->engines[e].e)
		return -1;
	if (!a->ok[k]) {
		int ret = -ENOTSUP;

		if (s->set.record.snapshot && !s->engines[e].ops->flight_recorder)
			snprintf(why, sizeof(why), "the flight recorder (--snapshot) keeps each "
				 "thread's newest records in the traced process: only the inject "
				 "engine does");
		else
			ret = s->engines[e].ops->can_place(s->engines[e].e, &s->sites[i], why,
							   sizeof(why));

		a->ok[k] = ret ? -1 : 1;
		if (ret)
			a->why[k] = strdup(why[0] ? why : strerror(-ret));
	}
	return a->ok[k];
}

static const char *why_of(struct usc_session *s, struct answers *a, size_t e, size_t i)
{
	const char *w = a->why[e * s->nsites + i];

	return s->engines[e].e ? (w ? w : "?") : s->engines[e].why;
}

/* The first engine at or after `from` that can place site i, or -1. */
static int first_engine(struct usc_session *s, struct answers *a, size_t from, size_t i)
{
	for (size_t e = from; e < s->nengines; e++)
		if (ask(s, a, e, i) > 0)
			return (int)e;
	return -1;
}

/* Site i on engine e. kept: why it is not on an engine before e that
 * could take it (NULL: that engine's answer, as for one that refused). */
static void place(struct usc_session *s, struct answers *a, size_t i, int e, const char *kept)
{
	s->place[i].engine = e;
	s->place[i].why[0] = 0;
	/* why it left the engines before: the first one's reason */
	if (e > 0)
		for (size_t k = 0; k < (size_t)e; k++)
			if (s->engines[k].e) {
				snprintf(s->place[i].why, sizeof(s->place[i].why), "%s",
					 kept && a->ok[k * s->nsites + i] > 0 ? kept :
					 why_of(s, a, k, i));
				break;
			}
}

/* A tail call's group on one engine (from `from` on) that follows tail
 * calls, or the tail call alone with its $retval unavailable. */
static void place_group(struct usc_session *s, struct answers *a, size_t t, size_t from)
{
	for (size_t e = from; e < s->nengines; e++) {
		bool all;

		if (!s->engines[e].e || !s->engines[e].ops->follows_tail_calls || ask(s, a, e, t) < 0)
			continue;
		all = true;
		for (size_t i = 0; i < s->nsites && all; i++)
			if (s->sites[i].cont && (size_t)s->sites[i].group == t)
				all = ask(s, a, e, i) > 0;
		if (!all)
			continue;
		place(s, a, t, (int)e, "on one engine with the rets its tail call reaches");
		s->sites[t].follow_tail = true;
		for (size_t i = 0; i < s->nsites; i++)
			if (s->sites[i].cont && (size_t)s->sites[i].group == t)
				place(s, a, i, (int)e, NULL);
		return;
	}
	place(s, a, t, first_engine(s, a, from, t), NULL);
	s->sites[t].follow_tail = false;
	for (size_t i = 0; i < s->nsites; i++)
		if (s->sites[i].cont && (size_t)s->sites[i].group == t)
			s->place[i].engine = -1;
}

static bool has_group(const struct usc_session *s, size_t t)
{
	for (size_t i = 0; i < s->nsites; i++)
		if (s->sites[i].cont && (size_t)s->sites[i].group == t)
			return true;
	return false;
}

/* Does an engine that patches code (one with a footprint) move the byte a
 * kernel uprobe of another engine sits on? Then the patch's site goes to
 * the next engine (with its group). Repeat until nothing moves. */
static int untangle(struct usc_session *s, struct answers *a)
{
	bool moved = true;

	for (int round = 0; moved && round < 16; round++) {
		moved = false;
		for (size_t j = 0; j < s->nsites; j++) {
			int ej = s->place[j].engine;
			uint64_t r[8][2];
			size_t nr;

			if (ej < 0 || !s->engines[ej].ops->footprint)
				continue;
			nr = s->engines[ej].ops->footprint(s->engines[ej].e, &s->sites[j], r, 8);
			for (size_t k = 0; k < s->nsites && nr; k++) {
				int ek = s->place[k].engine;
				bool hit = false;

				if (ek < 0 || ek == ej || s->engines[ek].ops->footprint ||
				    strcmp(s->sites[k].path, s->sites[j].path))
					continue;
				for (size_t q = 0; q < nr; q++)
					hit |= s->sites[k].vaddr >= r[q][0] && s->sites[k].vaddr < r[q][1];
				if (!hit)
					continue;
				/* move site j (and its group) past its engine */
				int next = first_engine(s, a, (size_t)ej + 1, j);

				log_info("%s at 0x%llx: not on %s: %s at 0x%llx is on %s, inside its "
					 "patch", s->sites[j].label, (unsigned long long)s->sites[j].vaddr,
					 s->engines[ej].ops->name, s->sites[k].label,
					 (unsigned long long)s->sites[k].vaddr, s->engines[ek].ops->name);
				bool stuck;

				if (s->sites[j].cont || (s->sites[j].tail_call && has_group(s, j))) {
					size_t t = s->sites[j].cont ? (size_t)s->sites[j].group : j;

					place_group(s, a, t, (size_t)ej + 1);
					stuck = s->place[t].engine < 0;
				} else {
					stuck = next < 0;
					if (!stuck)
						place(s, a, j, next, NULL);
				}
				if (stuck) {
					log_error("%s: %s at 0x%llx and %s at 0x%llx cannot both be "
						  "placed: a kernel uprobe would sit inside an in-process "
						  "patch; probe them with one engine (-e)",
						  s->sites[j].spec->text, s->sites[j].label,
						  (unsigned long long)s->sites[j].vaddr, s->sites[k].label,
						  (unsigned long long)s->sites[k].vaddr);
					return -ENOTSUP;
				}
				if (s->place[j].engine >= 0)
					snprintf(s->place[j].why, sizeof(s->place[j].why),
						 "a kernel uprobe of %.128s is inside its patch (0x%llx)",
						 s->sites[k].label, (unsigned long long)s->sites[k].vaddr);
				moved = true;
				break;
			}
		}
	}
	return 0;
}

/* uscope objtrace: the followed set lives with one engine (in the process,
 * in a BPF map, or in the session for tracefs), so every site that follows
 * objects goes to it: the first engine that can place every --from and
 * --until site and every site of a probe that is not a glob (a function
 * too short for a patch sends the session to an engine that takes it). A
 * function of a glob that engine cannot place is left unplaced
 * (unplaced() counts it). */
static int place_objtrace(struct usc_session *s, struct answers *a)
{
	char reasons[512] = "";
	size_t used = 0;
	int e = -1;

	if (!s->set.objtrace.on)
		return 0;
	for (size_t k = 0; k < s->nengines && e < 0; k++) {
		bool all = s->engines[k].e != NULL;
		size_t refused = SIZE_MAX;

		/* every site asked, so -v can say why the engines before it did not */
		for (size_t i = 0; i < s->nsites && s->engines[k].e; i++) {
			uint8_t role = s->sites[i].spec->obj_role;

			if (!s->sites[i].hidden && (role == USC_OBJ_FROM || role == USC_OBJ_UNTIL ||
						    (role != USC_OBJ_NONE &&
						     !s->specs[s->sites[i].probe].is_glob)) &&
			    ask(s, a, k, i) <= 0) {
				all = false;
				refused = refused == SIZE_MAX ? i : refused;
			}
		}
		if (all)
			e = (int)k;
		else if (used < sizeof(reasons))	/* the first site it refused, and why */
			used += (size_t)snprintf(reasons + used, sizeof(reasons) - used,
						 "%s%s: %s%s%s", used ? "; " : "",
						 s->engines[k].ops->name,
						 refused == SIZE_MAX ? "" : s->sites[refused].label,
						 refused == SIZE_MAX ? "" : ": ",
						 why_of(s, a, k, refused == SIZE_MAX ? 0 : refused));
	}
	if (e < 0) {
		log_error("objtrace: no engine can place every --from and --until probe and "
			  "every probe that is not a glob: %s%s", reasons,
			  s->opts.engine && strcmp(s->opts.engine, "auto") ?
			  " (-e auto tries every engine)" : "");
		return -ENOTSUP;
	}
	for (size_t i = 0; i < s->nsites; i++) {
		struct usc_site *st = &s->sites[i];

		if (st->hidden || st->spec->obj_role == USC_OBJ_NONE || s->place[i].engine == e)
			continue;
		if (st->tail_call && has_group(s, i)) {
			place_group(s, a, i, (size_t)e);
			if (s->place[i].engine == e)
				continue;
		} else if (ask(s, a, (size_t)e, i) > 0) {
			place(s, a, i, e, "objtrace keeps every site on one engine");
			continue;
		}
		s->place[i].engine = -1;
		for (size_t k = 0; k < s->nsites; k++)
			if (s->sites[k].cont && (size_t)s->sites[k].group == i)
				s->place[k].engine = -1;
	}
	return 0;
}

/* Sites of a probe no engine can place: an error naming each engine's
 * reason, or for a glob one warning that counts them. */
/* py: probes' hidden GIL sites go with the py: probes, on the engine that
 * took them (inject): its agent's profile function needs them. */
static int place_py_hooks(struct usc_session *s, struct answers *a)
{
	int e = -1, fe = -1;

	/* Py_FinalizeEx's, with the stacks (the inject agent waits there for
	 * us to read their frames' code objects; elsewhere it is a no-op) */
	for (size_t i = 0; i < s->nsites && fe < 0; i++)
		if (!s->sites[i].hidden && (site_has_pystack(&s->sites[i]) ||
					    site_has_ustack(&s->sites[i])))
			fe = s->place[i].engine;
	for (size_t i = 0; i < s->nsites && fe >= 0; i++)
		if (s->sites[i].py_final && ask(s, a, (size_t)fe, i) > 0)
			place(s, a, i, fe, NULL);
	for (size_t i = 0; i < s->nsites && e < 0; i++)
		if (s->sites[i].python)
			e = s->place[i].engine;
	for (size_t i = 0; i < s->nsites && e >= 0; i++) {
		if (!s->sites[i].py_hook)
			continue;
		if (ask(s, a, (size_t)e, i) < 0) {
			log_error("%s: cannot probe %s at 0x%llx, where a thread takes the GIL: %s",
				  s->sites[i].spec->text, s->sites[i].symbol,
				  (unsigned long long)s->sites[i].vaddr, why_of(s, a, (size_t)e, i));
			return -ENOTSUP;
		}
		place(s, a, i, e, NULL);
	}
	return 0;
}

static int unplaced(struct usc_session *s, struct answers *a)
{
	for (size_t p = 0; p < s->nspecs; p++) {
		size_t n = 0, first = 0, all = 0;
		char reasons[512] = "";
		size_t used = 0;

		for (size_t i = 0; i < s->nsites; i++) {
			if (s->sites[i].probe != p || s->sites[i].hidden)
				continue;
			all++;
			if (s->place[i].engine < 0 && n++ == 0)
				first = i;
		}
		if (!n)
			continue;
		for (size_t e = 0; e < s->nengines && used < sizeof(reasons); e++)
			used += (size_t)snprintf(reasons + used, sizeof(reasons) - used, "%s%s: %s",
						 e ? "; " : "", s->engines[e].ops->name,
						 why_of(s, a, e, first));
		/* the engines the user did not allow could */
		if (s->opts.engine && strcmp(s->opts.engine, "auto") && used < sizeof(reasons))
			snprintf(reasons + used, sizeof(reasons) - used, " (-e auto puts each site "
				 "on an engine that can take it)");
		/* a glob is never refused as a whole, but one with nothing left
		 * to probe is: there is nothing to trace */
		if (!s->specs[p].is_glob || n == all) {
			const struct usc_site *st = &s->sites[first];

			if (st->python)	/* a Python function: no address */
				log_error("%s: cannot probe it: %s", s->specs[p].text, reasons);
			else
				log_error("%s: cannot probe %s at 0x%llx: %s", s->specs[p].text,
					  st->symbol ? st->symbol : st->path,
					  (unsigned long long)st->vaddr, reasons);
			return -ENOTSUP;
		}
		/* the main reasons of the first engine, counted */
		struct { const char *w; size_t len, n; } r[4];
		size_t nr = 0, shown = 0;
		char list[512] = "";

		for (size_t i = 0; i < s->nsites; i++) {
			const char *w, *paren;
			size_t len, k;

			if (s->sites[i].probe != p || s->sites[i].hidden || s->place[i].engine >= 0)
				continue;
			w = why_of(s, a, 0, i);
			paren = strstr(w, " (");
			len = paren ? (size_t)(paren - w) : strlen(w);
			for (k = 0; k < nr; k++)
				if (r[k].len == len && !memcmp(r[k].w, w, len))
					break;
			if (k == nr && nr < 4)
				r[nr++] = (typeof(r[0])){w, len, 0};
			if (k < nr)
				r[k].n++;
		}
		for (size_t k = 0; k < nr; k++)
			for (size_t q = k + 1; q < nr; q++)
				if (r[q].n > r[k].n) {
					typeof(r[0]) t = r[k];

					r[k] = r[q];
					r[q] = t;
				}
		for (size_t k = 0, u = 0; k < nr && u < sizeof(list); k++, shown++)
			u += (size_t)snprintf(list + u, sizeof(list) - u, "%s%zu %.*s", k ? ", " : "",
					      r[k].n, (int)r[k].len, r[k].w);
		log_warn("%s: skipping %zu of its %s that %s cannot probe: %s", s->specs[p].text, n,
			 n == 1 ? "function" : "functions", s->nengines == 1 ? s->engines[0].ops->name :
			 "no engine", list);
		(void)shown;
	}
	return 0;
}

static int plan_once(struct usc_session *s)
{
	struct answers a = {0};
	int ret = 0;

	a.ok = calloc(s->nengines * s->nsites + 1, sizeof(*a.ok));
	a.why = calloc(s->nengines * s->nsites + 1, sizeof(*a.why));
	free(s->place);
	s->place = calloc(s->nsites + 1, sizeof(*s->place));
	if (!a.ok || !a.why || !s->place) {
		ret = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < s->nsites; i++)
		s->place[i].engine = -1;
	for (size_t i = 0; i < s->nsites; i++) {
		if (s->sites[i].hidden)
			continue;
		if (s->sites[i].tail_call && has_group(s, i))
			place_group(s, &a, i, 0);
		else
			place(s, &a, i, first_engine(s, &a, 0, i), NULL);
	}
	ret = place_objtrace(s, &a);
	if (!ret)
		ret = place_py_hooks(s, &a);
	if (!ret)
		ret = untangle(s, &a);
	if (!ret)
		ret = unplaced(s, &a);
	if (!ret)
		ret = session_place_later_mapped(s);
	if (!ret)
		ret = session_obj_init(s);
	if (ret)
		goto out;
	/* $retval at a tail call that no engine follows: not computed yet */
	for (size_t p = 0; p < s->nspecs; p++) {
		size_t n = 0;
		const char *engine = NULL;

		for (size_t i = 0; i < s->nsites; i++) {
			struct usc_site *st = &s->sites[i];
			bool retval = false;

			if (st->probe != p || !st->tail_call || st->follow_tail ||
			    s->place[i].engine < 0)
				continue;
			for (unsigned k = 0; k < st->nargs; k++)
				if (st->args[k].ninsn && st->args[k].insn[0].op == FOP_RETVAL) {
					st->args[k].unavailable = true;
					retval = true;
				}
			n += retval;
			if (retval && !s->engines[s->place[i].engine].ops->follows_tail_calls)
				engine = s->engines[s->place[i].engine].ops->name;
		}
		if (n && engine)
			log_warn("%s: $retval is (unavailable) at %zu tail call%s: the %s engine does "
				 "not follow a tail call to its callee's return (inject and bpf do)",
				 s->specs[p].text, n, n == 1 ? "" : "s", engine);
		else if (n)
			log_warn("%s: $retval is (unavailable) at %zu tail call%s whose callee cannot "
				 "be followed (-v says why)", s->specs[p].text, n, n == 1 ? "" : "s");
	}
	for (size_t i = 0; i < s->nsites; i++)
		if (s->place[i].engine >= 0)
			s->engines[s->place[i].engine].nsites++;
	/* a kernel uprobe only over the file's code */
	ret = session_check_code(s);
	if (!ret)
		ret = session_plan_agg(s);
	if (!ret)
		ret = session_plan_script(s);
out:
	for (size_t k = 0; a.why && k < s->nengines * s->nsites; k++)
		free(a.why[k]);
	free(a.why);
	free(a.ok);
	if (ret == -ENOMEM)
		log_error("out of memory");
	return ret;
}

int session_engine_sites(struct usc_session *s, size_t k)
{
	struct session_engine *se = &s->engines[k];
	struct usc_engine *e = se->e;
	size_t n = 0;

	if (!e || e->sites)
		return 0;
	e->sites = calloc(se->nsites + 1, sizeof(*e->sites));
	if (!e->sites)
		return -ENOMEM;
	for (size_t i = 0; i < s->nsites; i++)
		if (s->place[i].engine == (int)k)
			e->sites[n++] = &s->sites[i];
	e->nsites = n;
	return 0;
}

/* What a plan decides of the sites, as they were before it: put back
 * before the sites are planned again. */
struct plan_saved {
	bool *follow_tail, *filter_in_place, *agg_in_place;
	int32_t *agg_func;
	bool *unavailable;	/* [site][arg], args at argoff[site] */
	size_t *argoff;
};

static void saved_free(struct plan_saved *p)
{
	free(p->follow_tail);
	free(p->filter_in_place);
	free(p->agg_in_place);
	free(p->agg_func);
	free(p->unavailable);
	free(p->argoff);
}

static int plan_save(const struct usc_session *s, struct plan_saved *p)
{
	size_t n = s->nsites + 1, nargs = 0;

	for (size_t i = 0; i < s->nsites; i++)
		nargs += s->sites[i].nargs;
	p->follow_tail = calloc(n, sizeof(bool));
	p->filter_in_place = calloc(n, sizeof(bool));
	p->agg_in_place = calloc(n, sizeof(bool));
	p->agg_func = calloc(n, sizeof(int32_t));
	p->argoff = calloc(n, sizeof(size_t));
	p->unavailable = calloc(nargs + 1, sizeof(bool));
	if (!p->follow_tail || !p->filter_in_place || !p->agg_in_place || !p->agg_func ||
	    !p->argoff || !p->unavailable)
		return -ENOMEM;
	for (size_t i = 0, at = 0; i < s->nsites; i++) {
		const struct usc_site *st = &s->sites[i];

		p->follow_tail[i] = st->follow_tail;
		p->filter_in_place[i] = st->filter_in_place;
		p->agg_in_place[i] = st->agg_in_place;
		p->agg_func[i] = st->agg_func;
		p->argoff[i] = at;
		for (unsigned k = 0; k < st->nargs; k++)
			p->unavailable[at++] = st->args[k].unavailable;
	}
	return 0;
}

static void plan_restore(struct usc_session *s, const struct plan_saved *p)
{
	for (size_t i = 0; i < s->nsites; i++) {
		struct usc_site *st = &s->sites[i];

		st->follow_tail = p->follow_tail[i];
		st->filter_in_place = p->filter_in_place[i];
		st->agg_in_place = p->agg_in_place[i];
		st->agg_func = p->agg_func[i];
		for (unsigned k = 0; k < st->nargs; k++)
			st->args[k].unavailable = p->unavailable[p->argoff[i] + k];
	}
	for (size_t k = 0; k < s->nengines; k++) {
		struct session_engine *se = &s->engines[k];

		se->nsites = 0;
		if (se->e) {
			free(se->e->sites);
			se->e->sites = NULL;
			se->e->nsites = 0;
		}
	}
}

/* Each engine with sites prepared (engine.h: the bpf engine loads its
 * program). One that cannot be: the run's error with -e NAME; with -e
 * auto it is left out (-v says why) and *again asks for a new plan. */
static int prepare_engines(struct usc_session *s, bool *again)
{
	*again = false;
	for (size_t k = 0; k < s->nengines; k++) {
		struct session_engine *se = &s->engines[k];
		char why[sizeof(se->why)] = "";
		int ret;

		if (!se->e || !se->nsites || !se->ops->prepare)
			continue;
		ret = session_engine_sites(s, k);
		if (ret)
			return ret;
		ret = se->ops->prepare(se->e, why, sizeof(why));
		if (!ret)
			continue;
		if (!why[0])
			snprintf(why, sizeof(why), "%s", strerror(-ret));
		if (s->ectx.engine_named) {
			log_error("%s", why);
			return ret;
		}
		log_info("not using the %s engine: %s", se->ops->name, why);
		snprintf(se->why, sizeof(se->why), "%s", why);
		free(se->e->sites);
		se->e->ops->destroy(se->e);
		se->e = NULL;
		*again = true;
	}
	return 0;
}

int session_plan_engines(struct usc_session *s)
{
	struct plan_saved saved = {0};
	bool again = true;
	int ret = plan_save(s, &saved);

	/* (at most once an engine: each round leaves one out for good) */
	for (size_t round = 0; !ret && again && round <= s->nengines; round++) {
		if (round)
			plan_restore(s, &saved);
		ret = plan_once(s);
		if (!ret)
			ret = prepare_engines(s, &again);
	}
	if (!saved.follow_tail && ret == -ENOMEM)
		log_error("out of memory");	/* (plan_once says its own) */
	saved_free(&saved);
	return ret;
}
