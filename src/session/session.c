/* A tracing session: see session.h. This file is the lifecycle and the run
 * loop; deliver.c takes events to the sinks, plan.c chooses the engines,
 * merge.c orders the events of several, spawn.c starts COMMAND. */
#include "session/session.h"

#include <errno.h>
#include <fnmatch.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/log.h"
#include "objfile/modules.h"
#include "record/reader.h"
#include "record/record.h"
#include "record/source.h"
#include "session/session_int.h"
#include "sink/sink.h"
#include "stack/mapwatch.h"
#include "stack/stack.h"
#include "stack/unwtab.h"

/* How often a sink's snapshot is refreshed (sink.h, refresh). */
#define SESSION_REFRESH_MS 1000
/* The longest wait between two polls of the engines. */
#define POLL_MS 20

uint64_t session_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* The run's settings from the caller's options, once: their defaults
 * applied, --max-wait made the bound itself (0: never wait). */
static void settings_decide(struct usc_settings *set, const struct usc_session_opts *o)
{
	*set = (struct usc_settings){
		.agg = o->agg,
		.count_only = o->count_only,
		.stack_bytes = o->stack_bytes,
		.interval = o->interval,
		.record = {o->record.on, o->record.snapshot},
		.max_wait_ns = o->max_wait_ns == USC_MAX_WAIT_NEVER ? 0 :
			       o->max_wait_ns ? o->max_wait_ns : SESSION_MAX_WAIT_NS,
		.objtrace = {o->objtrace.on, o->objtrace.max_objects},
		.max_procs = o->max_procs ? o->max_procs : SESSION_MAX_PROCS,
		.script = o->script,
	};
	/* aggregations: a string of a key takes whole words */
	if (!set->agg.str_max)
		set->agg.str_max = AGG_STR_DEFAULT;
	set->agg.str_max = (set->agg.str_max + 7) & ~7u;
	if (set->agg.str_max > AGG_KEY_MAX - 8)
		set->agg.str_max = AGG_KEY_MAX - 8;
	if (!set->agg.max_rows)
		set->agg.max_rows = AGG_ROWS_DEFAULT;
	if (!set->agg.unit_ns)
		set->agg.unit_ns = 1;
}

int usc_session_new(const struct usc_session_opts *o, struct usc_session **out)
{
	struct usc_session *s = calloc(1, sizeof(*s));

	*out = NULL;
	if (!s)
		return -ENOMEM;
	s->opts = *o;
	if (!s->opts.engines) {
		s->opts.engines = usc_engines;
		s->opts.nengines = usc_nengines;
	}
	settings_decide(&s->set, o);
	s->cache = cache_new();
	if (!s->cache) {
		free(s);
		return -ENOMEM;
	}
	s->target.kind = o->cmd ? USC_TARGET_COMMAND : o->pid ? USC_TARGET_PID : USC_TARGET_SYSTEM;
	if (o->pid && !o->cmd)
		s->opts.pid = session_process_of(o->pid);	/* -p TID: its process */
	s->target.pid = s->opts.pid;
	if (o->root && !(s->target.root = strdup(o->root))) {	/* resolve_target checks it */
		cache_free(s->cache);
		free(s);
		return -ENOMEM;
	}
	s->ectx = (struct usc_engine_ctx){
		.target = &s->target,
		.cache = s->cache,
		.set = &s->set,
		.children = !o->no_children,
	};
	session_undo_init(s);
	*out = s;
	return 0;
}

int usc_session_add_sink(struct usc_session *s, struct usc_sink *k)
{
	struct usc_sink **v = realloc(s->sinks, (s->nsinks + 1) * sizeof(*v));

	if (!v)
		return -ENOMEM;
	s->sinks = v;
	s->sinks[s->nsinks++] = k;
	return 0;
}

