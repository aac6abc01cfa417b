/* Engines behind one ops table.
 *
 * An engine only places sites and delivers what they record: the session
 * (src/session/) decides which engine takes which site, from what each
 * says it can place, and no engine calls another. Each engine embeds struct
 * usc_engine in its own state and recovers itself with container_of, as
 * libbpf's links do. Lifecycle:
 *   create (no side effect) -> can_place(site) for the sites it may take ->
 *   attach (the session has handed it e->sites: create their probes, not
 *   yet live) -> start(pid) (go live) -> poll ... -> stop (no new hits) ->
 *   poll (drain) -> stats -> detach (remove everything) -> destroy.
 * detach must be safe to call at any point and more than once. */
#ifndef USC_ENGINE_ENGINE_H
#define USC_ENGINE_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "probe/agg.h"
#include "resolve/resolve.h"

enum usc_value_kind {
	USC_V_INT,
	USC_V_STR,
	USC_V_FAULT,	/* the memory could not be read */
	USC_V_NULL,	/* a string behind a NULL pointer */
	USC_V_USTACK,	/* $ustack as an engine copied it: str, len bytes: struct
			 * fetch_stack_hdr and the stack (probe/fetch.h) */
	USC_V_STACK,	/* $ustack unwound (src/stack/): stack */
};

/* Why an unwound stack ends where it does. */
enum usc_stack_end {
	USC_STACK_END_OUTERMOST,	/* the outermost frame: complete */
	USC_STACK_END_LIMIT,		/* $ustack:N frames */
	USC_STACK_END_COPY,		/* the next frame is beyond the stack copied */
	USC_STACK_END_NOCFI,		/* no CFI for end_pc */
	USC_STACK_END_NOMODULE,		/* end_pc is in no file mapping */
	USC_STACK_END_UNREAD,		/* the stack could not be read */
	USC_STACK_END_ERROR,		/* the CFI could not be followed */
};

/* A stack: frame 0 is the probed code, then its callers. pc[i] is exact
 * where the bit i of exact is set (frame 0, a frame a signal interrupted):
 * otherwise a return address (symbolized at pc - 1, as gdb does). */
struct usc_stack {
	uint32_t n;
	uint8_t end;			/* enum usc_stack_end */
	uint64_t end_pc;		/* where it ended */
	uint64_t exact[(USC_STACK_FRAMES_MAX + 63) / 64];
	uint64_t sigframe[(USC_STACK_FRAMES_MAX + 63) / 64];	/* the signal trampoline */
	uint64_t pc[];
};

static inline bool usc_stack_exact(const struct usc_stack *st, uint32_t i)
{
	return (st->exact[i / 64] >> (i % 64)) & 1;
}

static inline bool usc_stack_sigframe(const struct usc_stack *st, uint32_t i)
{
	return (st->sigframe[i / 64] >> (i % 64)) & 1;
}

struct usc_value {
	uint8_t kind;		/* enum usc_value_kind */
	uint32_t len;		/* USC_V_STR, USC_V_USTACK: bytes, without the NUL */
	uint64_t u;		/* USC_V_INT: raw bits, zero-extended from the type's size */
	const char *str;	/* USC_V_STR, USC_V_USTACK */
	const struct usc_stack *stack;	/* USC_V_STACK */
};

struct usc_event {
	uint64_t time_ns;	/* CLOCK_MONOTONIC */
	int32_t pid, tid, cpu;
	const char *comm;
	const struct usc_site *site;
	uint64_t ip;		/* probe address; for returns, the return address */
	uint64_t func;		/* returns: the function's address */
	unsigned nvals;
	const struct usc_value *vals;	/* in the order of site->args */
};

/* Return non-zero to stop delivery. */
typedef int (*usc_event_fn)(const struct usc_event *ev, void *ctx);

