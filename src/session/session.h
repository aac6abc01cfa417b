/* A tracing session: the library object that runs one trace.
 *
 *   usc_session_new -> usc_session_add_sink ... -> usc_session_plan(probes)
 *   -> usc_session_run -> usc_session_free
 *
 * plan resolves the probes into sites (resolve/) and chooses the engine of
 * each site from what the engines say they can place: with engine "auto",
 * inject where it can patch, otherwise bpf, otherwise tracefs. run spawns
 * COMMAND or attaches to PID, starts every engine that took a site, polls
 * them, merges their events in time order into the sinks (sink.h), stops at
 * the target's end, the duration, or SIGINT/SIGTERM/SIGHUP (session/target.c
 * says what becomes of COMMAND then), drains what was recorded, reports the
 * counts, and removes every probe, on every way out; what the kernel would
 * not remove if uscope were killed, its janitor does (session/janitor.c).
 *
 * Events flow from sources (the engines) to sinks (text, JSON, flow,
 * count...): a command is a choice of sinks. The session owns the cache of
 * ELF files and debug info that resolve, the engines and the sinks share.
 * The library never prints: failures are reported through the log hook
 * (core/log.h), once, by the layer that knows what to say. */
#ifndef USC_SESSION_SESSION_H
#define USC_SESSION_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "engine/engine.h"
#include "agg/agg.h"
#include "probe/probe.h"
#include "cache/cache.h"
#include "resolve/resolve.h"
#include "sink/sink.h"

struct agg_table;
struct rec_writer;

#define SESSION_MAX_PENDING 16
#define SESSION_MAX_WAIT_NS 100000000ULL	/* --max-wait's default: 100 ms */

struct usc_session_opts {
	pid_t pid;			/* trace a running process (-p) */
	const char *root;		/* system-wide: MODULE paths under it (--root) */
	char *const *cmd;		/* or start COMMAND (argv, NULL-terminated);
					 * neither: system-wide */
	const char *engine;		/* NULL or "auto", or an engine's name */
	double duration;		/* seconds, 0: until the target ends */
	double interval;		/* seconds, 0: none: sinks report() every interval */
	uint32_t stack_bytes;		/* $ustack: bytes of stack copied (0: 8 KiB) */
	bool stack_copy;		/* $ustack: copied at every hit (--stack-mode
					 * copy), not walked where the probe runs */
	bool count_only;		/* only hit counts are wanted: engines may
					 * count instead of recording */
	unsigned resolve_flags;		/* RESOLVE_URETPROBE, RESOLVE_NO_INLINES */
	bool no_children;		/* -p: its own threads only, not the processes
					 * it forks after attach (--no-children) */
	struct usc_agg_opts agg;
	/* uscope objtrace: probes with an obj_role follow objects; the set
	 * holds max_objects at most (a --from hit beyond is reported) */
	struct {
		bool on;
		uint32_t max_objects;
	} objtrace;
	/* uscope record: engines write their records unformatted to the
	 * recorder sink, lossless unless drop (a full buffer drops and counts);
	 * snapshot: the flight recorder, the last that many bytes a thread
	 * (a CPU, on tracefs) kept in memory and written at the end */
	struct {
		bool on, drop;
		uint64_t snapshot;
	} record;
	/* a lossless producer (record, stacks counted) waits for room at most
	 * this long a wait (0: SESSION_MAX_WAIT_NS; record.drop: never) */
	uint64_t max_wait_ns;
	/* the executable the janitor runs, after uscope died, to take out what
	 * an inject session left in the processes it patched: one whose main
	 * hands USC_JANITOR_ARG to usc_janitor_main (the CLI gives
	 * /proc/self/exe). NULL: the janitor removes the tracefs events and
	 * heals the uprobes only, and the inject agents let go alone (what no
	 * atomic store takes out stays, for a later uscope to take out) */
	const char *janitor_exe;
	/* the engines to choose from, in order of preference (tests give a
	 * fake one); NULL: usc_engines */
	const struct usc_engine_ops *const *engines;
	size_t nengines;
};

/* One engine of the session. */
struct session_engine {
	const struct usc_engine_ops *ops;
	struct usc_engine *e;	/* NULL: not created (why says why) or not used */
	char why[256];
	size_t nsites;		/* sites it took */
	bool live;
};

struct session_merge;
struct session_janitor;
struct session_python;
struct rec_header;

