/* The engines, in the order -e auto prefers them; the filter over an
 * event, for who cannot filter where the probe runs. */
#include "engine/engine.h"

#include <stdbool.h>
#include <string.h>

const struct usc_engine_ops *const usc_engines[] = {
	&inject_engine_ops,
	&bpf_engine_ops,
	&tracefs_engine_ops,
};
const size_t usc_nengines = sizeof(usc_engines) / sizeof(usc_engines[0]);

const struct usc_engine_ops *engine_by_name(const char *name)
{
	for (size_t i = 0; i < usc_nengines; i++)
		if (!strcmp(usc_engines[i]->name, name))
			return usc_engines[i];
	return NULL;
}

ssize_t engine_site_index(const struct usc_engine *e, const struct usc_site *site)
{
	for (size_t i = 0; i < e->nsites; i++)
		if (e->sites[i] == site)
			return (ssize_t)i;
	return -1;
}

/* ---- filters over events ------------------------------------------------------ */

static int ev_int(const struct usc_event *ev, unsigned i, uint64_t *u)
{
	if (i >= ev->nvals || ev->vals[i].kind != USC_V_INT ||
	    ev->site->args[i].unavailable || ev->site->args[i].optimized_out)
		return -1;
	*u = ev->vals[i].u;
	return 0;
}

static int ev_str(const struct usc_event *ev, unsigned i, const char **s, uint32_t *n)
{
	if (i >= ev->nvals || ev->vals[i].kind != USC_V_STR)
		return -1;
	*s = ev->vals[i].str;
	*n = ev->vals[i].len;
	return 0;
}

#define FILTER_INLINE static inline
#define FILTER_STEP filter_step
#define FILTER_INT(env, i, u) ev_int(env, i, u)
#define FILTER_STR(env, i, s, n) ev_str(env, i, s, n)
#define FILTER_GLOB(env, strs, off, pn, s, sn) filter_glob_full((strs) + (off), pn, s, sn)
#include "probe/filter_eval.h"

bool engine_filter_pass(const struct usc_event *ev)
{
	const struct usc_filter *f = &ev->site->filter;
	uint32_t stack = 0;

	if (!f->n)
		return true;
	for (uint32_t k = 0; k < f->n && k < USC_FILTER_MAX; k++)
		filter_step(&f->insn[k], f->strs, &stack, (void *)ev);
	return stack & 1;
}
