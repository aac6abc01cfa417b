/* pprof profiles of stacks ($ustack), for go tool pprof, Pyroscope and
 * Parca (src/pprof/ writes them):
 *
 *   count --pprof FILE     a sample per counted stack (aggsink.c's rows keyed
 *                          by it): its hits ("calls", "count"); the row's
 *                          other key arguments become the sample's labels
 *   latency --pprof FILE   the same with the calls' time summed as a second
 *                          sample type ("wall", "nanoseconds"): the entry's
 *                          stack, charged with the time until the return
 *   export --format pprof  a recording's stacks: each event with a stack is
 *                          a call; when the probe is a function's entry and
 *                          its return was recorded too, its time to the
 *                          return less that of the probed calls it made
 *                          (its self time, src/flow's pairing) is summed as
 *                          "wall": pprof adds a function's callees to it,
 *                          so its cumulative time is its calls' whole time
 *
 * A frame is a location: its address in the process, its mapping (the
 * file's range, offset, path and build id) and its lines, the functions
 * inlined there innermost first then the function itself, each with its
 * source file and line, as stack_syms shows them; JIT code's frames (named
 * from the process's perf map) are in a mapping named "[jit]", as perf
 * names it. A row without a stack (a
 * probe without $ustack beside one with it) is one frame named after the
 * probe. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/cache.h"
#include "core/log.h"
#include "objfile/objfile.h"
#include "objfile/modules.h"
#include "flow/flow.h"
#include "output/output.h"
#include "pprof/pprof.h"
#include "sink/aggsink.h"
#include "sink/sink.h"
#include "sink/sink_int.h"
#include "stack/stack.h"

#define SYMS_MAX 8

/* Build ids by path, read once each. */
struct build_ids {
	char **path, **hex;
	size_t n;
};

static const char *build_id(struct build_ids *b, const char *path)
{
	char hex[129];
	char **p, **h;

	for (size_t i = 0; i < b->n; i++)
		if (!strcmp(b->path[i], path))
			return b->hex[i];
	p = realloc(b->path, (b->n + 1) * sizeof(*p));
	if (p)
		b->path = p;
	h = realloc(b->hex, (b->n + 1) * sizeof(*h));
	if (h)
		b->hex = h;
	if (!p || !h)
		return NULL;
	objfile_build_id(path, hex, sizeof(hex));
	b->path[b->n] = strdup(path);
	b->hex[b->n] = strdup(hex);
	if (!b->path[b->n] || !b->hex[b->n]) {
		free(b->path[b->n]);
		free(b->hex[b->n]);
		return NULL;
	}
	return b->hex[b->n++];
}

static void build_ids_free(struct build_ids *b)
{
	for (size_t i = 0; i < b->n; i++) {
		free(b->path[i]);
		free(b->hex[i]);
	}
	free(b->path);
	free(b->hex);
}

/* The mapping of addr in pid (0: none known). */
static uint64_t mapping_of(struct pprof *pp, struct build_ids *b, struct usc_cache *c, pid_t pid,
			   uint64_t addr)
{
	for (int pass = 0; pass < 2; pass++) {
		size_t n = 0;
		const struct proc_map *m = cache_maps(c, pid, pass == 1, &n);

		for (size_t i = 0; m && i < n; i++)
			if (addr >= m[i].start && addr < m[i].end && m[i].path && m[i].path[0] == '/')
				return pprof_mapping(pp, m[i].start, m[i].end, m[i].pgoff, m[i].path,
						     build_id(b, m[i].path));
	}
	return 0;
}

/* The mapping of JIT code at addr (a frame the perf map named): the
 * anonymous mapping holding it, as "[jit]" (perf's name for it). */
