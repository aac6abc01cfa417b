#include "core/grow.h"
#include "flow/flow.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct frame {
	const char *key;
	size_t keylen;
	uint64_t time_ns;
	uint64_t child_ns;	/* time in the calls it made that returned */
	void *data;
};

struct thread {
	uint64_t ctx;		/* a thread's tid, or a goroutine's g (usc_event_ctx) */
	bool used;
	struct frame *frames;
	size_t n, cap;
	size_t popped;		/* frames the last return popped (still in frames[n..]) */
};

/* Open addressing on ctx, linear probing, at most 3/4 full. */
struct flow_state {
	struct thread *t;
	size_t cap, n;
};

static size_t hash_ctx(uint64_t ctx)
{
	uint64_t h = ctx * 0x9e3779b97f4a7c15ULL;

	return (size_t)(h ^ (h >> 29));
}

struct flow_state *flow_new(void)
{
	return calloc(1, sizeof(struct flow_state));
}

void flow_free(struct flow_state *st)
{
	if (!st)
		return;
	for (size_t i = 0; i < st->cap; i++)
		free(st->t[i].frames);
	free(st->t);
	free(st);
}

static struct thread *lookup(const struct flow_state *st, uint64_t ctx)
{
	if (!st->cap)
		return NULL;
	for (size_t i = hash_ctx(ctx) & (st->cap - 1);; i = (i + 1) & (st->cap - 1)) {
		if (!st->t[i].used)
			return NULL;
		if (st->t[i].ctx == ctx)
			return &st->t[i];
	}
}

static int grow_table(struct flow_state *st)
{
	size_t cap = st->cap ? st->cap * 2 : 64;
	struct thread *t = calloc(cap, sizeof(*t));

	if (!t)
		return -ENOMEM;
	for (size_t i = 0; i < st->cap; i++) {
		size_t k;

		if (!st->t[i].used)
			continue;
		for (k = hash_ctx(st->t[i].ctx) & (cap - 1); t[k].used; k = (k + 1) & (cap - 1))
			;
		t[k] = st->t[i];
	}
	free(st->t);
	st->t = t;
	st->cap = cap;
	return 0;
}

static struct thread *get_thread(struct flow_state *st, uint64_t ctx)
{
	struct thread *th = lookup(st, ctx);
	size_t i;

	if (th)
		return th;
	if ((st->n + 1) * 4 > st->cap * 3 && grow_table(st))
		return NULL;
	for (i = hash_ctx(ctx) & (st->cap - 1); st->t[i].used; i = (i + 1) & (st->cap - 1))
		;
	st->t[i].used = true;
	st->t[i].ctx = ctx;
	st->n++;
	return &st->t[i];
}

int flow_feed(struct flow_state *st, uint64_t ctx, uint64_t time_ns, enum flow_kind kind,
	      const char *key, size_t keylen, struct flow_result *out)
{
	return flow_feed_data(st, ctx, time_ns, kind, key, keylen, NULL, out);
}

int flow_feed_data(struct flow_state *st, uint64_t ctx, uint64_t time_ns, enum flow_kind kind,
		   const char *key, size_t keylen, void *data, struct flow_result *out)
{
	struct thread *th;

	out->depth = 0;
	out->duration_ns = -1;
	out->dropped = 0;
	out->self_ns = -1;
	out->data = NULL;
	if (kind != FLOW_ENTRY) {
		/* a return or an event never needs a new thread */
		th = lookup(st, ctx);
		if (!th)
			return 0;
		if (kind == FLOW_EVENT) {
			out->depth = th->n;
			return 0;
		}
		for (size_t i = th->n; i-- > 0;) {
			const struct frame *f = &th->frames[i];

			if (f->keylen != keylen || (f->key != key && memcmp(f->key, key, keylen)))
				continue;
			out->depth = i;
			out->duration_ns = time_ns >= f->time_ns ? (int64_t)(time_ns - f->time_ns) : 0;
			out->self_ns = f->child_ns <= (uint64_t)out->duration_ns ?
				       out->duration_ns - (int64_t)f->child_ns : 0;
			out->dropped = th->n - i - 1;
			out->data = f->data;
			th->popped = th->n - i;
			/* the caller's own time excludes this call */
			if (i)
				th->frames[i - 1].child_ns += (uint64_t)out->duration_ns;
			th->n = i;
			return 0;
		}
		return 0;	/* no entry seen: depth 0, no duration */
	}

	th = get_thread(st, ctx);
	if (!th)
		return -ENOMEM;
	if (core_reserve(th->frames, th->cap, th->n + 1, 16))
		return -ENOMEM;
	out->depth = th->n;
	th->popped = 0;
	th->frames[th->n++] = (struct frame){.key = key, .keylen = keylen, .time_ns = time_ns,
					     .data = data};
	return 0;
}

