/* $ustack: stacks copied where the probe ran (the registers and the top of
 * the stack: probe/fetch.h's fetch_stack_hdr), unwound here with the
 * modules' CFI (.eh_frame, .debug_frame) by libdw's unwinder, and shown as
 * frames: function+offset, module, file:line, inlined calls, as perf's
 * --call-graph dwarf and gdb's bt do.
 *
 * Why libdw rather than libunwind: libdw already reads every module's
 * debug info for uscope (one library for CFI, lines and inlined scopes),
 * its dwfl_frame takes a thread state we supply (the copied registers and
 * stack) without a live process, and it follows .debug_frame as well as
 * .eh_frame and signal frames. The frame-pointer step libdw takes where
 * there is no CFI is kept where the walker where the probe runs would take
 * it (stack_walk.h: JIT code in anonymous memory, a module without CFI for
 * the pc but at frame 0, a frame pointer that passes its checks); refused
 * elsewhere: the stack ends there, with that reason, never in a made-up
 * frame.
 *
 * The state (a Dwfl per traced process, built from its maps as the cache
 * holds them: refreshed on a miss, or a recording's) hangs off the
 * session's cache (cache/cache.h), and so do the frames' names, cached
 * per (module, address). */
#ifndef USC_STACK_STACK_H
#define USC_STACK_STACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "probe/event.h"

struct usc_cache;

/* Bytes of a struct usc_stack of max frames. */
static inline size_t stack_size(uint32_t max)
{
	return sizeof(struct usc_stack) + (size_t)max * sizeof(uint64_t);
}

/* Unwind the copy (a USC_V_USTACK value's bytes) of thread tid of process
 * pid into out, room for max frames. 0, -EINVAL (not a stack copy), or
 * -ENOMEM. A stack that cannot go further says why in out->end. */
int stack_unwind(struct usc_cache *c, pid_t pid, pid_t tid, const void *copy, size_t len,
		 struct usc_stack *out, uint32_t max);

/* A stack as a number, the same for the same frames (and end) in the same
 * process: what aggregation keys on. 0: out of memory. */
uint64_t stack_intern(struct usc_cache *c, pid_t pid, const struct usc_stack *st);
/* The stack of an id, and its process; NULL for none. */
const struct usc_stack *stack_interned(struct usc_cache *c, uint64_t id, pid_t *pid);

/* What one frame shows; an address inside inlined code shows as several
 * (the inlined functions innermost first, the function itself last). */
struct stack_sym {
	const char *func;	/* demangled; NULL: no symbol covers it */
	uint64_t off;		/* from func's start (not for an inlined one) */
	const char *module;	/* the file's name; NULL: no file mapping */
	const char *path;	/* its path */
	const char *file;	/* source file, NULL: no line information */
	unsigned line;
	bool inlined;
	bool signal;		/* the signal trampoline (<signal handler called>) */
	bool python;		/* a Python frame: func is its qualname, file its
				 * co_filename (python/names.h) */
	bool jit;		/* JIT code: func is its name in the process's
				 * perf map (/tmp/perf-PID.map), no module */
	uint64_t pc;
};

/* The frames frame i of st shows, at most max: their count. Strings stay
 * valid until the cache is freed. */
size_t stack_syms(struct usc_cache *c, pid_t pid, const struct usc_stack *st, uint32_t i,
		  struct stack_sym *out, size_t max);

/* $ustack with Python in it: each _PyEval_EvalFrameDefault frame of the
 * native stack replaced by the Python frames that evaluator call runs, from
 * the innermost Python frame left to the next one C entered
 * (PYFRAME_ENTRY), as CPython's frames chain them (py, npy of them,
 * innermost first: a walk's, python/frame.h). Frames CPython hides take
 * their place in the count but are not shown. Works on any struct
 * usc_stack however its native frames were found; out has room for max
 * frames (it ends there, USC_STACK_END_LIMIT). 0 or -ENOMEM. */
struct python_frame;
struct stack_pyeval;	/* what is known of each CPython file's evaluator (the
			   parts split off it that a stripped file names not):
			   the caller keeps it across calls, NULL at first */
int stack_splice_python(struct usc_cache *c, pid_t pid, const struct usc_stack *native,
			const struct python_frame *py, uint32_t npy, struct usc_stack *out,
			uint32_t max, struct stack_pyeval **evals);
void stack_pyeval_free(struct stack_pyeval *e);

/* Why st ends ("" when at its outermost frame): "no CFI for 0x... (libx.so)". */
void stack_end_text(struct usc_cache *c, pid_t pid, const struct usc_stack *st, char *buf,
		    size_t len);

#endif
