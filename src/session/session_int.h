/* Internal to src/session: planning, merging and starting COMMAND. */
#ifndef USC_SESSION_SESSION_INT_H
#define USC_SESSION_SESSION_INT_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "engine/engine.h"
#include "session/session.h"


/* One engine of the session. */
struct session_engine {
	const struct usc_engine_ops *ops;
	struct usc_engine *e;	/* NULL: not created (why says why) or not used */
	char why[256];
	size_t nsites;		/* sites it took */
	bool live;
	/* system-wide: the processes the inject engine may not take, traced
	 * on this one, each alone (session/fallback.c): its sites are the
	 * inject engine's, it is not started */
	bool fallback;
};

struct session_merge;
struct session_janitor;
struct session_python;
struct session_pysys;
struct rec_header;

struct usc_session {
	struct usc_session_opts opts;
	/* the run's settings, decided once from opts in usc_session_new: the
	 * engines and the sinks read them through their contexts' set */
	struct usc_settings set;
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
	/* the processes traced on the fallback engine (fallback.c): at start,
	 * and started after attach */
	size_t nfallback[2];
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
	/* uscope script: the engine that runs the program where the probe
	 * fires (session/script.c), as the script's sink sees it; live when
	 * script_in_place */
	struct script_source *script_src;
	/* interposed probes, said once the process has loaded its modules
	 * (session/interpose.c) */
	bool interpose_done;
	unsigned interpose_tries;
	uint64_t interpose_next;	/* CLOCK_MONOTONIC ns of the next look */
};

/* deliver.c: an event to the sinks (in time order): the usc_event_fn the
 * session hands each engine's poll. */
int session_deliver(const struct usc_event *ev, void *ctx);
/* deliver.c: every live engine's new events (or records), then what may
 * leave the merge; drain: all of it. The number handed over, or -errno. */
int session_poll_engines(struct usc_session *s, bool drain);
/* deliver.c: the sinks' flush after a drain (s->sink_stop, or 0); their
 * reports, every interval and the final one (the first failure of a sink
 * that wrote nothing else, for the final); whether one keeps a snapshot
 * (--serve), and that snapshot brought up to date. */
int session_sinks_flush(struct usc_session *s);
int session_sinks_report(struct usc_session *s, bool final);
bool session_sinks_refresh_wanted(const struct usc_session *s);
void session_sinks_refresh(struct usc_session *s);
/* deliver.c: $ustack's maps watched as they change, from COMMAND's exec
 * (on_exec) or now (pid > 0 or every process). */
void session_watch_maps(struct usc_session *s, pid_t pid, bool on_exec);
/* session.c: CLOCK_MONOTONIC in ns. */
uint64_t session_mono_ns(void);

/* recording.c: uscope record. The recorder sink's writer becomes the
 * session's (s->rec) and the engines' usc_raw_out (s->raw). 0 or -errno. */
int session_record_begin(struct usc_session *s);
/* An event of an engine that writes no records of its own. */
int session_record_event(struct usc_session *s, const struct usc_event *ev);
/* Engine e's records, to the recording: their number, or -errno. */
int session_record_poll(struct usc_session *s, struct usc_engine *e);
/* Process pid's maps changed (a library loaded): written again. */
void session_record_maps(struct usc_session *s, pid_t pid);
/* Every engine was drained. 0 or -EIO. */
int session_record_round(struct usc_session *s);
/* The flight recorder writes now (SIGUSR1): a SNAPSHOT chunk saying why,
 * then the engines' newest records. 0 or -errno. */
int session_record_dump(struct usc_session *s, const char *why);
/* ... at the end of the run: the chunk, and the drain writes the records. */
int session_record_last(struct usc_session *s, const char *why);

/* fallback.c: system-wide on inject, the bpf engine for the processes
 * the inject engine refuses (added to s->engines, attached; the engines'
 * context told), where it can be. 0 or -errno, reported. */
int session_fallback_prepare(struct usc_session *s);
/* A site's counts on the fallback engine, added to the inject engine's. */
void session_fallback_stats(struct usc_site_stats *to, const struct usc_site_stats *from);

/* plan.c: an engine for every site (s->place), the engines already
 * created, and those with sites prepared (a bpf program loaded): one that
 * cannot be is left out and the sites planned again, with -e auto. 0 or
 * -errno, reported. */