/* The engines to choose from, created (no side effect yet). */
static int create_engines(struct usc_session *s)
{
	const char *want = s->opts.engine && strcmp(s->opts.engine, "auto") ? s->opts.engine : NULL;
	size_t n = 0;

	s->engines = calloc(s->opts.nengines + 1, sizeof(*s->engines));
	if (!s->engines)
		return -ENOMEM;
	s->ectx.engine_named = want != NULL;
	for (size_t i = 0; i < s->opts.nengines; i++) {
		const struct usc_engine_ops *ops = s->opts.engines[i];
		struct session_engine *se;

		if (want && strcmp(ops->name, want))
			continue;
		se = &s->engines[n++];
		se->ops = ops;
		if (ops->create(&s->ectx, &se->e, se->why, sizeof(se->why))) {
			se->e = NULL;
			if (!se->why[0])
				snprintf(se->why, sizeof(se->why), "cannot be used here");
			if (want) {
				log_error("%s", se->why);
				s->nengines = n;
				return -ENOTSUP;
			}
			log_info("not using the %s engine: %s", ops->name, se->why);
		}
	}
	s->nengines = n;
	if (!n) {
		char names[128] = "";
		size_t used = 0;

		for (size_t i = 0; i < s->opts.nengines && used < sizeof(names); i++)
			used += (size_t)snprintf(names + used, sizeof(names) - used, ", %s",
						 s->opts.engines[i]->name);
		log_error("unknown engine '%s' (available: auto%s)", want, names);
		return -ENOENT;
	}
	return 0;
}

/* An engine named that the session has not. */
static int check_engine_name(const struct usc_session *s)
{
	const char *want = s->opts.engine && strcmp(s->opts.engine, "auto") ? s->opts.engine : NULL;

	for (size_t i = 0; want && i < s->opts.nengines; i++)
		if (!strcmp(s->opts.engines[i]->name, want))
			return 0;
	return want ? create_engines((struct usc_session *)s) : 0;	/* reports it */
}

int usc_session_plan(struct usc_session *s, struct usc_probe_spec *specs, size_t nspecs)
{
	int ret;

	s->specs = specs;
	s->nspecs = nspecs;
	ret = resolve_target(&s->target, s->opts.cmd ? s->opts.cmd[0] : NULL);
	if (ret) {
		s->target_missing = s->opts.cmd != NULL;
		return ret;
	}
	session_python_launcher(s);
	if (session_pending_modules(s))
		return check_engine_name(s);	/* the rest once COMMAND has them */
	return session_plan_sites(s);
}

int session_plan_sites(struct usc_session *s)
{
	unsigned flags = s->opts.resolve_flags;
	int ret;

	ret = create_engines(s);
	if (ret)
		return ret;
	if (s->set.count_only)
		flags |= RESOLVE_NO_TAIL_FOLLOW;	/* a tail call's hit is its return */
	ret = resolve_probes(s->cache, &s->target, s->specs, s->nspecs, flags, &s->sites,
			     &s->nsites);
	if (ret)
		return ret;
	ret = session_python_plan(s);
	if (ret)
		return ret;
	session_interpose_plan(s);
	s->ectx.sites = s->sites;
	s->ectx.nsites = s->nsites;
	for (size_t i = 0; i < s->nsites; i++)
		s->sites[i].script = s->opts.script && s->sites[i].probe < s->nspecs ?
				     (int32_t)s->opts.script_probe[s->sites[i].probe] : -1;
	/* $ustack copies --stack-size bytes, and always with --stack-mode
	 * copy: the engines read it in the program */
	for (size_t i = 0; i < s->nsites; i++) {
		struct usc_site *site = &s->sites[i];

		/* $pystack too is named here, at uscope's pace: counted, it waits
		 * for room as a stack does */
		s->ectx.has_stacks |= site_has_pystack(site);
		if (!site_has_ustack(site))
			continue;
		s->ectx.has_stacks = true;
		for (unsigned a = 0; a < site->nargs; a++) {
			struct fetch_insn *in = &site->args[a].insn[0];

			if (in->op != FOP_USTACK)
				continue;
			if (s->set.stack_bytes)
				in->imm = (int64_t)((uint64_t)(uint32_t)in->imm |
						    (uint64_t)s->set.stack_bytes << 32);
			if (s->opts.stack_copy)
				in->imm |= FETCH_STACK_COPY;
		}
	}
	s->stats = calloc(s->nsites + 1, sizeof(*s->stats));
	s->stack_fb = calloc((s->nsites + 1) * USC_STACK_FB_NR, sizeof(*s->stack_fb));
	if (!s->stats || !s->stack_fb)
		return -ENOMEM;
	s->totals.sites = s->stats;
	return session_plan_engines(s);
}

