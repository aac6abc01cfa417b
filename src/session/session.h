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
#define USC_MAX_WAIT_NEVER UINT64_MAX	/* usc_session_opts.max_wait_ns: never wait */
#define SESSION_MAX_PROCS 256		/* --max-procs's default */

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
	 * recorder sink, lossless within max_wait_ns (a full buffer then drops
	 * and counts); snapshot: the flight recorder, the last that many bytes
	 * a thread (a CPU, on tracefs) kept in memory and written at the end */
	struct {
		bool on;
		uint64_t snapshot;
	} record;
	/* --max-wait, decided here once for every engine: a lossless producer
	 * (record, stacks counted) that finds no room waits for it at most
	 * this long a wait, while the tracer makes progress. 0 (a zeroed
	 * opts): SESSION_MAX_WAIT_NS; USC_MAX_WAIT_NEVER (--drop, --max-wait
	 * 0): it never waits, a full buffer drops and counts. The engines see
	 * the bound itself (usc_settings.max_wait_ns, 0: never: agg/settings.h). */
	uint64_t max_wait_ns;
	/* system-wide on inject: at most this many processes patched
	 * (--max-procs; 0: SESSION_MAX_PROCS) */
	uint32_t max_procs;
	/* the executable the janitor runs, after uscope died, to take out what
	 * an inject session left in the processes it patched: one whose main
	 * hands USC_JANITOR_ARG to usc_janitor_main (the CLI gives
	 * /proc/self/exe). NULL: the janitor removes the tracefs events and
	 * heals the uprobes only, and the inject agents let go alone (what no
	 * atomic store takes out stays, for a later uscope to take out) */
	const char *janitor_exe;
	/* uscope script: the compiled program (script/prog.h), and for each
	 * probe spec the probe of the program its sites run; NULL: none */
	const struct script_blob *script;
	const unsigned *script_probe;
	/* the engines to choose from, in order of preference (tests give a
	 * fake one); NULL: usc_engines */
	const struct usc_engine_ops *const *engines;
	size_t nengines;
};

/* The session: opaque outside src/session (its fields: session_int.h). */
struct usc_session;

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

/* usc_session_plan failed because COMMAND was not found. */
bool usc_session_target_missing(const struct usc_session *s);

/* The janitor's second life (session/janitor_exec.c): argv[0] is
 * USC_JANITOR_ARG, then "-p PID" for each process an inject session that
 * died had patched. The executable named by usc_session_opts.janitor_exe
 * calls it when its first argument is USC_JANITOR_ARG, before anything
 * else. Returns the exit status. */
#define USC_JANITOR_ARG "--janitor"
int usc_janitor_main(int argc, char **argv);

#endif
