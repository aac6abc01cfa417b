/* The inject engine's Python: where CPython is in an image's process, told
 * to the agent (inject_shared.h's struct inj_py, agent/python.c), for
 * $pystack and py: probes; and for py: probes, the agent's tables of the
 * probes and of the code objects it decided on, the profile function set
 * when we attach to a running interpreter (a pending call) and taken out
 * when we leave, and the names the agent copied told to the session's
 * Python names (python/names.h). */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cache/cache.h"
#include "core/log.h"
#include "core/proc.h"
#include "engine/inject/inject_int.h"
#include "python/detect.h"
#include "python/linetable.h"
#include "python/names.h"

#define PENDING_MS 2000		/* Py_AddPendingCall may wait for its lock, at most */

bool inj_py_wanted(const struct inj *j)
{
	for (size_t i = 0; i < j->base.nsites; i++)
		if (site_has_pystack(j->base.sites[i]) || j->base.sites[i]->python)
			return true;
	return false;
}

static bool has_py_probes(const struct inj *j)
{
	for (size_t i = 0; i < j->base.nsites; i++)
		if (j->base.sites[i]->python)
			return true;
	return false;
}

static bool has_pystacks(const struct inj *j)
{
	for (size_t i = 0; i < j->base.nsites; i++)
		if (site_has_pystack(j->base.sites[i]))
			return true;
	return false;
}

/* The region's layout after struct inj_py: the verdicts (py: probes), the
 * code objects described ($pystack), the arena. */
static uint64_t py_layout(const struct inj *j, struct inj_py *py)
{
	uint64_t off = sizeof(struct inj_py);

	if (has_py_probes(j)) {
		if (py) {
			py->codes_off = off;
			py->ncodes = INJ_PY_CODES;
		}
		off += INJ_PY_CODES * sizeof(struct inj_py_code);
	}
	if (has_pystacks(j)) {
		if (py)
			py->seen_off = off;
		off += INJ_PY_SEEN * sizeof(struct inj_py_seen);
	}
	if (py)
		py->arena_off = off;
	return off + INJ_PY_ARENA;
}

uint64_t inj_py_reserve(struct inj *j, uint64_t off, uint64_t *py_off)
{
	*py_off = 0;
	if (!inj_py_wanted(j))
		return off;
	off = (off + 63) & ~63ULL;
	*py_off = off;
	return off + py_layout(j, NULL);
}

/* Is path the file of the runtime at rt_path (device and inode: one is
 * the host's path, the other may be under /proc/PID/root)? */
static bool same_file(const char *path, const char *rt_path)
{
	struct stat a, b;

	return path && rt_path && !stat(path, &a) && !stat(rt_path, &b) && a.st_dev == b.st_dev &&
	       a.st_ino == b.st_ino;
}

/* py: probes: one entry a site, its globs. System-wide, a py: probe has a
 * site in each CPython there is: a process takes those of its own. */
static void probes(struct inj *j, struct inj_py *py, const char *rt_path)
{
	bool system = j->base.ctx->target->kind == USC_TARGET_SYSTEM;

	for (size_t i = 0; i < j->base.nsites; i++) {
		const struct usc_site *s = j->base.sites[i];
		struct inj_py_probe *p;

		if (!s->python || (system && !same_file(s->path, rt_path)))
			continue;
		if (py->nprobes >= INJ_PY_PROBES) {
			log_warn("%s: the inject engine takes %d py: probes at most: left out",
				 s->spec->text, INJ_PY_PROBES);
			continue;
		}
		p = &py->probes[py->nprobes++];
		/* (longer globs were refused: inj_plan_site) */
		snprintf(p->module, sizeof(p->module), "%.*s", INJ_PY_PAT - 1, s->spec->module);
		snprintf(p->qualname, sizeof(p->qualname), "%.*s", INJ_PY_PAT - 1, s->spec->symbol);
		p->entry = s->is_return ? ~0u : (uint32_t)i;
		p->ret = s->is_return ? (uint32_t)i : ~0u;
		py->nret += s->is_return;
	}
}

