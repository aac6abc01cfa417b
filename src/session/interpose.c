/* When to look for interposed probes (resolve_interposed): in the traced
 * process, once its dynamic linker has loaded the modules the probes name.
 * With -p that is at once, as the probes are planned (before the line that
 * says they are ready); COMMAND is looked at as it starts, every
 * millisecond at most, until ld.so's list of objects holds them (a
 * program that never loads them, or ends first, is not looked at). */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "core/log.h"
#include "resolve/resolve.h"
#include "session/session.h"
#include "session/session_int.h"

#define INTERPOSE_TRIES 5000	/* at least 5 s of COMMAND's start */
#define INTERPOSE_GAP_NS 1000000ULL

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void look(struct usc_session *s, pid_t pid)
{
	uint64_t now;
	int ret;

	if (s->interpose_done || pid <= 0 || !s->nsites || s->replayed)
		return;
	now = now_ns();
	if (now < s->interpose_next)
		return;
	s->interpose_next = now + INTERPOSE_GAP_NS;
	ret = resolve_interposed(s->cache, pid, s->specs, s->nspecs, s->sites, s->nsites);
	if (ret == -EAGAIN && ++s->interpose_tries < INTERPOSE_TRIES)
		return;
	if (ret && ret != -ENOENT)
		log_debug("interposition in process %d: not known (%s)", (int)pid,
			  ret == -EAGAIN ? "its modules were not all loaded" : strerror(-ret));
	s->interpose_done = true;
}

void session_interpose_plan(struct usc_session *s)
{
	if (s->target.kind == USC_TARGET_PID)
		look(s, s->target.pid);
}

void session_interpose_poll(struct usc_session *s)
{
	look(s, s->pid);
}
