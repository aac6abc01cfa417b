/* A script from its text to what the session and the executors take: the
 * passes in order (script.h lists them), and what is asked of the result. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "script/parse.h"
#include "script/script_int.h"

int usc_script_compile(const char *src, size_t n, const struct usc_script_opts *o,
		       struct usc_script **out, struct script_diag *d)
{
	struct usc_script *s = calloc(1, sizeof(*s));
	int ret;

	*out = NULL;
	memset(d, 0, sizeof(*d));
	if (!s || !(s->arena = arena_new())) {
		free(s);
		return -ENOMEM;
	}
	s->src = src;
	s->nsrc = n;
	s->opts = *o;
	s->strlen = o->strlen ? o->strlen : SCRIPT_STRLEN;
	if (s->strlen < 8)
		s->strlen = 8;
	if (s->strlen > SCRIPT_STRLEN_MAX)
		s->strlen = SCRIPT_STRLEN_MAX;
	s->max_keys = o->max_keys ? o->max_keys : SCRIPT_KEYS_DEFAULT;
	ret = script_parse(src, n, s->arena, &s->prog, d);
	if (!ret)
		ret = script_probes_read(s, d);
	if (!ret)
		ret = script_sema(s, d);
	if (!ret)
		ret = script_lower(s, d);
	if (!ret)
		ret = script_compile(s, d);
	if (ret) {
		if (!d->set)
			script_fail(d, 0, 0, "%s", ret == -ENOMEM ? "out of memory" : "invalid program");
		usc_script_free(s);
		return ret;
	}
	*out = s;
	return 0;
}

void usc_script_free(struct usc_script *s)
{
	if (!s)
		return;
	free(s->attach);
	free(s->probes);
	free(s->maps);
	free(s->fmts);
	free(s->strtab);
	free(s->insns);
	free(s->blob);
	free(s->specs);
	free(s->spec_probe);
	free(s->spec_attach);
	arena_free(s->arena);
	free(s);
}

struct usc_probe_spec *usc_script_specs(struct usc_script *s, size_t *n)
{
	*n = s->nspecs;
	return s->specs;
}

const struct script_blob *usc_script_blob(const struct usc_script *s)
{
	return s->blob;
}

const unsigned *usc_script_spec_probes(const struct usc_script *s)
{
	return s->spec_probe;
}

bool usc_script_has_sites(const struct usc_script *s)
{
	return s->nspecs > 0;
}

size_t usc_script_nattach(const struct usc_script *s)
{
	return s->nattach;
}