/* 3.11's py: probes through the agent's frame evaluator (agent/pyeval.c)
 * rather than the profile function: where none asks for a return (r:py:,
 * latency, flow) or a stack (the evaluator runs before the frame is the
 * thread's, so $pystack would miss it), and CPython has the functions.
 * USCOPE_PY_PROFILE=1 keeps the profile function (tests, bench: both ways
 * side by side); on a CPython whose evaluator misses calls (3.11.0 to
 * 3.11.3: python_eval_sees_every_call) the profile function serves, unless
 * USCOPE_PY_PROFILE=0 asks for the evaluator all the same. */
static bool eval_fits(const struct inj *j, const struct inj_py *py,
		      const struct python_runtime *rt)
{
	const char *env = getenv("USCOPE_PY_PROFILE");

	/* (pyeval.c reads PyThreadState.tracing, which 3.8 to 3.11 have;
	 * 3.8's evaluator is a field of the interpreter, later ones are set
	 * through CPython's functions) */
	if (py->mon || py->nret || !rt->off->ts_tracing || !rt->api.eval_default ||
	    (!(rt->off->flags & PYOFF_EVAL_38) && (!rt->api.eval_set || !rt->api.eval_get)) ||
	    (env && *env && strcmp(env, "0")))
		return false;
	for (size_t i = 0; i < j->base.nsites; i++) {
		const struct usc_site *s = j->base.sites[i];

		for (unsigned a = 0; s->python && a < s->nargs; a++)
			if (s->args[a].insn[0].op == FOP_USTACK || s->args[a].insn[0].op == FOP_PYSTACK)
				return false;
	}
	/* USCOPE_PY_PROFILE=0: the evaluator wherever it can be set, even where
	 * it misses calls (the user's choice: py: probes on no __getitem__) */
	if (!python_eval_sees_every_call(rt->version) && !(env && !strcmp(env, "0"))) {
		char v[32];

		python_version_str(rt->version, v, sizeof(v));
		log_debug("inject: CPython %s calls a __getitem__ written in Python from a "
			  "specialized subscript without the frame evaluator (CPython gh-104405, "
			  "fixed in 3.11.4): py: probes' calls through the profile function", v);
		return false;
	}
	return true;
}

/* What py: probes call is there: _PyEval_SetProfile (3.11), or
 * sys.monitoring's way in from C (3.12 and later). */
static bool api_complete(const struct inj_py *py)
{
	if (!py->mon)	/* (3.8: its fields set as PyEval_SetProfile sets them) */
		return py->set_profile || (py->off.flags & PYOFF_EVAL_38);
	return py->sys_getobject && py->call_method && py->getattr && py->cmethod_new &&
	       py->incref && py->decref && py->err_fetch && py->err_restore && py->err_clear &&
	       py->long_as_long;
}

void inj_py_ctl(struct inj *j, struct inj_ctl *c, pid_t pid, uint64_t py_off)
{
	struct inj_py *py = (struct inj_py *)((char *)c + py_off);
	struct python_runtime rt;

	c->py_off = py_off;
	if (!py_off)
		return;
	py_layout(j, py);
	/* a process of COMMAND's tree may run something else: its $pystack
	 * says so, event by event */
	if (python_find_pid(pid, &rt)) {
		log_debug("inject: process %d runs no CPython uscope reads", (int)pid);
		return;
	}
	if (has_py_probes(j))
		probes(j, py, rt.path);
	py->off = *rt.off;
	py->glibc = rt.glibc;	/* (zero: not known) */
	py->runtime = rt.runtime;
	py->set_profile = rt.api.set_profile;
	py->mon = (rt.version >> 16) >= 0x030c;
	py->mon_tool = -1;
	py->sys_getobject = rt.api.sys_getobject;
	py->call_method = rt.api.call_method;
	py->getattr = rt.api.getattr;
	py->cmethod_new = rt.api.cmethod_new;
	py->incref = rt.api.incref;
	py->decref = rt.api.decref;
	py->err_fetch = rt.api.err_fetch;
	py->err_restore = rt.api.err_restore;
	py->err_clear = rt.api.err_clear;
	py->long_as_long = rt.api.long_as_long;
	py->tstate_get = rt.api.tstate_get;
	py->none = rt.api.none;
	py->true_ = rt.api.true_;
	py->false_ = rt.api.false_;
	py->long_type = rt.api.long_type;
	py->bool_type = rt.api.bool_type;
	py->unicode_type = rt.types.unicode;
	py->eval_default = rt.api.eval_default;
	py->eval_set = rt.api.eval_set;
	py->eval_get = rt.api.eval_get;
	py->eval = eval_fits(j, py, &rt);
	if (py->eval && proc_main_stack(pid, &py->main_stack_top, &py->main_stack_size))
		py->main_stack_top = py->main_stack_size = 0;	/* (the main thread: not known) */
	if (py->eval)
		log_debug("inject: process %d: py: probes' calls through the agent's frame evaluator "
			  "(PEP 523)", (int)pid);
	py->on = 1;
	py->state = py->nprobes && api_complete(py) ? INJ_PY_ON : INJ_PY_OFF;
	if (py->nprobes && py->state == INJ_PY_OFF)
		log_warn("process %d: its CPython does not export the functions py: probes call: "
			 "they see nothing", (int)pid);
	log_debug("inject: process %d runs CPython %u.%u (%s), _PyRuntime at %#llx", (int)pid,
		  rt.version >> 24, (rt.version >> 16) & 0xff, rt.path,
		  (unsigned long long)rt.runtime);
	python_runtime_free(&rt);
}

