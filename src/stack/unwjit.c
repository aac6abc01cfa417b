/* JIT code whose frames its frame pointer does not describe, known by its
 * shape (unwjit.h): CPython's perf trampolines.
 *
 * CPython 3.12+ with -X perf (or sys.activate_stack_trampoline) enters the
 * evaluator of each Python function through a copy of a small function,
 * _Py_trampoline_func_start, in an anonymous executable arena (64 KiB of
 * copies, one after the other, each padded to 16 bytes since 3.13), so that perf names the frame after the
 * Python function (/tmp/perf-PID.map). 3.12's and 3.13's copies keep no
 * frame pointer:
 *	[endbr64] sub $8,%rsp; call *%rcx; add $8,%rsp; ret
 * later ones do:
 *	[endbr64] push %rbp; mov %rsp,%rbp; call *%rcx; pop %rbp; ret
 * A step by frame pointer through the first reads a frame that is not
 * there: the walk went on from a stale rbp or ended (perf's own unwinding by
 * frame pointer shows them as the last frame). Each shape's caller is known
 * at the one place a walk meets it, the return address of its call: the
 * return address 8 bytes above the stack pointer at the call, rbp
 * unchanged or saved just below it. So an arena holding copies of either
 * gets a table of one row, which every walker (the agent's, the bpf
 * program's, the tracer's) follows as it follows a module's CFI, and the
 * walk goes on with the CFI of the caller (py_trampoline_evaluator, then
 * _PyEval_EvalFrame... main). The row is right at the return addresses of
 * the copies, which is where a walk's frame 1 and beyond are: a probe never
 * fires inside a trampoline. */
#include <errno.h>
#include <string.h>
#include <sys/uio.h>

#include "objfile/modules.h"
#include "stack/unwjit.h"

#define JIT_SPAN (1u << 24)		/* the arenas a table serves: 16 MiB */
#define JIT_SHIFT 14
#define JIT_NIDX (JIT_SPAN >> JIT_SHIFT)

static const uint8_t ENDBR64[] = {0xf3, 0x0f, 0x1e, 0xfa};

/* The shapes, after an endbr64 if any. */
static const struct jit_shape {
	const char *name;
	uint8_t len;
	uint8_t bytes[16];
} shapes[] = {
	/* (jit_rows[] below says where each leaves the caller's rbp) */
	{"CPython perf trampoline (3.12, 3.13)", 11,
	 {0x48, 0x83, 0xec, 0x08, 0xff, 0xd1, 0x48, 0x83, 0xc4, 0x08, 0xc3}},
	{"CPython perf trampoline (frame pointer)", 8,
	 {0x55, 0x48, 0x89, 0xe5, 0xff, 0xd1, 0x5d, 0xc3}},
};
#define NSHAPES (sizeof(shapes) / sizeof(shapes[0]))

/* Each shape's table: one row from offset 0, CFA = rsp + 16 (the return
 * address and the 8 bytes below it), rbp as the shape leaves it; every
 * block of the index is that row. */
static struct stack_row jit_rows[NSHAPES] = {
	{.pc = 0, .cfa_off = 16, .op = STACK_OP_RSP | STACK_RBP_SAME << STACK_RBP_SHIFT},
	{.pc = 0, .cfa_off = 16, .op = STACK_OP_RSP | STACK_RBP_SAVED << STACK_RBP_SHIFT,
	 .rbp_off = -2},
};
static uint32_t jit_idx[JIT_NIDX];
#define JIT_TAB(k)                                                                         \
	{.tab = {.base = 0, .span = JIT_SPAN, .nrows = 1, .nidx = JIT_NIDX, .shift = JIT_SHIFT}, \
	 .rows = &jit_rows[k], .idx = jit_idx, .by_op = {[STACK_OP_RSP] = 1}}
static const struct stack_utab jit_tabs[NSHAPES] = {JIT_TAB(0), JIT_TAB(1)};

int stack_jit_shape(const uint8_t *b, size_t n, const char **name)
{
	size_t at = n >= sizeof(ENDBR64) && !memcmp(b, ENDBR64, sizeof(ENDBR64)) ?
			    sizeof(ENDBR64) : 0;

	for (size_t k = 0; k < NSHAPES; k++) {
		size_t len = at + shapes[k].len;

		size_t pad = (len + 15) & ~(size_t)15;

		if (n < len || memcmp(b + at, shapes[k].bytes, shapes[k].len))
			continue;
		/* copies one after the other (3.12), or each padded to 16
		 * bytes (3.13): the next one too, where there is room */
		if (n >= len + pad && memcmp(b, b + len, len) && memcmp(b, b + pad, len))
			continue;
		if (name)
			*name = shapes[k].name;
		return (int)k;
	}
	return -ENODATA;
}

int stack_jit_tab(pid_t pid, const struct proc_map *m, const struct stack_utab **out)
{
	uint8_t b[2 * (sizeof(ENDBR64) + 16)];
	size_t n = sizeof(b);
	struct iovec local, remote;
	ssize_t got;
	int k;

	*out = NULL;
	if (pid <= 0 || m->perms[2] != 'x' || m->end <= m->start)
		return -ENODATA;
	if (m->end - m->start < n)
		n = m->end - m->start;
	local = (struct iovec){b, n};
	remote = (struct iovec){(void *)(uintptr_t)m->start, n};
	got = process_vm_readv(pid, &local, 1, &remote, 1, 0);
	if (got <= 0)
		return -ENODATA;
	k = stack_jit_shape(b, (size_t)got, NULL);
	if (k < 0)
		return k;
	*out = &jit_tabs[k];
	return 0;
}
