/* What a Python frame walk (walk.h) records: plain, fixed-size data, the
 * same in uscope, the inject agent and the bpf program. */
#ifndef USC_PYTHON_FRAME_H
#define USC_PYTHON_FRAME_H

#include "python/offsets.h"

enum python_frame_flags {
	/* where C called into the evaluator: the first frame a
	 * _PyEval_EvalFrameDefault call runs (is_entry in 3.11; the frame
	 * inside a C-stack shim in 3.12 and 3.13). Native stacks and Python
	 * stacks splice here. */
	PYFRAME_ENTRY = 1 << 0,
	PYFRAME_GEN = 1 << 1,	/* owned by a generator or coroutine */
	PYFRAME_WHOLE = 1 << 2,	/* a PyFrameObject (3.8 to 3.10): never
				   incomplete, never hidden */
};

/* A py: probe's function in its events and count rows: the code object's
 * address (user addresses fit 47 bits), and from bit 48 which code object
 * at that address it is (the inject agent's verdict generation: a module's
 * body runs once and is freed, and the next code object may be made
 * where it was; each keeps its own row and names). */
#define PY_GEN_SHIFT 48
#define PY_GEN_MASK 0x7fffu
#define PY_CODE_ADDR(key) ((key) & ((1ULL << PY_GEN_SHIFT) - 1))

/* A walk's default bound on the frames it stores (walk.h's
 * PYWALK_MAX_FRAMES). */
#define PYTHON_FRAMES_MAX 128

/* One frame, as a probe records it: 16 bytes. */
struct python_frame {
	uint64_t code;		/* PyCodeObject * */
	int32_t instr;		/* byte offset of its instruction in the code
				   (-2: a frame that has run nothing yet) */
	uint32_t flags;		/* enum python_frame_flags */
};

enum python_walk_status {
	PYWALK_MORE,		/* under way */
	PYWALK_END,		/* the chain ended: every frame is stored */
	PYWALK_FULL,		/* more frames than room: the stack is cut */
	PYWALK_FAULT,		/* memory could not be read: the frames before
				   the fault are stored */
};

/* $pystack as an engine stores it (the inject agent, the bpf program):
 * this header, then n struct python_frame, innermost first. */
struct python_stack_hdr {
	uint32_t n;		/* frames that follow */
	uint16_t want;		/* frames asked for ($pystack:N) */
	uint8_t status;		/* enum python_walk_status, or PYWALK_NONE */
	uint8_t pad;
};

/* Is len bytes at p a $pystack as an engine stores it (header and frames
 * agree)? */
static inline int python_stack_ok(const void *p, uint32_t len)
{
	struct python_stack_hdr h;

	if (len < sizeof(h))
		return 0;
	__builtin_memcpy(&h, p, sizeof(h));	/* (a recording's bytes may be unaligned) */
	return h.n <= PYTHON_FRAMES_MAX && len == sizeof(h) + h.n * sizeof(struct python_frame);
}

/* python_stack_hdr.status beyond enum python_walk_status: the thread runs
 * no Python (no thread state), or the process no CPython uscope reads */
#define PYWALK_NONE 8
/* ... the process's CPython was not known where the probe ran yet (the bpf
 * program, system-wide: uscope tells it at the process's first hit) */
#define PYWALK_NOTYET 9

/* A walk's bound on the thread states and interpreters it looks at to find
 * a thread's (walk.h's tfind). */
#define PYTHON_TSTATE_STEPS 4096

/* Finding a thread's PyThreadState in the interpreters' thread lists
 * (_PyRuntime.interpreters.head, PyInterpreterState.threads.head, then
 * PyThreadState.next): walk.h's tfind. */
struct python_tfind {
	uint64_t interp;	/* the next interpreter to look in */
	uint64_t ts;		/* the next thread state; 0: the next interpreter's */
	uint64_t found;		/* the thread's state, once status is PYWALK_END */
	uint32_t status;	/* PYWALK_MORE, PYWALK_END (found, or the lists
				   ended: found 0), PYWALK_FULL (the steps ran
				   out), PYWALK_FAULT */
	uint32_t pad;
};

struct python_walk {
	uint64_t frame;		/* the next frame to read; 0 ends the chain */
	uint32_t n;		/* frames stored */
	uint32_t status;	/* enum python_walk_status */
};

#endif