struct usc_site_stats {
	uint64_t events;	/* delivered */
	int64_t lost;		/* -1: the kernel cannot attribute it to this probe */
	int64_t hits;		/* the kernel's hit count, -1 when it has none for
				 * this session (a pid filter: hits of other
				 * processes would be in it) */
	uint64_t agg_full;	/* hits aggregated where the probe runs that found
				 * the key table full: not counted */
	uint64_t agg_fault;	/* ... whose value (hist) could not be read */
};

/* An engine's counts; sites[i] is for the engine's e->sites[i]. */
struct usc_stats {
	uint64_t events;
	uint64_t lost;			/* the engine's own count */
	struct usc_site_stats *sites;	/* e->nsites entries, owned by the engine */
};

struct usc_session;
struct usc_engine;
struct rec_writer;

/* A row aggregated where the probe runs: the site, the key's bytes
 * (probe/agg.h), its statistics and buckets (usc_agg_nbuckets). */
typedef int (*usc_agg_fn)(void *ctx, const struct usc_site *site, const uint8_t *key,
			  uint32_t keylen, const struct agg_stats *st, const uint64_t *buckets);

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
	 * when the session says (session->snapshot_dump) */
	bool flight_recorder;
	/* uscope objtrace: the engine keeps the followed objects where the
	 * probe runs (usc_obj_role): its sites' events come with their verdict
	 * and only when it is not 0; otherwise the session keeps the set */
	bool objtrace;
	/* Set up engine state, without touching the system: check that the
	 * engine can work here at all (support, permission, a target it can
	 * trace). 0, or -errno with the reason in why. */
	int (*create)(struct usc_session *s, struct usc_engine **out, char *why, size_t len);
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
	/* The session has handed e->sites: create their probes, not yet live.
	 * -errno, the reason logged. */
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
	/* Recording (uscope record): write what is available to w as the
	 * engine produced it, unformatted (record/record.h), instead of
	 * delivering events. Returns the number of records written, or -errno.
	 * Optional: without it, the engine's events are written in uscope's
	 * own form. */
	int (*record)(struct usc_engine *e, struct rec_writer *w);
	/* Optional: a source with an end (a recording): true once it has
	 * delivered everything; the session ends when every source has. */
	bool (*ended)(struct usc_engine *e);
	/* Stop recording new hits; what was recorded can still be polled. */
	void (*stop)(struct usc_engine *e);
	int (*stats)(struct usc_engine *e, struct usc_stats *st);
	void (*detach)(struct usc_engine *e);
	void (*destroy)(struct usc_engine *e);
	/* Optional. Does the engine evaluate the site's filter where the
	 * probe runs? Otherwise the session drops the events it does not
	 * pass. Asked after the plan, before attach. */
	bool (*filters)(struct usc_engine *e, const struct usc_site *site);
	/* Optional. Can the engine aggregate the site where the probe runs
	 * (session->opts.agg), delivering no event for it? 0, or -ENOTSUP:
	 * the session aggregates its events. Asked after the plan, before
	 * attach; the answer is in site->agg_in_place. */
	int (*agg_place)(struct usc_engine *e, const struct usc_site *site);
	/* Every row aggregated in place, as it stands since attach (count,
	 * sum, buckets), min and max since the previous read: fn(ctx, site,
	 * key, keylen, st, buckets) (usc_agg_fn, session.h). */
	int (*agg_read)(struct usc_engine *e, usc_agg_fn fn, void *ctx);
};

struct usc_engine {
	const struct usc_engine_ops *ops;
	struct usc_session *session;
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

/* An engine by name ("tracefs", "bpf", "inject"), or NULL. */
const struct usc_engine_ops *engine_by_name(const char *name);

/* Where in the engine's sites a site is: e->sites[i] == site, or -1. */
/* Does the event pass its site's filter (site->filter, with the
 * interpreter every engine shares: probe/filter_eval.h)? */
bool engine_filter_pass(const struct usc_event *ev);

ssize_t engine_site_index(const struct usc_engine *e, const struct usc_site *site);

#endif
