/* The folded sink (export --format folded): one line per distinct call
 * path, "main;parse;lex 1234", the functions from the outermost call to
 * the innermost, then the path's self time in nanoseconds, summed over
 * every call and thread: what flamegraph.pl, inferno and speedscope read.
 * Paths come from entry and return pairs (src/flow, per thread); a call
 * counts once it has returned.
 *
 * The paths are a tree: a node per (parent node, function), found by a
 * hash of that pair, so an event costs one lookup and memory grows with
 * the distinct paths, not the events. Each entry's flow frame carries its
 * node.
 *
 * Events with a stack ($ustack) are samples instead: each adds 1 to its
 * stack's line, "main;parse;malloc 42", the frames' names outermost first;
 * a recording with stacks folds its stacks only (counts and nanoseconds
 * do not add up in one graph). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/grow.h"
#include "flow/flow.h"
#include "output/output.h"
#include "sink/sink.h"
#include "sink/sink_int.h"
#include "stack/stack.h"

struct path_node {
	uint32_t parent;	/* node index + 1; 0: a root */
	uint32_t func;		/* flow_functions id */
	uint64_t self_ns;
};

struct folded_sink {
	struct usc_sink base;
	FILE *fp;
	const struct usc_sink_ctx *s;
	struct flow_state *st;
	uint32_t *func_of;		/* per site (flow_functions) */
	const char **keys;
	size_t *lens, nfuncs;
	bool own;			/* keys and lens are blocks of their own (py_func),
					 * not flow_functions' one */
	struct path_node *nodes;
	size_t n, cap;
	uint32_t *slots;		/* open addressing: node index + 1, 0 empty */
	size_t nslots;
	uint64_t *stack_n;		/* hits of each stack, by its id (stack_intern) */
	size_t nstack;
	int error, write_error;
};

static size_t slot_of(uint32_t parent, uint32_t func, size_t mask)
{
	uint64_t h = ((uint64_t)parent << 32 | func) * 0x9e3779b97f4a7c15ULL;

	return (size_t)(h >> 20) & mask;
}

static int grow(struct folded_sink *fs)
{
	size_t ns = fs->nslots ? fs->nslots * 2 : 1024;
	uint32_t *slots = calloc(ns, sizeof(*slots));

	if (!slots)
		return -ENOMEM;
	for (size_t i = 0; i < fs->n; i++) {
		size_t j = slot_of(fs->nodes[i].parent, fs->nodes[i].func, ns - 1);

		while (slots[j])
			j = (j + 1) & (ns - 1);
		slots[j] = (uint32_t)i + 1;
	}
	free(fs->slots);
	fs->slots = slots;
	fs->nslots = ns;
	return 0;
}

/* The node of func under parent (0: a root), made when new; its index + 1,
 * or 0 when out of memory. */
static uint32_t node_get(struct folded_sink *fs, uint32_t parent, uint32_t func)
{
	size_t j;

	if ((fs->n + 1) * 4 > fs->nslots * 3 && grow(fs))
		return 0;
	for (j = slot_of(parent, func, fs->nslots - 1); fs->slots[j];
	     j = (j + 1) & (fs->nslots - 1)) {
		const struct path_node *p = &fs->nodes[fs->slots[j] - 1];

		if (p->parent == parent && p->func == func)
			return fs->slots[j];
	}
	if (fs->n == UINT32_MAX - 1)
		return 0;
	if (core_reserve(fs->nodes, fs->cap, fs->n + 1, 1024))
		return 0;
	fs->nodes[fs->n] = (struct path_node){.parent = parent, .func = func};
	fs->slots[j] = (uint32_t)++fs->n;
	return fs->slots[j];
}

static int folded_begin(struct usc_sink *k, const struct usc_sink_ctx *s)
{
	struct folded_sink *fs = container_of(k, struct folded_sink, base);

	fs->s = s;
	return flow_functions(s->sites, s->nsites, &fs->func_of, &fs->keys, &fs->lens,
			      &fs->nfuncs);
}

/* The function id of a py: probe's Python function (name: interned),
 * made the first time; UINT32_MAX when out of memory. */
