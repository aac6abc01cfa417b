/* $pystack system-wide (session/python.c's, no -p and no COMMAND): each
 * process's CPython found where it runs. The inject engine finds it as it
 * attaches each process; the bpf program is told (usc_engine_ops.python)
 * of the processes running a CPython uscope reads when the session starts,
 * and of any other at its first hit, whose $pystack the program marks
 * PYWALK_NOTYET (it has no entry for the process): the hits before are
 * shown without Python frames, saying so, and counted in one line at the
 * end. A process told of that has gone, exec'd, or whose pid another one
 * has now (its start time and executable tell) is forgotten within
 * CHECK_NS, and the engines told so. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/log.h"
#include "python/detect.h"
#include "python/names.h"
#include "session/session_int.h"

#define LOOK_AGAIN_NS 200000000ULL	/* a process looked at again */
#define NONE_AGAIN_NS 5000000000ULL	/* ... one with no CPython (a dlopen) */
#define CHECK_NS 1000000000ULL		/* the processes told of, checked */

/* A process the engines were told of (or looked at and found none in), by
 * its host pid, and what it was then. */
struct sys_proc {
	pid_t pid;			/* 0: a free slot */
	bool told;			/* the engines know its CPython */
	bool counted;			/* in notyet_procs */
	uint64_t looked_ns;		/* when its CPython was last looked for */
	uint64_t checked_ns;		/* ... its identity last checked */
	uint64_t start, dev, ino;	/* its start time, its executable's file */
};

struct session_pysys {
	bool scanned;			/* the processes running at the start: told */
	struct sys_proc *procs;		/* open addressing by pid */
	size_t nprocs, procs_cap;
	uint64_t next_check_ns;
	uint64_t notyet_hits;		/* hits before their process's CPython was known */
	size_t notyet_procs;
};

struct session_pysys *session_pysys_new(void)
{
	return calloc(1, sizeof(struct session_pysys));
}

void session_pysys_free(struct session_pysys *p)
{
	if (!p)
		return;
	if (p->notyet_hits)
		log_warn("$pystack: %llu hit%s of %zu process%s came before uscope knew %s CPython "
			 "(system-wide, it is found at a process's first hit): shown without "
			 "Python frames", (unsigned long long)p->notyet_hits,
			 p->notyet_hits == 1 ? "" : "s", p->notyet_procs,
			 p->notyet_procs == 1 ? "" : "es", p->notyet_procs == 1 ? "its" : "their");
	free(p->procs);
	free(p);
}

static uint64_t mono_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ULL + (uint64_t)t.tv_nsec;
}

/* What process pid is: its start time (/proc/PID/stat's 22nd field) and
 * its executable's file, which a pid used again or an exec changes. 0, or
 * -ESRCH (gone). */
static int proc_identity(pid_t pid, struct sys_proc *out)
{
	char path[64], buf[1024], *r;
	unsigned long long start = 0;
	struct stat st;
	size_t n;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (!(f = fopen(path, "re")))
		return -ESRCH;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	/* after the command's ")": the state is field 3, starttime 22 */
	if (!(r = strrchr(buf, ')')) ||
	    sscanf(r + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d "
			  "%*d %*d %llu", &start) != 1)
		return -ESRCH;
	snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
	if (stat(path, &st))
		memset(&st, 0, sizeof(st));	/* (a kernel thread, or not ours) */
	out->start = start;
	out->dev = st.st_dev;
	out->ino = st.st_ino;
	return 0;
}

static bool same_proc(const struct sys_proc *a, const struct sys_proc *b)
{
	return a->start == b->start && a->dev == b->dev && a->ino == b->ino;
}

static struct sys_proc *sys_slot(struct sys_proc *v, size_t cap, pid_t pid)
{
	size_t i = ((size_t)(uint32_t)pid * 0x9e3779b9u) & (cap - 1);

	while (v[i].pid && v[i].pid != pid)
		i = (i + 1) & (cap - 1);
	return &v[i];
}

/* The table again, in cap slots, with the entries keep(ctx, entry) keeps. */
static int sys_rehash(struct session_pysys *p, size_t cap,
		      bool (*keep)(void *ctx, struct sys_proc *), void *ctx)
{
	struct sys_proc *v = calloc(cap, sizeof(*v));

	if (!v)
		return -ENOMEM;
	p->nprocs = 0;
	for (size_t i = 0; i < p->procs_cap; i++)
		if (p->procs[i].pid && (!keep || keep(ctx, &p->procs[i]))) {
			*sys_slot(v, cap, p->procs[i].pid) = p->procs[i];
			p->nprocs++;
		}
	free(p->procs);
	p->procs = v;
	p->procs_cap = cap;
	return 0;
}