/* Does a recorded site answer to spec's location (its symbol, a glob, or
 * for USDT PROVIDER:NAME, against the recorded label)? */
static bool replay_match(const struct usc_probe_spec *spec, const struct usc_site *site)
{
	char usdt[USC_NAME_MAX * 3 + 2];

	if (spec->loc_kind == USC_LOC_USDT) {
		snprintf(usdt, sizeof(usdt), "%s:%s", spec->provider, spec->symbol);
		return !fnmatch(usdt, site->label, 0);
	}
	if (spec->is_return != site->is_return)
		return false;
	return (site->symbol && !fnmatch(spec->symbol, site->symbol, 0)) ||
	       !fnmatch(spec->symbol, site->label, 0);
}

/* A recording's maps (each REC_MAPS chunk, the later winning where they
 * overlap): stacks and :symbol values are read with them, never with this
 * machine's /proc (the recorded pids may be other processes here). */
static int replay_maps(void *ctx, pid_t pid, const struct proc_map *m, size_t n)
{
	struct usc_session *s = ctx;

	return cache_set_maps(s->cache, pid, m, n);
}

int usc_session_replay(struct usc_session *s, const char *path, struct usc_probe_spec *specs,
		       size_t nspecs)
{
	struct session_engine *se;
	struct rec_file *f;
	struct usc_engine *e;
	size_t matched = 0;
	int ret;

	s->engines = calloc(1, sizeof(*s->engines));
	if (!s->engines)
		return -ENOMEM;
	ret = source_open(&s->ectx, path, &e);
	if (ret)
		return ret;
	se = &s->engines[0];
	se->ops = &source_engine_ops;
	se->e = e;
	s->nengines = 1;
	f = source_file(e);
	cache_freeze(s->cache);
	if (rec_file_maps(f, replay_maps, s) == -ENOMEM || session_python_replay(s, f))
		return -ENOMEM;
	s->replayed = rec_file_header(f);
	s->specs = rec_file_specs(f, &s->nspecs);
	s->sites = rec_file_take_sites(f, &s->nsites);
	s->ectx.sites = s->sites;
	s->ectx.nsites = s->nsites;
	for (size_t i = 0; i < s->nsites; i++)	/* $pystack's frames are named too */
		s->ectx.has_stacks |= site_has_ustack(&s->sites[i]) || site_has_pystack(&s->sites[i]);
	s->stats = calloc(s->nsites + 1, sizeof(*s->stats));
	s->stack_fb = calloc((s->nsites + 1) * USC_STACK_FB_NR, sizeof(*s->stack_fb));
	s->place = calloc(s->nsites + 1, sizeof(*s->place));
	if (!s->stats || !s->place || !s->stack_fb)
		return -ENOMEM;
	s->totals.sites = s->stats;
	s->target.kind = USC_TARGET_SYSTEM;
	for (size_t i = 0; i < s->nsites; i++) {
		struct usc_site *site = &s->sites[i];
		const struct usc_probe_spec *sp = NULL;

		/* PROBEs given: the recorded sites they name, with their filters */
		for (size_t k = 0; k < nspecs && !sp; k++)
			if (replay_match(&specs[k], site))
				sp = &specs[k];
		s->place[i].engine = nspecs && !sp ? -1 : 0;
		/* hist histograms a value: a recorded site without one (a
		 * return probe) has nothing for it */
		if (s->set.agg.kind == USC_AGG_HIST && !probe_shown_args(site->args, site->nargs))
			s->place[i].engine = -1;
		if (!sp || site->hidden || s->place[i].engine < 0)
			continue;
		matched++;
		if (sp->filter.n) {
			const char *bad = NULL;

			ret = probe_bind_filter(&sp->filter, site->args, site->nargs, &site->filter, &bad);
			if (ret) {
				log_error("%s: if %.*s: %s has no recorded argument named '%s'%s", sp->text,
					  (int)sp->filter.len, sp->text + sp->filter.pos, site->label,
					  bad ? bad : "?", ret == -EINVAL ? " of that type" : "");
				return ret;
			}
			/* the recording's source filters, as an engine where the
			 * probe runs would (record/source.c): counted after it */
			site->filter_in_place = true;
		}
	}
	if (nspecs && !matched) {
		log_error("%s: no recorded probe answers to %s%s", path, specs[0].text,
			  nspecs > 1 ? " or the others" : "");
		return -ENOENT;
	}
	for (size_t i = 0; i < s->nsites; i++)
		se->nsites += s->place[i].engine == 0;
	return session_plan_agg(s);
}

