/* Part of the bpf engine's program (engine/bpf/uscope.bpf.c includes it
 * once, in this place: it uses the maps, state and helpers defined above
 * it there and is no header of its own).
 *
 * Filters: a site's `if COND`, the filter interpreter every engine shares
 * (probe/filter_eval.h) with glob matching in bpf_loop steps. */

/* ---- filters ------------------------------------------------------------- */

struct glob_ctx {
	const char *p;		/* the filter's strings */
	const char *s;		/* the record's buffer */
	struct glob_state *g;
};

#define PAT(c, k) (c)->p[((c)->g->poff + (k)) & (USC_FILTER_STRS - 1)]
#define STR(c, k) (c)->s[((c)->g->soff & (BPFENG_REC_MAX - 1)) + ((k) & 255)]

/* No match here: back to the last '*', or no match at all. */
static __always_inline long glob_back(struct glob_state *g)
{
	if (g->star == ~0u) {
		g->result = 0;
		return 1;
	}
	g->pi = g->star + 1;
	g->si = ++g->mark;
	return 0;
}

/* One step of the glob match of filter_eval.h's filter_glob_full (a class
 * [...] one character of it a step): bpf_loop runs it, so the verifier
 * sees one step, not a loop. */
static long glob_step(__u32 n, void *data)
{
	struct glob_ctx *c = data;
	struct glob_state *g = c->g;

	if (g->literal) {
		if (g->si >= g->sn || g->pi >= g->pn) {
			g->result = g->si >= g->sn && g->pi >= g->pn;
			return 1;
		}
		if (PAT(c, g->pi) != STR(c, g->si)) {
			g->result = 0;
			return 1;
		}
		g->pi++;
		g->si++;
		return 0;
	}
	if (g->in_class) {
		__u32 q = g->cq;
		char ch = STR(c, g->si);

		if (q >= g->pn) {
			g->in_class = 0;	/* unterminated: matches nothing */
			return glob_back(g);
		}
		if (PAT(c, q) == ']' && q != g->pi + 1 + g->cneg) {
			g->in_class = 0;
			if (g->chit == g->cneg)
				return glob_back(g);
			g->pi = q + 1;
			g->si++;
			return 0;
		}
		if (q + 2 < g->pn && PAT(c, q + 1) == '-' && PAT(c, q + 2) != ']') {
			g->chit |= ch >= PAT(c, q) && ch <= PAT(c, q + 2);
			g->cq = q + 3;
		} else {
			g->chit |= ch == PAT(c, q);
			g->cq = q + 1;
		}
		return 0;
	}
	if (g->si >= g->sn) {
		if (g->pi < g->pn && PAT(c, g->pi) == '*') {
			g->pi++;
			return 0;
		}
		g->result = g->pi == g->pn;
		return 1;
	}
	if (g->pi < g->pn && PAT(c, g->pi) == '*') {
		g->star = g->pi++;
		g->mark = g->si;
		return 0;
	}
	if (g->pi < g->pn && PAT(c, g->pi) == '[') {
		g->in_class = 1;
		g->cneg = g->pi + 1 < g->pn && PAT(c, g->pi + 1) == '!';
		g->cq = g->pi + 1 + g->cneg;
		g->chit = 0;
		return 0;
	}
	if (g->pi < g->pn && (PAT(c, g->pi) == '?' || PAT(c, g->pi) == STR(c, g->si))) {
		g->pi++;
		g->si++;
		return 0;
	}
	return glob_back(g);
}

struct fil_ctx {
	const struct bpfeng_site *site;
	const struct bpfeng_rec *rec;
	const char *buf;
	struct task_state *ts;
	__u32 stack;
};

static __always_inline int fil_int(struct fil_ctx *f, __u32 i, __u64 *u)
{
	const struct bpfeng_val *v = &f->rec->vals[i & (BPFENG_MAX_ARGS - 1)];

	if (i >= BPFENG_MAX_ARGS || v->kind != BPFENG_INT)
		return 1;
	*u = v->val;
	return 0;
}

static __always_inline int fil_str(struct fil_ctx *f, __u32 i, const char **s, __u32 *n)
{
	const struct bpfeng_val *v = &f->rec->vals[i & (BPFENG_MAX_ARGS - 1)];

	if (i >= BPFENG_MAX_ARGS || v->kind != BPFENG_STR)
		return 1;
	*s = (const char *)(unsigned long)v->str_off;	/* an offset: see FILTER_SCHAR */
	*n = v->str_len;
	return 0;
}

static __always_inline int fil_glob(struct fil_ctx *f, const char *strs, __u32 off, __u32 pn,
				    const char *s, __u32 sn, __u32 literal)
{
	struct glob_state *g = &f->ts->glob;
	struct glob_ctx c = {strs, f->buf, g};
	__u32 steps;

	if (!fstr_on || sn > 255 || (literal && sn != pn))
		return 0;	/* (no filter compares strings: none of this is walked) */
	__builtin_memset(g, 0, sizeof(*g));
	g->poff = off;
	g->pn = pn;
	g->soff = (__u32)(unsigned long)s;
	g->sn = sn;
	g->star = ~0u;
	g->literal = literal;
	/* steps enough for any backtracking, classes scanned again included */
	steps = 2 * (pn + 2) * (sn + 2) * (pn + 2);
	bpf_loop(steps < (1 << 22) ? steps : (1 << 22), glob_step, &c, 0);
	return g->result;
}

/* strings are offsets into the record (f->buf), masked for the verifier */
#define FILTER_INLINE static __always_inline
#define FILTER_STEP filter_step
#define FILTER_INT(env, i, u) fil_int(env, i, u)
#define FILTER_STR(env, i, s, n) fil_str(env, i, s, n)
#define FILTER_GLOB(env, strs, off, pn, s, sn) fil_glob(env, strs, off, pn, s, sn, 0)
#define FILTER_STREQ(env, strs, off, ln, s, n) fil_glob(env, strs, off, ln, s, n, 1)
#include "probe/filter_eval.h"

static long fil_step(__u32 k, void *data)
{
	struct fil_ctx *f = data;

	if (k >= USC_FILTER_MAX)
		return 1;
	filter_step(&f->site->filter.insn[k], f->site->filter.strs, &f->stack, f);
	return 0;
}

/* Global functions (not static) are verified once, on their own, not at
 * every call in every state: what keeps the program within the verifier's
 * limits. Their pointer arguments may be NULL to the verifier. */
__noinline int filter_pass(const struct bpfeng_site *site, struct task_state *ts)
{
	struct fil_ctx f = {};
	__u32 n;

	if (!site || !ts)
		return 0;
	f.site = site;
	f.rec = (const struct bpfeng_rec *)ts->buf;
	f.buf = ts->buf;
	f.ts = ts;
	n = site->filter.n;
	if (!n)
		return 1;
	bpf_loop(n < USC_FILTER_MAX ? n : USC_FILTER_MAX, fil_step, &f, 0);
	return f.stack & 1;
}
