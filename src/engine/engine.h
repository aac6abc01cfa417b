/* Engines behind one ops table.
 *
 * An engine only places sites and delivers what they record: the session
 * (src/session/) decides which engine takes which site, from what each
 * says it can place, and no engine calls another. An engine sees of the
 * session only its context (struct usc_engine_ctx: the sites, the target,
 * the options that change how it places and buffers) and hands back events
 * through poll's callback, or raw records through record's usc_raw_out: it
 * knows neither the session's struct nor the recording's file.
 *
 * Each engine embeds struct usc_engine in its own state and recovers itself with container_of, as
 * libbpf's links do. Lifecycle:
 *   create (no side effect) -> can_place(site) for the sites it may take ->
 *   attach (the session has handed it e->sites: create their probes, not
 *   yet live) -> start(pid) (go live) -> poll ... -> stop (no new hits) ->
 *   poll (drain) -> stats -> detach (remove everything) -> destroy.
 * detach must be safe to call at any point and more than once. */
#ifndef USC_ENGINE_ENGINE_H
#define USC_ENGINE_ENGINE_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "agg/agg.h"
#include "agg/settings.h"
#include "probe/event.h"
#include "resolve/resolve.h"

struct usc_engine;
struct usc_cache;
struct usc_raw_inject;	/* engine/raw.h */
struct python_runtime;	/* python/detect.h */

/* What uscope's janitor undoes for an engine when uscope dies before the
 * engine could (SIGKILL, a crash, the OOM killer): the janitor is a small
 * process that learns, as the run goes, what is to be undone, and does what
 * is still to do once uscope is gone (session/janitor.c). An engine adds
 * each thing it creates before it creates it (so that nothing exists that
 * the janitor does not know), and says when it removed it itself. Only
 * what the kernel does not remove with uscope's files needs it (tracefs
 * events and instances; bpf links go with their file descriptors). */
enum usc_undo_kind {
	USC_UNDO_WRITE,		/* write text to the file at path (appending: a
				 * "-:GROUP/EVENT" line to uprobe_events) */
	USC_UNDO_RMDIR,		/* remove the directory at path (a tracefs instance) */
	/* a kernel uprobe at file path, offset text (decimal). A process
	 * killed while the kernel removes its uprobe's breakpoints (in its own
	 * write, close or rmdir) has the kernel give up: the breakpoints stay
	 * in the processes ("failed to unregister, leaking uprobe"). After
	 * uscope died, the janitor places and removes a uprobe there itself
	 * (a perf event on its own process: no breakpoint lands elsewhere),
	 * which removes every breakpoint left. done() does not apply: the
	 * engine cannot know. */
	USC_UNDO_UPROBE,
	/* the inject engine patched process text (decimal; path: its
	 * /proc/PID). After uscope died, the janitor gives the agent there a
	 * moment to let go (engine/inject/agent/tracer.c), then takes out with
	 * every thread stopped what the agent could not (inj_janitor_undo):
	 * only when the session gave it an executable to run for that
	 * (usc_session_opts.janitor_exe). done(): restored, or the process
	 * has gone. Or text "mem:DEV:INO": the shared memory of a process
	 * whose forked children take themselves up (they map it): each
	 * process that maps that memfd then, as above (inj_janitor_undo_memfd). */
	USC_UNDO_INJECT,
	/* the inject engine's gate (engine/inject/gate.c): text, its map's id,
	 * the value (a u32 keyed by tgid) of a process the gate stopped, and
	 * of one let go (decimal, space-separated). The janitor opens the map
	 * by its id when told; after uscope died, it sends SIGCONT to every
	 * process the map has as stopped, and marks it let go. done() does
	 * not apply. */
	USC_UNDO_GATE,
};

struct usc_undo {
	void *ctx;
	/* Before creating it: a handle (> 0) for done, or -errno (nothing will
	 * undo it if uscope dies: said once). */
	int (*add)(const struct usc_undo *u, enum usc_undo_kind kind, const char *path,
		   const char *text);
	/* It was undone (or never made): the janitor forgets it (not
	 * USC_UNDO_UPROBE). */
	void (*done)(const struct usc_undo *u, int id);
};

/* What an engine is told of the session. The session fills it before it
 * creates its engines and keeps it until they are destroyed; the sites are
 * set once planned (a site's index in the session is site - sites). */