/* A FOP_PYARG's name (pos | len << 32 in the probe's text) into the names
 * the agent reads: its imm there. */
static int64_t arg_name(struct inj_py *py, uint32_t *used, const struct usc_probe_spec *spec,
			int64_t imm)
{
	size_t pos = (size_t)(imm & 0xffffffff), len = (size_t)((uint64_t)imm >> 32);
	uint32_t at = *used;

	if (pos + len > sizeof(spec->text) || at + len > INJ_PY_NAMES)
		return (int64_t)INJ_PY_NAMES;	/* matches no argument */
	memcpy(py->names + at, spec->text + pos, len);
	*used += (uint32_t)len;
	return (int64_t)((uint64_t)at | (uint64_t)len << 32);
}

void inj_py_sites(struct inj *j, struct inj_image *img)
{
	struct inj_ctl *c = img->shm.ctl;
	struct inj_site *is = (struct inj_site *)((char *)img->shm.map + c->sites_off);
	struct inj_py *py = c->py_off ? (struct inj_py *)((char *)c + c->py_off) : NULL;
	uint32_t used = 0;

	for (size_t i = 0; i < j->base.nsites; i++) {
		const struct usc_site *site = j->base.sites[i];
		struct inj_site *d = &is[i];

		if (site->py_hook)
			d->kind = INJ_PYHOOK;	/* (a patched site: filled) */
		if (site->py_final)
			d->kind = INJ_PYSYNC;
		if (d->kind >= INJ_PYHOOK)
			d->rec_fast = 0;	/* the agent's to call, not a record */
		if (!site->python || !py)
			continue;
		d->ctl = img->shm.remote;
		d->owner = img->shm.owner_remote;
		d->index = (uint32_t)i;
		d->nargs = site->nargs < INJ_MAX_ARGS ? site->nargs : INJ_MAX_ARGS;
		d->kind = INJ_PLAIN;
		for (unsigned a = 0; a < d->nargs; a++) {
			const struct usc_fetcharg *fa = &site->args[a];

			d->reg_only[a] = 0xff;
			d->args[a].ninsn = fa->ninsn;
			memcpy(d->args[a].insn, fa->insn, sizeof(fa->insn[0]) * fa->ninsn);
			switch (fa->insn[0].op) {
			case FOP_PYARG:
				d->args[a].insn[0].imm = arg_name(py, &used, site->spec,
								  fa->insn[0].imm);
				/* fall through */
			case FOP_PYRETVAL:
			case FOP_COMM:
				d->nstr++;
				break;
			case FOP_PYARGS:	/* up to 256 bytes */
				d->nstr += 2;
				break;
			case FOP_PYSTACK:
				d->stack_need += (uint32_t)(sizeof(struct python_stack_hdr) +
							    fa->insn[0].imm * sizeof(struct python_frame) + 8);
				break;
			default:
				break;
			}
		}
		inj_agg_site(j, site, d, c, img->shm.remote);
		/* counted by its function alone: the agent keeps its row */
		d->py_count = d->agg == INJ_AGG_ROW && d->agg_nkey == 1 && d->agg_value < 0 &&
			      !d->filter.n && d->agg_keylen == 16 &&
			      site->args[0].insn[0].op == FOP_PYFUNC;
	}
}