static uint64_t jit_mapping_of(struct pprof *pp, struct usc_cache *c, pid_t pid, uint64_t addr)
{
	for (int pass = 0; pass < 2; pass++) {
		size_t n = 0;
		const struct proc_map *m = cache_maps(c, pid, pass == 1, &n);

		for (size_t i = 0; m && i < n; i++)
			if (addr >= m[i].start && addr < m[i].end)
				return pprof_mapping(pp, m[i].start, m[i].end, 0, "[jit]", NULL);
	}
	return pprof_mapping(pp, addr, addr + 1, 0, "[jit]", NULL);
}

/* The locations of st's frames, leaf first, into ids (max); how many. */
static size_t stack_locations(struct pprof *pp, struct build_ids *b, struct usc_cache *c,
			      pid_t pid, const struct usc_stack *st, uint64_t *ids, size_t max)
{
	size_t n = 0;

	for (uint32_t i = 0; i < st->n && n < max; i++) {
		struct stack_sym sy[SYMS_MAX];
		struct pprof_line lines[SYMS_MAX];
		size_t ns = stack_syms(c, pid, st, i, sy, SYMS_MAX), nl = 0;
		uint64_t pc = st->pc[i];
		/* a return address is after its call: its mapping is the call's */
		uint64_t look = usc_stack_exact(st, i) || !pc ? pc : pc - 1;
		uint64_t m = ns && sy[0].jit ? jit_mapping_of(pp, c, pid, look) :
					      mapping_of(pp, b, c, pid, look);

		for (size_t k = 0; k < ns; k++)
			if (sy[k].func)
				lines[nl++] = (struct pprof_line){
					pprof_function(pp, sy[k].func, sy[k].file), sy[k].line};
		ids[n++] = pprof_location(pp, m, pc, lines, nl);
	}
	return n;
}

/* A frame for a row without a stack: the probe's name. */
static uint64_t probe_location(struct pprof *pp, const char *label)
{
	struct pprof_line l = {pprof_function(pp, label, NULL), 0};

	return pprof_location(pp, 0, 0, &l, 1);
}

static int write_profile(struct pprof *pp, FILE *fp, int *write_error)
{
	int ret = pprof_write(pp, fp);

	if (ret == -EIO) {
		*write_error = errno ? errno : EIO;
		log_error("cannot write the profile: %s", strerror(*write_error));
	} else if (ret) {
		log_error("out of memory");
	}
	return ret;
}

/* ---- count and latency: the rows ------------------------------------------------ */

struct pprof_rows {
	struct agg_sink k;	/* first: aggsink_destroy frees it */
	struct build_ids ids;
};

static struct pprof_rows *rows_of(struct usc_sink *k)
{
	return container_of(container_of(k, struct agg_sink, base), struct pprof_rows, k);
}

static int rows_begin(struct usc_sink *k, const struct usc_sink_ctx *c)
{
	struct pprof_rows *p = rows_of(k);
	int ret = aggsink_begin(k, c);

	if (!ret && p->k.intervals) {
		agg_table_free(&p->k.all);	/* a profile of the whole run */
		p->k.intervals = false;
	}
	return ret;
}