struct usc_engine_ctx {
	const struct usc_target *target;
	struct usc_cache *cache;		/* ELF files and debug info, shared */
	const struct usc_undo *undo;		/* what to undo if uscope dies (NULL: none) */
	const struct usc_site *sites;	/* every site of the session */
	size_t nsites;
	const struct usc_settings *set;	/* the run's settings (agg/settings.h) */
	/* -p: the processes the target forks after attach (and theirs) are
	 * traced too, as COMMAND's are (not --no-children); a child that
	 * execs another program leaves unless a probe names that program */
	bool children;
	bool has_stacks;		/* a site fetches $ustack */
	/* -e named the engine (not auto): system-wide, the inject engine is
	 * used only then (engine/inject/system.c) */
	bool engine_named;
	/* System-wide: the engine that takes, for each process alone, the
	 * processes the inject engine may not ptrace or patch (its name; NULL:
	 * none, they are left out). refused hands it one, before the process
	 * runs on (a stopped one is let go after): 0 when it is traced there,
	 * or -errno (said by the session). */
	const char *fallback;
	int (*refused)(const struct usc_engine_ctx *ctx, pid_t pid);
};

/* What each site of a session was given: the engine that took it. */
struct usc_placement {
	int engine;		/* index in the session's engines, or -1 (skipped) */
	char why[256];		/* why it left the preferred engine ("": it did not) */
};

/* Where an engine's records go, unformatted, when the session records
 * (usc_engine_ops.record): the session writes them to the recording
 * (src/record/), whose reader gives them back to the engine's decoders
 * (engine/raw.h). Each returns 0 or -errno, the failure reported. */
struct usc_raw_out {
	void *ctx;
	/* the flight recorder writes now: the overwrite buffers' newest records */
	bool snapshot;
	/* process pid: its maps and the files it maps, described once */
	int (*process)(const struct usc_raw_out *o, pid_t pid);
	/* thread tid's name: known already, or written */
	bool (*knows_thread)(const struct usc_raw_out *o, pid_t tid);
	int (*thread)(const struct usc_raw_out *o, pid_t pid, pid_t tid, const char *comm);
	/* a clock sample: TSC and CLOCK_MONOTONIC ns (core/tsc.h) */
	int (*clock)(const struct usc_raw_out *o, uint64_t tsc, uint64_t ns);
	/* an inject image: its process, and each site's runtime address there */
	int (*image)(const struct usc_raw_out *o, uint32_t image, pid_t pid, const uint64_t *ips,
		     size_t n);
	/* a thread's inject ring bytes, a then b (the ring's end, its start) */
	int (*inject)(const struct usc_raw_out *o, const struct usc_raw_inject *h, const void *a,
		      size_t alen, const void *b, size_t blen);
};