/* Where CPython is initialized in the process (a running interpreter,
 * not COMMAND at its entry point): its threads are given the profile
 * function by a pending call, which its main thread runs with the GIL. */
static void pending(struct inj_image *img, struct remote *rem, const char *what)
{
	const struct agent_hdr *hdr = (const void *)inject_agent_blob;
	struct inj_ctl *c = img->shm.ctl;
	struct inj_py *py = c && c->py_off ? (struct inj_py *)((char *)c + c->py_off) : NULL;
	uint64_t add = 0, ret = 0;
	int32_t init = 0;
	struct python_runtime rt;
	int err;

	if (!py || !py->on || !py->nprobes || !rem->ntasks)
		return;
	if (remote_read(rem, py->runtime + py->off.rt_initialized, &init, 4) || !init)
		return;	/* it is starting: its threads take the GIL (the hooks) */
	if (python_find_pid(rem->pid, &rt))
		return;
	add = rt.api.add_pending;
	python_runtime_free(&rt);
	if (!add)
		return;
	err = remote_call(rem, 0, add, img->shm.agent_remote + hdr->py_pending_off,
			  img->shm.remote, img->shm.agent_remote + hdr->trap_off, PENDING_MS, &ret);
	if (err || (int)ret)
		log_warn("process %d: cannot schedule %s (Py_AddPendingCall: %s)", (int)rem->pid,
			 what, err ? strerror(-err) : "its queue is full");
}

void inj_py_attach(struct inj_image *img, struct remote *rem)
{
	pending(img, rem, "the profile function (py: probes see its threads as they take "
		"the GIL)");
}

void inj_py_detach(struct inj_image *img, struct remote *rem)
{
	struct inj_ctl *c = img->shm.ctl;
	struct inj_py *py = c && c->py_off ? (struct inj_py *)((char *)c + c->py_off) : NULL;

	if (!py || py->state != INJ_PY_ON)
		return;
	/* the agent's tally so far (-vv): where a py: probe counted nothing,
	 * whether the mechanism was ever put in place */
	log_debug("inject: process %d: the profile function put in %llu thread states, taken out "
		  "of %llu; the frame evaluator put in %llu interpreters, taken out of %llu",
		  (int)img->pid, (unsigned long long)py->installs,
		  (unsigned long long)py->removes, (unsigned long long)py->eval_installs,
		  (unsigned long long)py->eval_removes);
	py->state = INJ_PY_STOP;	/* each thread takes it out at its next call */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	pending(img, rem, "the profile function's removal (each thread removes it itself "
		"at its next call)");
	if (py->foreign)
		log_warn("process %d: %llu times a thread state had a profile function of its own "
			 "(cProfile, sys.setprofile): its Python calls are not seen", (int)img->pid,
			 (unsigned long long)py->foreign);
}

/* What became of sys.monitoring in the process, said once. */
static void mon_tell(struct inj_image *img, const struct inj_py *py)
{
	uint32_t st = py->mon_state;
	static const char *const steps[] = {"?", "use_tool_id", "events", "DISABLE",
					    "the callbacks' objects", "register_callback",
					    "set_events"};

	if (st == img->py_mon_said || st == INJ_MON_BUSY)
		return;
	img->py_mon_said = st;
	if (st == INJ_MON_ARMED)
		log_info("process %d: py: probes through sys.monitoring, tool id %d (\"uscope\")",
			 (int)img->pid, (int)py->mon_tool);
	else if (st == INJ_MON_TAKEN)
		log_error("process %d: py: probes need a sys.monitoring tool id: 4 and 3 are both in "
			  "use (sys.monitoring.get_tool() names their tools): no Python call is seen",
			  (int)img->pid);
	else if (st == INJ_MON_FAILED)
		log_error("process %d: py: probes: sys.monitoring's %s failed: no Python call is "
			  "seen", (int)img->pid, steps[py->mon_step < 7 ? py->mon_step : 0]);
}

