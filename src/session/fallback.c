/* System-wide on the inject engine, the processes it may not take (another
 * tracer on them, no permission to ptrace them, seccomp or a shadow stack)
 * are traced on the bpf engine instead, each alone: the fallback.
 *
 * A kernel uprobe registered for every process would place its breakpoint
 * in the injected processes too, on inject's patched bytes. A uprobe for
 * one process (a multi-uprobe link with its pid) is placed by the kernel in
 * that process's memory only, when linked and as it maps the file. So the
 * fallback is a bpf engine with the inject engine's sites, never started
 * whole; the inject engine hands each process it refuses to the session
 * (usc_engine_ctx.refused), which makes and loads it at the first (neither
 * is paid where no process is refused) and links the
 * sites for that process alone (add_pid) before it runs on: a process the gate stopped is traced
 * from its first call. Its events go to the sinks with the others (the
 * merge), its counts are added to the sites' (session.c, agg.c), and it
 * goes as the other engines do (its links closed; the janitor knows its
 * uprobes). Where the bpf engine cannot be used (no root, or it cannot
 * take a site as the inject engine does), there is none: the inject engine
 * says the processes it left out. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "session/session.h"
#include "session/session_int.h"

static struct session_engine *fallback_of(struct usc_session *s)
{
	for (size_t k = 0; k < s->nengines; k++)
		if (s->engines[k].fallback)
			return &s->engines[k];
	return NULL;
}

static bool fallback_fits(struct usc_engine *fb, const struct usc_engine *inj);

/* The fallback engine made, at the first process refused (making it reads
 * the kernel's BTF: hundreds of ms on a loaded machine, which a run with no
 * refusal does not pay before it is ready). 0, or -ENOTSUP (se->why says). */
static int fallback_create(struct usc_session *s, struct session_engine *se)
{
	struct session_engine *inj = NULL;
	struct usc_engine *e = NULL;
	char why[256] = "";

	for (size_t k = 0; k < s->nengines; k++)
		if (s->engines[k].live && s->engines[k].ops->procs)
			inj = &s->engines[k];	/* it places into processes */
	if (!inj || se->ops->create(&s->ectx, &e, why, sizeof(why))) {
		snprintf(se->why, sizeof(se->why), "%s", why[0] ? why : "no engine to fall back on");
		log_info("the processes the inject engine may not ptrace are left out: %s", se->why);
		return -ENOTSUP;
	}
	if (!fallback_fits(e, inj->e) ||
	    !(e->sites = calloc(inj->e->nsites + 1, sizeof(*e->sites)))) {
		e->ops->destroy(e);
		snprintf(se->why, sizeof(se->why), "a site it cannot take as inject does");
		return -ENOTSUP;
	}
	memcpy(e->sites, inj->e->sites, inj->e->nsites * sizeof(*e->sites));
	e->nsites = inj->e->nsites;
	se->e = e;
	return 0;
}

static int fallback_refused(const struct usc_engine_ctx *ctx, pid_t pid)
{
	struct usc_session *s = container_of(ctx, struct usc_session, ectx);
	struct session_engine *se = fallback_of(s);
	int ret;

	if (!se || se->why[0] || (!se->e && fallback_create(s, se)))
		return -ENOTSUP;	/* (it could not be made or loaded) */
	if (!se->live) {	/* the first: loaded now */
		ret = se->e->ops->attach(se->e);
		if (ret) {	/* (said) */
			snprintf(se->why, sizeof(se->why), "%s", strerror(-ret));
			log_info("the processes the inject engine may not ptrace are left out");
			return ret;
		}
		se->live = true;
		if (++s->nlive > 1 && !s->merge && !(s->merge = merge_new()))
			return -ENOMEM;
	}
	ret = se->ops->add_pid(se->e, pid);
	if (!ret)	/* (the sinks are told the session once it is started) */
		s->nfallback[s->sctx.set != NULL]++;
	else if (ret != -ESRCH)
		log_warn("process %d: the %s engine cannot trace it either: %s", (int)pid,
			 se->ops->name, strerror(-ret));
	return ret;
}

/* Can the fallback take every site of the inject engine as it does? */
static bool fallback_fits(struct usc_engine *fb, const struct usc_engine *inj)
{
	char why[256];

	for (size_t i = 0; i < inj->nsites; i++) {
		const struct usc_site *site = inj->sites[i];

		if (fb->ops->can_place(fb, site, why, sizeof(why))) {
			log_debug("no fallback engine: %s: %s", site->label, why);
			return false;
		}
		if (site->agg_in_place && (!fb->ops->agg_place || fb->ops->agg_place(fb, site))) {
			log_debug("no fallback engine: %s is not aggregated in the kernel",
				  site->label);
			return false;
		}
	}
	return true;
}

int session_fallback_prepare(struct usc_session *s)
{
	const struct usc_engine_ops *ops = NULL;
	bool inj = false;

	for (size_t i = 0; i < s->opts.nengines; i++)
		if (!strcmp(s->opts.engines[i]->name, "bpf"))
			ops = s->opts.engines[i];
	if (s->target.kind != USC_TARGET_SYSTEM || s->set.objtrace.on || !ops || !ops->add_pid)
		return 0;
	for (size_t k = 0; k < s->nengines; k++)
		inj |= s->engines[k].live && s->engines[k].ops->procs;	/* it places into processes */
	if (!inj)
		return 0;
	/* its slot (room for every engine and one); not made, nor live, until
	 * a process is refused (fallback_create): no cost otherwise */
	s->engines[s->nengines++] = (struct session_engine){.ops = ops, .fallback = true};
	s->ectx.fallback = ops->name;
	s->ectx.refused = fallback_refused;
	return 0;
}

void session_fallback_stats(struct usc_site_stats *to, const struct usc_site_stats *from)
{
	to->events += from->events;
	to->lost = to->lost < 0 || from->lost < 0 ? -1 : to->lost + from->lost;
	to->hits = to->hits < 0 || from->hits < 0 ? -1 : to->hits + from->hits;
	to->agg_full += from->agg_full;
	to->agg_fault += from->agg_fault;
	to->lost_wait += from->lost_wait;
	for (int k = 0; k < USC_STACK_FB_NR; k++) {
		to->stack_fallback[k] += from->stack_fallback[k];
		to->stack_partial[k] += from->stack_partial[k];
	}
}
