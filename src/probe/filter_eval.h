/* The filter interpreter, written once, as fetch_eval.h is: one step of a
 * filter program (fetch.h) over the values a hit fetched. Included by the
 * inject agent, the bpf program and the session (which filters the events of
 * an engine that cannot filter in place).
 *
 * The includer defines, before each inclusion (none of them: only
 * filter_glob_full):
 *   FILTER_STEP                       the function's name
 *   FILTER_INLINE                     its storage and inlining
 *   FILTER_INT(env, i, u)             0 with the i-th value's bits in *u, or
 *                                     non-zero (a fault, a string)
 *   FILTER_STR(env, i, s, n)          0 with the i-th value's string in *s, *n
 *                                     bytes, or non-zero
 *   FILTER_GLOB(env, strs, off, pn, s, sn)  does the string match the glob of
 *                                     pn bytes at strs + off?
 * and may define, for a verifier that wants every index bounded:
 *   FILTER_LIT(strs, off, k)          strs[off + k]
 *   FILTER_SCHAR(s, k)                s[k]
 *   FILTER_STREQ(env, strs, off, ln, s, n)  is the string the literal of ln
 *                                     bytes at strs + off? (default: a loop)
 * The stack of truth values is a word of bits, the top in bit 0. */
#ifndef USC_PROBE_FILTER_EVAL_ONCE
#define USC_PROBE_FILTER_EVAL_ONCE

#include "probe/fetch.h"

/* bits of `size` bytes, sign-extended when sign */
static inline int64_t filter_sext(uint64_t u, unsigned size, unsigned sign)
{
	if (size >= 8 || !size)
		return (int64_t)u;
	u &= (1ULL << (8 * size)) - 1;
	if (sign && (u >> (8 * size - 1)))
		u |= ~0ULL << (8 * size);
	return (int64_t)u;
}

/* A glob of *, ? and [...] ([!...] negated) matched against s, with one
 * step back to the last * (linear in practice). */
static inline int filter_glob_full(const char *p, uint32_t pn, const char *s, uint32_t sn)
{
	uint32_t pi = 0, si = 0, star = ~0u, mark = 0;

	while (si < sn) {
		if (pi < pn && p[pi] == '*') {
			star = pi++;
			mark = si;
			continue;
		}
		if (pi < pn && p[pi] == '[') {
			uint32_t q = pi + 1;
			int neg = q < pn && p[q] == '!', hit = 0;

			q += neg;
			for (; q < pn && (p[q] != ']' || q == pi + 1 + (uint32_t)neg); q++) {
				if (q + 2 < pn && p[q + 1] == '-' && p[q + 2] != ']') {
					hit |= s[si] >= p[q] && s[si] <= p[q + 2];
					q += 2;
				} else {
					hit |= s[si] == p[q];
				}
			}
			if (q < pn && hit != neg) {
				pi = q + 1;
				si++;
				continue;
			}
		} else if (pi < pn && (p[pi] == '?' || p[pi] == s[si])) {
			pi++;
			si++;
			continue;
		}
		if (star == ~0u)
			return 0;
		pi = star + 1;
		si = ++mark;
	}
	while (pi < pn && p[pi] == '*')
		pi++;
	return pi == pn;
}

#endif

/* Included for filter_glob_full alone: no step to make. */
#ifdef FILTER_STEP

#ifndef FILTER_LIT
#define FILTER_LIT(strs, off, k) (strs)[(off) + (k)]
#endif
#ifndef FILTER_SCHAR
#define FILTER_SCHAR(s, k) (s)[k]
#endif

FILTER_INLINE void FILTER_STEP(const struct filter_insn *in, const char *strs, uint32_t *stack,
			       void *env)
{
	uint64_t u = 0;
	const char *s = 0;
	uint32_t n = 0;
	int b = 0;

	(void)env;
	switch (in->op) {
	case FIL_NZ:
		b = !FILTER_INT(env, in->arg, &u) && filter_sext(u, in->size, 0) != 0;
		break;
	case FIL_CMP:
		if (FILTER_INT(env, in->arg, &u))
			break;	/* a fault compares to nothing */
		if (in->cmp == CMP_BITS) {
			b = (u & (uint64_t)in->imm) != 0;
		} else if (in->sign) {
			int64_t x = filter_sext(u, in->size, 1), y = in->imm;

			b = in->cmp == CMP_EQ ? x == y : in->cmp == CMP_NE ? x != y :
			    in->cmp == CMP_LT ? x < y : in->cmp == CMP_LE ? x <= y :
			    in->cmp == CMP_GT ? x > y : x >= y;
		} else {
			uint64_t x = (uint64_t)filter_sext(u, in->size, 0), y = (uint64_t)in->imm;

			b = in->cmp == CMP_EQ ? x == y : in->cmp == CMP_NE ? x != y :
			    in->cmp == CMP_LT ? x < y : in->cmp == CMP_LE ? x <= y :
			    in->cmp == CMP_GT ? x > y : x >= y;
		}
		break;
	case FIL_STR: {
		uint32_t off = (uint32_t)(in->imm & 0xffff);
		uint32_t ln = (uint32_t)((uint64_t)in->imm >> 32);

		if (FILTER_STR(env, in->arg, &s, &n))
			break;
		if (in->cmp == CMP_GLOB || in->cmp == CMP_NGLOB) {
			b = FILTER_GLOB(env, strs, off, ln, s, n);
			b = in->cmp == CMP_GLOB ? b : !b;
		} else {
#ifdef FILTER_STREQ
			b = FILTER_STREQ(env, strs, off, ln, s, n);
#else
			uint32_t k = 0;

			b = n == ln;
			for (; b && k < ln && k < USC_FILTER_STRS; k++)
				b = FILTER_SCHAR(s, k) == FILTER_LIT(strs, off, k);
#endif
			b = in->cmp == CMP_EQ ? b : !b;
		}
		break;
	}
	case FIL_NOT:
		*stack ^= 1;
		return;
	case FIL_AND:
		*stack = (*stack >> 1) & (*stack | ~1u);
		return;
	case FIL_OR:
		*stack = (*stack >> 1) | (*stack & 1);
		return;
	default:
		return;
	}
	*stack = *stack << 1 | (uint32_t)b;
}

#endif /* FILTER_STEP */

#undef FILTER_STEP
#undef FILTER_INLINE
#undef FILTER_INT
#undef FILTER_STR
#undef FILTER_GLOB
#undef FILTER_LIT
#undef FILTER_SCHAR
#undef FILTER_STREQ