/* Why the frame evaluator gave way to the profile function, said once. */
static void eval_tell(struct inj_image *img, const struct inj_py *py)
{
	uint32_t why = py->eval_off;

	if (!why || img->py_eval_said)
		return;
	img->py_eval_said = true;
	log_info("process %d: py: probes through the profile function from now on, not the frame "
		 "evaluator: %s", (int)img->pid,
		 why == INJ_EVAL_FOREIGN ? "an interpreter has an evaluator of its own (a JIT, a "
		 "debugger)" : why == INJ_EVAL_DEEP ? "a thread had used half of its C stack (with an "
		 "evaluator each Python call nests there)" : "a thread's stack bounds are not known");
}

/* The names the agent copied since the last time, told to the session's
 * names (for the py: probes' functions, also once the process has gone). */
void inj_py_sync(struct inj *j, struct inj_image *img)
{
	struct inj_ctl *c = img->shm.ctl;
	struct inj_py *py = c && c->py_off ? (struct inj_py *)((char *)c + c->py_off) : NULL;
	const char *base;
	uint8_t *conv = NULL;
	uint32_t end;
	pid_t who;

	if (!py || !py->arena_off)
		return;
	if (py->mon)
		mon_tell(img, py);
	if (py->eval)
		eval_tell(img, py);
	base = (const char *)py + py->arena_off;
	end = __atomic_load_n(&py->arena_used, __ATOMIC_ACQUIRE);
	while (img->py_seen + sizeof(struct inj_py_name) <= end) {
		struct inj_py_name r;
		struct python_code_info ci = {0};
		const char *names;
		uint32_t len, lines;

		memcpy(&r, base + img->py_seen, sizeof(r));
		r.code = __atomic_load_n((const uint64_t *)(base + img->py_seen), __ATOMIC_ACQUIRE);
		lines = r.nlinetable == INJ_PY_NOLINES ? 0 : r.nlinetable;
		len = (uint32_t)(sizeof(r) + r.nmodule + r.nqualname + r.nfilename + 3 + lines + 7) &
		      ~7u;
		if (!r.code || img->py_seen + len > end || r.nmodule >= INJ_PY_STR ||
		    r.nqualname >= INJ_PY_STR || r.nfilename >= INJ_PY_STR || lines > INJ_PY_LINES)
			break;	/* being written: the next time */
		names = base + img->py_seen + sizeof(r);
		ci.addr = r.code;
		ci.module = r.nmodule ? names : NULL;
		ci.qualname = names + r.nmodule + 1;
		ci.filename = names + r.nmodule + 1 + r.nqualname + 1;
		ci.firstlineno = r.firstlineno;
		ci.firsttraceable = r.firsttraceable;
		if (r.nlinetable != INJ_PY_NOLINES) {
			ci.linetable = (const uint8_t *)ci.filename + r.nfilename + 1;
			ci.linetable_len = lines;
		}
		/* 3.8 to 3.10: the table made a location table, as read ones are */
		free(conv);
		conv = NULL;
		if (ci.linetable && py->off.lt_format != PYLT_LOCATIONS &&
		    !python_linetable_convert((enum python_lt_format)py->off.lt_format, ci.linetable,
					      ci.linetable_len, ci.firstlineno, 2 * (size_t)r.ncode,
					      &conv, &ci.linetable_len))
			ci.linetable = conv;
		/* told as its process's: a fork's code object may be at the
		 * address of another's */
		who = img->pid;
		if (r.pid) {
			int32_t p = (int32_t)r.pid, t = (int32_t)r.pid;

			inj_host_ids(j, img, &p, &t);
			who = p;
		}
		if (ci.qualname[r.nqualname] || ci.filename[r.nfilename] ||
		    python_names_tell(j->base.ctx->cache, who, &ci))
			break;
		img->py_seen += len;
	}
	free(conv);
}