struct usc_session {
	struct usc_session_opts opts;
	struct usc_target target;
	struct usc_cache *cache;
	/* what the engines are told (engine/engine.h): the sites, the target,
	 * the cache and the options, kept up to date as the plan goes */
	struct usc_engine_ctx ectx;
	/* what the sinks are told (sink/sink.h), filled once planned */
	struct usc_sink_ctx sctx;
	const char **engine_names;
	size_t *engine_nsites;
	struct usc_probe_spec *specs;
	size_t nspecs;
	struct usc_site *sites;
	size_t nsites;
	struct usc_placement *place;	/* nsites */
	struct session_engine *engines;
	size_t nengines;
	/* sinks, in the order they were added */
	struct usc_sink **sinks;
	size_t nsinks;
	/* the run */
	pid_t pid;			/* the traced process (COMMAND once started) */
	size_t nlive;			/* engines with sites */
	struct session_merge *merge;	/* several engines: events wait here */
	int sink_stop;			/* a sink asked to stop (write error) */
	bool target_missing;		/* plan: COMMAND was not found */
	struct usc_site_stats *stats;	/* nsites, from every engine */
	struct usc_stats totals;	/* sites = stats */
	uint64_t *dropped;		/* nsites (made at the first): events an engine
					 * delivered that the session dropped (objtrace:
					 * no followed object; a filter the engine could
					 * not apply), not counted as events */
	struct agg_table *agg_seen;	/* the rows aggregated in place, as last read */
	/* COMMAND's MODULEs that exist only once it runs: planned once it has
	 * mapped them, COMMAND then traced as with -p (session/pending.c) */
	const char *pending[SESSION_MAX_PENDING];
	size_t npending;
	struct rec_writer *rec;		/* recording: where the engines write (a sink's) */
	const struct rec_header *replayed;	/* usc_session_replay: the file's header */
	/* $ustack: stacks are unwound as events go to the sinks, into
	 * these (one per argument, USC_STACK_FRAMES_MAX frames each) */
	struct usc_stack *stacks[USC_MAX_ARGS];
	struct usc_value stack_vals[USC_MAX_ARGS];
	uint64_t stacks_unwound;
	uint64_t *stack_fb;		/* [nsites][USC_STACK_FB_NR]: the walks that fell
					 * back to a copy, by why */
	struct mapwatch *mapwatch;	/* ... the maps as they change (stack/mapwatch.h) */
	struct usc_raw_out raw;		/* recording: where the engines write (recording.c) */
	struct session_objset *objset;	/* objtrace: the set kept here, for the sites
					 * of an engine that keeps none (session/objtrace.c) */
	/* what the engines made that the kernel would not remove if uscope
	 * died: undone then by the janitor (session/janitor.c) */
	struct usc_undo undo;
	struct session_janitor *janitor;
	struct session_python *python;	/* CPython in the target (session/python.c) */
};

/* How a run ended. */
struct usc_run_result {
	int err;		/* 0, or -errno: the run failed (reported) */
	bool target_exited;	/* COMMAND (or PID) ended while traced */
	int status;		/* COMMAND's wait status, when target_exited */
	int exec_errno;		/* COMMAND could not be run: its exec's errno */
	int signal;		/* a signal sent to uscope alone ended the run:
				 * COMMAND was given it too, and left running
				 * (exit 128+signal) */
};

int usc_session_new(const struct usc_session_opts *o, struct usc_session **out);
void usc_session_free(struct usc_session *s);

/* Instead of usc_session_plan: the session's source is the recording at
 * path (uscope CMD -r FILE), its probes and sites the recorded ones; specs,
 * when given, name the recorded probes to read (their locations, globs
 * allowed) and filter them (if COND over the recorded arguments). 0 or
 * -errno (reported). */
int usc_session_replay(struct usc_session *s, const char *path, struct usc_probe_spec *specs,
		       size_t nspecs);

/* Events and reports go to every sink added, in order. The session does not
 * own them: free them after usc_session_free. */
int usc_session_add_sink(struct usc_session *s, struct usc_sink *k);

/* Resolve the probes (the session keeps a pointer to specs: they must
 * outlive it) and choose an engine for every site. 0 or -errno, reported. */
int usc_session_plan(struct usc_session *s, struct usc_probe_spec *specs, size_t nspecs);

/* Run the planned session to its end; see above. 0 (res filled) or
 * -errno (reported; res->err too). */
int usc_session_run(struct usc_session *s, struct usc_run_result *res);

/* The name of the engine that took site i, or NULL (skipped). */
const char *usc_session_engine_of(const struct usc_session *s, size_t i);

/* The janitor's second life (session/janitor_exec.c): argv[0] is
 * USC_JANITOR_ARG, then "-p PID" for each process an inject session that
 * died had patched. The executable named by usc_session_opts.janitor_exe
 * calls it when its first argument is USC_JANITOR_ARG, before anything
 * else. Returns the exit status. */
#define USC_JANITOR_ARG "--janitor"
int usc_janitor_main(int argc, char **argv);

/* Called by the engines' poll: an event, to the sinks (in time order). */
int session_deliver(const struct usc_event *ev, void *ctx);

#endif