int session_plan_engines(struct usc_session *s);
/* plan.c: engine k's sites handed to it (e->sites), once. 0 or -ENOMEM. */
int session_engine_sites(struct usc_session *s, size_t k);
/* mapped.c: sites in libraries the target maps only later (dlopen) to an
 * engine with kernel uprobes (-e auto), or a warning. */
int session_place_later_mapped(struct usc_session *s);

/* codecheck.c: every site placed on an engine with kernel uprobes has the
 * file's code in each process the uprobe lands in. 0, or -EBUSY with the
 * process and the reason said. */
int session_check_code(struct usc_session *s);

/* agg.c: which sites their engines filter and aggregate where the probe
 * runs (site->filter_in_place, agg_in_place). 0 or -errno. */
int session_plan_agg(struct usc_session *s);
/* Hand the sinks what the engines aggregated in place since the last
 * call (sink agg_row). 0 or -errno (reported). */
int session_agg_collect(struct usc_session *s);
void session_agg_free(struct usc_session *s);

/* script.c: uscope script. Which sites their engine runs the program of
 * where the probe fires (site->script_in_place: all of them, on one engine
 * that can, or none), and what the script's sink is told of it
 * (sctx.script_src). 0 or -errno. */
int session_plan_script(struct usc_session *s);

/* objtrace.c: the followed set kept by the session, for the sites of an
 * engine that keeps none where the probe runs (tracefs). */
int session_obj_init(struct usc_session *s);
void session_obj_free(struct usc_session *s);
/* Does the session keep the set for this site's events? */
bool session_obj_here(const struct usc_session *s, const struct usc_site *site);
/* An event of such a site through the set: 1 with *out the event with its
 * verdict (its values copied into vals, USC_MAX_ARGS of them), 0 when it is
 * no event (a call with no followed object, an --until of none). */
int session_obj_event(struct usc_session *s, const struct usc_event *ev, struct usc_event *out,
		      struct usc_value *vals);

/* janitor.c: the engines' undo list (engine.h, struct usc_undo) and the
 * process that undoes what is left if uscope dies. init: s->undo, and the
 * engines' context points to it; the janitor starts with the first thing
 * to undo. end: after the engines are destroyed: it ends (what they could
 * not remove, it tries once more). */
void session_undo_init(struct usc_session *s);
void session_janitor_end(struct usc_session *s);

/* target.c: what a signal read from the session's signalfd does: none;
 * stop the run; or (sent to uscope alone while COMMAND runs) stop the run
 * and pass the signal on to COMMAND once the probes are removed. The
 * terminal's signals are stops only the second time (tty_stops counts
 * them): COMMAND had them too. */
enum session_sig_act { SESSION_SIG_NONE, SESSION_SIG_STOP, SESSION_SIG_FORWARD };
struct signalfd_siginfo;
enum session_sig_act session_signal_act(const struct signalfd_siginfo *si, bool command,
					int *tty_stops);
/* -p's pid as a process: a thread's process (said with -v), else pid. */
pid_t session_process_of(pid_t pid);
/* The wait status of process pid, which has ended (pfd: its pidfd, or -1).
 * 0, or -ENODATA when the kernel does not say. */
int session_exit_status(int pfd, pid_t pid, int *status);
/* Say how the traced process ended: a signal on stderr, an exit with -v;
 * known false: only that it ended. */
void session_report_end(pid_t pid, int status, bool known);

/* merge.c: events of several engines in time order. */
struct session_merge *merge_new(void);
void merge_free(struct session_merge *m);
/* Copy ev in. 0 or -ENOMEM. */
int merge_push(struct session_merge *m, const struct usc_event *ev);
/* Deliver, in time order, the events no later than watermark (ns,
 * CLOCK_MONOTONIC); UINT64_MAX delivers all. fn's non-zero return stops
 * the delivery and is returned; -ENOMEM. */
int merge_flush(struct session_merge *m, uint64_t watermark, usc_event_fn fn, void *ctx);
size_t merge_pending(const struct session_merge *m);

/* COMMAND a launcher of CPython (python/launch.h), py: probes asked for:
 * target.python is the CPython it runs. */
