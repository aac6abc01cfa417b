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
#include <stdlib.h>
#include <string.h>

#include "cache/cache.h"
#include "python/names.h"
#include "resolve/shape.h"
#include "stack/stack.h"

#define EVAL_FUNC "_PyEval_EvalFrameDefault"
#define SYMS 8
#define EVAL_FILES 16

/* Of each CPython file a stack passes through: the parts the compiler split
 * off its evaluator (GCC's _PyEval_EvalFrameDefault.cold), which a stripped
 * file names not, and where a frame of it returns to when the evaluator
 * calls out from there (Debian's 3.14 and 3.15: most of the interpreter's
 * code is such a part, which no symbol covers). Found once a file, by
 * resolve/shape.h: the code the evaluator jumps into whose FDE starts
 * mid-function. */
struct stack_pyeval {
	struct {
		char *path;
		size_t n;
		uint64_t start[SHAPE_MAX_REGIONS], end[SHAPE_MAX_REGIONS];
	} f[EVAL_FILES];
	size_t n;
};

void stack_pyeval_free(struct stack_pyeval *e)
{
	for (size_t i = 0; e && i < e->n; i++)
		free(e->f[i].path);
	free(e);
}

/* path's evaluator parts: its index in e, or -1 (none known). */
static int eval_parts(struct usc_cache *c, struct stack_pyeval *e, const char *path)
{
	const struct objfile_sym *fn = NULL, **cands = NULL;
	struct func_shape sh;
	struct objfile *ef;
	size_t ncands = 0, k;

	for (k = 0; k < e->n; k++)
		if (!strcmp(e->f[k].path, path))
			return e->f[k].n ? (int)k : -1;
	if (e->n == EVAL_FILES || !(e->f[k].path = strdup(path)))
		return -1;
	e->n++;
	e->f[k].n = 0;
	if (cache_elf(c, path, &ef) || objfile_func_lookup(ef, EVAL_FUNC, &fn, &cands, &ncands))
		fn = NULL;
	free(cands);
	if (!fn || shape_of(ef, fn, &sh))
		return -1;
	for (size_t r = 1; r < sh.n; r++) {	/* (rg[0] is the body: named) */
		e->f[k].start[e->f[k].n] = sh.rg[r].addr;
		e->f[k].end[e->f[k].n++] = sh.rg[r].addr + sh.rg[r].len;
	}
	shape_free(&sh);
	return e->f[k].n ? (int)k : -1;
}

/* A frame no symbol covers, in a part split off the evaluator? */
static bool in_eval_part(struct usc_cache *c, struct stack_pyeval *e, const struct stack_sym *sy)
{
	struct objfile *ef;
	uint64_t vaddr;
	int k;

	/* (no symbol: its offset is the file's; st->pc[i] was a return
	 * address, one past the call) */
	if (!e || sy->func || !sy->path || sy->python || sy->jit ||
	    (k = eval_parts(c, e, sy->path)) < 0 || cache_elf(c, sy->path, &ef) ||
	    !sy->off || objfile_offset_to_vaddr(ef, sy->off - 1, &vaddr))
		return false;
	for (size_t r = 0; r < e->f[k].n; r++)
		if (vaddr >= e->f[k].start[r] && vaddr < e->f[k].end[r])
			return true;
	return false;
}

static void bit(uint64_t *b, uint32_t i, bool on)
{
	if (on)
		b[i / 64] |= 1ULL << (i % 64);
}

/* Is native frame i the evaluator (its outermost name: inlined code
 * inside it names itself first; or a part of it no symbol names)? */
static bool is_eval(struct usc_cache *c, pid_t pid, const struct usc_stack *st, uint32_t i,
		    struct stack_pyeval *e)
{
	struct stack_sym sy[SYMS];
	size_t n;

	if (usc_stack_python(st, i) || usc_stack_sigframe(st, i))
		return false;
	n = stack_syms(c, pid, st, i, sy, SYMS);
	return n && ((sy[n - 1].func && !strcmp(sy[n - 1].func, EVAL_FUNC)) ||
		     (n == 1 && usc_stack_exact(st, i) == false && in_eval_part(c, e, &sy[0])));
}

int stack_splice_python(struct usc_cache *c, pid_t pid, const struct usc_stack *native,
			const struct python_frame *py, uint32_t npy, struct usc_stack *out,
			uint32_t max, struct stack_pyeval **evals)
{
	uint32_t j = 0;

	if (evals && !*evals)
		*evals = calloc(1, sizeof(**evals));	/* (none: by name only) */
	memset(out, 0, sizeof(*out));
	if (max > USC_STACK_FRAMES_MAX)
		max = USC_STACK_FRAMES_MAX;
	out->end = native->end;
	out->end_pc = native->end_pc;
	for (uint32_t i = 0; i < native->n; i++) {
		if (j < npy && is_eval(c, pid, native, i, evals ? *evals : NULL)) {
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