static uint32_t py_func(struct folded_sink *fs, const char *name)
{
	const char **k;
	size_t *l;

	for (size_t i = 0; i < fs->nfuncs; i++)
		if (fs->keys[i] == name)
			return (uint32_t)i;
	if (!fs->own) {
		/* flow_functions' keys and lens are one block: two of ours */
		k = malloc((fs->nfuncs + 1) * sizeof(*k));
		l = malloc((fs->nfuncs + 1) * sizeof(*l));
		if (!k || !l) {
			free(k);
			free(l);
			return UINT32_MAX;
		}
		memcpy(k, fs->keys, fs->nfuncs * sizeof(*k));
		memcpy(l, fs->lens, fs->nfuncs * sizeof(*l));
		free(fs->keys);
		fs->own = true;
	} else {
		k = realloc(fs->keys, (fs->nfuncs + 1) * sizeof(*k));
		if (k)
			fs->keys = k;
		l = k ? realloc(fs->lens, (fs->nfuncs + 1) * sizeof(*l)) : NULL;
		if (!l)
			return UINT32_MAX;
	}
	fs->keys = k;
	fs->lens = l;
	fs->keys[fs->nfuncs] = name;
	fs->lens[fs->nfuncs] = strlen(name);
	return (uint32_t)fs->nfuncs++;
}

static int fail(struct folded_sink *fs, int err)
{
	fs->error = err;
	log_error("cannot fold the call paths: %s", strerror(-err));
	return err;
}

static int folded_event(struct usc_sink *k, const struct usc_event *ev)
{
	struct folded_sink *fs = container_of(k, struct folded_sink, base);
	size_t i = (size_t)(ev->site - fs->s->sites);
	const char *key;
	size_t keylen, depth;
	bool unpaired;
	enum flow_kind kind;
	struct flow_result r;
	uintptr_t node = 0;
	uint32_t func;
	int ret;

	for (unsigned a = 0; a < ev->nvals; a++) {
		uint64_t id;

		if (ev->vals[a].kind != USC_V_STACK)
			continue;
		id = stack_intern(fs->s->cache, ev->pid, ev->vals[a].stack);
		if (!id)
			return fail(fs, -ENOMEM);
		if (id > fs->nstack) {
			size_t n = id * 2;
			uint64_t *v = realloc(fs->stack_n, n * sizeof(*v));

			if (!v)
				return fail(fs, -ENOMEM);
			memset(v + fs->nstack, 0, (n - fs->nstack) * sizeof(*v));
			fs->stack_n = v;
			fs->nstack = n;
		}
		fs->stack_n[id - 1]++;
		return 0;	/* a sample: not a call path */
	}
	if (i >= fs->s->nsites || fs->func_of[i] == UINT32_MAX)
		return 0;
	func = fs->func_of[i];
	kind = sink_flow_classify(fs->s->cache, ev, &key, &keylen, &unpaired);
	if (ev->site->python && key != ev->site->symbol &&
	    (func = py_func(fs, key)) == UINT32_MAX)
		return fail(fs, -ENOMEM);
	if (kind == FLOW_ENTRY) {
		void *parent = NULL;
		uint64_t ctx;
		const char *pk;
		size_t pl;

		/* the caller's node: the thread's (goroutine's) innermost open
		 * frame's */
		ctx = flow_ctx_of(ev);
		depth = flow_depth(fs->st, ctx);
		if (depth && !flow_frame(fs->st, ctx, depth - 1, &pk, &pl, NULL, &parent))
			parent = NULL;
		node = node_get(fs, (uint32_t)(uintptr_t)parent, func);
		if (!node)
			return fail(fs, -ENOMEM);
	}
	ret = flow_feed_data(fs->st, flow_ctx_of(ev), ev->time_ns, kind, key, keylen, (void *)node,
			     &r);
	if (ret)
		return fail(fs, ret);
	if (kind == FLOW_RETURN && r.duration_ns >= 0 && r.data)
		fs->nodes[(uintptr_t)r.data - 1].self_ns += (uint64_t)r.self_ns;
	return 0;
}

struct line {
	char *text;
	size_t len;
};

static int by_text(const void *a, const void *b)
{
	const struct line *x = a, *y = b;

	return strcmp(x->text, y->text);
}

/* The path of node idx (index + 1), outermost first, into o. */
static int path_text(struct folded_sink *fs, struct usc_output *o, uint32_t idx)
{
	uint32_t chain[256];
	size_t n = 0;
	int ret = 0;

	/* deeper paths than chain holds keep their innermost calls */
	for (uint32_t at = idx; at && n < 256; at = fs->nodes[at - 1].parent)
		chain[n++] = at;
	for (size_t i = n; i-- > 0 && !ret;) {
		const struct path_node *p = &fs->nodes[chain[i] - 1];
		char name[USC_SYM_MAX];
		size_t len = fs->lens[p->func] < sizeof(name) - 1 ? fs->lens[p->func] :
			     sizeof(name) - 1;

		/* ';' separates frames and ' ' ends the path: neither may be in a name */
		for (size_t c = 0; c < len; c++) {
			char ch = fs->keys[p->func][c];

			name[c] = ch == ';' || ch == ' ' || ch == '\n' ? '_' : ch;
		}
		name[len] = 0;
		ret = output_raw(o, name);
		if (!ret && i)
			ret = output_raw(o, ";");
	}
	return ret;
}

