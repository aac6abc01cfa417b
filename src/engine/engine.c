#include "engine/engine.h"

#include <errno.h>
#include <string.h>

#include "core/log.h"

static const struct usc_engine_ops *const engines[] = {
	&tracefs_engine_ops,
	&bpf_engine_ops,
	&inject_engine_ops,
};

int engine_lookup(const char *name, const struct usc_engine_ops **out)
{
	if (!strcmp(name, "auto")) {	/* decided once the sites are known */
		*out = NULL;
		return 0;
	}
	for (size_t i = 0; i < sizeof(engines) / sizeof(engines[0]); i++) {
		if (!strcmp(engines[i]->name, name)) {
			*out = engines[i];
			return 0;
		}
	}
	log_error("unknown engine '%s' (available: auto, tracefs, bpf, inject)", name);
	return -ENOENT;
}

/* auto: for one process (-p, COMMAND), the inject engine wherever it can
 * patch every site: no trap per hit, no root. Otherwise, and system-wide,
 * the kernel's uprobe_events, the most proven path, unless a site needs
 * what its fetch arguments cannot compute (two registers added, a USDT
 * base+index operand): then the bpf engine, which interprets the fetch
 * program itself. */
const struct usc_engine_ops *engine_choose(const struct usc_session *s)
{
	char why[512];

	if (s->target.kind != USC_TARGET_SYSTEM) {
		if (inject_can_place(s, why, sizeof(why)) == 0)
			return &inject_engine_ops;
		log_info("not using the inject engine: %s", why);
	}
	for (size_t i = 0; i < s->nsites; i++)
		for (unsigned a = 0; a < s->sites[i].nargs; a++)
			for (unsigned k = 0; k < s->sites[i].args[a].ninsn; k++)
				if (s->sites[i].args[a].insn[k].op == FOP_ADD_REG) {
					log_info("%s: using the bpf engine: uprobe_events cannot "
						 "add two registers", s->sites[i].label);
					return &bpf_engine_ops;
				}
	return &tracefs_engine_ops;
}