struct usc_engine_ops {
	const char *name;
	/* COMMAND is to be handed to the engine before it execs (spawned) and
	 * once it has exec'd (launched): an engine that patches the process */
	bool trace_exec;
	/* return probes on a tail call deliver at the callee's return (see
	 * usc_site.cont): the engine keeps per-thread state for them */
	bool follows_tail_calls;
	/* the flight recorder (record --snapshot): the engine keeps each
	 * thread's newest records in overwrite buffers, written by record()
	 * when the session says (usc_raw_out.snapshot) */
	bool flight_recorder;
	/* uscope objtrace: the engine keeps the followed objects where the
	 * probe runs (usc_obj_role): its sites' events come with their verdict
	 * and only when it is not 0; otherwise the session keeps the set */
	bool objtrace;
	/* The engine places kernel uprobes: the kernel writes its breakpoint
	 * over the instruction at the site and runs the file's instruction
	 * aside, so code that is not the file's there (another tool's patch,
	 * a dead uscope session's) would crash. The plan checks first that
	 * every process the breakpoint lands in has the file's code at each
	 * site (session/codecheck.c): with -p only the target when
	 * pid_only_uprobes (a uprobe with a process filter is placed in that
	 * process only), otherwise every process that maps the file. */
	bool kernel_uprobes;
	bool pid_only_uprobes;
	/* Set up engine state, without touching the system: check that the
	 * engine can work here at all (support, permission, a target it can
	 * trace). 0, or -errno with the reason in why. */
	int (*create)(const struct usc_engine_ctx *ctx, struct usc_engine **out, char *why,
		      size_t len);
	/* Can the engine place this site? 0, or -ENOTSUP with the reason in
	 * why. What it learns (a patch plan) it keeps for attach: each site is
	 * planned once. */
	int (*can_place)(struct usc_engine *e, const struct usc_site *site, char *why,
			 size_t len);
	/* The link-time byte ranges of site->path the engine changes to place
	 * the site, [r[i][0], r[i][1]); count. The session keeps kernel uprobes
	 * out of the bytes an in-process patch moves. */
	size_t (*footprint)(struct usc_engine *e, const struct usc_site *site,
			    uint64_t (*r)[2], size_t max);
	/* Optional. The plan is made and e->sites handed: what can still fail
	 * for want of the kernel's support, done before any engine attaches
	 * (the bpf engine loads its program). Nothing to undo when it fails.
	 * 0, or -errno with the reason in why, not logged: with -e auto the
	 * session plans again without the engine (and -v says why); with
	 * -e NAME it is the run's error, in one line. */
	int (*prepare)(struct usc_engine *e, char *why, size_t len);
	/* The session has handed e->sites (and prepared it): create their
	 * probes, not yet live. -errno, the reason logged. */
	int (*attach)(struct usc_engine *e);
	/* Go live, for process pid and its threads (0 = system-wide);
	 * follow_children also follows the processes it forks and execs. */
	int (*start)(struct usc_engine *e, pid_t pid, bool follow_children);
	/* trace_exec engines: COMMAND (pid) is forked and held before its exec;
	 * the engine takes hold of it (ptrace) before it runs. -errno. */
	int (*spawned)(struct usc_engine *e, pid_t pid);
	/* trace_exec engines: COMMAND has been let go to exec: install at its
	 * entry point and let it run. -errno. */
	int (*launched)(struct usc_engine *e, pid_t pid);
	/* trace_exec engines: a wait status of a process the engine holds by
	 * ptrace (the session waits for every child, and passes on the stops
	 * and deaths of the ones that are not its own business). */
	void (*waited)(struct usc_engine *e, pid_t pid, int status);
	/* Deliver what is available, waiting at most timeout_ms for it.
	 * Returns the number of events delivered, or -errno. */
	int (*poll)(struct usc_engine *e, int timeout_ms, usc_event_fn fn, void *ctx);
	/* Recording (uscope record): hand what is available to out as the
	 * engine produced it, unformatted, instead of delivering events.
	 * Returns the number of records written, or -errno. Optional: without
	 * it, the engine's events are recorded in uscope's own form. */
	int (*record)(struct usc_engine *e, const struct usc_raw_out *out);
	/* Optional: an fd that becomes readable when the engine has records
	 * to hand over (its producers ring past a watermark), or -1. The
	 * session sleeps on it instead of polling the engine often while it
	 * records or counts stacks; poll and record read it. */
	int (*wait_fd)(struct usc_engine *e);
	/* Optional: a source with an end (a recording): true once it has
	 * delivered everything; the session ends when every source has. */
	bool (*ended)(struct usc_engine *e);
	/* Stop recording new hits; what was recorded can still be polled. */
	void (*stop)(struct usc_engine *e);
	int (*stats)(struct usc_engine *e, struct usc_stats *st);
	void (*detach)(struct usc_engine *e);
	void (*destroy)(struct usc_engine *e);
	/* Optional: process pid runs this CPython (python/detect.h), at these
	 * run-time addresses: an engine that walks its frames where the probe
	 * runs and cannot find it itself (bpf) is told so, once it is mapped
	 * (COMMAND: after its exec; system-wide: at the process's first hit);
	 * rt NULL: pid no longer runs it (gone, exec'd, its pid used again). */
	int (*python)(struct usc_engine *e, pid_t pid, const struct python_runtime *rt);
	/* Optional. Does the engine evaluate the site's filter where the
	 * probe runs? Otherwise the session drops the events it does not
	 * pass. Asked after the plan, before attach. */
	bool (*filters)(struct usc_engine *e, const struct usc_site *site);
	/* Optional. Can the engine aggregate the site where the probe runs
	 * (ctx->set->agg), delivering no event for it? 0, or -ENOTSUP:
	 * the session aggregates its events. Asked after the plan, before
	 * attach; the answer is in site->agg_in_place. */
	int (*agg_place)(struct usc_engine *e, const struct usc_site *site);
	/* Every row aggregated in place, as it stands since attach (count,
	 * sum, buckets), min and max since the previous read: fn(ctx, site,
	 * key, keylen, st, buckets) (usc_agg_fn, agg/agg.h). */
	int (*agg_read)(struct usc_engine *e, usc_agg_fn fn, void *ctx);
	/* Optional: system-wide, the processes the engine attached to at
	 * start (the readiness line says it), and in *late the ones it
	 * attached to since, as they started (the summary says them); 0: it
	 * places probes in files, not processes. */
	size_t (*procs)(struct usc_engine *e, size_t *late);
	/* Optional, uscope script (ctx->set->script): can the engine run the
	 * site's probe (site->script) where the probe fires, its maps in its
	 * own memory, its output records (printf ...) delivered as events
	 * (usc_event.script_rec)? 0, or -ENOTSUP: its events go to uscope,
	 * which runs it. Asked after the plan, before attach; the answer is in
	 * site->script_in_place. */
	int (*script_place)(struct usc_engine *e, const struct usc_site *site);
	/* The rows of the program's map m as the engine holds them, each to
	 * fn (its key; a plain value, or an aggregation's copies combined). */
	int (*script_rows)(struct usc_engine *e, int m,
			   void (*fn)(void *arg, int m, const uint8_t *key, const uint8_t *val),
			   void *arg);
	/* clear(@m) (zero: zero(@m)) where the engine holds map m. */
	void (*script_clear)(struct usc_engine *e, int m, bool zero);
	/* Its counts of runtime errors (by script/prog.h's enum script_err)
	 * and of each map's updates lost for want of room, added to errs and
	 * full. */
	void (*script_errors)(struct usc_engine *e, uint64_t *errs, uint64_t *full);
	/* Optional: after attach, instead of start, trace the sites in process
	 * pid alone (its probes placed in that process only, not in every
	 * process that maps the file): once per process, each live at once.
	 * 0 or -errno. */
	int (*add_pid)(struct usc_engine *e, pid_t pid);
};