bool usc_session_target_missing(const struct usc_session *s)
{
	return s->target_missing;
}

const char *usc_session_engine_of(const struct usc_session *s, size_t i)
{
	if (i >= s->nsites || !s->place || s->place[i].engine < 0)
		return NULL;
	return s->engines[s->place[i].engine].ops->name;
}

/* ---- the run ------------------------------------------------------------ */

struct run {
	struct usc_session *s;
	struct spawned sp;
	pid_t child;		/* COMMAND, until reaped */
	int sfd, pfd;
	bool ptraced;		/* an engine holds COMMAND's tree by ptrace */
	bool running;		/* COMMAND was started before the plan (pending modules) */
	bool gone, stopping;
	int status;
	int sigints;		/* the terminal's SIGINTs and SIGHUPs */
	int forward;		/* a signal for COMMAND once the probes are gone */
	const char *dump_why;	/* the flight recorder is to write (SIGUSR1) */
};

static int pidfd_open_(pid_t pid)
{
	return (int)syscall(SYS_pidfd_open, pid, 0);
}

/* Hand each engine its sites and create their probes; an engine with none
 * is not used. */
static int attach_engines(struct usc_session *s)
{
	for (size_t k = 0; k < s->nengines; k++) {
		struct session_engine *se = &s->engines[k];
		struct usc_engine *e = se->e;
		int ret;

		if (!e)
			continue;
		if (!se->nsites) {
			e->ops->destroy(e);
			se->e = NULL;
			continue;
		}
		if (session_engine_sites(s, k))
			return -ENOMEM;
		se->live = true;
		s->nlive++;
		ret = e->ops->attach(e);
		if (ret)
			return ret;
	}
	if (session_fallback_prepare(s))
		return -ENOMEM;		/* (its only failure) */
	if (s->nlive > 1) {
		s->merge = merge_new();
		if (!s->merge)
			return -ENOMEM;
	}
	return 0;
}

/* Wait statuses: COMMAND's end is ours; the stops and ends of processes an
 * engine holds by ptrace are the engine's. */
static void reap(struct run *r)
{
	struct usc_session *s = r->s;
	int st;
	pid_t pid;

	for (;;) {
		pid = waitpid(r->ptraced ? -1 : r->child, &st, __WALL | WNOHANG);
		if (pid <= 0)
			return;
		if (pid == r->child && (WIFEXITED(st) || WIFSIGNALED(st))) {
			r->gone = true;
			r->status = st;
			r->child = -1;
		}
		for (size_t k = 0; k < s->nengines && r->ptraced; k++)
			if (s->engines[k].live && s->engines[k].ops->waited)
				s->engines[k].ops->waited(s->engines[k].e, pid, st);
		if (!r->ptraced)
			return;
	}
}

