/* The passes over a probe's instructions once compile.c has made them:
 * script_fuse makes the common shapes one instruction (a latency's stop,
 * nsecs - @s[tid] behind /@s[tid]/, one SOP_DELTA), and script_few says
 * whether the probe is a few updates of maps (SCRIPT_PROBE_UPDATES: vm.h's
 * _unit runs it with no machine to set up). */
#include <stdbool.h>
#include <stdlib.h>

#include "script/script_int.h"

/* A key a probe of updates computes itself: none, an input, the thread's
 * or the process's id. */
static bool simple_key(uint32_t b)
{
	return b == SCRIPT_KEYNONE || b == SCRIPT_REG_TID || b == SCRIPT_REG_PID ||
	       ((b & SCRIPT_KEYIN) && b < SCRIPT_KEYNONE);
}

/* A probe of updates (vm.h's _unit runs it, no machine): up to
 * SCRIPT_UNITS_MAX units of [a value: LDI, IN, BUILTIN, or a DELTA whose
 * jump, if any, is to the END] and the MAP of a store or an aggregation
 * that takes it (a count, a delete: none), keys simple_key's; then the
 * END. Nothing else reads the registers a unit writes. */
bool script_few(const struct script_insn *in, uint32_t n)
{
	uint32_t i = 0, units = 0;

	if (!n || in[n - 1].op != SOP_END)
		return false;
	while (i + 1 < n) {
		const struct script_insn *v = NULL, *m;

		switch (in[i].op) {
		case SOP_DELTA:
			if (!simple_key(in[i].b) || (in[i].imm && (uint64_t)in[i].imm != n - 1))
				return false;
			/* fall through */
		case SOP_LDI:
		case SOP_IN:
		case SOP_BUILTIN:
			v = &in[i++];
			break;
		default:
			break;
		}
		if (i + 1 >= n)
			return false;	/* a value nothing takes */
		m = &in[i++];
		if (m->op != SOP_MAP || !simple_key(m->b))
			return false;
		switch (m->imm) {
		case SMOP_COUNT:
		case SMOP_DELETE:
			if (v)
				return false;
			break;
		case SMOP_STORE: case SMOP_SUM: case SMOP_MIN: case SMOP_MAX: case SMOP_AVG:
		case SMOP_STATS: case SMOP_HIST: case SMOP_LHIST:
			if (!v || m->a != v->d)
				return false;
			break;
		default:
			return false;
		}
		if (++units > SCRIPT_UNITS_MAX)
			return false;
	}
	return units > 0;
}

/* Is insns[i] a jump (with its target in imm)? */
static bool jumps(const struct script_insn *in)
{
	return in->op == SOP_JMP || in->op == SOP_JZ || in->op == SOP_JNZ ||
	       (in->op == SOP_DELTA && in->imm);
}

/* At i: a per-thread stop, a builtin minus a map's value (nsecs -
 * @s[tid]: bpftrace's latency), as [BUILTIN,] MAP LOAD [, JZ on its
 * register], [BUILTIN,] ALU SUB (the builtin first when there is no
 * predicate; else the predicate read the map), none but the first a
 * jump's target. Its SOP_DELTA and *len, or op 0. */
static struct script_insn delta_at(const struct script_insn *in, uint32_t n, uint32_t i,
				   const bool *target, uint32_t *len)
{
	struct script_insn f = {0};
	const struct script_insn *m, *jz = NULL, *bi = NULL, *sub;
	uint32_t k = i;

	if (k < n && in[k].op == SOP_BUILTIN)
		bi = &in[k++];
	if (k >= n || (k > i && target[k]))
		return f;
	m = &in[k++];
	if (m->op != SOP_MAP || m->imm != SMOP_LOAD || m->x > 0xff || m->d >= SCRIPT_NREGS)
		return f;
	if (!bi && k < n && in[k].op == SOP_JZ && in[k].a == m->d && (uint64_t)in[k].imm > k &&
	    !target[k])
		jz = &in[k++];
	if (!bi && k < n && !target[k])
		bi = &in[k++];
	if (!bi || k >= n || target[k])
		return f;
	sub = &in[k++];
	/* (a key in the builtin's register would be read before it is set) */
	if (bi->op != SOP_BUILTIN || bi->x > 0xff || bi->d >= SCRIPT_NREGS || bi->d == m->d ||
	    bi->d == m->b ||
	    sub->op != SOP_ALU || sub->x != SALU_SUB || sub->a != bi->d || sub->b != m->d)
		return f;
	*len = k - i;
	f = (struct script_insn){SOP_DELTA, sub->d, m->d, m->b, m->x | bi->x << 8 | (uint32_t)bi->d << 16,
				 jz ? jz->imm : 0};
	return f;
}

/* The probe's n instructions at in with the common shapes fused, jumps
 * moved to where their targets went: the new count. */
uint32_t script_fuse(struct script_insn *in, uint32_t n)
{
	bool *target = calloc(n + 1, sizeof(*target));
	uint32_t *at = calloc(n + 1, sizeof(*at)), out = 0;

	if (!target || !at) {
		free(target);
		free(at);
		return n;	/* as it is */
	}
	for (uint32_t i = 0; i < n; i++)
		if (jumps(&in[i]) && (uint64_t)in[i].imm <= n)
			target[in[i].imm] = true;
	for (uint32_t i = 0; i < n;) {
		uint32_t len = 1;
		struct script_insn f = delta_at(in, n, i, target, &len);

		for (uint32_t k = 0; k < len; k++)
			at[i + k] = out;
		in[out++] = f.op == SOP_DELTA ? f : in[i];
		i += len;
	}
	at[n] = out;
	for (uint32_t i = 0; i < out; i++)
		if (jumps(&in[i]) && (uint64_t)in[i].imm <= n)
			in[i].imm = at[in[i].imm];
	free(target);
	free(at);
	return out;
}
