/* uscope objtrace in the session: the followed set for the sites of an
 * engine that keeps none where the probe runs (tracefs: its events come
 * with the six argument registers, and the set is kept here, from the
 * --from and --until events in the order the engine delivers them), and
 * the verdict such events get, as the agent and the bpf program give it
 * (probe.h, enum usc_obj_role). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "session/session.h"
#include "session/session_int.h"

/* Open addressing, linear probing; a removal shifts its cluster back, so
 * nothing is left behind. */
struct session_objset {
	uint64_t *t;
	size_t mask;		/* slots - 1 */
	size_t n, max;
};

static size_t home(const struct session_objset *o, uint64_t k)
{
	return (size_t)((k * 0x9e3779b97f4a7c15ULL) >> 24) & o->mask;
}

static ssize_t find(const struct session_objset *o, uint64_t k)
{
	for (size_t at = home(o, k), i = 0; i <= o->mask; i++, at = (at + 1) & o->mask) {
		if (o->t[at] == k)
			return (ssize_t)at;
		if (!o->t[at])
			return -1;
	}
	return -1;
}

static int set_add(struct session_objset *o, uint64_t k)
{
	size_t at = home(o, k);

	if (find(o, k) >= 0)
		return 1;
	if (o->n >= o->max)
		return 2;	/* full */
	while (o->t[at])
		at = (at + 1) & o->mask;
	o->t[at] = k;
	o->n++;
	return 1;
}

static int set_del(struct session_objset *o, uint64_t k)
{
	ssize_t f = find(o, k);
	size_t hole, at;

	if (f < 0)
		return 0;
	hole = (size_t)f;
	o->t[hole] = 0;
	o->n--;
	/* the keys after the hole that would not be found across it move in */
	for (at = (hole + 1) & o->mask; o->t[at]; at = (at + 1) & o->mask) {
		size_t h = home(o, o->t[at]);

		if (((at - h) & o->mask) >= ((at - hole) & o->mask)) {
			o->t[hole] = o->t[at];
			o->t[at] = 0;
			hole = at;
		}
	}
	return 1;
}

int session_obj_init(struct usc_session *s)
{
	struct session_objset *o;
	size_t slots = 64;

	if (!s->set.objtrace.on || s->objset)
		return 0;
	o = calloc(1, sizeof(*o));
	while (slots < 2 * (size_t)s->set.objtrace.max_objects)
		slots *= 2;
	if (o)
		o->t = calloc(slots, sizeof(*o->t));
	if (!o || !o->t) {
		free(o);
		return -ENOMEM;
	}
	o->mask = slots - 1;
	o->max = s->set.objtrace.max_objects;
	s->objset = o;
	return 0;
}

void session_obj_free(struct usc_session *s)
{
	if (s->objset)
		free(s->objset->t);
	free(s->objset);
	s->objset = NULL;
}

bool session_obj_here(const struct usc_session *s, const struct usc_site *site)
{
	size_t i = (size_t)(site - s->sites);
	int e;

	if (!s->objset || site->spec->obj_role == USC_OBJ_NONE || i >= s->nsites)
		return false;
	e = s->place ? s->place[i].engine : -1;
	return e < 0 || !s->engines[e].ops->objtrace;
}

int session_obj_event(struct usc_session *s, const struct usc_event *ev, struct usc_event *out,
		      struct usc_value *vals)
{
	struct session_objset *o = s->objset;
	unsigned n = ev->nvals;
	uint64_t verdict = 0;

	if (!n || n > USC_MAX_ARGS)
		return 0;
	switch (ev->site->spec->obj_role) {
	case USC_OBJ_MATCH:
		for (unsigned i = 0; i < USC_OBJ_NREGS && i + 1 < n; i++)
			if ((ev->site->obj_regs >> i & 1) && ev->vals[i].kind == USC_V_INT &&
			    ev->vals[i].u && find(o, ev->vals[i].u) >= 0)
				verdict |= 1u << i;
		break;
	case USC_OBJ_FROM:
	case USC_OBJ_UNTIL:
		if (ev->vals[0].kind != USC_V_INT || !ev->vals[0].u)
			return 0;
		verdict = ev->site->spec->obj_role == USC_OBJ_FROM ? (uint64_t)set_add(o, ev->vals[0].u) :
			  (uint64_t)set_del(o, ev->vals[0].u);
		break;
	default:
		return 0;
	}
	if (!verdict)
		return 0;
	memcpy(vals, ev->vals, n * sizeof(*vals));
	vals[n - 1].kind = USC_V_INT;
	vals[n - 1].u = verdict;
	*out = *ev;
	out->vals = vals;
	return 1;
}
