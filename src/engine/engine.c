#include "engine/engine.h"

#include <errno.h>
#include <string.h>

#include "core/log.h"

static const struct usc_engine_ops *const engines[] = {
	&tracefs_engine_ops,
};

int engine_lookup(const char *name, const struct usc_engine_ops **out)
{
	/* auto: the only engine so far is the kernel's. Engines added later
	 * (inject, bpf) are ranked here. */
	if (!strcmp(name, "auto")) {
		*out = engines[0];
		return 0;
	}
	for (size_t i = 0; i < sizeof(engines) / sizeof(engines[0]); i++) {
		if (!strcmp(engines[i]->name, name)) {
			*out = engines[i];
			return 0;
		}
	}
	log_error("unknown engine '%s' (available: auto, tracefs)", name);
	return -ENOENT;
}
