/* py: probes in the sinks: an event of a py: probe is about the Python
 * function its first argument names (python/names.h), not its site. */
#include "flow/flow.h"
#include "python/names.h"
#include "sink/sink_int.h"

#include <string.h>

const char *sink_py_name(struct usc_cache *c, const struct usc_event *ev)
{
	const struct python_loc *l;

	if (!ev->site->python || !ev->nvals || ev->site->args[0].show != USC_SHOW_PYFUNC ||
	    ev->vals[0].kind != USC_V_INT || !c)
		return NULL;
	l = python_names_func(c, ev->pid, ev->vals[0].u);
	return l ? l->qualname : NULL;
}

enum flow_kind sink_flow_classify(struct usc_cache *c, const struct usc_event *ev,
				  const char **key, size_t *keylen, bool *unpaired)
{
	enum flow_kind kind = flow_classify(ev->site, key, keylen, unpaired);
	const char *py = sink_py_name(c, ev);

	if (py) {
		/* Python's calls nest: each pairs with its function's return */
		*key = py;
		*keylen = strlen(py);
	}
	return kind;
}