size_t flow_depth(const struct flow_state *st, uint64_t ctx)
{
	const struct thread *th = lookup(st, ctx);

	return th ? th->n : 0;
}

bool flow_frame(const struct flow_state *st, uint64_t ctx, size_t i, const char **key,
		size_t *keylen, uint64_t *time_ns, void **data)
{
	const struct thread *th = lookup(st, ctx);

	if (!th || i >= th->n + th->popped)
		return false;
	*key = th->frames[i].key;
	*keylen = th->frames[i].keylen;
	if (time_ns)
		*time_ns = th->frames[i].time_ns;
	if (data)
		*data = th->frames[i].data;
	return true;
}

struct keyed {
	const char *key;
	size_t len;
	size_t site;
};

static int by_key(const void *a, const void *b)
{
	const struct keyed *x = a, *y = b;
	int c = memcmp(x->key, y->key, x->len < y->len ? x->len : y->len);

	return c ? c : (x->len > y->len) - (x->len < y->len);
}

int flow_functions(const struct usc_site *sites, size_t n, uint32_t **ids_out,
		   const char ***keys_out, size_t **lens_out, size_t *nfuncs)
{
	struct keyed *v = calloc(n ? n : 1, sizeof(*v));
	uint32_t *ids = malloc((n ? n : 1) * sizeof(*ids));
	void *block = malloc((n ? n : 1) * (sizeof(char *) + sizeof(size_t)));
	const char **keys = block;
	size_t *lens = (size_t *)((char *)block + (n ? n : 1) * sizeof(char *));
	size_t m = 0, nf = 0;

	if (!v || !ids || !block) {
		free(v);
		free(ids);
		free(block);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		bool unpaired;

		ids[i] = UINT32_MAX;
		if (flow_classify(&sites[i], &v[m].key, &v[m].len, &unpaired) != FLOW_EVENT &&
		    !unpaired)
			v[m++].site = i;
	}
	qsort(v, m, sizeof(*v), by_key);
	for (size_t i = 0; i < m; i++) {
		if (!nf || by_key(&v[i - 1], &v[i])) {
			keys[nf] = v[i].key;
			lens[nf++] = v[i].len;
		}
		ids[v[i].site] = (uint32_t)(nf - 1);
	}
	free(v);
	*ids_out = ids;
	*keys_out = keys;
	*lens_out = lens;
	*nfuncs = nf;
	return 0;
}

size_t flow_nthreads(const struct flow_state *st)
{
	return st->n;
}

bool flow_next_ctx(const struct flow_state *st, size_t *it, uint64_t *ctx)
{
	for (; *it < st->cap; ++*it)
		if (st->t[*it].used) {
			*ctx = st->t[(*it)++].ctx;
			return true;
		}
	return false;
}

uint64_t flow_ctx_of(const struct usc_event *ev)
{
	const struct usc_site *s = ev->site;
	unsigned last = s && s->nargs ? s->nargs - 1 : 0;

	if (s && site_go_ctx(s) && last < ev->nvals && ev->vals[last].kind == USC_V_INT &&
	    ev->vals[last].u)
		return ev->vals[last].u | 1ULL << 63;
	return (uint64_t)(uint32_t)ev->tid;
}

static bool ends_with(const char *s, size_t n, const char *suffix, size_t *stem)
{
	size_t k = strlen(suffix);

	if (n < k || memcmp(s + n - k, suffix, k))
		return false;
	*stem = n - k;
	return true;
}

enum flow_kind flow_classify(const struct usc_site *site, const char **key, size_t *keylen,
			     bool *unpaired)
{
	const struct usc_probe_spec *spec = site->spec;

	*unpaired = false;
	if (spec->loc_kind == USC_LOC_USDT) {
		/* symbol is PROVIDER_NAME: the stem keeps the provider */
		const char *s = site->symbol ? site->symbol : site->label;
		size_t n = strlen(s), stem;

		*key = s;
		if (ends_with(s, n, "entry", &stem) || ends_with(s, n, "start", &stem)) {
			*keylen = stem;
			return FLOW_ENTRY;
		}
		if (ends_with(s, n, "return", &stem) || ends_with(s, n, "done", &stem) ||
		    ends_with(s, n, "end", &stem)) {
			*keylen = stem;
			return FLOW_RETURN;
		}
		*keylen = n;
		return FLOW_EVENT;
	}
	/* A function's entry or return pairs by the function's name. */
	*key = site->symbol ? site->symbol : site->label;
	*keylen = strlen(*key);
	if (site->is_return)
		return FLOW_RETURN;
	if ((spec->loc_kind == USC_LOC_SYMBOL || spec->loc_kind == USC_LOC_PYTHON) &&
	    !spec->has_offset)
		return FLOW_ENTRY;
	/* p on an ADDRESS or SYMBOL+OFFSET: an entry without a pair. */
	*unpaired = true;
	return FLOW_EVENT;
}
