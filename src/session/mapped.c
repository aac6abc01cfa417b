/* Sites in libraries the target maps only later.
 *
 * An in-process engine (inject) patches what a process has mapped when it
 * attaches: -p's process as it is, COMMAND's program at its entry point,
 * with the libraries it links and preloads. A library dlopen'ed afterwards
 * (a plugin, a Python extension module and what it links, ctypes.CDLL) is
 * never patched, and its probes would count 0 while the library runs. A
 * kernel uprobe is placed on the file and the kernel inserts it into every
 * mapping made later. So, with -e auto, such a site goes to the first
 * engine with kernel uprobes that can take it; with one engine named, a
 * warning names the library and the engines that would see it.
 *
 * "Mapped at start": with -p, in the process's maps now; with COMMAND, an
 * executable or a library named by a probe's file, COMMAND's program (or
 * the CPython it launches), each one's linked libraries as ld.so finds
 * them, and LD_PRELOAD's (uscope's environment, or env's VAR=VALUE). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cache/cache.h"
#include "core/log.h"
#include "objfile/objfile.h"
#include "objfile/modules.h"
#include "session/session.h"
#include "session/session_int.h"

struct mapped {
	char **paths;		/* COMMAND: real paths mapped at start */
	size_t n, cap;
	struct proc_map *maps;	/* -p: its maps */
	ssize_t nmaps;
};

static void add_path(struct mapped *m, const char *p)
{
	char *r = realpath(p, NULL), **v;

	if (!r)
		return;
	for (size_t i = 0; i < m->n; i++)
		if (!strcmp(m->paths[i], r)) {
			free(r);
			return;
		}
	if (m->n == m->cap) {
		v = realloc(m->paths, (m->cap ? 2 * m->cap : 16) * sizeof(*v));
		if (!v) {
			free(r);
			return;
		}
		m->paths = v;
		m->cap = m->cap ? 2 * m->cap : 16;
	}
	m->paths[m->n++] = r;
}

/* An executable and what it links (module_deps fails on a library: then
 * nothing is added, the library stays unknown). */
static void add_program(struct mapped *m, const char *exe)
{
	char **deps = NULL;
	ssize_t n;

	if (!exe || (n = module_deps(exe, &deps)) < 0)
		return;
	for (ssize_t i = 0; i < n; i++)
		add_path(m, deps[i]);
	module_list_free(deps, (size_t)n);
}

static void add_preload(struct mapped *m, const char *list)
{
	char *copy = list ? strdup(list) : NULL, *save = NULL;

	for (char *t = copy ? strtok_r(copy, ": ", &save) : NULL; t; t = strtok_r(NULL, ": ", &save)) {
		add_path(m, t);
		add_program(m, t);	/* what it links */
	}
	free(copy);
}

static void command_set(struct usc_session *s, struct mapped *m)
{
	const struct usc_target *t = &s->target;

	add_program(m, t->exe);
	add_program(m, t->python);
	add_preload(m, getenv("LD_PRELOAD"));
	/* env VAR=VALUE ... COMMAND */
	for (size_t i = 1; s->opts.cmd[0] && s->opts.cmd[i] &&
			   !strcmp(strrchr(s->opts.cmd[0], '/') ? strrchr(s->opts.cmd[0], '/') + 1 :
				   s->opts.cmd[0], "env"); i++)
		if (!strncmp(s->opts.cmd[i], "LD_PRELOAD=", 11))
			add_preload(m, s->opts.cmd[i] + 11);
	/* a probed program (one with an interpreter, not a library) is one
	 * COMMAND may run (exec): its libraries too */
	for (size_t i = 0; i < s->nsites; i++) {
		struct objfile *ef;

		if ((i == 0 || strcmp(s->sites[i].path, s->sites[i - 1].path)) &&
		    cache_elf(s->cache, s->sites[i].path, &ef) == 0 && ef->interp)
			add_program(m, s->sites[i].path);
	}
}

static bool mapped_at_start(const struct usc_session *s, const struct mapped *m, const char *path)
{
	uint64_t addr;
	char *r;
	bool in = false;

	if (s->target.kind == USC_TARGET_PID)
		return m->nmaps < 0 ||	/* (unread: not known, not moved) */
		       procmaps_file_offset_to_addr(m->maps, (size_t)m->nmaps, path, 0, &addr) == 0;
	if (!(r = realpath(path, NULL)))
		return true;
	for (size_t i = 0; i < m->n && !in; i++)
		in = !strcmp(m->paths[i], r);
	free(r);
	return in;
}

static int kernel_engine(struct usc_session *s, size_t i)
{
	char why[256];

	for (size_t e = 0; e < s->nengines; e++)
		if (s->engines[e].e && s->engines[e].ops->kernel_uprobes &&
		    s->engines[e].ops->can_place(s->engines[e].e, &s->sites[i], why,
						 sizeof(why)) == 0)
			return (int)e;
	return -1;
}

static bool in_process(const struct usc_session *s, int e)
{
	return e >= 0 && !s->engines[e].ops->kernel_uprobes;
}

int session_place_later_mapped(struct usc_session *s)
{
	struct mapped m = {.nmaps = -1};
	const char *said = NULL;
	bool any = false;

	/* (objtrace keeps every site on one engine) */
	if (s->set.objtrace.on || (s->target.kind != USC_TARGET_PID &&
				   !(s->target.kind == USC_TARGET_COMMAND && s->opts.cmd)))
		return 0;
	for (size_t i = 0; i < s->nsites && !any; i++)
		any = in_process(s, s->place[i].engine) && !s->sites[i].python;
	if (!any)
		return 0;
	if (s->target.kind == USC_TARGET_PID)
		m.nmaps = procmaps_read(s->target.pid, &m.maps);
	else
		command_set(s, &m);
	for (size_t i = 0; i < s->nsites; i++) {
		struct usc_site *st = &s->sites[i];
		int k;

		/* (a py: probe's function and the hidden sites placed with theirs
		 * stay: CPython itself is mapped at start) */
		if (!in_process(s, s->place[i].engine) || st->python || st->hidden || st->cont ||
		    st->tail_call || mapped_at_start(s, &m, st->path))
			continue;
		if (s->opts.engine && strcmp(s->opts.engine, "auto")) {
			if (!said || strcmp(said, st->path))
				log_warn("%s: %s is not mapped by %s when %s patches it: a library "
					 "dlopen'ed later is not seen by %s; -e auto (or -e bpf, "
					 "-e tracefs) places its probes with kernel uprobes, which see "
					 "it whenever it is mapped", st->spec->text, st->path,
					 s->target.kind == USC_TARGET_PID ? "the process" : "COMMAND",
					 s->engines[s->place[i].engine].ops->name,
					 s->engines[s->place[i].engine].ops->name);
			said = st->path;
			continue;
		}
		if ((k = kernel_engine(s, i)) < 0)
			continue;
		s->place[i].engine = k;
		snprintf(s->place[i].why, sizeof(s->place[i].why),
			 "%s is not mapped at start (dlopen'ed later): a kernel uprobe sees it "
			 "when it is", st->path);
		if (!said || strcmp(said, st->path))
			log_info("%s: %s: on %s (not mapped when the process is patched: "
				 "dlopen'ed later)", st->spec->text, st->path, s->engines[k].ops->name);
		said = st->path;
	}
	for (size_t i = 0; i < m.n; i++)
		free(m.paths[i]);
	free(m.paths);
	if (m.nmaps > 0)
		procmaps_free(m.maps, (size_t)m.nmaps);
	return 0;
}