static int folded_report(struct usc_sink *k, const struct usc_sink_ctx *s,
			 const struct usc_stats *st, bool final)
{
	struct folded_sink *fs = container_of(k, struct folded_sink, base);
	struct usc_output o = {0};
	struct line *lines;
	size_t n = 0;
	int ret = 0;

	(void)st;
	if (!final || fs->error)
		return fs->error;
	lines = calloc((fs->n > fs->nstack ? fs->n : fs->nstack) + 1, sizeof(*lines));
	if (!lines)
		return fail(fs, -ENOMEM);
	o.cache = s->cache;
	for (size_t id = 1; id <= fs->nstack && !ret; id++) {
		const struct usc_stack *sk;
		pid_t pid;

		if (!fs->stack_n[id - 1] || !(sk = stack_interned(s->cache, id, &pid)))
			continue;
		output_reset(&o);
		ret = output_stack_folded(&o, pid, sk);
		if (!ret && !(lines[n].text = strdup(o.buf ? o.buf : "")))
			ret = -ENOMEM;
		if (!ret)
			lines[n++].len = fs->stack_n[id - 1];	/* the count, until merged */
	}
	if (n) {
		/* the same names (other addresses in the same functions): one line */
		size_t m = 0;

		qsort(lines, n, sizeof(*lines), by_text);
		for (size_t i = 0; i < n && !ret; i++) {
			uint64_t sum = lines[i].len;
			char num[32];

			while (i + 1 < n && !strcmp(lines[i].text, lines[i + 1].text)) {
				free(lines[i].text);
				sum += lines[++i].len;
			}
			snprintf(num, sizeof(num), " %" PRIu64 "\n", sum);
			output_reset(&o);
			ret = output_raw(&o, lines[i].text);
			ret = ret ? ret : output_raw(&o, num);
			free(lines[i].text);
			lines[m].text = ret ? NULL : strdup(o.buf);
			if (!ret && !lines[m].text)
				ret = -ENOMEM;
			if (!ret)
				lines[m++].len = o.len;
		}
		n = m;
		goto write;
	}
	for (size_t i = 0; i < fs->n && !ret; i++) {
		char num[32];

		if (!fs->nodes[i].self_ns)
			continue;
		output_reset(&o);
		snprintf(num, sizeof(num), " %" PRIu64 "\n", fs->nodes[i].self_ns);
		ret = path_text(fs, &o, (uint32_t)i + 1);
		ret = ret ? ret : output_raw(&o, num);
		if (!ret && !(lines[n].text = strdup(o.buf)))
			ret = -ENOMEM;
		if (!ret)
			lines[n++].len = o.len;
	}
	qsort(lines, n, sizeof(*lines), by_text);
write:
	/* the lines in batches of 64 KiB, not a write(2) a line */
	output_reset(&o);
	for (size_t i = 0; i < n; i++) {
		if (!ret && output_raw(&o, lines[i].text))
			ret = -ENOMEM;
		if (!ret && (o.len >= 65536 || i + 1 == n)) {
			ret = sink_write(fs->fp, o.buf, o.len, &fs->write_error);
			output_reset(&o);
		}
		free(lines[i].text);
	}
	free(lines);
	output_free(&o);
	if (ret < 0 && !fs->write_error)
		return fail(fs, ret);
	return ret;
}

static void folded_destroy(struct usc_sink *k)
{
	struct folded_sink *fs = container_of(k, struct folded_sink, base);

	flow_free(fs->st);
	free(fs->func_of);
	if (fs->own)
		free(fs->lens);
	free(fs->keys);
	free(fs->nodes);
	free(fs->slots);
	free(fs->stack_n);
	free(fs);
}

static const struct usc_sink_ops folded_ops = {
	.begin = folded_begin,
	.event = folded_event,
	.report = folded_report,
	.destroy = folded_destroy,
};

struct usc_sink *usc_sink_folded(FILE *fp)
{
	struct folded_sink *fs = calloc(1, sizeof(*fs));

	if (!fs || !(fs->st = flow_new())) {
		free(fs);
		return NULL;
	}
	fs->base.ops = &folded_ops;
	fs->fp = fp;
	return &fs->base;
}
