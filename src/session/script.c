/* uscope script in the session: whether the program runs where the probe
 * fires (every site on one engine that can: the inject agent, the bpf
 * program) or in uscope on the sites' events (the script's sink runs it),
 * and, when it runs there, the engine's maps handed to the sink. One
 * program's maps are global: they live in one place, so its sites go
 * together or not at all. USCOPE_SCRIPT_EVENTS=1 has uscope run it on the
 * events always (the tests compare the two). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "script/run.h"
#include "session/session_int.h"

static int src_rows(void *ctx, int m, void (*fn)(void *, int, const uint8_t *, const uint8_t *),
		    void *arg)
{
	struct usc_session *s = ctx;
	int ret = 0;

	for (size_t k = 0; k < s->nengines && !ret; k++) {
		const struct session_engine *se = &s->engines[k];

		if (se->e && se->nsites && se->ops->script_rows)
			ret = se->ops->script_rows(se->e, m, fn, arg);
	}
	return ret;
}

static void src_clear(void *ctx, int m, bool zero)
{
	struct usc_session *s = ctx;

	for (size_t k = 0; k < s->nengines; k++) {
		const struct session_engine *se = &s->engines[k];

		if (se->e && se->nsites && se->ops->script_clear)
			se->ops->script_clear(se->e, m, zero);
	}
}

static void src_errors(void *ctx, uint64_t *errs, uint64_t *full)
{
	struct usc_session *s = ctx;

	for (size_t k = 0; k < s->nengines; k++) {
		const struct session_engine *se = &s->engines[k];

		if (se->e && se->nsites && se->ops->script_errors)
			se->ops->script_errors(se->e, errs, full);
	}
}

int session_plan_script(struct usc_session *s)
{
	const char *env = getenv("USCOPE_SCRIPT_EVENTS");
	int engine = -1;
	bool ok = s->set.script && !(env && !strcmp(env, "1"));

	for (size_t i = 0; i < s->nsites; i++)
		s->sites[i].script_in_place = false;
	if (!s->set.script)
		return 0;
	for (size_t i = 0; i < s->nsites && ok; i++) {
		if (s->place[i].engine < 0)
			continue;
		if (engine < 0)
			engine = s->place[i].engine;
		ok = s->place[i].engine == engine;
	}
	if (ok && engine >= 0) {
		const struct session_engine *se = &s->engines[engine];

		ok = se->ops->script_place != NULL;
		for (size_t i = 0; i < s->nsites && ok; i++)
			ok = s->place[i].engine < 0 || se->ops->script_place(se->e, &s->sites[i]) == 0;
	}
	if (!ok || engine < 0) {
		log_info("script: run by uscope on the probes' events");
		return 0;
	}
	for (size_t i = 0; i < s->nsites; i++)
		s->sites[i].script_in_place = s->place[i].engine >= 0;
	if (!s->script_src) {
		s->script_src = calloc(1, sizeof(*s->script_src));
		if (!s->script_src)
			return -ENOMEM;
	}
	*s->script_src = (struct script_source){
		.ctx = s, .rows = src_rows, .clear = src_clear, .errors = src_errors,
	};
	log_info("script: run where the probes fire, on %s", s->engines[engine].ops->name);
	return 0;
}
