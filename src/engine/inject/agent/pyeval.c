/* The agent's py: probes on 3.11 when no probe asks for a return or a
 * stack (count by function, trace of calls with their arguments): a PEP
 * 523 frame evaluator (_PyInterpreterState_SetEvalFrameFunc, CPython's way
 * in for a JIT or a debugger) instead of the profile function.
 *
 * Why: once any profile function is set, 3.11 makes a frame object for
 * every Python call and calls the function for every C call and return
 * too: an empty C profile function costs 1.38-1.45x on bench/pywork.py by
 * itself. A frame evaluator is called only where a Python frame starts or
 * resumes, with the frame; an empty one costs ~1.04x (3.11 then calls a
 * Python function through it instead of inline, and the CALL
 * specialisations for Python functions step aside).
 *
 * agent_pyeval, a few instructions of assembly, keeps the arguments, asks
 * agent_pyeval_entry where to go and jumps there (_PyEval_EvalFrameDefault)
 * with the caller's return address on the stack: no frame of ours stays
 * under a Python frame, so taking it out leaves nothing of the agent's on
 * any stack.
 *
 * A call is the profile function's "call" (the e2e tests compare the
 * counts with sys.setprofile's): a function's frame evaluated, and each
 * resumption of a generator's or coroutine's (next, send, throw: CPython
 * evaluates its frame again), but not the call of a generator function,
 * which only makes the generator (the frame, evaluated as far as
 * RETURN_GENERATOR, is the thread's; a resumed one is the generator's),
 * nor a call inside someone's trace or profile function (CPython's own
 * profilers do not see those either).
 *
 * Its cost: 3.11 calls a Python function through an evaluator, so each
 * Python call nests on the C stack (~400 bytes; inline, without one). A
 * program that raised its recursion limit, or a thread with a small
 * stack, could run out of stack where it would not have: so once a thread
 * has used half of its stack (glibc's struct pthread says where it is;
 * the main thread's, its startstack and RLIMIT_STACK), or runs on a stack
 * whose bounds are not known, the evaluator gives way to the profile
 * function for good, in that frame (not counted here: the profile
 * function sees its call).
 *
 * It is set per interpreter by the pending call and where a thread takes
 * the GIL (agent_py_hook), and taken out there at a detach, or by itself
 * at its first call after a detach or once uscope has gone. An interpreter
 * that already has an evaluator of someone else's (a JIT, a debugger)
 * keeps it, and the profile function serves instead; so too, from the next
 * thread that takes the GIL, when one is set over ours (the tracer says
 * why: py->eval_off). Everything here runs with the GIL held. */
#include "engine/inject/agent/pyagent.h"

/* CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR */
#define CO_MAKES_GENERATOR (0x20 | 0x80 | 0x200)

typedef void (*seteval_fn)(uint64_t interp, uint64_t fn);
typedef uint64_t (*geteval_fn)(uint64_t interp);

uint64_t agent_pyeval_entry(uint64_t tstate, uint64_t iframe) HIDDEN;
void agent_pyeval(void) HIDDEN;

/* (tstate, frame, throwflag) kept across the call: the stack is 16-byte
 * aligned at it (8 for the return address, 24 pushed). */
__asm__(".text\n.globl agent_pyeval\n.hidden agent_pyeval\n.type agent_pyeval, @function\n"
	"agent_pyeval:\n"
	"\tpush %rdi\n\tpush %rsi\n\tpush %rdx\n"
	"\tcall agent_pyeval_entry\n"
	"\tpop %rdx\n\tpop %rsi\n\tpop %rdi\n"
	"\tjmp *%rax\n"
	".size agent_pyeval, .-agent_pyeval\n");

/* An interpreter's evaluator: through CPython's functions (3.9 on), or
 * 3.8's PyInterpreterState.eval_frame itself (what they do), the GIL
 * held. */
static uint64_t get_eval(const struct inj_py *py, uint64_t interp)
{
	if (py->off.flags & PYOFF_EVAL_38)
		return ld64(interp + py->off.is_eval_frame);
	return ((geteval_fn)py->eval_get)(interp);
}

static void set_eval(const struct inj_py *py, uint64_t interp, uint64_t fn)
{
	if (py->off.flags & PYOFF_EVAL_38)
		*(volatile uint64_t *)(interp + py->off.is_eval_frame) = fn;
	else
		((seteval_fn)py->eval_set)(interp, fn);
}

