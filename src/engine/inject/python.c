/* The inject engine's Python: where CPython is in an image's process, told
 * to the agent (inject_shared.h's struct inj_py, agent/python.c), for
 * $pystack and py: probes. */
#include <errno.h>
#include <string.h>

#include "core/log.h"
#include "engine/inject/inject_int.h"
#include "python/detect.h"

/* Does a site of the session read Python? */
bool inj_py_wanted(const struct inj *j)
{
	for (size_t i = 0; i < j->base.nsites; i++)
		if (site_has_pystack(j->base.sites[i]) || j->base.sites[i]->python)
			return true;
	return false;
}

uint64_t inj_py_reserve(struct inj *j, uint64_t off, uint64_t *py_off)
{
	*py_off = 0;
	if (!inj_py_wanted(j))
		return off;
	off = (off + 63) & ~63ULL;
	*py_off = off;
	return off + sizeof(struct inj_py);
}

void inj_py_ctl(struct inj *j, struct inj_ctl *c, pid_t pid, uint64_t py_off)
{
	struct inj_py *py = (struct inj_py *)((char *)c + py_off);
	struct python_runtime rt;

	(void)j;
	c->py_off = py_off;
	if (!py_off)
		return;
	/* a process of COMMAND's tree may run something else: its $pystack
	 * says so, event by event */
	if (python_find_pid(pid, &rt)) {
		log_debug("inject: process %d runs no CPython uscope reads", (int)pid);
		return;
	}
	py->off = *rt.off;
	py->glibc = *python_glibc_offsets();
	py->runtime = rt.runtime;
	py->set_profile = rt.api.set_profile;
	py->none = rt.api.none;
	py->true_ = rt.api.true_;
	py->false_ = rt.api.false_;
	py->long_type = rt.api.long_type;
	py->bool_type = rt.api.bool_type;
	py->unicode_type = rt.types.unicode;
	py->on = 1;
	log_debug("inject: process %d runs CPython %u.%u (%s), _PyRuntime at %#llx", (int)pid,
		  rt.version >> 24, (rt.version >> 16) & 0xff, rt.path,
		  (unsigned long long)rt.runtime);
	python_runtime_free(&rt);
}
