/* The inject agent's records turned into events (engine/raw.h): what the
 * tracer does as it drains the rings, and what a recording's reader does
 * with the ring bytes in the file. Nothing read is trusted: the rings are
 * the traced process's memory, the file may be damaged. Apart from the
 * rest of the engine so that the reader (and its fuzzer) link it alone. */
#include <errno.h>
#include <string.h>

#include "engine/inject/inject_shared.h"
#include "engine/raw.h"

/* The record or pad at p whose first word, read once by the caller, is n:
 * whether it is short, a pad or full is decided from that one read (the
 * rings are the traced process's memory and may change under us). */
static int peek(const void *p, uint32_t n, size_t avail, uint32_t *site, uint64_t *tsc,
		uint32_t *len)
{
	const struct inj_rec *r = p;

	if (n & INJ_REC_SHORT) {
		const struct inj_rec_short *q = p;

		n = inj_short_len(n, avail);
		if (!n)
			return -EINVAL;	/* stray bits, a size the agent never writes */
		*len = n;
		*site = q->site;
		*tsc = q->tsc;
		return 0;
	}
	if (n & INJ_REC_PAD) {
		/* the rest of the ring's end, skipped (from an 8-aligned
		 * record to the ring's end: 8-aligned too, and what follows
		 * must be) */
		n &= ~INJ_REC_PAD;
		if (!n || n > avail || (n & 7))
			return -EINVAL;
		*len = n;
		return 1;
	}
	if (n >= sizeof(*r) + 8 && n <= avail && !(n & 7) && r->nvals == INJ_NVALS_SCRIPT) {
		*len = n;	/* a script's output (struct script_rec, then values) */
		*site = r->site;
		*tsc = r->tsc;
		return 0;
	}
	if (n < sizeof(*r) || n > avail || (n & 7) || r->nvals > INJ_MAX_ARGS ||
	    sizeof(*r) + r->nvals * sizeof(struct inj_val) > n)
		return -EINVAL;	/* not a record the agent writes */
	*len = n;
	*site = r->site;
	*tsc = r->tsc;
	return 0;
}

static inline uint32_t first_word(const void *p)
{
	return *(const volatile uint32_t *)p;
}

int inject_raw_peek(const void *p, size_t avail, uint32_t *site, uint64_t *tsc, uint32_t *len)
{
	if (avail < sizeof(uint32_t))
		return -EINVAL;
	return peek(p, first_word(p), avail, site, tsc, len);
}

/* A short record (len bytes, checked): its words in order, the return
 * address first at a return site; an argument it has no word for is a
 * fault, as in a record that says fewer values than its site has. */
static void short_event(const struct inj_rec_short *q, uint32_t first, uint32_t len,
			const struct usc_site *site, struct usc_value *vals, struct usc_event *ev)
{
	uint32_t nw = (uint32_t)((len - sizeof(*q)) / sizeof(uint64_t)), w = 0;

	ev->cpu = (int32_t)(first >> INJ_REC_SHORT_CPU & 0xfff);
	if (site->ret_site)
		ev->ip = w < nw ? q->w[w++] : 0;
	for (unsigned a = 0; a < ev->nvals; a++, w++)
		vals[a] = w < nw ? (struct usc_value){.kind = USC_V_INT, .u = q->w[w]}
				 : (struct usc_value){.kind = USC_V_FAULT};
}

int inject_raw_event(const void *p, size_t avail, const struct usc_site *site, uint64_t ip,
		     uint64_t time_ns, int32_t pid, int32_t tid, const char *comm,
		     struct usc_value *vals, struct usc_event *ev)
{
	const struct inj_rec *r = p;
	uint32_t site_idx, len, w;
	uint64_t tsc;

