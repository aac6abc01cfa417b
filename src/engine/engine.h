/* Engines behind one ops table.
 *
 * A session holds the logical probes (specs) and their resolved sites; an
 * engine places the sites and delivers events. Each engine embeds struct
 * usc_engine in its own state and recovers itself with container_of, as
 * libbpf's links do. Lifecycle:
 *   open -> attach (create probes, not yet live) -> start(pid) (filter, go
 *   live) -> poll ... -> stop (no new hits) -> poll (drain) -> stats ->
 *   detach (remove everything) -> destroy.
 * detach must be safe to call at any point and more than once. */
#ifndef USC_ENGINE_ENGINE_H
#define USC_ENGINE_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "resolve/resolve.h"

enum usc_value_kind { USC_V_INT, USC_V_STR, USC_V_FAULT };

struct usc_value {
	uint8_t kind;		/* enum usc_value_kind */
	uint32_t len;		/* USC_V_STR: bytes, without the NUL */
	uint64_t u;		/* USC_V_INT: raw bits, zero-extended from the type's size */
	const char *str;	/* USC_V_STR */
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
};

struct usc_stats {
	uint64_t events;
	uint64_t lost;			/* the kernel's own count */
	struct usc_site_stats *sites;	/* nsites entries, owned by the engine */
};

struct usc_session;
struct usc_engine;

struct usc_engine_ops {
	const char *name;
	/* COMMAND is to be held at its exec by PTRACE_TRACEME, and launched()
	 * called once it has exec'd (an engine that patches the process) */
	bool trace_exec;
	/* Check support and permission; set up engine state. -errno. */
	int (*open)(struct usc_session *s, struct usc_engine **out);
	/* Create every site's probe, not yet live. -errno. */
	int (*attach)(struct usc_engine *e);
	/* Go live, for process pid and its threads (0 = system-wide);
	 * follow_children also follows processes it forks. */
	int (*start)(struct usc_engine *e, pid_t pid, int follow_children);
	/* trace_exec engines: COMMAND (pid) has exec'd and is stopped by
	 * ptrace; the engine takes it from there and lets it run. -errno. */
	int (*launched)(struct usc_engine *e, pid_t pid);
	/* Deliver what is available, waiting at most timeout_ms for it.
	 * Returns the number of events delivered, or -errno. */
	int (*poll)(struct usc_engine *e, int timeout_ms, usc_event_fn fn, void *ctx);
	/* Stop recording new hits; what was recorded can still be polled. */
	void (*stop)(struct usc_engine *e);
	int (*stats)(struct usc_engine *e, struct usc_stats *st);
	void (*detach)(struct usc_engine *e);
	void (*destroy)(struct usc_engine *e);
};

struct usc_engine {
	const struct usc_engine_ops *ops;
	struct usc_session *session;
};

struct usc_session {
	struct usc_target target;
	bool count_only;	/* only hits are wanted: engines may skip recording */
	struct usc_probe_spec *specs;
	size_t nspecs;
	struct usc_site *sites;
	size_t nsites;
	struct usc_engine *engine;
};

#ifndef container_of
#define container_of(ptr, type, member) \
	((type *)((char *)(ptr) - __builtin_offsetof(type, member)))
#endif

extern const struct usc_engine_ops tracefs_engine_ops;
extern const struct usc_engine_ops bpf_engine_ops;
extern const struct usc_engine_ops inject_engine_ops;

/* The inject engine can patch every site of s (and there is a process to
 * patch): 0, or -ENOTSUP with the first reason why not in why. */
int inject_can_place(const struct usc_session *s, char *why, size_t len);

/* Pick an engine by name ("auto", "tracefs", "bpf", "inject"). -ENOENT for an unknown
 * name. "auto" gives NULL: the choice waits for the sites (engine_choose). */
int engine_lookup(const char *name, const struct usc_engine_ops **out);
const struct usc_engine_ops *engine_choose(const struct usc_session *s);

#endif
