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
};

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

struct python_walk {
	uint64_t frame;		/* the next frame to read; 0 ends the chain */
	uint32_t n;		/* frames stored */
	uint32_t status;	/* enum python_walk_status */
};

#endif