/* Ctrl-Z without a COMMAND (uscope alone in the foreground): it stops, as
 * SIGTSTP would have it. No engine holds a process then (inject's under -p
 * and system-wide let it go after the attach: its forks take themselves up,
 * engine/inject/forks.c), and what waits for uscope waits a bound
 * (--max-wait). */
static void tstp(struct run *r)
{
	(void)r;
	kill(getpid(), SIGSTOP);
}

static void read_signals(struct run *r)
{
	struct signalfd_siginfo si;

	while (read(r->sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		if (si.ssi_signo == SIGCHLD || si.ssi_signo == SIGPIPE)
			continue;
		if (si.ssi_signo == SIGUSR1) {
			r->dump_why = "SIGUSR1";
			continue;
		}
		if (si.ssi_signo == SIGTSTP) {
			tstp(r);
			continue;
		}
		switch (session_signal_act(&si, r->child > 0, &r->sigints)) {
		case SESSION_SIG_FORWARD:
			r->forward = (int)si.ssi_signo;
			/* fall through */
		case SESSION_SIG_STOP:
			r->stopping = true;
			break;
		case SESSION_SIG_NONE:
			break;
		}
	}
}

/* What the sinks are told of the session, now that it is planned. */
static int fill_sink_ctx(struct usc_session *s)
{
	size_t nprocs = 0;

	s->engine_names = calloc(s->nengines + 1, sizeof(*s->engine_names));
	s->engine_nsites = calloc(s->nengines + 1, sizeof(*s->engine_nsites));
	if (!s->engine_names || !s->engine_nsites)
		return -ENOMEM;
	for (size_t k = 0; k < s->nengines; k++) {
		const struct session_engine *se = &s->engines[k];

		s->engine_names[k] = se->ops->name;
		s->engine_nsites[k] = se->nsites;
		if (se->live && se->ops->procs)
			nprocs += se->ops->procs(se->e, &(size_t){0});
	}
	s->sctx = (struct usc_sink_ctx){
		.specs = s->specs,
		.nspecs = s->nspecs,
		.sites = s->sites,
		.nsites = s->nsites,
		.place = s->place,
		.engine_names = s->engine_names,
		.engine_nsites = s->engine_nsites,
		.nengines = s->nengines,
		.cache = s->cache,
		.set = &s->set,
		.replayed = s->replayed,
		.pid = s->pid,
		.exe = s->pid ? s->target.exe : NULL,
		.command = s->opts.cmd != NULL,
		.script_src = s->script_src,
		.nprocs = nprocs + s->nfallback[0],
	};
	return 0;
}

/* The file COMMAND runs: the script itself when it is one (the kernel
 * finds its interpreter, as the shell would). */
static const char *command_file(const struct usc_session *s)
{
	return s->target.script ? s->target.script : s->target.exe;
}

static int start_target(struct run *r, const sigset_t *oldmask, struct usc_run_result *res)
{
	struct usc_session *s = r->s;
	int ret;

	if (r->running) {
		s->pid = r->child;	/* COMMAND runs already: as with -p */
	} else if (s->opts.cmd) {
		for (size_t k = 0; k < s->nengines; k++)
			r->ptraced |= s->engines[k].live && s->engines[k].ops->trace_exec;
		ret = spawn_held(command_file(s), s->opts.cmd, oldmask, &r->sp);
		if (ret) {
			log_error("cannot start %s: %s", s->opts.cmd[0], strerror(-ret));
			return ret;
		}
		r->child = r->sp.pid;
		s->pid = r->child;
		session_watch_maps(s, r->child, true);
		for (size_t k = 0; k < s->nengines; k++) {
			struct session_engine *se = &s->engines[k];

			if (se->live && se->ops->trace_exec && (ret = se->ops->spawned(se->e, r->child)))
				return ret;
		}
	} else {
		s->pid = s->opts.pid;
	}
	/* -p (or COMMAND run already): an engine that follows its children by
	 * ptrace has their wait statuses */
	if ((!s->opts.cmd || r->running) && s->ectx.children)
		for (size_t k = 0; k < s->nengines; k++)
			r->ptraced |= s->engines[k].live && s->engines[k].ops->trace_exec;
	if (!s->mapwatch)
		session_watch_maps(s, s->pid, false);
	for (size_t k = 0; k < s->nengines; k++) {
		struct session_engine *se = &s->engines[k];

		if (se->live && !se->fallback && (ret = se->ops->start(se->e, s->pid,
						      (s->opts.cmd != NULL && !r->running) ||
						      s->ectx.children)))
			return ret;
	}
	if (s->pid && !s->opts.cmd)
		r->pfd = pidfd_open_(s->pid);
	/* -p: the engines told where its CPython is before "tracing" says the
	 * probes are in ($pystack on bpf from the first hit) */
	session_python_poll(s);
	if ((ret = fill_sink_ctx(s)))
		return ret;
	for (size_t k = 0; k < s->nsinks; k++)
		if (s->sinks[k]->ops->begin && (ret = s->sinks[k]->ops->begin(s->sinks[k], &s->sctx)))
			return ret;
	ret = session_record_begin(s);
	if (ret)
		return ret;
	if (!s->opts.cmd || r->running)
		return 0;
	ret = spawn_go(&r->sp);
	if (ret > 0) {
		log_error("cannot run %s: %s", s->opts.cmd[0],
			  ret == ENOENT ? "command not found" : strerror(ret));
		res->exec_errno = ret;
		r->child = -1;
		return -ret;
	}
	if (ret) {
		log_error("cannot start %s: %s", s->opts.cmd[0], strerror(-ret));
		return ret;
	}
	for (size_t k = 0; k < s->nengines; k++) {
		struct session_engine *se = &s->engines[k];

		if (se->live && se->ops->trace_exec && (ret = se->ops->launched(se->e, r->child))) {
			log_error("cannot attach to %s", s->opts.cmd[0]);
			kill(r->child, SIGKILL);
			return ret;
		}
	}
	return 0;
}

/* COMMAND first, then the plan, once it has mapped its pending modules;
 * then it is traced as a running process. */
static int run_pending(struct run *r, const sigset_t *oldmask, struct usc_run_result *res)
{
	struct usc_session *s = r->s;
	int ret = spawn_held(command_file(s), s->opts.cmd, oldmask, &r->sp);

	if (ret) {
		log_error("cannot start %s: %s", s->opts.cmd[0], strerror(-ret));
		return ret;
	}
	r->child = r->sp.pid;
	ret = spawn_go(&r->sp);
	if (ret) {
		log_error("cannot run %s: %s", s->opts.cmd[0],
			  ret == ENOENT ? "command not found" : strerror(ret > 0 ? ret : -ret));
		if (ret > 0)
			res->exec_errno = ret;
		r->child = -1;
		return ret > 0 ? -ret : ret;
	}
	ret = session_wait_modules(s, r->child, r->sfd, &r->sigints, &r->status, &res->signal);
	if (ret == -ECHILD) {
		r->child = -1;
		r->gone = true;
		res->target_exited = true;
		res->status = r->status;
		return ret;
	}
	if (ret)
		return ret;
	r->running = true;
	s->target.kind = USC_TARGET_PID;
	s->target.pid = r->child;
	return session_plan_sites(s);
}

/* Every engine is a source with an end (a recording), and has ended. */
static bool sources_ended(const struct usc_session *s)
{
	size_t live = 0;

	for (size_t k = 0; k < s->nengines; k++) {
		const struct session_engine *se = &s->engines[k];

		if (!se->live)
			continue;
		if (!se->ops->ended || !se->ops->ended(se->e))
			return false;
		live++;
	}
	return live > 0;
}

static int loop(struct run *r)
{
	struct usc_session *s = r->s;
	uint64_t now = session_mono_ns();
	uint64_t deadline = s->opts.duration > 0 ? now + (uint64_t)(s->opts.duration * 1e9) : 0;
	uint64_t step = s->set.interval > 0 ? (uint64_t)(s->set.interval * 1e9) : 0;
	uint64_t next_report = step ? now + step : 0;
	uint64_t next_refresh = session_sinks_refresh_wanted(s) ? now : 0;

	while (!r->stopping) {
		struct pollfd fds[8];
		int nfds = 0, n;
		bool polled = false;

		n = session_poll_engines(s, false);
		if (n < 0)
			return n;
		if (session_sinks_flush(s) || sources_ended(s))
			break;
		read_signals(r);
		if (r->dump_why) {
			n = session_record_dump(s, r->dump_why);
			r->dump_why = NULL;
			if (n < 0)
				return n;
		}
		if (r->child > 0 || r->ptraced)
			reap(r);
		if (r->child <= 0 && r->pfd >= 0) {
			struct pollfd p = {.fd = r->pfd, .events = POLLIN};

			r->gone |= poll(&p, 1, 0) > 0;
		}
		if (r->gone)
			break;
		now = session_mono_ns();
		if (deadline && now >= deadline)
			break;
		if (next_report && now >= next_report) {
			session_sinks_report(s, false);
			next_report += step;
		}
		if (next_refresh && now >= next_refresh) {
			session_sinks_refresh(s);
			next_refresh = now + SESSION_REFRESH_MS * 1000000ULL;
			if (s->sink_stop)
				break;
		}
		if (n > 0)
			continue;	/* more may be waiting: drain without sleeping */
		fds[nfds++] = (struct pollfd){.fd = r->sfd, .events = POLLIN};
		if (r->pfd >= 0)
			fds[nfds++] = (struct pollfd){.fd = r->pfd, .events = POLLIN};
		/* recording, stacks: the engines' buffers fill in milliseconds at
		 * full rate, and a lossless producer waits meanwhile: an engine
		 * that wakes us past a watermark is slept on, others polled */
		for (size_t k = 0; k < s->nengines; k++) {
			const struct session_engine *se = &s->engines[k];
			int fd = -1;

			if (se->live && se->ops->wait_fd && nfds < 8)
				fd = se->ops->wait_fd(se->e);
			if (fd >= 0)
				fds[nfds++] = (struct pollfd){.fd = fd, .events = POLLIN};
			else
				polled |= se->live;
		}
		poll(fds, (nfds_t)nfds, (s->rec || s->ectx.has_stacks) && polled ? 1 : POLL_MS);
	}
	return 0;
}

/* The traced process has ended: say how (a signal, on stderr). COMMAND's
 * wait status is ours; a running process's, the kernel's (session/target.c). */
static void target_ended(struct run *r)
{
	struct usc_session *s = r->s;
	bool known = true;

	if (!r->gone)
		return;
	if (!s->opts.cmd)
		known = !session_exit_status(r->pfd, s->pid, &r->status);
	session_report_end(s->pid, r->status, known);
}

/* No new hits, then everything already recorded. */
static void drain(struct usc_session *s)
{
	for (size_t k = 0; k < s->nengines; k++)
		if (s->engines[k].live)
			s->engines[k].ops->stop(s->engines[k].e);
	for (int k = 0; k < 1000 && !s->sink_stop; k++) {
		int n = session_poll_engines(s, true);

		session_sinks_flush(s);
		if (n <= 0)
			break;
	}
}

int usc_session_run(struct usc_session *s, struct usc_run_result *res)
{
	struct run r = {.s = s, .sp = {-1, -1, -1}, .child = -1, .sfd = -1, .pfd = -1};
	sigset_t mask, oldmask;
	int ret;

	memset(res, 0, sizeof(*res));
	/* From here on, every way out goes through the cleanup: the signals
	 * that end a session are read from a signalfd, never acted on
	 * asynchronously. */
	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGHUP);
	sigaddset(&mask, SIGCHLD);
	sigaddset(&mask, SIGPIPE);
	if (s->set.record.on && s->set.record.snapshot)
		sigaddset(&mask, SIGUSR1);	/* the flight recorder writes */
	if (!s->opts.cmd)
		sigaddset(&mask, SIGTSTP);	/* read_signals: not while holding tracees */
	sigprocmask(SIG_BLOCK, &mask, &oldmask);
	r.sfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
	if (r.sfd < 0) {
		/* no way to hear Ctrl-C or COMMAND's end: start nothing */
		ret = -errno;
		log_error("cannot read signals (signalfd: %s)", strerror(-ret));
		sigprocmask(SIG_SETMASK, &oldmask, NULL);
		res->err = ret;
		return ret;
	}

	ret = s->npending ? run_pending(&r, &oldmask, res) : 0;
	if (!ret)
		ret = attach_engines(s);
	if (!ret)
		ret = start_target(&r, &oldmask, res);
	if (ret == -ENOMEM)
		log_error("out of memory");	/* (the rest say their own) */
	if (!ret) {
		ret = loop(&r);
		target_ended(&r);
		if (s->rec && s->set.record.snapshot) {
			/* the flight recorder's last words: at the end, and
			 * when COMMAND died by a signal, its last records */
			char why[96];

			if (r.gone && WIFSIGNALED(r.status))
				snprintf(why, sizeof(why), "the traced process died of SIG%s",
					 sigabbrev_np(WTERMSIG(r.status)) ?
					 sigabbrev_np(WTERMSIG(r.status)) : "?");
			else
				snprintf(why, sizeof(why), "the end of the run");
			if (session_record_last(s, why) && !ret)
				ret = -EIO;
		}
		drain(s);
		s->raw.snapshot = false;
		int failed = session_sinks_report(s, true);

		if (!ret && failed)
			ret = failed;
		res->target_exited = r.gone && s->opts.cmd;
		res->status = r.status;
	}
	for (size_t k = 0; k < s->nengines; k++)
		if (s->engines[k].e) {
			s->engines[k].ops->detach(s->engines[k].e);
			s->engines[k].live = false;
		}
	/* A signal sent to uscope alone: COMMAND has it too, now that nothing
	 * of ours is in it, and runs on (we do not wait for it). */
	if (r.forward && r.child > 0 && !r.gone) {
		kill(r.child, r.forward);
		res->signal = r.forward;
	}
	/* A COMMAND still held before its exec sees its pipe close and exits;
	 * one that runs when we stop first (-d, Ctrl-C twice, an error) runs
	 * on, untraced. */
	if (r.sp.go_w >= 0 && r.child > 0) {
		spawn_close(&r.sp);
		waitpid(r.child, NULL, __WALL);
	}
	spawn_close(&r.sp);
	if (r.pfd >= 0)
		close(r.pfd);
	if (r.sfd >= 0)
		close(r.sfd);
	sigprocmask(SIG_SETMASK, &oldmask, NULL);
	res->err = ret;
	return ret;
}

void usc_session_free(struct usc_session *s)
{
	if (!s)
		return;
	for (size_t k = 0; k < s->nengines; k++)
		if (s->engines[k].e) {
			struct usc_engine *e = s->engines[k].e;
			const struct usc_site **sites = e->sites;

			e->ops->destroy(e);
			free(sites);
		}
	session_janitor_end(s);
	merge_free(s->merge);
	mapwatch_close(s->mapwatch);
	session_agg_free(s);
	for (size_t i = 0; i < USC_MAX_ARGS; i++)
		free(s->stacks[i]);
	session_obj_free(s);
	session_python_free(s);
	free(s->script_src);
	free(s->engines);
	free(s->engine_names);
	free(s->engine_nsites);
	free(s->place);
	free(s->stats);
	free(s->dropped);
	free(s->stack_fb);
	free(s->sinks);
	resolve_sites_free(s->sites, s->nsites);
	resolve_target_release(&s->target);
	cache_free(s->cache);
	free(s);
}
