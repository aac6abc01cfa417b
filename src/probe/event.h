/* What probes deliver, whichever engine ran them or recording held them:
 * events and their values, unwound stacks, and per-site counts. Engines
 * produce these, the session passes them on, sinks and output consume them;
 * this header depends on nothing but the probe language, so every layer can
 * name these types without depending on another's. */
#ifndef USC_PROBE_EVENT_H
#define USC_PROBE_EVENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "probe/fetch.h"

struct usc_site;	/* resolve/resolve.h: where the event was recorded */

#define USC_STACK_FB_NR 12	/* = STACK_FB_NR (src/stack/stack_walk.h) */

enum usc_value_kind {
	USC_V_INT,
	USC_V_STR,
	USC_V_FAULT,	/* the memory could not be read */
	USC_V_NULL,	/* a string behind a NULL pointer */
	USC_V_USTACK,	/* $ustack as an engine copied it: str, len bytes: struct
			 * fetch_stack_hdr and the stack (probe/fetch.h) */
	USC_V_STACK,	/* $ustack unwound (src/stack/): stack; $pystack symbolized */
	USC_V_WALK,	/* $ustack as an engine walked it: str, len bytes: struct
			 * fetch_walk_hdr and the return addresses */
	USC_V_PYSTACK,	/* $pystack as an engine walked it: str, len bytes: struct
			 * python_stack_hdr and the frames (python/frame.h) */
};

/* Is it a stack's bytes as an engine stored them (str, len), not yet
 * frames: $ustack copied or walked, $pystack? */
static inline bool usc_value_is_raw_stack(uint8_t kind)
{
	return kind == USC_V_USTACK || kind == USC_V_WALK || kind == USC_V_PYSTACK;
}

/* Why an unwound stack ends where it does. */
enum usc_stack_end {
	USC_STACK_END_OUTERMOST,	/* the outermost frame: complete */
	USC_STACK_END_LIMIT,		/* $ustack:N frames */
	USC_STACK_END_COPY,		/* the next frame is beyond the stack copied */
	USC_STACK_END_NOCFI,		/* no CFI for end_pc */
	USC_STACK_END_NOMODULE,		/* end_pc is in no file mapping */
	USC_STACK_END_UNREAD,		/* the stack could not be read */
	USC_STACK_END_ERROR,		/* the CFI could not be followed */
	/* $pystack */
	USC_STACK_END_PYFAULT,		/* a Python frame could not be read */
	USC_STACK_END_NOPYTHON,		/* the thread runs no Python */
	USC_STACK_END_PYNOTYET,		/* its process's CPython was not known yet */
};

/* A stack: frame 0 is the probed code, then its callers. pc[i] is exact
 * where the bit i of exact is set (frame 0, a frame a signal interrupted):
 * otherwise a return address (symbolized at pc - 1, as gdb does). Where
 * the bit i of python is set, frame i is a Python frame and pc[i] the
 * interned location of its qualname, file and line (python/names.h):
 * $pystack's frames, and those spliced into $ustack. */
struct usc_stack {
	uint32_t n;
	uint8_t end;			/* enum usc_stack_end */
	uint64_t end_pc;		/* where it ended */
	uint64_t exact[(USC_STACK_FRAMES_MAX + 63) / 64];
	uint64_t sigframe[(USC_STACK_FRAMES_MAX + 63) / 64];	/* the signal trampoline */
	uint64_t python[(USC_STACK_FRAMES_MAX + 63) / 64];	/* a Python frame */
	uint64_t pc[];
};

static inline bool usc_stack_exact(const struct usc_stack *st, uint32_t i)
{
	return (st->exact[i / 64] >> (i % 64)) & 1;
}

static inline bool usc_stack_python(const struct usc_stack *st, uint32_t i)
{
	return (st->python[i / 64] >> (i % 64)) & 1;
}

static inline bool usc_stack_sigframe(const struct usc_stack *st, uint32_t i)
{
	return (st->sigframe[i / 64] >> (i % 64)) & 1;
}

struct usc_value {
	uint8_t kind;		/* enum usc_value_kind */
	uint32_t len;		/* USC_V_STR, USC_V_USTACK, USC_V_WALK, USC_V_PYSTACK:
				 * bytes (a string's without the NUL) */
	uint64_t u;		/* USC_V_INT: raw bits, zero-extended from the type's size */
	const char *str;	/* USC_V_STR, USC_V_USTACK, USC_V_WALK, USC_V_PYSTACK */
	const struct usc_stack *stack;	/* USC_V_STACK */
};

/* A value with bytes of its own (str, len): a string, a stack as an engine
 * stored it. */
static inline bool usc_value_has_bytes(const struct usc_value *v)
{
	return v->kind == USC_V_STR || usc_value_is_raw_stack(v->kind);
}

struct usc_event {
	uint64_t time_ns;	/* CLOCK_MONOTONIC */
	int32_t pid, tid, cpu;
	const char *comm;
	const struct usc_site *site;
	uint64_t ip;		/* probe address; for returns, the return address */
	uint64_t func;		/* returns: the function's address */
	unsigned nvals;
	const struct usc_value *vals;	/* in the order of site->args */
	/* uscope script: an output record (printf's values ...) the engine's
	 * executor made where the probe ran (script/prog.h's struct
	 * script_rec, then its values; script_len bytes), for the script's
	 * sink to format; NULL: an event */
	const void *script_rec;
	uint32_t script_len;
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
	uint64_t lost_wait;	/* of lost: records a lossless producer dropped
				 * because the tracer made no room within the
				 * bound of a wait (--max-wait), or had made no
				 * progress since a wait that timed out */
	/* $ustack: hits whose stack the engine could not walk where the
	 * probe ran, and copied instead, by why (enum stack_fallback,
	 * src/stack/stack_walk.h; [0]: unused) */
	uint64_t stack_fallback[USC_STACK_FB_NR];
	/* ... and counted where the probe ran as far as the walk went, by why
	 * it stopped: no room for a copy then (a burst filled the buffer) */
	uint64_t stack_partial[USC_STACK_FB_NR];
};

/* An engine's counts; sites[i] is for the engine's e->sites[i]. */
struct usc_stats {
	uint64_t events;
	uint64_t lost;			/* the engine's own count */
	struct usc_site_stats *sites;	/* e->nsites entries, owned by the engine */
};

#endif
