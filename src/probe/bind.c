/* Binding a parsed argument to a site: $argN means the N-th SysV integer
 * argument at a function's entry, and the N-th argument of a USDT probe at
 * its site. The parser leaves FOP_ARG; this turns it into a real load. */
#include <errno.h>
#include <string.h>

#include "probe/probe.h"

static const uint8_t sysv_arg_regs[6] = {
	USC_REG_DI, USC_REG_SI, USC_REG_DX, USC_REG_CX, USC_REG_R8, USC_REG_R9,
};

static bool is_store(uint8_t op)
{
	return op == FOP_ST_RAW || op == FOP_ST_MEM || op == FOP_ST_STRING;
}

/* An array in memory (usc_fetcharg.in_place: a char[] member at val + off)
 * has no value to load: it is its bytes at val + off, where the user's
 * first step reads. A dereference or a string reads there; a plain number
 * (`r->tag:x32`) reads the array's first bytes. */
static void in_place_step(struct fetch_insn *step, int64_t off)
{
	if (step->op == FOP_ST_RAW)
		*step = (struct fetch_insn){.op = FOP_ST_MEM, .size = step->size};
	if (step->op == FOP_DEREF || step->op == FOP_ST_MEM || step->op == FOP_ST_STRING)
		step->imm += off;
}

int probe_bind_arg(const struct usc_fetcharg *in, const struct usc_fetcharg *usdt,
		   unsigned nusdt, struct usc_fetcharg *out)
{
	struct fetch_insn prog[USC_FETCH_MAX * 2];
	unsigned n = 0, k;
	const struct usc_fetcharg *a;
	int64_t idx;

	*out = *in;
	if (in->ninsn == 0 || in->insn[0].op != FOP_ARG)
		return 0;
	idx = in->insn[0].imm;
	if (!usdt) {
		if (idx < 1 || idx > 6)
			return -ERANGE;
		out->insn[0] = (struct fetch_insn){.op = FOP_REG, .reg = sysv_arg_regs[idx - 1]};
		return 0;
	}
	if (idx < 1 || (unsigned)idx > nusdt)
		return -ERANGE;
	a = &usdt[idx - 1];

	/* A bare $argN keeps the argument's own size and sign. */
	if (!in->type_given && in->ninsn == 3 && in->insn[1].op == FOP_ST_RAW) {
		memcpy(out->insn, a->insn, sizeof(out->insn));
		out->ninsn = a->ninsn;
		out->type = a->type;
		return 0;
	}

	/* The argument's value: its program up to the store; a store from
	 * memory becomes a dereference. Then the user's program after FOP_ARG. */
	for (k = 0; k < a->ninsn && !is_store(a->insn[k].op) && a->insn[k].op != FOP_END; k++)
		prog[n++] = a->insn[k];
	if (k < a->ninsn && a->insn[k].op == FOP_ST_MEM)
		prog[n++] = (struct fetch_insn){.op = FOP_DEREF, .imm = a->insn[k].imm};
	for (unsigned u = 1; u < in->ninsn; u++) {
		prog[n] = in->insn[u];
		if (u == 1 && a->in_place && k < a->ninsn && a->insn[k].op == FOP_ST_STRING)
			in_place_step(&prog[n], a->insn[k].imm);
		n++;
	}

	/* DEREF off; ST_RAW size -> ST_MEM off size */
	for (k = 0; k + 1 < n; k++) {
		if (prog[k].op == FOP_DEREF && prog[k + 1].op == FOP_ST_RAW) {
			prog[k] = (struct fetch_insn){.op = FOP_ST_MEM, .size = prog[k + 1].size,
						      .imm = prog[k].imm};
			memmove(&prog[k + 1], &prog[k + 2], (n - k - 2) * sizeof(prog[0]));
			n--;
			break;
		}
	}
	if (n > USC_FETCH_MAX)
		return -E2BIG;
	memcpy(out->insn, prog, n * sizeof(prog[0]));
	out->ninsn = (uint8_t)n;
	return 0;
}