	if (avail < sizeof(uint32_t) || peek(p, w = first_word(p), avail, &site_idx, &tsc, &len))
		return -EINVAL;
	memset(ev, 0, sizeof(*ev));
	ev->time_ns = time_ns;
	ev->pid = pid;
	ev->tid = tid;
	ev->comm = comm;
	ev->site = site;
	ev->ip = ip;
	if (site->ret_site)
		ev->func = ip - (site->vaddr - site->func_vaddr);
	ev->nvals = site->nargs < INJ_MAX_ARGS ? site->nargs : INJ_MAX_ARGS;
	ev->vals = vals;
	if (w & INJ_REC_SHORT) {
		short_event((const struct inj_rec_short *)p, w, len, site, vals, ev);
		return 0;
	}
	ev->cpu = (int32_t)r->cpu;
	if (r->nvals == INJ_NVALS_SCRIPT) {
		/* a script's output record: its bytes, for the script's sink */
		ev->nvals = 0;
		ev->script_rec = r + 1;
		ev->script_len = len - (uint32_t)sizeof(*r);
		return 0;
	}
	if (site->ret_site)
		ev->ip = r->retaddr;
	for (unsigned a = 0; a < r->nvals && a < INJ_MAX_ARGS; a++) {
		const struct inj_val *v = &r->vals[a];
		struct usc_value *o = &vals[a];

		memset(o, 0, sizeof(*o));
		if (v->kind == INJ_STR && (uint32_t)v->str_off + v->str_len < len) {
			o->kind = USC_V_STR;
			o->str = (const char *)r + v->str_off;
			o->len = v->str_len;
		} else if (v->kind == INJ_STACK && v->str_len >= sizeof(struct fetch_stack_hdr) &&
			   (uint32_t)v->str_off + v->str_len <= len &&
			   ((const struct fetch_stack_hdr *)((const char *)r + v->str_off))->len ==
				   v->str_len - sizeof(struct fetch_stack_hdr)) {
			o->kind = USC_V_USTACK;
			o->str = (const char *)r + v->str_off;
			o->len = v->str_len;
		} else if (v->kind == INJ_WALK && (uint32_t)v->str_off + v->str_len <= len &&
			   fetch_walk_valid((const char *)r + v->str_off, v->str_len)) {
			o->kind = USC_V_WALK;
			o->str = (const char *)r + v->str_off;
			o->len = v->str_len;
		} else if (v->kind == INJ_PYSTACK && (uint32_t)v->str_off + v->str_len <= len &&
			   python_stack_ok((const char *)r + v->str_off, v->str_len)) {
			o->kind = USC_V_PYSTACK;
			o->str = (const char *)r + v->str_off;
			o->len = v->str_len;
		} else if (v->kind == INJ_INT) {
			o->kind = USC_V_INT;
			o->u = v->val;
		} else if (v->kind == INJ_NULL) {
			o->kind = USC_V_NULL;
		} else {
			o->kind = USC_V_FAULT;
		}
	}
	for (unsigned a = r->nvals; a < site->nargs && a < INJ_MAX_ARGS; a++)
		vals[a] = (struct usc_value){.kind = USC_V_FAULT};
	return 0;
}

int inject_raw_pystacks(const void *p, size_t avail,
			int (*fn)(void *ctx, const void *bytes, uint32_t len), void *ctx)
{
	const struct inj_rec *r = p;
	uint32_t site, len, w;
	uint64_t tsc;
	int ret = 0;

	if (avail < sizeof(uint32_t) || peek(p, w = first_word(p), avail, &site, &tsc, &len) ||
	    (w & INJ_REC_SHORT) || r->nvals == INJ_NVALS_SCRIPT)
		return 0;	/* a pad, not a record, one of integers only, a script's */
	for (unsigned a = 0; a < r->nvals && a < INJ_MAX_ARGS && !ret; a++) {
		const struct inj_val *v = &r->vals[a];

		if (v->kind == INJ_PYSTACK && (uint32_t)v->str_off + v->str_len <= len &&
		    python_stack_ok((const char *)r + v->str_off, v->str_len))
			ret = fn(ctx, (const char *)r + v->str_off, v->str_len);
	}
	return ret;
}
