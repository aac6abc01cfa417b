/* Python frames spliced into a native stack (stack.h's
 * stack_splice_python): CPython runs Python code in _PyEval_EvalFrameDefault,
 * one C call of it for each time C called into Python (3.11 runs
 * Python-to-Python calls in the same C call), so each of its native frames
 * stands for a run of Python frames: from the innermost one not yet placed
 * to the first one C entered (is_entry in 3.11, the frame a C-stack shim
 * holds in 3.12 and 3.13: PYFRAME_ENTRY). The native frames are named as
 * stack_syms names them, so the splice does not care how they were found
 * (a copy unwound here, or return addresses from where the probe ran). */
#include <errno.h>
#include <string.h>

#include "python/names.h"
#include "stack/stack.h"

#define EVAL_FUNC "_PyEval_EvalFrameDefault"
#define SYMS 8

static void bit(uint64_t *b, uint32_t i, bool on)
{
	if (on)
		b[i / 64] |= 1ULL << (i % 64);
}

/* Is native frame i the evaluator (its outermost name: inlined code
 * inside it names itself first)? */
static bool is_eval(struct usc_cache *c, pid_t pid, const struct usc_stack *st, uint32_t i)
{
	struct stack_sym sy[SYMS];
	size_t n;

	if (usc_stack_python(st, i) || usc_stack_sigframe(st, i))
		return false;
	n = stack_syms(c, pid, st, i, sy, SYMS);
	return n && sy[n - 1].func && !strcmp(sy[n - 1].func, EVAL_FUNC);
}

int stack_splice_python(struct usc_cache *c, pid_t pid, const struct usc_stack *native,
			const struct python_frame *py, uint32_t npy, struct usc_stack *out,
			uint32_t max)
{
	uint32_t j = 0;

	memset(out, 0, sizeof(*out));
	if (max > USC_STACK_FRAMES_MAX)
		max = USC_STACK_FRAMES_MAX;
	out->end = native->end;
	out->end_pc = native->end_pc;
	for (uint32_t i = 0; i < native->n; i++) {
		if (j < npy && is_eval(c, pid, native, i)) {
			bool entry;

			do {
				bool hidden;
				uint64_t id = python_names_frame(c, pid, &py[j], &hidden);

				if (!id)
					return -ENOMEM;
				entry = py[j++].flags & PYFRAME_ENTRY;
				if (hidden)
					continue;
				if (out->n == max)
					goto full;
				bit(out->python, out->n, true);
				out->pc[out->n++] = id;
			} while (!entry && j < npy);
			continue;
		}
		if (out->n == max)
			goto full;
		bit(out->exact, out->n, usc_stack_exact(native, i));
		bit(out->sigframe, out->n, usc_stack_sigframe(native, i));
		out->pc[out->n++] = native->pc[i];
	}
	return 0;
full:
	out->end = USC_STACK_END_LIMIT;
	out->end_pc = 0;
	return 0;
}
