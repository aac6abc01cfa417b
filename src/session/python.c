/* The session's Python (src/python): which CPython the target runs, the
 * refusals of what cannot be, $ustack given the Python frames to splice,
 * engines told where CPython is, and $pystack's frames (and those spliced
 * into $ustack) named as events go to the sinks. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache/cache.h"
#include "core/log.h"
#include "objfile/modules.h"
#include "python/detect.h"
#include "python/launch.h"
#include "python/names.h"
#include "engine/raw.h"
#include "record/reader.h"
#include "record/record.h"
#include "session/session.h"
#include "session/session_int.h"
#include "stack/stack.h"

#define SPLICE_ARG "__usc_pystack"	/* $ustack's Python frames: a hidden argument */
#define FIND_TRIES 100			/* polls COMMAND's CPython is looked for */

struct session_python {
	struct python_runtime rt;	/* the target's, as the plan found it */
	bool found;			/* ... in the file (COMMAND) or the process */
	pid_t told;			/* the process the engines were told of */
	unsigned tries;			/* COMMAND: polls it was looked for in */
	struct usc_stack *spliced[USC_MAX_ARGS];
	struct stack_pyeval *evals;	/* stack_splice_python's, kept */
	/* system-wide: each process's CPython found where it runs
	 * (pysystem.c) */
	struct session_pysys *sys;
};

static bool wants(const struct usc_session *s, bool *stacks, bool *py_probes)
{
	*stacks = *py_probes = false;
	for (size_t i = 0; i < s->nsites; i++) {
		*stacks |= site_has_pystack(&s->sites[i]);
		*py_probes |= s->sites[i].python;
	}
	return *stacks || *py_probes;
}

/* py: probes read the frames and code objects of the versions the table
 * describes (3.11: a profile function; 3.12 to 3.14: sys.monitoring): on
 * another CPython they are refused. */
static bool py_probes_read(const struct python_runtime *rt, bool py_probes)
{
	char v[32];

	if (!py_probes || ((rt->version >> 16) >= 0x0308 && (rt->version >> 16) <= 0x030f))
		return true;
	python_version_str(rt->version, v, sizeof(v));
	log_error("py: probes read CPython 3.8 to 3.15; this is %s", v);
	return false;
}

/* COMMAND's executable: it has the runtime, or links a libpython: 0; 1
 * when it does not (a script, a launcher such as env or sh: CPython is
 * looked for once it runs, said unless quiet); or -errno for a CPython
 * uscope does not read (said). */
static int command_runtime(const char *exe, struct python_runtime *rt, bool quiet)
{
	uint8_t magic[4] = {0};
	int ret;
	FILE *f;

	f = fopen(exe, "rb");
	if (f) {
		if (fread(magic, 1, 4, f) != 4)
			magic[0] = 0;
		fclose(f);
	}
	if (memcmp(magic, "\177ELF", 4))
		return 1;	/* a script: its interpreter runs */
	ret = python_find_linked(exe, rt, quiet);
	if (ret == -ENOENT && !quiet)
		log_warn("python: %s has no CPython (neither the runtime nor a libpython it "
			 "links): Python is looked for in what it runs (an exec)", exe);
	/* asked for Python, an exec may bring it; $ustack alone: a native
	 * program's stacks stay native (and counted where the probe runs) */
	if (ret == -ENOENT)
		return quiet ? -ENOENT : 1;
	return ret;
}

/* $ustack alone, COMMAND a native program: 1 (Python looked for once it
 * runs) when it launches CPython, that is one of its arguments names a
 * python program that has it (env, timeout, nice ... python3 script), else
 * -ENOENT. */
static int launched_runtime(char *const *argv, struct python_runtime *rt)
{
	for (size_t i = 1; argv[0] && argv[i]; i++) {
		const char *b = strrchr(argv[i], '/');
		char *path = NULL;
		int ret;

		if (strncmp(b ? b + 1 : argv[i], "python", 6) || module_which(argv[i], &path))
			continue;
		ret = command_runtime(path, rt, true);
		free(path);
		if (ret == 0) {
			python_runtime_free(rt);
			memset(rt, 0, sizeof(*rt));
			return 1;
		}
	}
	return -ENOENT;
}

