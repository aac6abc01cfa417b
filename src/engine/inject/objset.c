/* uscope objtrace in the inject engine, the tracer's side: the followed
 * set's memory in the shared region, and what the agent is told of each
 * site that follows objects (objset.h has the set, agent/agent.c the rest). */
#include <string.h>

#include "engine/inject/inject_int.h"
#include "engine/inject/objset.h"

static bool any_role(const struct inj *j)
{
	for (size_t i = 0; i < j->base.nsites; i++)
		if (j->base.sites[i]->spec->obj_role != USC_OBJ_NONE)
			return true;
	return false;
}

uint64_t inj_obj_reserve(struct inj *j, uint64_t off, uint64_t *obj_off)
{
	const struct usc_engine_ctx *s = j->base.ctx;
	struct objset geo;

	*obj_off = 0;
	if (!s->set->objtrace.on || !any_role(j))
		return off;
	off = (off + 4095) & ~4095ULL;
	*obj_off = off;
	off += objset_layout(s->set->objtrace.max_objects, &geo);
	return (off + 4095) & ~4095ULL;
}

void inj_obj_ctl(struct inj *j, struct inj_ctl *c, uint64_t obj_off)
{
	struct objset *o;

	c->obj_off = obj_off;
	if (!obj_off)
		return;
	o = (struct objset *)((char *)c + obj_off);
	memset(o, 0, sizeof(*o));
	objset_layout(j->base.ctx->set->objtrace.max_objects, o);
}

void inj_obj_site(const struct usc_site *site, struct inj_site *d, const struct inj_ctl *c,
		  uint64_t remote)
{
	const struct objset *o;

	d->obj = INJ_OBJ_NONE;
	if (!c->obj_off || site->spec->obj_role == USC_OBJ_NONE || !d->nargs)
		return;
	o = (const struct objset *)((const char *)c + c->obj_off);
	d->obj = (uint16_t)site->spec->obj_role;
	d->obj_verdict = (uint16_t)(d->nargs - 1);
	d->obj_regs = site->obj_regs;
	d->objs.set = remote + c->obj_off;
	d->objs.filter = remote + c->obj_off + o->filter_off;
	d->objs.fshift = o->fshift;
}

uint64_t inj_obj_full(const struct inj_shm *m)
{
	if (!m->map || !m->ctl->obj_off)
		return 0;
	return ((const struct objset *)((const char *)m->map + m->ctl->obj_off))->full;
}