static struct sys_proc *sys_proc_of(struct session_pysys *p, pid_t pid)
{
	struct sys_proc *e;

	if ((p->nprocs + 1) * 2 > p->procs_cap &&
	    sys_rehash(p, p->procs_cap ? p->procs_cap * 2 : 64, NULL, NULL))
		return NULL;
	e = sys_slot(p->procs, p->procs_cap, pid);
	if (!e->pid) {
		e->pid = pid;
		p->nprocs++;
	}
	return e;
}

/* A hit of pid whose $pystack the engine could not walk: it was not told
 * of the process's CPython (yet). Looked for now (again after an exec, or
 * a while after none was found), and the engines told: true when pid runs
 * no CPython uscope reads (the hit has no Python frames), false when it
 * does (the hit came before the engine knew: counted). */
bool session_pysys_notyet(struct usc_session *s, struct session_pysys *p, pid_t pid)
{
	struct sys_proc *e = sys_proc_of(p, pid), id;
	struct python_runtime rt;
	uint64_t now = mono_ns();

	if (!e) {
		p->notyet_hits++;
		return false;
	}
	if (e->looked_ns && now - e->checked_ns < LOOK_AGAIN_NS)
		goto known;
	e->checked_ns = now;
	if (e->looked_ns && !proc_identity(pid, &id) && same_proc(&id, e) &&
	    (e->told || now - e->looked_ns < NONE_AGAIN_NS))
		goto known;	/* the same process as it was looked at */
	e->looked_ns = now;
	e->told = false;
	if (proc_identity(pid, e) || python_find_pid(pid, &rt))
		return true;	/* gone, or no CPython uscope reads */
	python_names_runtime(s->cache, pid, &rt);
	session_python_tell(s, pid, &rt);
	e->told = true;
	log_debug("python: process %d runs CPython (%s): the engines told", (int)pid, rt.path);
	python_runtime_free(&rt);
known:
	if (!e->told)
		return true;
	p->notyet_hits++;
	if (!e->counted) {
		e->counted = true;
		p->notyet_procs++;
	}
	return false;
}

static bool sys_keep(void *ctx, struct sys_proc *e)
{
	struct sys_proc id;

	if (!proc_identity(e->pid, &id) && same_proc(&id, e))
		return true;
	if (e->told)
		session_python_tell(ctx, e->pid, NULL);
	return false;
}

/* Does process pid map a file whose path says python (python3.X,
 * libpython3.X.so)? A quick look before the real one. */
static bool maps_python(pid_t pid)
{
	char path[64], line[512];
	bool yes = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	if (!(f = fopen(path, "re")))
		return false;
	while (!yes && fgets(line, sizeof(line), f))
		yes = strstr(line, "python") != NULL;
	fclose(f);
	return yes;
}

/* At the start: every process that runs a CPython uscope reads now is
 * told to the engines that walk where the probe runs (bpf), so that only
 * those started later have a first hit before uscope knows them. */
static void sys_scan(struct usc_session *s, struct session_pysys *p)
{
	struct dirent *d;
	size_t told = 0;
	bool any = false;
	DIR *dir;

	for (size_t k = 0; k < s->nengines; k++)
		any |= s->engines[k].live && s->engines[k].e && s->engines[k].ops->python;
	if (!any || !(dir = opendir("/proc")))
		return;
	while ((d = readdir(dir))) {
		pid_t pid = (pid_t)strtol(d->d_name, NULL, 10);
		struct python_runtime rt;
		struct sys_proc *e;

		if (pid <= 0 || pid == getpid() || !maps_python(pid) ||
		    python_find_pid(pid, &rt))
			continue;
		if ((e = sys_proc_of(p, pid)) && !proc_identity(pid, e)) {
			e->looked_ns = e->checked_ns = mono_ns();
			python_names_runtime(s->cache, pid, &rt);
			session_python_tell(s, pid, &rt);
			e->told = true;
			told++;
		}
		python_runtime_free(&rt);
	}
	closedir(dir);
	log_info("$pystack: %zu process%s running CPython, told to the engines; any other at its "
		 "first hit", told, told == 1 ? "" : "es");
}

/* Now and then: the processes that have gone, exec'd, or whose pid another
 * one has now, are forgotten, and the engines told of those they knew
 * (such a pid is looked at afresh at its next hit). */
static void sys_check(struct usc_session *s, struct session_pysys *p)
{
	uint64_t now = mono_ns();

	if (now < p->next_check_ns || !p->nprocs)
		return;
	p->next_check_ns = now + CHECK_NS;
	sys_rehash(p, p->procs_cap, sys_keep, s);
}

void session_pysys_poll(struct usc_session *s, struct session_pysys *p)
{
	if (!p->scanned) {
		p->scanned = true;
		sys_scan(s, p);
	}
	sys_check(s, p);
}