/* Row r's sample: its stack, its values, its other keys as labels. */
static int row_sample(struct pprof_rows *p, struct pprof *pp, const struct agg_row *r)
{
	const struct usc_sink_ctx *c = p->k.s;
	struct usc_value vals[USC_MAX_ARGS] = {0};
	struct usc_event ev = {.site = r->site, .vals = vals, .comm = ""};
	struct pprof_label lb[USC_MAX_ARGS];
	struct usc_output txt = {.cache = c->cache};
	size_t nlb = 0, nlocs = 0;
	uint64_t locs[USC_STACK_FRAMES_MAX];
	int64_t v[2] = {(int64_t)r->st.count, r->st.sum * (int64_t)p->k.a.unit_ns};
	unsigned first, n;
	int value, ret = 0;

	agg_layout(&c->set->agg, r->site, &first, &n, &value);
	for (unsigned i = 0; i < n && first + i < USC_MAX_ARGS && !ret; i++) {
		const struct usc_fetcharg *a = &r->site->args[first + i];

		aggsink_key_slot(&p->k, r, first, i, vals, &ev);
		if (vals[first + i].kind == USC_V_STACK) {
			if (!nlocs)
				nlocs = stack_locations(pp, &p->ids, c->cache, ev.pid,
							vals[first + i].stack, locs,
							USC_STACK_FRAMES_MAX);
			continue;
		}
		if (a->show == USC_SHOW_GO_PART)
			continue;
		output_reset(&txt);
		ret = aggsink_value_text(&txt, &ev, first + i);
		lb[nlb] = (struct pprof_label){.key = a->name,
					       .str = ret ? NULL : strdup(txt.buf ? txt.buf : "")};
		if (!ret && !lb[nlb].str)
			ret = -ENOMEM;
		if (lb[nlb].str)
			nlb++;
	}
	if (!ret && !nlocs)
		locs[nlocs++] = probe_location(pp, r->label);
	if (!ret)
		ret = pprof_sample(pp, locs, nlocs, v, lb, nlb);
	for (size_t i = 0; i < nlb; i++)
		free((char *)lb[i].str);
	output_free(&txt);
	return ret;
}

static int rows_report(struct usc_sink *k, const struct usc_sink_ctx *c, const struct usc_stats *st,
		       bool final)
{
	static const char *const type[] = {"calls", "wall"}, *const unit[] = {"count", "nanoseconds"};
	struct pprof_rows *p = rows_of(k);
	bool lat = c->set->agg.kind == USC_AGG_LATENCY;
	struct pprof *pp;
	int ret = 0;

	(void)st;
	if (!final || !p->k.labels)
		return 0;
	pp = pprof_new(type, unit, lat ? 2 : 1);
	if (!pp) {
		log_error("out of memory");
		return -ENOMEM;
	}
	for (size_t i = 0; i < p->k.iv.n && !ret; i++)
		if (p->k.iv.rows[i]->st.count && p->k.iv.rows[i]->site)
			ret = row_sample(p, pp, p->k.iv.rows[i]);
	if (ret)
		log_error("out of memory");
	else
		ret = write_profile(pp, p->k.fp, &p->k.write_error);
	pprof_free(pp);
	return ret;
}

static void rows_destroy(struct usc_sink *k)
{
	build_ids_free(&rows_of(k)->ids);
	aggsink_destroy(k);
}

static const struct usc_sink_ops rows_ops = {
	.begin = rows_begin,
	.event = aggsink_event,
	.agg_row = aggsink_row,
	.flush = aggsink_flush,
	.report = rows_report,
	.destroy = rows_destroy,
};

struct usc_sink *usc_sink_pprof(FILE *fp)
{
	struct pprof_rows *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	aggsink_init(&p->k, &rows_ops, fp, false);
	return &p->k.base;
}

/* ---- export: a recording's stacks ------------------------------------------------ */

struct pprof_export {
	struct usc_sink base;
	FILE *fp;
	const struct usc_sink_ctx *s;
	struct flow_state *flow;	/* entries waiting for their return */
	uint64_t *calls, *ns;		/* by stack id (stack_intern) - 1 */
	size_t n;
	bool timed;			/* some call was paired with its return */
	struct build_ids ids;
	int err, write_error;
};

static struct pprof_export *export_of(struct usc_sink *k)
{
	return container_of(k, struct pprof_export, base);
}

static int export_begin(struct usc_sink *k, const struct usc_sink_ctx *c)
{
	export_of(k)->s = c;
	return 0;
}

static int export_fail(struct pprof_export *x, int err)
{
	if (!x->err)
		log_error("out of memory");
	return x->err = err;
}