void session_python_launcher(struct usc_session *s);
/* python.c: CPython in the target. plan: after the sites are resolved,
 * before the engines are chosen: refuse what cannot be ($pystack or py:
 * probes system-wide, on a process with no CPython or another version),
 * and give $ustack's sites the Python frames to splice. 0 or -errno
 * (reported). */
int session_python_plan(struct usc_session *s);
/* Each poll: tell the engines where CPython is in the target, once it is
 * mapped (COMMAND: after its exec). */
void session_python_poll(struct usc_session *s);
/* Say which probed functions the process's calls do not reach (another
 * object interposes them: resolve_interposed), once: as the probes are
 * planned for -p (session_interpose_plan), else from the loop's polls
 * (session_interpose_poll) once ld.so has loaded the probed modules of
 * COMMAND. */
void session_interpose_plan(struct usc_session *s);
void session_interpose_poll(struct usc_session *s);
void session_python_free(struct usc_session *s);
/* Tell the engines that walk CPython's frames where the probe runs (bpf)
 * that pid runs rt (NULL: no longer). */
void session_python_tell(struct usc_session *s, pid_t pid, const struct python_runtime *rt);
/* pysystem.c: $pystack system-wide, each process's CPython found where it
 * runs. poll: each round (the processes running CPython told at the first,
 * those gone or exec'd forgotten); notyet: a hit of pid whose $pystack the
 * engine could not walk for want of its CPython: true when pid runs none
 * (its hit has no Python frames), false when it does (it is told now; the
 * hit is counted, said at free). */
struct session_pysys *session_pysys_new(void);
void session_pysys_poll(struct usc_session *s, struct session_pysys *p);
bool session_pysys_notyet(struct usc_session *s, struct session_pysys *p, pid_t pid);
void session_pysys_free(struct session_pysys *p);
/* Value i of ev, a $pystack as an engine walked it, named into st: *out. */
int session_python_value(struct usc_session *s, const struct usc_event *ev, unsigned i,
			 struct usc_stack *st, struct usc_value *out);
/* vals: ev's, stacks unwound: each $ustack with the event's hidden Python
 * frames spliced in. 0 or -ENOMEM. */
int session_python_splice(struct usc_session *s, const struct usc_event *ev,
			  struct usc_value *vals);

/* Recording: the Python code objects an event's (or a ring's records')
 * $pystack names, and those py: probes told of, each written once before
 * the records (REC_PYCODE). 0 or -EIO. */
int session_python_record_event(struct usc_session *s, const struct usc_event *ev);
int session_python_record_ring(struct usc_session *s, pid_t pid, const void *bytes, size_t len);
/* Replaying: what the recording keeps of them. 0 or -ENOMEM. */
struct rec_file;
int session_python_replay(struct usc_session *s, struct rec_file *f);

/* pending.c: MODULEs that exist only once COMMAND runs (a run-time USDT
 * provider, a library it opens from elsewhere). Which of the specs' are so:
 * s->pending, their count. */
size_t session_pending_modules(struct usc_session *s);
/* Let child run until it has mapped every pending module (its maps,
 * polled). 0; -ECHILD when it exited first (*status); -EINTR when a signal
 * (read from sfd: *forward, when it was passed on to child) or -d ended the
 * wait. Reported. */
int session_wait_modules(struct usc_session *s, pid_t child, int sfd, int *sigints, int *status,
			 int *forward);
/* plan.c's steps after the target: engines, sites, placement. */
int session_plan_sites(struct usc_session *s);

/* spawn.c: COMMAND, forked and held before its exec until spawn_go. */
struct spawned {
	pid_t pid;
	int go_w;		/* write a byte: exec */
	int err_r;		/* the exec's errno comes back here (close-on-exec) */
};
/* Fork exe with argv, the child's signal mask set to oldmask. 0 or -errno. */
int spawn_held(const char *exe, char *const *argv, const sigset_t *oldmask, struct spawned *sp);
/* Let it exec. 0, or the exec's errno (the child has exited: reaped), or
 * -errno for our own failure. */
int spawn_go(struct spawned *sp);
/* Close what is left (a held child sees EOF and exits 127). */
void spawn_close(struct spawned *sp);

#endif