int agent_pyeval_set(struct inj_py *py, int on)
{
	const struct python_offsets *o = &py->off;
	uint64_t head = ld64(py->runtime + o->rt_interp_head), mine = (uint64_t)&agent_pyeval;
	uint64_t interp = head, f;

	/* someone else's evaluator anywhere: none of ours (all or nothing,
	 * so that one mechanism counts every interpreter) */
	for (uint32_t i = 0; on && interp && i < 256; i++) {
		f = get_eval(py, interp);
		if (f != py->eval_default && f != mine) {
			py->eval_off = INJ_EVAL_FOREIGN;
			on = 0;		/* ours out of those that have it */
		}
		interp = ld64(interp + o->is_next);
	}
	interp = head;
	for (uint32_t i = 0; interp && i < 256; i++) {
		f = get_eval(py, interp);
		if (on && f == py->eval_default) {
			set_eval(py, interp, mine);
			__atomic_add_fetch(&py->eval_installs, 1, __ATOMIC_RELAXED);
		} else if (!on && f == mine) {
			set_eval(py, interp, py->eval_default);
			__atomic_add_fetch(&py->eval_removes, 1, __ATOMIC_RELAXED);
		}
		interp = ld64(interp + o->is_next);
	}
	return py->eval_off ? -1 : 0;
}

/* Where this thread's stack pointer may go down to before the evaluator
 * gives way (half its stack used), or 0: not known. */
static uint64_t stack_floor(const struct inj_ctl *c, const struct inj_py *py, uint64_t sp)
{
	const struct python_glibc *g = &py->glibc;
	uint64_t fs = fs_base(c), block, lo, hi;

	if (!fs || !g->stackblock_size)
		return 0;	/* (no glibc whose struct pthread is known) */
	block = ld64(fs + g->stackblock);
	if (block) {		/* a thread of pthread_create's */
		lo = block + ld64(fs + g->guardsize);
		hi = block + ld64(fs + g->stackblock_size);
	} else {		/* the main thread */
		hi = py->main_stack_top;
		lo = hi - py->main_stack_size;
	}
	if (!(lo < sp && sp <= hi && hi - lo <= (1ULL << 40)))
		return 0;
	return lo + (hi - lo) / 2;
}

/* The profile function instead, for good (why: eval_off). */
static void give_way(struct inj_py *py, uint32_t why)
{
	py->eval_off = why;
	agent_pyeval_set(py, 0);
	agent_py_profile_all(py, 1);
}

/* A frame about to be evaluated: its probes' hits; where to go. 3.9 on,
 * the evaluator is called (tstate, frame, throwflag); 3.8, (frame,
 * throwflag), and the thread state is the GIL holder's, this one. */
uint64_t agent_pyeval_entry(uint64_t tstate, uint64_t iframe)
{
	struct inj_ctl *c = my_ctl();
	struct inj_py *py = py_mut(c);
	const struct python_offsets *o = &py->off;
	uint64_t mask, sp = (uint64_t)__builtin_frame_address(0), floor;
	struct py_hit h;

	if (py->state != INJ_PY_ON || owner_died(c->owner)) {
		agent_pyeval_set(py, 0);	/* detached, or the tracer has gone */
		return py->eval_default;
	}
	if (o->flags & PYOFF_EVAL_38) {
		iframe = tstate;
		tstate = ld64(py->runtime + o->rt_tstate_current);
	}
	/* 3.11 nests each Python call on the C stack for an evaluator; 3.8 to
	 * 3.10 nest them anyway (a PyFrameObject, an evaluator call each) */
	if (!(o->flags & PYOFF_FRAMEOBJ)) {
		if (sp < (floor = stack_floor(c, py, sp))) {
			give_way(py, INJ_EVAL_DEEP);
			return py->eval_default;
		}
		if (!floor) {
			give_way(py, INJ_EVAL_NOSTACK);
			return py->eval_default;
		}
	}
	if (!tstate || *(volatile const int32_t *)(tstate + o->ts_tracing) > 0)
		return py->eval_default;	/* inside someone's profile function */
	h.code = ld64(iframe + o->fr_code);
	/* (3.11: a generator function's call runs its frame as far as
	 * RETURN_GENERATOR; before, it does not run it at all) */
	if (!(o->flags & PYOFF_FRAMEOBJ) && (ld32(h.code + o->co_flags) & CO_MAKES_GENERATOR) &&
	    ld8(iframe + o->fr_owner) != o->owner_generator)
		return py->eval_default;	/* a generator made, not run */
	h.frame = 0;
	h.iframe = iframe;
	h.retval = 0;
	h.py = py;
	if ((mask = agent_py_verdict(py, h.code, iframe, &h.verdict)))
		py_hits(c, py, mask, PYTRACE_CALL, &h);
	return py->eval_default;
}