static int export_event(struct usc_sink *k, const struct usc_event *ev)
{
	struct pprof_export *x = export_of(k);
	uint64_t id = 0;
	const char *key;
	size_t keylen;
	bool unpaired;
	struct flow_result r;
	enum flow_kind kind;

	if (x->err)
		return x->err;
	for (unsigned a = 0; a < ev->nvals && !id; a++) {
		if (ev->vals[a].kind != USC_V_STACK)
			continue;
		id = stack_intern(x->s->cache, ev->pid, ev->vals[a].stack);
		if (!id)
			return export_fail(x, -ENOMEM);
		if (id > x->n) {
			size_t n = id * 2;
			uint64_t *c = realloc(x->calls, n * sizeof(*c)), *t;

			if (c)
				x->calls = c;
			t = c ? realloc(x->ns, n * sizeof(*t)) : NULL;
			if (!t)
				return export_fail(x, -ENOMEM);
			x->ns = t;
			memset(x->calls + x->n, 0, (n - x->n) * sizeof(*c));
			memset(x->ns + x->n, 0, (n - x->n) * sizeof(*t));
			x->n = n;
		}
		x->calls[id - 1]++;
	}
	/* entries and returns pair per thread: an entry's stack is charged
	 * with the time to its return */
	kind = sink_flow_classify(x->s->cache, ev, &key, &keylen, &unpaired);
	if (kind == FLOW_EVENT)
		return 0;
	if (flow_feed_data(x->flow, flow_ctx_of(ev), ev->time_ns, kind, key, keylen,
			   kind == FLOW_ENTRY ? (void *)(uintptr_t)id : NULL, &r))
		return export_fail(x, -ENOMEM);
	if (kind == FLOW_RETURN && r.duration_ns >= 0 && r.data) {
		x->ns[(uintptr_t)r.data - 1] += (uint64_t)r.self_ns;
		x->timed = true;
	}
	return 0;
}

static int export_report(struct usc_sink *k, const struct usc_sink_ctx *c,
			 const struct usc_stats *st, bool final)
{
	static const char *const type[] = {"calls", "wall"}, *const unit[] = {"count", "nanoseconds"};
	struct pprof_export *x = export_of(k);
	struct pprof *pp;
	size_t samples = 0;
	int ret = 0;

	(void)st;
	if (!final || x->err)
		return x->err;
	pp = pprof_new(type, unit, x->timed ? 2 : 1);
	if (!pp)
		return export_fail(x, -ENOMEM);
	for (size_t id = 1; id <= x->n && !ret; id++) {
		uint64_t locs[USC_STACK_FRAMES_MAX];
		int64_t v[2] = {(int64_t)x->calls[id - 1], (int64_t)x->ns[id - 1]};
		const struct usc_stack *sk;
		pid_t pid;
		size_t n;

		if (!x->calls[id - 1] || !(sk = stack_interned(c->cache, id, &pid)))
			continue;
		n = stack_locations(pp, &x->ids, c->cache, pid, sk, locs, USC_STACK_FRAMES_MAX);
		ret = pprof_sample(pp, locs, n, v, NULL, 0);
		samples++;
	}
	if (ret) {
		pprof_free(pp);
		return export_fail(x, ret);
	}
	if (!samples) {
		log_error("the recording has no stacks: record a probe with $ustack for a pprof "
			  "profile (--format folded draws its call paths)");
		pprof_free(pp);
		return x->err = -ENOENT;
	}
	ret = write_profile(pp, x->fp, &x->write_error);
	pprof_free(pp);
	return ret;
}

static void export_destroy(struct usc_sink *k)
{
	struct pprof_export *x = export_of(k);

	flow_free(x->flow);
	free(x->calls);
	free(x->ns);
	build_ids_free(&x->ids);
	free(x);
}

static const struct usc_sink_ops export_ops = {
	.begin = export_begin,
	.event = export_event,
	.report = export_report,
	.destroy = export_destroy,
};

struct usc_sink *usc_sink_pprof_export(FILE *fp)
{
	struct pprof_export *x = calloc(1, sizeof(*x));

	if (!x || !(x->flow = flow_new())) {
		free(x);
		return NULL;
	}
	x->base.ops = &export_ops;
	x->fp = fp;
	return &x->base;
}