struct usc_engine {
	const struct usc_engine_ops *ops;
	const struct usc_engine_ctx *ctx;
	/* the sites the session gave it, before attach */
	const struct usc_site **sites;
	size_t nsites;
};

#ifndef container_of
#define container_of(ptr, type, member) \
	((type *)((char *)(ptr) - __builtin_offsetof(type, member)))
#endif

extern const struct usc_engine_ops tracefs_engine_ops;
extern const struct usc_engine_ops bpf_engine_ops;
extern const struct usc_engine_ops inject_engine_ops;

/* The engines, in the order -e auto prefers them: inject (no trap a hit),
 * bpf (computes every fetch program, reads memory not paged in yet), then
 * tracefs (the kernel's own uprobe_events). */
extern const struct usc_engine_ops *const usc_engines[];
extern const size_t usc_nengines;

/* The session's janitor: see struct usc_undo. */
static inline int engine_undo_add(const struct usc_engine_ctx *ctx, enum usc_undo_kind kind,
				  const char *path, const char *text)
{
	return ctx->undo ? ctx->undo->add(ctx->undo, kind, path, text) : -ENOSYS;
}

static inline void engine_undo_done(const struct usc_engine_ctx *ctx, int id)
{
	if (ctx->undo && id > 0)
		ctx->undo->done(ctx->undo, id);
}

/* After uscope died (the janitor, session/janitor_exec.c): take out what an
 * inject session that died in process pid left there, with ptrace, once
 * its agent has let go or had a moment to (engine/inject/undo.c). 0 (done,
 * or nothing was left, or the process has gone), or -errno. */
int inj_janitor_undo(pid_t pid);
/* The same for every process that maps the memfd (dev, ino): the children a
 * process the inject session patched forked, which the session may not have
 * known of. 0 or -errno (the first failure). */
int inj_janitor_undo_memfd(uint64_t dev, uint64_t ino);

/* An engine by name ("tracefs", "bpf", "inject"), or NULL. */
const struct usc_engine_ops *engine_by_name(const char *name);

/* Does the event pass its site's filter (site->filter, with the
 * interpreter every engine shares: probe/filter_eval.h)? */
bool engine_filter_pass(const struct usc_event *ev);

/* Where in the engine's sites a site is: e->sites[i] == site, or -1. */
ssize_t engine_site_index(const struct usc_engine *e, const struct usc_site *site);

#endif
