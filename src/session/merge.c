/* Events of several engines in one time order.
 *
 * With one engine the session hands its events to the sinks as they come
 * (each engine delivers its own in time order). With several, an engine's
 * events may arrive before older ones of another engine that were not read
 * yet, so they wait here, copied (an engine's event points into its own
 * buffers, valid for the call only), and leave in time order once they are
 * older than the watermark: the time every engine has certainly delivered
 * by, the start of the last polling round less a margin for what was in
 * flight (a record being written, a kernel buffer page not read yet). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "session/session.h"
#include "core/grow.h"
#include "session/session_int.h"

struct queued {
	uint64_t time;
	uint64_t seq;		/* arrival order: keeps equal times stable */
	size_t off;		/* in the arena: the copied event */
};

struct session_merge {
	struct queued *q;
	size_t n, cap;
	char *arena;
	size_t used, acap;
	uint64_t seq;
};

struct session_merge *merge_new(void)
{
	return calloc(1, sizeof(struct session_merge));
}

void merge_free(struct session_merge *m)
{
	if (!m)
		return;
	free(m->q);
	free(m->arena);
	free(m);
}

static size_t align8(size_t n)
{
	return (n + 7) & ~(size_t)7;
}

static void *arena_take(struct session_merge *m, size_t n, size_t *off)
{
	n = align8(n);
	if (core_reserve(m->arena, m->acap, m->used + n, 65536))
		return NULL;
	*off = m->used;
	m->used += n;
	return m->arena + *off;
}

/* A value with bytes of its own: a string, a stack as copied. */
static inline bool has_bytes(const struct usc_value *v)
{
	return usc_value_has_bytes(v);
}

/* The event, its values and its strings, at one offset of the arena; the
 * pointers inside are offsets until merge_flush makes them pointers again. */
int merge_push(struct session_merge *m, const struct usc_event *ev)
{
	size_t need = sizeof(*ev) + ev->nvals * sizeof(struct usc_value) + strlen(ev->comm) + 1,
	       off, pos;
	struct usc_event *c;
	struct usc_value *v;
	char *base;

	for (unsigned i = 0; i < ev->nvals; i++)
		if (has_bytes(&ev->vals[i]))
			need += ev->vals[i].len + 1;
	if (core_reserve(m->q, m->cap, m->n + 1, 1024))
		return -ENOMEM;
	if (!arena_take(m, need, &off))
		return -ENOMEM;
	base = m->arena + off;
	c = (struct usc_event *)base;
	*c = *ev;
	pos = sizeof(*c);
	v = (struct usc_value *)(base + pos);
	memcpy(v, ev->vals, ev->nvals * sizeof(*v));
	c->vals = (const struct usc_value *)(uintptr_t)pos;
	pos += ev->nvals * sizeof(*v);
	for (unsigned i = 0; i < ev->nvals; i++) {
		if (!has_bytes(&v[i]))
			continue;
		memcpy(base + pos, v[i].str, v[i].len);
		base[pos + v[i].len] = 0;
		v[i].str = (const char *)(uintptr_t)pos;
		pos += v[i].len + 1;
	}
	strcpy(base + pos, ev->comm);
	c->comm = (const char *)(uintptr_t)pos;
	m->q[m->n++] = (struct queued){ev->time_ns, m->seq++, off};
	return 0;
}

static int cmp_queued(const void *a, const void *b)
{
	const struct queued *x = a, *y = b;

	if (x->time != y->time)
		return x->time < y->time ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

int merge_flush(struct session_merge *m, uint64_t watermark, usc_event_fn fn, void *ctx)
{
	size_t k = 0;
	int stop = 0;

	if (!m->n)
		return 0;
	qsort(m->q, m->n, sizeof(*m->q), cmp_queued);
	for (; k < m->n && m->q[k].time <= watermark && !stop; k++) {
		char *base = m->arena + m->q[k].off;
		struct usc_event ev = *(struct usc_event *)base;
		struct usc_value *v = (struct usc_value *)(base + (uintptr_t)ev.vals);

		for (unsigned i = 0; i < ev.nvals; i++)
			if (has_bytes(&v[i]))
				v[i].str = base + (uintptr_t)v[i].str;
		ev.vals = v;
		ev.comm = base + (uintptr_t)ev.comm;
		stop = fn(&ev, ctx);
	}
	if (k == m->n) {
		m->n = 0;
		m->used = 0;
		return stop;
	}
	/* keep the rest: in a new arena, in order */
	size_t keep = m->n - k, total = 0, at = 0;
	struct queued *rest = m->q + k;
	char *na;

	for (size_t i = 0; i < keep; i++) {
		const char *base = m->arena + rest[i].off;
		const struct usc_event *ev = (const struct usc_event *)base;

		total += align8((uintptr_t)ev->comm + strlen(base + (uintptr_t)ev->comm) + 1);
	}
	na = malloc(total > 65536 ? total : 65536);
	if (!na)
		return -ENOMEM;
	for (size_t i = 0; i < keep; i++) {
		const char *base = m->arena + rest[i].off;
		const struct usc_event *ev = (const struct usc_event *)base;
		size_t len = align8((uintptr_t)ev->comm + strlen(base + (uintptr_t)ev->comm) + 1);

		memcpy(na + at, base, len);
		rest[i].off = at;
		at += len;
	}
	free(m->arena);
	m->arena = na;
	m->acap = total > 65536 ? total : 65536;
	m->used = at;
	memmove(m->q, rest, keep * sizeof(*m->q));
	m->n = keep;
	return stop;
}

size_t merge_pending(const struct session_merge *m)
{
	return m->n;
}