/* An explicit $pystack of all the frames there may be: the splice's too. */
static bool is_full_pystack(const struct usc_fetcharg *a)
{
	return a->ninsn && a->insn[0].op == FOP_PYSTACK && a->insn[0].imm >= USC_PYSTACK_FRAMES_MAX;
}

/* $ustack's sites get the thread's Python frames too, hidden (unless the
 * probe takes them all already): the stack is shown with them spliced
 * in. */
static int add_splice(struct usc_site *site)
{
	struct usc_fetcharg *v, *a;

	for (unsigned i = 0; i < site->nargs; i++)
		if (is_full_pystack(&site->args[i]))
			return 0;
	if (site->nargs >= USC_MAX_ARGS)
		return 0;
	v = realloc(site->args, (site->nargs + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	site->args = v;
	a = &v[site->nargs++];
	memset(a, 0, sizeof(*a));
	snprintf(a->name, sizeof(a->name), SPLICE_ARG);
	a->type = USC_T_STACK;
	a->hidden = true;
	a->insn[0] = (struct fetch_insn){.op = FOP_PYSTACK, .imm = USC_PYSTACK_FRAMES_MAX};
	a->insn[1] = (struct fetch_insn){.op = FOP_END};
	a->ninsn = 2;
	return 0;
}

static bool is_splice(const struct usc_fetcharg *a)
{
	return a->hidden && a->ninsn && a->insn[0].op == FOP_PYSTACK;
}

void session_python_launcher(struct usc_session *s)
{
	bool py_probes = false;

	for (size_t i = 0; i < s->nspecs; i++)
		py_probes |= s->specs[i].loc_kind == USC_LOC_PYTHON;
	if (!py_probes || s->target.kind != USC_TARGET_COMMAND || !s->opts.cmd ||
	    s->target.python)
		return;
	if (!python_launched(s->opts.cmd, &s->target.python))
		log_info("%s launches %s: py: probes resolve there (the execs are followed)",
			 s->target.exe, s->target.python);
}

int session_python_plan(struct usc_session *s)
{
	struct session_python *p;
	bool stacks, py_probes, ustacks = false;
	int ret = -ENOENT;

	for (size_t i = 0; i < s->nsites; i++)
		ustacks |= site_has_ustack(&s->sites[i]);
	if (!wants(s, &stacks, &py_probes) && !ustacks)
		return 0;
	if (s->target.kind == USC_TARGET_SYSTEM) {
		/* system-wide $ustack: native frames only; py: probes and
		 * $pystack: the inject engine finds CPython in each process it
		 * attaches, the bpf program is told of a process's at its
		 * first hit (session_python_value) */
		if (!stacks)
			return 0;
		if (!(s->python = calloc(1, sizeof(*s->python))) ||
		    !(s->python->sys = session_pysys_new()))
			return -ENOMEM;
		return 0;
	}
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	s->python = p;
	if (s->target.kind == USC_TARGET_PID) {
		/* $ustack alone: Python frames where there are some, quietly */
		ret = stacks || py_probes ? python_detect_pid(s->target.pid, &p->rt) :
					    python_find_pid(s->target.pid, &p->rt);
	} else if (s->target.exe) {
		ret = command_runtime(s->target.python ? s->target.python : s->target.exe, &p->rt,
				      !stacks && !py_probes);
		if (ret == -ENOENT && s->opts.cmd)
			ret = launched_runtime(s->opts.cmd, &p->rt);
	}
	p->found = ret >= 0;	/* (1: a script: looked for once it runs) */
	if (ret < 0 && (stacks || py_probes))
		return ret;	/* said: no CPython, another version */
	if (ret < 0)
		return 0;
	if (ret == 0 && !py_probes_read(&p->rt, py_probes))
		return -ENOTSUP;
	for (size_t i = 0; i < s->nsites && ustacks; i++)
		if (site_has_ustack(&s->sites[i]) && (ret = add_splice(&s->sites[i])))
			return ret;
	if (p->found && s->target.kind == USC_TARGET_PID)
		return python_names_runtime(s->cache, s->target.pid, &p->rt);
	return 0;
}

/* Tell the engines that want it where CPython is in pid (its run-time
 * addresses); COMMAND is looked for until its libpython is mapped. */
void session_python_poll(struct usc_session *s)
{
	struct session_python *p = s->python;
	struct python_runtime rt;
	bool stacks, py_probes;

	if (p && p->sys) {
		session_pysys_poll(s, p->sys);
		return;
	}
	if (!p || !p->found || s->pid <= 0 || p->told == s->pid || p->tries > FIND_TRIES)
		return;
	p->tries++;
	if (python_find_pid(s->pid, &rt))
		return;
	p->told = s->pid;
	wants(s, &stacks, &py_probes);
	if (!py_probes_read(&rt, py_probes)) {	/* an exec brought another CPython */
		python_runtime_free(&rt);
		return;
	}
	python_names_runtime(s->cache, s->pid, &rt);
	session_python_tell(s, s->pid, &rt);
	python_runtime_free(&rt);
}

void session_python_tell(struct usc_session *s, pid_t pid, const struct python_runtime *rt)
{
	for (size_t k = 0; k < s->nengines; k++) {
		struct session_engine *se = &s->engines[k];

		if (se->live && se->e && se->ops->python && se->ops->python(se->e, pid, rt) && rt)
			log_debug("python: process %d: the %s engine could not be told of its "
				  "CPython", (int)pid, se->ops->name);
	}
}

void session_python_free(struct usc_session *s)
{
	struct session_python *p = s->python;

	if (!p)
		return;
	session_pysys_free(p->sys);
	python_runtime_free(&p->rt);
	for (size_t i = 0; i < USC_MAX_ARGS; i++)
		free(p->spliced[i]);
	stack_pyeval_free(p->evals);
	free(p);
	s->python = NULL;
}

/* ---- values ------------------------------------------------------------------ */

int session_python_value(struct usc_session *s, const struct usc_event *ev, unsigned i,
			 struct usc_stack *st, struct usc_value *out)
{
	const struct usc_value *v = &ev->vals[i];
	struct python_stack_hdr h;
	uint8_t nopy[sizeof(h)];

	if (!s->replayed && python_stack_ok(v->str, v->len)) {
		memcpy(&h, v->str, sizeof(h));
		/* not told of the process's CPython: system-wide, looked for
		 * now; else (COMMAND before its exec, a child that runs
		 * something else) it runs none */
		if (h.status == PYWALK_NOTYET &&
		    (!s->python || !s->python->sys ||
		     session_pysys_notyet(s, s->python->sys, ev->pid))) {
			h.status = PYWALK_NONE;
			memcpy(nopy, &h, sizeof(h));
			if (python_names_stack(s->cache, ev->pid, nopy, sizeof(h), st,
					       USC_STACK_FRAMES_MAX))
				*out = (struct usc_value){.kind = USC_V_FAULT};
			else
				*out = (struct usc_value){.kind = USC_V_STACK, .stack = st};
			return 0;
		}
	}

	if (python_names_stack(s->cache, ev->pid, v->str, v->len, st, USC_STACK_FRAMES_MAX)) {
		*out = (struct usc_value){.kind = USC_V_FAULT};
		return 0;
	}
	*out = (struct usc_value){.kind = USC_V_STACK, .stack = st};
	return 0;
}

struct rec_ctx {
	struct usc_session *s;
	pid_t pid;
};

/* Read each frame's code object now, while the process lives. */
static int touch_frames(void *ctx, const void *bytes, uint32_t len)
{
	const struct rec_ctx *r = ctx;
	struct python_stack_hdr h;
	struct python_frame f;
	struct python_code_info ci;

	memcpy(&h, bytes, sizeof(h));
	for (uint32_t i = 0; i < h.n && sizeof(h) + (i + 1) * sizeof(f) <= len; i++) {
		memcpy(&f, (const char *)bytes + sizeof(h) + i * sizeof(f), sizeof(f));
		python_names_code(r->s->cache, r->pid, f.code, &ci);
	}
	return 0;
}

int session_python_splice(struct usc_session *s, const struct usc_event *ev,
			  struct usc_value *vals)
{
	struct session_python *p = s->python;
	struct python_frame frames[PYTHON_FRAMES_MAX];
	struct python_stack_hdr h;
	const struct usc_value *pv = NULL;
	int ret;

	for (unsigned i = 0; i < ev->nvals && i < ev->site->nargs; i++)
		if ((is_splice(&ev->site->args[i]) || is_full_pystack(&ev->site->args[i])) &&
		    ev->vals[i].kind == USC_V_PYSTACK)
			pv = &ev->vals[i];
	if (!pv || !p || !python_stack_ok(pv->str, pv->len))
		return 0;
	/* the code objects first, while the process lives: naming the native
	 * frames may load a library's symbols, long enough for a short-lived
	 * process to end (a name read then is "<unknown code>") */
	touch_frames(&(struct rec_ctx){s, ev->pid}, pv->str, pv->len);
	memcpy(&h, pv->str, sizeof(h));
	memcpy(frames, pv->str + sizeof(h), h.n * sizeof(frames[0]));	/* aligned */
	for (unsigned i = 0; i < ev->nvals && i < USC_MAX_ARGS; i++) {
		if (vals[i].kind != USC_V_STACK || !h.n ||
		    (ev->vals[i].kind != USC_V_USTACK && ev->vals[i].kind != USC_V_WALK))
			continue;
		if (!p->spliced[i] && !(p->spliced[i] = malloc(stack_size(USC_STACK_FRAMES_MAX))))
			return -ENOMEM;
		ret = stack_splice_python(s->cache, ev->pid, vals[i].stack, frames, h.n,
					  p->spliced[i], USC_STACK_FRAMES_MAX, &p->evals);
		if (ret)
			return ret;
		vals[i].stack = p->spliced[i];
	}
	return 0;
}

/* ---- recordings --------------------------------------------------------------- */

static int write_code(void *ctx, pid_t pid, const struct python_code_info *ci)
{
	struct usc_session *s = ctx;

	return rec_write_pycode(s->rec, pid, ci) ? -EIO : 0;
}

int session_python_record_event(struct usc_session *s, const struct usc_event *ev)
{
	struct rec_ctx r = {s, ev->pid};

	for (unsigned i = 0; i < ev->nvals; i++) {
		struct python_stack_hdr h;

		if (ev->vals[i].kind != USC_V_PYSTACK ||
		    !python_stack_ok(ev->vals[i].str, ev->vals[i].len))
			continue;
		memcpy(&h, ev->vals[i].str, sizeof(h));
		if (h.status == PYWALK_NOTYET && s->python->sys)	/* (told now) */
			session_pysys_notyet(s, s->python->sys, ev->pid);
		touch_frames(&r, ev->vals[i].str, ev->vals[i].len);
	}
	return python_names_new_codes(s->cache, ev->pid, write_code, s);
}

int session_python_record_ring(struct usc_session *s, pid_t pid, const void *bytes, size_t len)
{
	struct rec_ctx r = {s, pid};
	size_t at = 0;

	while (at < len) {
		uint32_t site, n;
		uint64_t tsc;

		if (inject_raw_peek((const char *)bytes + at, len - at, &site, &tsc, &n) < 0)
			break;
		inject_raw_pystacks((const char *)bytes + at, len - at, touch_frames, &r);
		at += n;
	}
	return python_names_new_codes(s->cache, pid, write_code, s);
}

static int tell_code(void *ctx, pid_t pid, const struct python_code_info *ci)
{
	struct usc_session *s = ctx;

	return python_names_tell(s->cache, pid, ci);
}

int session_python_replay(struct usc_session *s, struct rec_file *f)
{
	/* (spliced stacks are kept in it) */
	if (!s->python && !(s->python = calloc(1, sizeof(*s->python))))
		return -ENOMEM;
	return rec_file_pycodes(f, tell_code, s);
}
